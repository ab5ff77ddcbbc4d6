package api

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeTransactions v0, answered by the transaction coordinator (internal/txn): the
// state, producer id and epoch, timeout, start time and partitions of each transactional id
// this broker coordinates (NOT_COORDINATOR for the others, TRANSACTIONAL_ID_NOT_FOUND for
// unknown ids). A broker that runs no coordinator answers COORDINATOR_NOT_AVAILABLE.

func handleDescribeTransactions(h *Handler, _ context.Context, c *Conn, r kmsg.Request) Reply {
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
	// Authorization (authorize.go): DESCRIBE on each transactional id
	// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), and of its partitions only those of topics the
	// principal may describe.
	resp := h.Txns.DescribeTransactions(req)
	describable := h.authorizedNames(c, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic)
	for i := range resp.TransactionStates {
		s := &resp.TransactionStates[i]
		if !h.authorized(c, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTransactionalId, s.TransactionalID) {
			d := kmsg.NewDescribeTransactionsResponseTransactionState()
			d.TransactionalID, d.ErrorCode = s.TransactionalID, kerr.TransactionalIDAuthorizationFailed.Code
			d.ProducerID, d.ProducerEpoch = -1, -1
			*s = d
			continue
		}
		s.Topics = slices.DeleteFunc(s.Topics, func(t kmsg.DescribeTransactionsResponseTransactionStateTopic) bool { return !describable.ok(t.Topic) })
	}
	return msg(resp)
}
