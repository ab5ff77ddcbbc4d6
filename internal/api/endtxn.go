package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// EndTxn v0-v5, answered by the transaction coordinator (internal/txn): commit or abort
// the ongoing transaction, answered once the Prepare record is written (the markers follow);
// v5 (KIP-890 part 2) bumps the epoch at every end and answers the new one. A broker that
// runs no coordinator answers COORDINATOR_NOT_AVAILABLE.

func handleEndTxn(h *Handler, ctx context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.EndTxnRequest)
	// Authorization (authorize.go): WRITE on the transactional id.
	if denied := h.txnDenied(c, req.TransactionalID, ""); denied != nil {
		resp := req.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = denied.Code
		resp.ProducerID, resp.ProducerEpoch = -1, -1
		return msg(resp)
	}
	if h.Txns == nil {
		resp := req.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		resp.ProducerID, resp.ProducerEpoch = -1, -1
		return msg(resp)
	}
	return msg(h.Txns.EndTxn(ctx, req))
}
