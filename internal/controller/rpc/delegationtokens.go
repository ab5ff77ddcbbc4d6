package rpc

import (
	"bytes"
	"context"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

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
		resp.PrincipalType, resp.PrincipalName = splitPrincipal(principal)
		resp.ErrorCode = code(err)
		return resp
	}
	tok := res.tok
	resp.PrincipalType, resp.PrincipalName = splitPrincipal(tok.Owner)
	resp.TokenRequesterPrincipalType, resp.TokenRequesterPrincipalName = splitPrincipal(tok.Requester)
	resp.IssueTimestamp, resp.ExpiryTimestamp, resp.MaxTimestamp = tok.IssueMs, tok.ExpiryMs, tok.MaxMs
	resp.TokenID, resp.HMAC = tok.ID, state.TokenHMAC(res.secret, tok.ID)
	return resp
}

func handleRenewDelegationToken(h *Handler, ctx context.Context, principal string, r kmsg.Request) kmsg.Response {
	req := r.(*kmsg.RenewDelegationTokenRequest)
	resp := req.ResponseKind().(*kmsg.RenewDelegationTokenResponse)
	mac := bytes.Clone(req.HMAC)
	exp, err := tokenCommand(ctx, h, func(c *state.Controller, now int64) ([]state.Record, int64, error) {
		return c.RenewDelegationToken(now, principal, mac, req.RenewTimeMillis)
	})
	resp.ErrorCode, resp.ExpiryTimestamp = code(err), exp
	return resp
}

func handleExpireDelegationToken(h *Handler, ctx context.Context, principal string, r kmsg.Request) kmsg.Response {
	req := r.(*kmsg.ExpireDelegationTokenRequest)
	resp := req.ResponseKind().(*kmsg.ExpireDelegationTokenResponse)
	mac := bytes.Clone(req.HMAC)
	exp, err := tokenCommand(ctx, h, func(c *state.Controller, now int64) ([]state.Record, int64, error) {
		return c.ExpireDelegationToken(now, principal, mac, req.ExpiryPeriodMillis)
	})
	resp.ErrorCode, resp.ExpiryTimestamp = code(err), exp
	return resp
}

// tokenCommand runs a renew or expire command and returns its expiry or its error.
func tokenCommand(ctx context.Context, h *Handler, cmd func(c *state.Controller, now int64) ([]state.Record, int64, error)) (int64, error) {
	type result struct {
		exp int64
		err error
	}
	res, err := do(ctx, h, 0, func(c *state.Controller, now int64) ([]state.Record, result) {
		recs, exp, err := cmd(c, now)
		return recs, result{exp, err}
	})
	if err != nil {
		return 0, err
	}
	return res.exp, res.err
}

// splitPrincipal splits "Type:Name".
func splitPrincipal(p string) (typ, name string) {
	typ, name, _ = strings.Cut(p, ":")
	return typ, name
}
