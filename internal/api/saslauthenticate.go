package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SaslAuthenticate v0-v2. As SaslHandshake: answered by the connection loop during an
// authentication; one that reaches the handler is out of place and gets ILLEGAL_SASL_STATE,
// as Kafka answers a SaslAuthenticate after authentication or on a listener without SASL.

func handleSaslAuthenticate(_ *Handler, _ context.Context, _ *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	resp.ErrorCode = kerr.IllegalSaslState.Code
	m := "SaslAuthenticate request received outside a SASL authentication"
	resp.ErrorMessage = &m
	return msg(resp)
}
