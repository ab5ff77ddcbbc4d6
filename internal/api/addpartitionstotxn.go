package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/metadata"
)

// AddPartitionsToTxn v0-v5, answered by the transaction coordinator (internal/txn): v0-v3
// come from producers (one transactional id, its partitions), v4+ from brokers verifying or
// adding partitions for several transactional ids at once (KIP-890; VerifyOnly only
// checks). A broker that runs no coordinator answers COORDINATOR_NOT_AVAILABLE.

func handleAddPartitionsToTxn(h *Handler, ctx context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.AddPartitionsToTxnRequest)
	// Authorization (authorize.go): v4+ comes from brokers and needs CLUSTER_ACTION; v0-v3
	// WRITE on the transactional id. Each topic needs WRITE: a transaction naming a topic
	// its producer may not write adds none of its partitions.
	if req.Version >= 4 && !h.authorizedCluster(c, kmsg.ACLOperationClusterAction) {
		return msg(addPartitionsError(req, kerr.ClusterAuthorizationFailed.Code))
	}
	if req.Version < 4 && !h.authorized(c, kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTransactionalId, req.TransactionalID) {
		return msg(addPartitionsError(req, kerr.TransactionalIDAuthorizationFailed.Code))
	}
	writable := h.authorizedNames(c, kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTopic)
	im := h.Meta.Image()
	if req.Version < 4 {
		topics := make([]kmsg.AddPartitionsToTxnRequestTransactionTopic, len(req.Topics))
		for i, t := range req.Topics {
			topics[i] = kmsg.AddPartitionsToTxnRequestTransactionTopic{Topic: t.Topic, Partitions: t.Partitions}
		}
		if denied, ok := topicsDenied(im, topics, writable); ok {
			resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
			for _, dt := range denied {
				st := kmsg.NewAddPartitionsToTxnResponseTopic()
				st.Topic = dt.Topic
				for _, dp := range dt.Partitions {
					st.Partitions = append(st.Partitions, kmsg.AddPartitionsToTxnResponseTopicPartition{Partition: dp.Partition, ErrorCode: dp.ErrorCode})
				}
				resp.Topics = append(resp.Topics, st)
			}
			return msg(resp)
		}
	}
	if h.Txns == nil {
		return msg(addPartitionsError(req, kerr.CoordinatorNotAvailable.Code))
	}
	if req.Version < 4 {
		return msg(h.Txns.AddPartitionsToTxn(ctx, req))
	}
	var deniedTxns []kmsg.AddPartitionsToTxnResponseTransaction
	allowed := *req
	allowed.Transactions = nil
	for _, t := range req.Transactions {
		if denied, ok := topicsDenied(im, t.Topics, writable); ok {
			deniedTxns = append(deniedTxns, kmsg.AddPartitionsToTxnResponseTransaction{TransactionalID: t.TransactionalID, Topics: denied})
			continue
		}
		allowed.Transactions = append(allowed.Transactions, t)
	}
	if len(deniedTxns) == 0 {
		return msg(h.Txns.AddPartitionsToTxn(ctx, req))
	}
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if len(allowed.Transactions) > 0 {
		resp = h.Txns.AddPartitionsToTxn(ctx, &allowed)
	}
	resp.Transactions = append(resp.Transactions, deniedTxns...)
	return msg(resp)
}

// topicsDenied answers a transaction's partitions when one of its topics may not be written:
// that topic's partitions TOPIC_AUTHORIZATION_FAILED, those of topics not in the image
// UNKNOWN_TOPIC_OR_PARTITION, the others OPERATION_NOT_ATTEMPTED, as Kafka answers; ok is
// false (and the answer nil) when every topic may be written.
func topicsDenied(im *metadata.Image, topics []kmsg.AddPartitionsToTxnRequestTransactionTopic, writable *authorizedSet) ([]kmsg.AddPartitionsToTxnResponseTransactionTopic, bool) {
	ok := false
	for _, t := range topics {
		if !writable.ok(t.Topic) {
			ok = true
		}
	}
	if !ok {
		return nil, false
	}
	var out []kmsg.AddPartitionsToTxnResponseTransactionTopic
	for _, t := range topics {
		st := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
		st.Topic = t.Topic
		ec := kerr.OperationNotAttempted.Code
		switch {
		case !writable.ok(t.Topic):
			ec = kerr.TopicAuthorizationFailed.Code
		case im.Topic(t.Topic) == nil:
			ec = kerr.UnknownTopicOrPartition.Code
		}
		for _, p := range t.Partitions {
			sp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
			sp.Partition, sp.ErrorCode = p, ec
			st.Partitions = append(st.Partitions, sp)
		}
		out = append(out, st)
	}
	return out, true
}

// addPartitionsError answers every partition of req with code (v4+: the top-level error).
func addPartitionsError(req *kmsg.AddPartitionsToTxnRequest, code int16) *kmsg.AddPartitionsToTxnResponse {
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if req.Version >= 4 {
		resp.ErrorCode = code
		return resp
	}
	for _, rt := range req.Topics {
		st := kmsg.NewAddPartitionsToTxnResponseTopic()
		st.Topic = rt.Topic
		for _, p := range rt.Partitions {
			sp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p, code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
