package rpc

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/server"
)

// Envelope v0-v0 (KIP-590): a broker forwards a client's request with the client's
// principal. The controller serves the requests whose answer depends on who asks: the
// delegation token requests (delegationtokens.go), which record the requester and check the
// owner and renewers. Any other embedded request is INVALID_REQUEST (brokers forward the rest
// bare), and an embedded request that does not decode is closed out with INVALID_REQUEST too.
// With an authorizer, only a super user (a broker, KIP-801) may send Envelopes
// (Config.MayForward, CLUSTER_AUTHORIZATION_FAILED otherwise), as Kafka's controller asks
// CLUSTER_ACTION of the sender; without one, every connection the listener lets in.

// envelopeAPIs are the embedded requests served, with their versions, each given the
// forwarded principal.
var envelopeAPIs = map[int16]struct {
	min, max int16
	serve    func(h *Handler, ctx context.Context, principal string, req kmsg.Request) kmsg.Response
}{
	kmsg.CreateDelegationToken.Int16(): {0, 3, handleCreateDelegationToken},
	kmsg.RenewDelegationToken.Int16():  {0, 2, handleRenewDelegationToken},
	kmsg.ExpireDelegationToken.Int16(): {0, 2, handleExpireDelegationToken},
}

func handleEnvelope(h *Handler, ctx context.Context, r kmsg.Request) kmsg.Response {
	req := r.(*kmsg.EnvelopeRequest)
	resp := req.ResponseKind().(*kmsg.EnvelopeResponse)
	fail := func(err error) kmsg.Response {
		h.log.Info("envelope refused", "err", err)
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	}
	var p kmsg.DefaultPrincipalData
	if err := p.ReadFrom(req.RequestPrincipal); err != nil || p.Type == "" || p.Name == "" {
		return fail(fmt.Errorf("the forwarded principal does not decode: %v", err))
	}
	inner, corr, _, err := server.ParseEmbeddedRequest(req.RequestData)
	if err != nil {
		return fail(err)
	}
	api, ok := envelopeAPIs[inner.Key()]
	if !ok || inner.GetVersion() < api.min || inner.GetVersion() > api.max {
		return fail(fmt.Errorf("%s v%d is not served inside an envelope", kmsg.NameForKey(inner.Key()), inner.GetVersion()))
	}
	out := api.serve(h, ctx, p.Type+":"+p.Name, inner)
	out.SetVersion(inner.GetVersion())
	resp.ResponseData = server.AppendEmbeddedResponse(nil, out, corr)
	return resp
}
