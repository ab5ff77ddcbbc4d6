package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AddPartitionsToTxn v0-v5, answered by the transaction coordinator (internal/txn): v0-v3
// come from producers (one transactional id, its partitions), v4+ from brokers verifying or
// adding partitions for several transactional ids at once (KIP-890; VerifyOnly only
// checks). A broker that runs no coordinator answers COORDINATOR_NOT_AVAILABLE.

func handleAddPartitionsToTxn(h *Handler, ctx context.Context, _ *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.AddPartitionsToTxnRequest)
	if h.Txns == nil {
		return msg(addPartitionsError(req, kerr.CoordinatorNotAvailable.Code))
	}
	return msg(h.Txns.AddPartitionsToTxn(ctx, req))
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
