package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AddOffsetsToTxn v0-v4, answered by the transaction coordinator (internal/txn): it adds
// the group's __consumer_offsets partition to the transaction, so the TxnOffsetCommit that
// follows is committed or aborted with it. A broker that runs no coordinator answers
// COORDINATOR_NOT_AVAILABLE.

func handleAddOffsetsToTxn(h *Handler, ctx context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.AddOffsetsToTxnRequest)
	// Authorization (authorize.go): WRITE on the transactional id, READ on the group.
	if denied := h.txnDenied(c, req.TransactionalID, req.Group); denied != nil {
		resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
		resp.ErrorCode = denied.Code
		return msg(resp)
	}
	if h.Txns == nil {
		resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return msg(resp)
	}
	return msg(h.Txns.AddOffsetsToTxn(ctx, req))
}
