package rpc

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SaslHandshake v0-v1 and SaslAuthenticate v0-v2, served so a SASL controller listener
// admits them: as on a broker listener, the connection loop answers them itself while a
// connection authenticates (internal/security's Session), and again for a KIP-368
// re-authentication. One that reaches the handler came on a listener without SASL, or on
// an authenticated connection that may not re-authenticate: ILLEGAL_SASL_STATE, as Kafka
// answers there.

func handleSaslHandshake(_ *Handler, _ context.Context, r kmsg.Request) kmsg.Response {
	req := r.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.ErrorCode = kerr.IllegalSaslState.Code
	resp.SupportedMechanisms = []string{}
	return resp
}

func handleSaslAuthenticate(_ *Handler, _ context.Context, r kmsg.Request) kmsg.Response {
	req := r.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	resp.ErrorCode = kerr.IllegalSaslState.Code
	m := "SaslAuthenticate request received outside a SASL authentication"
	resp.ErrorMessage = &m
	return resp
}
