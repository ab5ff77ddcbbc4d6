package api

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/group"
	"github.com/gregor-project/gregor/internal/txn"
)

// TxnOffsetCommit v0-v5 (KIP-98; KIP-447's member, generation and instance id from v3; v4
// only tells that the client knows TRANSACTION_ABORTABLE): a transaction's offsets, written
// by the group coordinator in a transactional batch of the request's producer and counted
// only once the transaction commits (group/txn.go). Partitions of unknown topics answer
// UNKNOWN_TOPIC_OR_PARTITION without reaching the coordinator. Before v2 a coordinator still
// loading answers COORDINATOR_NOT_AVAILABLE, as Kafka does for those clients.
//
// v5 is transaction version 2 (KIP-890 part 2): the client sends no AddOffsetsToTxn, so
// before writing, the group coordinator adds the group's __consumer_offsets partition to the
// transaction itself, with an AddPartitionsToTxn v5 to the transaction coordinator (local,
// or on the inter-broker listener, as produce's does: produceverify.go). A partition the
// transaction coordinator did not add answers every partition of the request with its error
// (INVALID_PRODUCER_EPOCH for a fenced producer, INVALID_TXN_STATE,
// CONCURRENT_TRANSACTIONS once the retries are spent, TRANSACTION_ABORTABLE; an unreachable
// or moving transaction coordinator COORDINATOR_NOT_AVAILABLE, as Kafka's group coordinator
// maps the NOT_ENOUGH_REPLICAS of a failed verification). v6 names topics by id.

func handleTxnOffsetCommit(h *Handler, ctx context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.TxnOffsetCommitRequest)
	im := h.Meta.Image()
	// Authorization (authorize.go): WRITE on the transactional id and READ on the group, or
	// every partition fails; READ on each topic.
	denied := h.txnDenied(c, req.TransactionalID, req.Group)
	readable := h.authorizedNames(c, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic)
	known := *req
	known.Topics = nil
	for _, rt := range req.Topics {
		kt := rt
		kt.Partitions = nil
		for _, rp := range rt.Partitions {
			if denied == nil && readable.ok(rt.Topic) && knownPartition(im, rt.Topic, rp.Partition) {
				kt.Partitions = append(kt.Partitions, rp)
			}
		}
		if len(kt.Partitions) > 0 {
			known.Topics = append(known.Topics, kt)
		}
	}
	codes := map[group.TopicPartition]int16{}
	if len(known.Topics) > 0 && req.Version >= 5 && req.Group != "" {
		if c := h.addOffsetsPartition(ctx, req); c != 0 {
			for _, t := range known.Topics {
				for _, p := range t.Partitions {
					codes[group.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = c
				}
			}
			known.Topics = nil
		}
	}
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
			case !ok && denied != nil:
				c = denied.Code
			case !ok && !readable.ok(rt.Topic):
				c = kerr.TopicAuthorizationFailed.Code
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

// addOffsetsPartition adds the group's __consumer_offsets partition to the request's
// transaction (TxnOffsetCommit v5), once this broker is known to coordinate the group. It
// returns 0, or the code every partition of the request is answered.
func (h *Handler) addOffsetsPartition(ctx context.Context, req *kmsg.TxnOffsetCommitRequest) int16 {
	if err := h.Groups.FindCoordinator(req.Group); err != nil {
		return err.Code
	}
	p := h.Groups.PartitionFor(req.Group)
	if p < 0 {
		return kerr.CoordinatorNotAvailable.Code
	}
	tp := txn.TopicPartition{Topic: group.TopicName, Partition: p}
	c := h.txnPartitions(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, true, []txn.TopicPartition{tp})[tp]
	if c == 0 {
		return 0
	}
	err := verificationError(c, verifyAddsFromVersion)
	var ke *kerr.Error
	switch {
	case !errors.As(err, &ke):
		return kerr.UnknownServerError.Code
	case ke == kerr.NotEnoughReplicas:
		h.Log.Warn("adding a group's offsets partition to its transaction failed", "group", req.Group, "transactional_id", req.TransactionalID, "err", err)
		return kerr.CoordinatorNotAvailable.Code
	}
	return ke.Code
}
