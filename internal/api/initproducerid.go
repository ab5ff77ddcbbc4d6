package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// InitProducerId v0-v5 for idempotent producers: every call hands out a fresh producer id
// with epoch 0 (ids are never reused, even across restarts). Transactional ids need the
// transaction coordinator, which this broker does not run yet: those requests get
// COORDINATOR_NOT_AVAILABLE, and FindCoordinator is not advertised, so clients do not try.

func handleInitProducerID(h *Handler, _ context.Context, _ *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return msg(resp)
	}
	id, err := h.Meta.NextProducerID()
	if err != nil {
		h.Log.Error("allocating a producer id failed", "err", err)
		resp.ErrorCode = code(err)
		return msg(resp)
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return msg(resp)
}
