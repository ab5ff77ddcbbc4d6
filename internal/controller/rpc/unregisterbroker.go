package rpc

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/controller/state"
)

// UnregisterBroker v0 -> state.Controller.UnregisterBroker: removes a broker's registration
// (decommissioning it, KIP-631), after electing new leaders from the ISR for the partitions
// it led and taking it out of every ISR, all in one committed change. As in Kafka
// (ReplicationControlManager.unregisterBroker) any registered broker may be unregistered,
// fenced or not; an id with no registration is BROKER_ID_NOT_REGISTERED. A broker that keeps
// running has its heartbeats refused from then on and stays out until it is restarted.

func handleUnregisterBroker(h *Handler, ctx context.Context, r kmsg.Request) kmsg.Response {
	req := r.(*kmsg.UnregisterBrokerRequest)
	resp := req.ResponseKind().(*kmsg.UnregisterBrokerResponse)
	// The command's own error travels in a struct: a nil error interface is no value to Do.
	res, err := do(ctx, h, 0, func(c *state.Controller, _ int64) ([]state.Record, struct{ err error }) {
		recs, err := c.UnregisterBroker(req.BrokerID)
		return recs, struct{ err error }{err}
	})
	if err == nil {
		err = res.err
	}
	resp.ErrorCode, resp.ErrorMessage = code(err), errMsg(err)
	if err == nil {
		h.log.Info("broker unregistered", "broker", req.BrokerID)
	}
	return resp
}
