package api

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregor-project/gregor/internal/group"
	"github.com/gregor-project/gregor/internal/metadata"
	"github.com/gregor-project/gregor/internal/txn"
)

// Helpers shared by the transaction API files (findcoordinator.go, initproducerid.go,
// addpartitionstotxn.go, addoffsetstotxn.go, endtxn.go, writetxnmarkers.go,
// describetransactions.go, listtransactions.go, and produce's verification in
// produceverify.go). The coordinator itself is internal/txn; these files route requests to
// it and build what it needs from the broker (its topic, producer ids).

// EnsureTxnTopic returns the partition count of __transaction_state, or 0 if it does not
// exist; with create it first creates the topic if missing (txn.Options.EnsureTopic).
func (h *Handler) EnsureTxnTopic(create bool) (int32, error) {
	t := h.Meta.Image().Topic(txn.TopicName)
	if t == nil && create {
		var err error
		t, err = h.createTopic(topicSpec{name: txn.TopicName, partitions: -1, rf: -1}, false)
		if errors.Is(err, metadata.ErrTopicExists) {
			return h.EnsureTxnTopic(false)
		}
		if err != nil {
			return 0, err
		}
	}
	if t == nil {
		return 0, nil
	}
	return t.Partitions, nil
}

// txnTopicDefaults applies Kafka's settings for __transaction_state
// (TransactionStateManager's topic configs) to what the creator left unset: an internal,
// compacted, uncompressed topic of transaction.state.log.num.partitions partitions and
// transaction.state.log.replication.factor replicas, min.insync.replicas
// transaction.state.log.min.isr, segments of transaction.state.log.segment.bytes, and no
// unclean leader election.
func (h *Handler) txnTopicDefaults(s *topicSpec) {
	cfg := h.Cfg.Current()
	if s.partitions == -1 && len(s.assignment) == 0 {
		s.partitions = cfg.TransactionStateLogNumPartitions
	}
	if s.rf == -1 && len(s.assignment) == 0 {
		s.rf = cfg.TransactionStateLogReplicationFactor
	}
	defaults := map[string]string{
		"cleanup.policy":                 "compact",
		"compression.type":               "uncompressed",
		"min.insync.replicas":            strconv.Itoa(int(cfg.TransactionStateLogMinIsr)),
		"segment.bytes":                  strconv.Itoa(int(cfg.TransactionStateLogSegmentBytes)),
		"unclean.leader.election.enable": "false",
	}
	for k, v := range defaults {
		if _, ok := s.configs[k]; !ok {
			s.configs = withConfig(s.configs, k, v)
		}
	}
}

// txnCoordinator returns the node leading the transactional id's __transaction_state
// partition, creating the topic on first use (FindCoordinator key type 1).
func (h *Handler) txnCoordinator(transactionalID string) (int32, *kerr.Error) {
	if h.Txns == nil {
		return -1, kerr.CoordinatorNotAvailable
	}
	t := h.Meta.Image().Topic(txn.TopicName)
	if t == nil {
		if _, err := h.EnsureTxnTopic(true); err != nil {
			h.Log.Warn("creating "+txn.TopicName+" failed", "err", err)
			return -1, kerr.CoordinatorNotAvailable
		}
		if t = h.Meta.Image().Topic(txn.TopicName); t == nil {
			return -1, kerr.CoordinatorNotAvailable
		}
	}
	pp := t.Partition(txn.PartitionFor(transactionalID, int32(len(t.Parts))))
	if pp == nil || pp.Leader < 0 {
		return -1, kerr.CoordinatorNotAvailable
	}
	return pp.Leader, nil
}

// NextProducerID hands out a fresh producer id from this broker's block
// (txn.Options.ProducerIDs): the transaction coordinator gives one to a new transactional
// id, and a new one when an id's epoch is exhausted.
func (h *Handler) NextProducerID(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, producerIDTimeout)
	defer cancel()
	return h.producerIDs().Next(ctx, h)
}

// GroupPartition is the __consumer_offsets partition of a group (txn.Options.GroupPartition:
// AddOffsetsToTxn adds it to the transaction), creating the topic on first use.
func (h *Handler) GroupPartition(groupID string) (int32, error) {
	n, err := h.EnsureOffsetsTopic(true)
	if err != nil {
		return -1, err
	}
	if n <= 0 {
		return -1, fmt.Errorf("%w: %s does not exist yet", kerr.CoordinatorNotAvailable, group.TopicName)
	}
	return group.PartitionFor(groupID, n), nil
}
