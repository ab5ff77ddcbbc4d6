package rpc

import (
	"bytes"
	"context"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/authz"
	"github.com/gregor-project/gregor/internal/controller/state"
)

// CreateDelegationToken v0-v3, RenewDelegationToken v0-v2 and ExpireDelegationToken v0-v2,
// inside an Envelope (envelope.go) -> state.Controller's token commands, with the forwarded
// principal as the requester. The broker checked what only it can (a token-authenticated
// or unauthenticated connection, CREATE_TOKENS on another owner); the state machine answers
// DELEGATION_TOKEN_AUTH_DISABLED, _NOT_FOUND, _OWNER_MISMATCH and _EXPIRED.

func handleCreateDelegationToken(h *Handler, ctx context.Context, principal string, r kmsg.Request) kmsg.Response {
	req := r.(*kmsg.CreateDelegationTokenRequest)
	resp := req.ResponseKind().(*kmsg.CreateDelegationTokenResponse)
	sreq := state.CreateTokenRequest{Requester: principal, MaxLifetimeMs: req.MaxLifetimeMillis}
	if req.OwnerPrincipalName != nil && *req.OwnerPrincipalName != "" {
		typ := "User"
		if req.OwnerPrincipalType != nil && *req.OwnerPrincipalType != "" {
			typ = *req.OwnerPrincipalType
		}
		sreq.Owner = typ + ":" + *req.OwnerPrincipalName
	}
	for _, rn := range req.Renewers {
		sreq.Renewers = append(sreq.Renewers, rn.PrincipalType+":"+rn.PrincipalName)
	}
	type result struct {
		tok    *state.DelegationToken
		secret string
		err    error
	}
	res, err := do(ctx, h, 0, func(c *state.Controller, now int64) ([]state.Record, result) {
		recs, t, err := c.CreateDelegationToken(now, sreq)
		return recs, result{t, c.Config().TokenSecret, err}
	})
	if err == nil {
		err = res.err
	}
	if err != nil {
		resp.PrincipalType, resp.PrincipalName = principalParts(principal)
		resp.ErrorCode = code(err)
		return resp
	}
	tok := res.tok
	resp.PrincipalType, resp.PrincipalName = principalParts(tok.Owner)
	resp.TokenRequesterPrincipalType, resp.TokenRequesterPrincipalName = principalParts(tok.Requester)
	resp.IssueTimestamp, resp.ExpiryTimestamp, resp.MaxTimestamp = tok.IssueMs, tok.ExpiryMs, tok.MaxMs
	resp.TokenID, resp.HMAC = tok.ID, state.TokenHMAC(res.secret, tok.ID)
	return resp
}

func handleRenewDelegationToken(h *Handler, ctx context.Context, principal string, r kmsg.Request) kmsg.Response {
	req := r.(*kmsg.RenewDelegationTokenRequest)
	resp := req.ResponseKind().(*kmsg.RenewDelegationTokenResponse)
	resp.ExpiryTimestamp, resp.ErrorCode = tokenChange(ctx, h, (*state.Controller).RenewDelegationToken, principal, req.HMAC, req.RenewTimeMillis)
	return resp
}

func handleExpireDelegationToken(h *Handler, ctx context.Context, principal string, r kmsg.Request) kmsg.Response {
	req := r.(*kmsg.ExpireDelegationTokenRequest)
	resp := req.ResponseKind().(*kmsg.ExpireDelegationTokenResponse)
	resp.ExpiryTimestamp, resp.ErrorCode = tokenChange(ctx, h, (*state.Controller).ExpireDelegationToken, principal, req.HMAC, req.ExpiryPeriodMillis)
	return resp
}

// tokenChange runs a renewal or an expiry (cmd) of the token with HMAC mac for principal and
// returns the token's expiry and the answer's error code. The HMAC is copied out of the
// request buffer, which the command may outlive.
func tokenChange(ctx context.Context, h *Handler, cmd func(c *state.Controller, now int64, principal string, mac []byte, periodMs int64) ([]state.Record, int64, error),
	principal string, mac []byte, periodMs int64) (int64, int16) {
	mac = bytes.Clone(mac)
	type result struct {
		exp int64
		err error
	}
	res, err := do(ctx, h, 0, func(c *state.Controller, now int64) ([]state.Record, result) {
		recs, exp, err := cmd(c, now, principal, mac, periodMs)
		return recs, result{exp, err}
	})
	if err == nil {
		err = res.err
	}
	return res.exp, code(err)
}

// principalParts splits a "Type:Name" principal the state machine recorded (authz.ParsePrincipal).
func principalParts(s string) (typ, name string) {
	p, _ := authz.ParsePrincipal(s)
	return p.Type, p.Name
}
