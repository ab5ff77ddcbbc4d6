package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SaslHandshake v0-v1. On a SASL listener the connection loop answers it itself until the
// connection is authenticated, and again for a KIP-368 re-authentication
// (internal/security's Session); one that reaches the handler came on a listener without
// SASL, or on an authenticated connection that may not re-authenticate: Kafka answers
// ILLEGAL_SASL_STATE there, naming no mechanism.

func handleSaslHandshake(_ *Handler, _ context.Context, _ *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.ErrorCode = kerr.IllegalSaslState.Code
	resp.SupportedMechanisms = []string{}
	return msg(resp)
}
