package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListTransactions v0-v2, answered by the transaction coordinator (internal/txn): the
// transactional ids this broker coordinates, filtered by state, producer id and (v1+)
// duration, and (v2) a transactional id pattern. A broker that runs no coordinator lists
// none.

func handleListTransactions(h *Handler, _ context.Context, _ *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.ListTransactionsRequest)
	if h.Txns == nil {
		resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
		return msg(resp)
	}
	return msg(h.Txns.ListTransactions(req))
}
