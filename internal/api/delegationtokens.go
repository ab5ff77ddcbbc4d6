package api

import (
	"context"
	"crypto/hmac"
	"errors"
	"fmt"
	"net/netip"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/authz"
	"github.com/gregor-project/gregor/internal/controller/state"
	"github.com/gregor-project/gregor/internal/metadata"
	"github.com/gregor-project/gregor/internal/security"
	"github.com/gregor-project/gregor/internal/server"
)

// Delegation tokens (KIP-48), as Kafka's brokers serve them in KRaft mode:
//
//   - CreateDelegationToken v0-v3, RenewDelegationToken v0-v2, ExpireDelegationToken v0-v2
//     are forwarded to the controller inside an Envelope with the connection's principal
//     (forwardAs), which records the requester and checks owners and renewers; the broker
//     answers once its own image shows the change, so the token authenticates here at once.
//   - DescribeDelegationToken v0-v3 is answered from the image, HMACs computed with this
//     broker's delegation.token.secret.key.
//
// Before forwarding the broker refuses, as Kafka's KafkaApis does: a connection that cannot
// ask for tokens (authenticated with a token, PLAINTEXT, or SSL without a client
// certificate) with DELEGATION_TOKEN_REQUEST_NOT_ALLOWED; a token for another owner without
// CREATE_TOKENS on that USER with DELEGATION_TOKEN_AUTHORIZATION_FAILED; a renewer that is
// not a User with INVALID_PRINCIPAL_TYPE. A token is described to its owner and renewers, to
// a principal with DESCRIBE on the DELEGATION_TOKEN (its id), and to one with DESCRIBE_TOKENS
// on its owner's USER.

// tokenRequestsAllowed is Kafka's allowTokenRequests: not over a token, PLAINTEXT, or SSL
// without a client certificate.
func (h *Handler) tokenRequestsAllowed(c *Conn) bool {
	proto := h.Cfg.Current().ListenerSecurityProtocolMap[c.Listener]
	switch {
	case c.TokenAuthenticated, proto == security.ProtocolPlaintext, proto == "":
		return false
	case proto == security.ProtocolSSL && c.Principal == authz.Anonymous:
		return false
	}
	return true
}

func handleCreateDelegationToken(h *Handler, ctx context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.CreateDelegationTokenRequest)
	resp := req.ResponseKind().(*kmsg.CreateDelegationTokenResponse)
	resp.PrincipalType, resp.PrincipalName = c.Principal.Type, c.Principal.Name
	resp.TokenRequesterPrincipalType, resp.TokenRequesterPrincipalName = c.Principal.Type, c.Principal.Name
	owner := c.Principal
	if req.OwnerPrincipalName != nil && *req.OwnerPrincipalName != "" {
		owner = authz.Principal{Type: authz.UserType, Name: *req.OwnerPrincipalName}
		if req.OwnerPrincipalType != nil && *req.OwnerPrincipalType != "" {
			owner.Type = *req.OwnerPrincipalType
		}
		resp.PrincipalType, resp.PrincipalName = owner.Type, owner.Name
	}
	refuse := func(e *kerr.Error) Reply {
		resp.ErrorCode = e.Code
		return msg(resp)
	}
	switch {
	case !h.tokenRequestsAllowed(c):
		return refuse(kerr.DelegationTokenRequestNotAllowed)
	case owner != c.Principal && !h.authorized(c, kmsg.ACLOperationCreateTokens, kmsg.ACLResourceTypeUser, owner.String()):
		return refuse(kerr.DelegationTokenAuthorizationFailed)
	}
	for _, rn := range req.Renewers {
		if rn.PrincipalType != authz.UserType {
			return refuse(kerr.InvalidPrincipalType)
		}
	}
	ctx, cancel := adminContext(ctx, req)
	defer cancel()
	out, err := h.forwardAs(ctx, c, req)
	if err != nil {
		resp.ErrorCode = code(err)
		return msg(resp)
	}
	cr := out.(*kmsg.CreateDelegationTokenResponse)
	if cr.ErrorCode == 0 {
		h.awaitTokens(ctx, func(im *metadata.Image) bool { return im.DelegationToken(cr.TokenID) != nil })
	}
	return msg(cr)
}

func handleRenewDelegationToken(h *Handler, ctx context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.RenewDelegationTokenRequest)
	resp := req.ResponseKind().(*kmsg.RenewDelegationTokenResponse)
	return h.forwardTokenChange(ctx, c, req, req.HMAC, resp, func(o kmsg.Response) (*int16, *int64) {
		rr := o.(*kmsg.RenewDelegationTokenResponse)
		return &rr.ErrorCode, &rr.ExpiryTimestamp
	})
}

func handleExpireDelegationToken(h *Handler, ctx context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.ExpireDelegationTokenRequest)
	resp := req.ResponseKind().(*kmsg.ExpireDelegationTokenResponse)
	return h.forwardTokenChange(ctx, c, req, req.HMAC, resp, func(o kmsg.Response) (*int16, *int64) {
		er := o.(*kmsg.ExpireDelegationTokenResponse)
		return &er.ErrorCode, &er.ExpiryTimestamp
	})
}

// forwardTokenChange forwards a renewal or expiry of the token with HMAC mac and, when the
// controller applied it, waits for this broker's image to show the token's new expiry (or
// the token gone). fields are an answer's error code and expiry: resp's when the request is
// refused here or cannot be forwarded (expiry -1), else the controller's answer's.
func (h *Handler) forwardTokenChange(ctx context.Context, c *Conn, req kmsg.Request, mac []byte, resp kmsg.Response,
	fields func(kmsg.Response) (*int16, *int64)) Reply {
	fail := func(err error) Reply {
		ec, exp := fields(resp)
		*ec, *exp = code(err), -1
		return msg(resp)
	}
	if !h.tokenRequestsAllowed(c) {
		return fail(kerr.DelegationTokenRequestNotAllowed)
	}
	ctx, cancel := adminContext(ctx, req)
	defer cancel()
	out, err := h.forwardAs(ctx, c, req)
	if err != nil {
		return fail(err)
	}
	if ec, exp := fields(out); *ec == 0 {
		secret := h.Cfg.DelegationTokenSecret()
		h.awaitTokens(ctx, func(im *metadata.Image) bool {
			t := tokenByHMAC(im, secret, mac)
			return t == nil || t.ExpiryMs == *exp
		})
	}
	return msg(out)
}

// awaitTokens waits (bounded) for the image to satisfy cond; a change the image does not
// show in time is answered all the same, as the controller answered.
func (h *Handler) awaitTokens(ctx context.Context, cond func(*metadata.Image) bool) {
	if err := h.awaitMetadata(ctx, cond, configVisibleTimeout); err != nil {
		h.Log.Warn("delegation token change not shown in this broker's metadata in time", "err", err)
	}
}

// tokenByHMAC is the token of im whose HMAC under secret is mac, or nil.
func tokenByHMAC(im *metadata.Image, secret string, mac []byte) *metadata.DelegationToken {
	if secret == "" {
		return nil
	}
	for _, t := range im.DelegationTokens() {
		if hmac.Equal(state.TokenHMAC(secret, t.ID), mac) {
			return t
		}
	}
	return nil
}

func handleDescribeDelegationToken(h *Handler, _ context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.DescribeDelegationTokenRequest)
	resp := req.ResponseKind().(*kmsg.DescribeDelegationTokenResponse)
	secret := h.Cfg.DelegationTokenSecret()
	switch {
	case !h.tokenRequestsAllowed(c):
		resp.ErrorCode = kerr.DelegationTokenRequestNotAllowed.Code
		return msg(resp)
	case secret == "":
		resp.ErrorCode = kerr.DelegationTokenAuthDisabled.Code
		return msg(resp)
	case req.Owners != nil && len(req.Owners) == 0:
		return msg(resp)
	}
	var owners []string
	for _, o := range req.Owners {
		owners = append(owners, o.PrincipalType+":"+o.PrincipalName)
	}
	me := c.Principal.String()
	for _, t := range h.Meta.Image().DelegationTokens() {
		if owners != nil && !anyOwnerOrRenewer(t, owners) {
			continue
		}
		if !ownerOrRenewer(t, me) &&
			!h.authorized(c, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeDelegationToken, t.ID) &&
			!h.authorized(c, kmsg.ACLOperationDescribeTokens, kmsg.ACLResourceTypeUser, t.Owner) {
			continue
		}
		d := kmsg.NewDescribeDelegationTokenResponseTokenDetail()
		d.PrincipalType, d.PrincipalName = principalParts(t.Owner)
		d.TokenRequesterPrincipalType, d.TokenRequesterPrincipalName = principalParts(t.Requester)
		d.IssueTimestamp, d.ExpiryTimestamp, d.MaxTimestamp = t.IssueMs, t.ExpiryMs, t.MaxMs
		d.TokenID, d.HMAC = t.ID, state.TokenHMAC(secret, t.ID)
		for _, p := range t.Renewers {
			rn := kmsg.NewDescribeDelegationTokenResponseTokenDetailRenewer()
			rn.PrincipalType, rn.PrincipalName = principalParts(p)
			d.Renewers = append(d.Renewers, rn)
		}
		resp.TokenDetails = append(resp.TokenDetails, d)
	}
	return msg(resp)
}

func ownerOrRenewer(t *metadata.DelegationToken, p string) bool {
	if t.Owner == p {
		return true
	}
	for _, r := range t.Renewers {
		if r == p {
			return true
		}
	}
	return false
}

func anyOwnerOrRenewer(t *metadata.DelegationToken, ps []string) bool {
	for _, p := range ps {
		if ownerOrRenewer(t, p) {
			return true
		}
	}
	return false
}

// principalParts splits a recorded "Type:Name" principal (authz.ParsePrincipal).
func principalParts(s string) (typ, name string) {
	p, _ := authz.ParsePrincipal(s)
	return p.Type, p.Name
}

// forwardAs forwards req to the controller inside an Envelope (KIP-590) carrying the
// connection's principal, for the requests whose answer depends on who asks, and returns
// the controller's answer to req.
func (h *Handler) forwardAs(ctx context.Context, c *Conn, req kmsg.Request) (kmsg.Response, error) {
	env := kmsg.NewPtrEnvelopeRequest()
	env.RequestData = server.AppendEmbeddedRequest(nil, req, 0, c.ClientID)
	p := kmsg.NewDefaultPrincipalData()
	p.Type, p.Name, p.TokenAuthenticated = c.Principal.Type, c.Principal.Name, c.TokenAuthenticated
	env.RequestPrincipal = p.AppendTo(nil)
	if ap, err := netip.ParseAddrPort(c.RemoteAddr); err == nil {
		env.ClientHostAddress = ap.Addr().AsSlice()
	}
	out, err := h.forward(ctx, env)
	if err != nil {
		return nil, err
	}
	er := out.(*kmsg.EnvelopeResponse)
	if er.ErrorCode != 0 {
		return nil, fmt.Errorf("%w: the controller refused the envelope of %s", kerr.ErrorForCode(er.ErrorCode), kmsg.NameForKey(req.Key()))
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := server.ReadEmbeddedResponse(er.ResponseData, resp); err != nil {
		return nil, errors.Join(kerr.UnknownServerError, err)
	}
	return resp, nil
}
