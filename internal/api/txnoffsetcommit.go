package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/group"
)

// TxnOffsetCommit v0-v4 (KIP-98; KIP-447's member, generation and instance id from v3; v4
// only tells that the client knows TRANSACTION_ABORTABLE): a transaction's offsets, written
// by the group coordinator in a transactional batch of the request's producer and counted
// only once the transaction commits (group/txn.go). Partitions of unknown topics answer
// UNKNOWN_TOPIC_OR_PARTITION without reaching the coordinator. Before v2 a coordinator still
// loading answers COORDINATOR_NOT_AVAILABLE, as Kafka does for those clients.
//
// v5 is not served: under transaction version 2 (KIP-890 part 2) it stands for the
// AddOffsetsToTxn the client no longer sends, which the group coordinator must then do on
// its behalf with the transaction coordinator; v6 names topics by id.

func handleTxnOffsetCommit(h *Handler, ctx context.Context, _ *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.TxnOffsetCommitRequest)
	im := h.Meta.Image()
	known := *req
	known.Topics = nil
	for _, rt := range req.Topics {
		kt := rt
		kt.Partitions = nil
		for _, rp := range rt.Partitions {
			if knownPartition(im, rt.Topic, rp.Partition) {
				kt.Partitions = append(kt.Partitions, rp)
			}
		}
		if len(kt.Partitions) > 0 {
			known.Topics = append(known.Topics, kt)
		}
	}
	codes := map[group.TopicPartition]int16{}
	if len(known.Topics) > 0 {
		got := h.Groups.CommitTxnOffsets(ctx, &known)
		for _, t := range got.Topics {
			for _, p := range t.Partitions {
				codes[group.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = p.ErrorCode
			}
		}
	}
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewTxnOffsetCommitResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			sp.Partition = rp.Partition
			c, ok := codes[group.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}]
			switch {
			case !ok:
				c = kerr.UnknownTopicOrPartition.Code
			case c == kerr.CoordinatorLoadInProgress.Code && req.Version < 2:
				c = kerr.CoordinatorNotAvailable.Code
			}
			sp.ErrorCode = c
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return msg(resp)
}
