package rpc

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/controller/state"
)

// AllocateProducerIds v0 -> state.Controller.AllocateProducerIDs: the next block of
// producer ids for a registered broker of the current epoch.

func handleAllocateProducerIDs(h *Handler, ctx context.Context, r kmsg.Request) kmsg.Response {
	req := r.(*kmsg.AllocateProducerIDsRequest)
	resp := req.ResponseKind().(*kmsg.AllocateProducerIDsResponse)
	res, err := do(ctx, h, 0, func(c *state.Controller, _ int64) ([]state.Record, state.ProducerIDsResponse) {
		return c.AllocateProducerIDs(req.BrokerID, req.BrokerEpoch)
	})
	if err == nil {
		err = res.Err
	}
	resp.ErrorCode = code(err)
	if err == nil {
		resp.ProducerIDStart, resp.ProducerIDLen = res.Start, int32(res.Len)
	}
	return resp
}
