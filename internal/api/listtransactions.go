package api

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListTransactions v0-v2, answered by the transaction coordinator (internal/txn): the
// transactional ids this broker coordinates, filtered by state, producer id and (v1+)
// duration, and (v2) a transactional id pattern. A broker that runs no coordinator lists
// none.

func handleListTransactions(h *Handler, _ context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.ListTransactionsRequest)
	if h.Txns == nil {
		resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
		return msg(resp)
	}
	// Authorization (authorize.go): only the transactional ids the principal may describe.
	resp := h.Txns.ListTransactions(req)
	describable := h.authorizedNames(c, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTransactionalId)
	resp.TransactionStates = slices.DeleteFunc(resp.TransactionStates, func(s kmsg.ListTransactionsResponseTransactionState) bool {
		return !describable.ok(s.TransactionalID)
	})
	return msg(resp)
}
