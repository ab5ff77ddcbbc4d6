package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeTransactions v0, answered by the transaction coordinator (internal/txn): the
// state, producer id and epoch, timeout, start time and partitions of each transactional id
// this broker coordinates (NOT_COORDINATOR for the others, TRANSACTIONAL_ID_NOT_FOUND for
// unknown ids). A broker that runs no coordinator answers COORDINATOR_NOT_AVAILABLE.

func handleDescribeTransactions(h *Handler, _ context.Context, _ *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.DescribeTransactionsRequest)
	if h.Txns == nil {
		resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
		for _, id := range req.TransactionalIDs {
			s := kmsg.NewDescribeTransactionsResponseTransactionState()
			s.TransactionalID, s.ErrorCode = id, kerr.CoordinatorNotAvailable.Code
			s.ProducerID, s.ProducerEpoch = -1, -1
			resp.TransactionStates = append(resp.TransactionStates, s)
		}
		return msg(resp)
	}
	return msg(h.Txns.DescribeTransactions(req))
}
