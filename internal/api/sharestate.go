package api

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/metadata"
	"github.com/gregor-project/gregor/internal/share"
)

// The share-partition leader's side of share-partition state (Kafka's persister): it reads a
// share-partition's state back from the share coordinator when it first leads it in a leader
// epoch, and writes each change an acknowledgement makes before it answers. The share
// coordinator of a share-partition is the leader of its __share_group_state partition: this
// broker's ShareStates when it leads it, else another broker, reached with
// ReadShareGroupState and WriteShareGroupState on the inter-broker listener.

// shareStateTimeout bounds one read or write of share-partition state.
const shareStateTimeout = 30 * time.Second

// EnsureShareStateTopic returns __share_group_state's partition count, or 0 if it does not
// exist; with create it first creates the topic if it is missing.
func (h *Handler) EnsureShareStateTopic(create bool) (int32, error) {
	t := h.Meta.Image().Topic(share.StateTopic)
	if t == nil && create {
		var err error
		t, err = h.createTopic(topicSpec{name: share.StateTopic, partitions: -1, rf: -1}, false)
		if errors.Is(err, metadata.ErrTopicExists) {
			return h.EnsureShareStateTopic(false)
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

// shareStateTopicDefaults applies Kafka's settings for __share_group_state to what the
// creator left unset: compacted, uncompressed, share.coordinator.state.topic.num.partitions
// partitions, share.coordinator.state.topic.replication.factor replicas (capped by the
// registered brokers, so a smaller cluster can serve share groups), min.insync.replicas
// share.coordinator.state.topic.min.isr (capped by the replicas).
func (h *Handler) shareStateTopicDefaults(s *topicSpec) {
	cfg := h.Cfg.Current()
	if s.partitions == -1 && len(s.assignment) == 0 {
		s.partitions = cfg.ShareCoordinatorStateTopicNumPartitions
	}
	rf := int(cfg.ShareCoordinatorStateTopicReplicationFactor)
	if s.rf != -1 {
		rf = int(s.rf)
	} else if len(s.assignment) == 0 {
		if n := len(h.Meta.Image().Brokers); n > 0 && n < rf {
			rf = n
		}
		s.rf = int16(rf)
	}
	minISR := min(int(cfg.ShareCoordinatorStateTopicMinIsr), max(rf, 1))
	defaults := map[string]string{
		"cleanup.policy":                 "compact",
		"compression.type":               "uncompressed",
		"min.insync.replicas":            strconv.Itoa(minISR),
		"unclean.leader.election.enable": "false",
	}
	for k, v := range defaults {
		if _, ok := s.configs[k]; !ok {
			s.configs = withConfig(s.configs, k, v)
		}
	}
}

// shareStateLeader is the broker coordinating k's state, creating __share_group_state on
// first use.
func (h *Handler) shareStateLeader(k share.Key) (int32, error) {
	n, err := h.EnsureShareStateTopic(true)
	if err != nil || n <= 0 {
		return -1, fmt.Errorf("%w: %s: %v", kerr.CoordinatorNotAvailable, share.StateTopic, err)
	}
	t := h.Meta.Image().Topic(share.StateTopic)
	if t == nil {
		return -1, kerr.CoordinatorNotAvailable
	}
	pp := t.Partition(share.StatePartitionFor(share.StateKey(k), int32(len(t.Parts))))
	if pp == nil || pp.Leader < 0 {
		return -1, kerr.CoordinatorNotAvailable
	}
	return pp.Leader, nil
}

// readShareState reads k's persisted state as its leader in leaderEpoch: found false when
// it has none (the share-partition starts afresh). Without a share coordinator (a handler
// built without one) nothing is persisted.
func (h *Handler) readShareState(k share.Key, leaderEpoch int32) (share.PartitionState, bool, error) {
	if h.ShareStates == nil {
		return share.PartitionState{}, false, nil
	}
	node, err := h.shareStateLeader(k)
	if err != nil {
		return share.PartitionState{}, false, err
	}
	if node == h.NodeID {
		return h.ShareStates.Read(k, leaderEpoch)
	}
	req := kmsg.NewPtrReadShareGroupStateRequest()
	req.GroupID = k.Group
	rt := kmsg.NewReadShareGroupStateRequestTopic()
	rt.TopicID = k.Topic
	rp := kmsg.NewReadShareGroupStateRequestTopicPartition()
	rp.Partition, rp.LeaderEpoch = k.Partition, leaderEpoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	r, err := askShareCoordinator[*kmsg.ReadShareGroupStateResponse](h, node, req)
	if err != nil {
		return share.PartitionState{}, false, err
	}
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		return share.PartitionState{}, false, kerr.CoordinatorNotAvailable
	}
	p := r.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		return share.PartitionState{}, false, kerr.ErrorForCode(p.ErrorCode)
	}
	if p.StartOffset < 0 { // no state: Kafka answers start offset -1
		return share.PartitionState{}, false, nil
	}
	s := share.PartitionState{StateEpoch: p.StateEpoch, LeaderEpoch: leaderEpoch, Start: p.StartOffset}
	for _, b := range p.StateBatches {
		st, ok := share.StateOfWire(b.DeliveryState)
		if !ok {
			return share.PartitionState{}, false, kerr.CoordinatorNotAvailable
		}
		s.Batches = append(s.Batches, share.StateBatch{First: b.FirstOffset, Last: b.LastOffset, State: st, Deliveries: b.DeliveryCount})
	}
	return s, true, nil
}

// readShareStateSummary reads k's persisted start offset, leader epoch and state epoch from
// its share coordinator (ReadShareGroupStateSummary when another broker is it), without the
// batches: found false when it has no state.
func (h *Handler) readShareStateSummary(k share.Key) (share.PartitionState, bool, error) {
	if h.ShareStates == nil {
		return share.PartitionState{}, false, nil
	}
	node, err := h.shareStateLeader(k)
	if err != nil {
		return share.PartitionState{}, false, err
	}
	if node == h.NodeID {
		s, ok, err := h.ShareStates.Read(k, -1)
		s.Batches = nil
		return s, ok, err
	}
	req := kmsg.NewPtrReadShareGroupStateSummaryRequest()
	req.GroupID = k.Group
	rt := kmsg.NewReadShareGroupStateSummaryRequestTopic()
	rt.TopicID = k.Topic
	rp := kmsg.NewReadShareGroupStateSummaryRequestTopicPartition()
	rp.Partition, rp.LeaderEpoch = k.Partition, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	r, err := askShareCoordinator[*kmsg.ReadShareGroupStateSummaryResponse](h, node, req)
	if err != nil {
		return share.PartitionState{}, false, err
	}
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		return share.PartitionState{}, false, kerr.CoordinatorNotAvailable
	}
	p := r.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		return share.PartitionState{}, false, kerr.ErrorForCode(p.ErrorCode)
	}
	if p.StartOffset < 0 {
		return share.PartitionState{}, false, nil
	}
	return share.PartitionState{StateEpoch: p.StateEpoch, LeaderEpoch: p.LeaderEpoch, Start: p.StartOffset}, true, nil
}

// writeShareState makes s k's persisted state, through the share coordinator.
func (h *Handler) writeShareState(k share.Key, s share.PartitionState) error {
	if h.ShareStates == nil {
		return nil
	}
	node, err := h.shareStateLeader(k)
	if err != nil {
		return err
	}
	if node == h.NodeID {
		return h.ShareStates.Write(k, s)
	}
	req := kmsg.NewPtrWriteShareGroupStateRequest()
	req.GroupID = k.Group
	rt := kmsg.NewWriteShareGroupStateRequestTopic()
	rt.TopicID = k.Topic
	rp := kmsg.NewWriteShareGroupStateRequestTopicPartition()
	rp.Partition, rp.StateEpoch, rp.LeaderEpoch, rp.StartOffset = k.Partition, s.StateEpoch, s.LeaderEpoch, s.Start
	for _, b := range s.Batches {
		rp.StateBatches = append(rp.StateBatches, kmsg.WriteShareGroupStateRequestTopicPartitionStateBatch{
			FirstOffset: b.First, LastOffset: b.Last, DeliveryState: share.WireState(b.State), DeliveryCount: b.Deliveries,
		})
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	r, err := askShareCoordinator[*kmsg.WriteShareGroupStateResponse](h, node, req)
	if err != nil {
		return err
	}
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		return kerr.CoordinatorNotAvailable
	}
	if c := r.Topics[0].Partitions[0].ErrorCode; c != 0 {
		return kerr.ErrorForCode(c)
	}
	return nil
}

// askShareCoordinator sends req, about one share-partition, to node, its share coordinator
// on another broker, within shareStateTimeout. Not reaching it, or an answer of another
// kind, is COORDINATOR_NOT_AVAILABLE, which the caller's client retries.
func askShareCoordinator[R kmsg.Response](h *Handler, node int32, req kmsg.Request) (R, error) {
	var zero R
	if h.Brokers == nil {
		return zero, kerr.CoordinatorNotAvailable
	}
	ctx, cancel := context.WithTimeout(context.Background(), shareStateTimeout)
	defer cancel()
	resp, err := h.Brokers.Request(ctx, node, req)
	if err != nil {
		return zero, fmt.Errorf("%w: %v", kerr.CoordinatorNotAvailable, err)
	}
	r, ok := resp.(R)
	if !ok {
		return zero, kerr.CoordinatorNotAvailable
	}
	return r, nil
}

// shareStateUnavailable is how a share fetch answers a partition whose state the share
// coordinator cannot give yet (it is being elected or loaded, or moved): NOT_LEADER_OR_FOLLOWER,
// which Kafka's share consumer retries after refreshing its metadata, where the coordinator
// errors themselves would fail its fetch.
func shareStateUnavailable(err error) error {
	if errors.Is(err, kerr.NotCoordinator) || errors.Is(err, kerr.CoordinatorNotAvailable) || errors.Is(err, kerr.CoordinatorLoadInProgress) {
		return fmt.Errorf("%w: share-partition state not available yet: %v", kerr.NotLeaderForPartition, err)
	}
	return err
}

// deleteShareStates deletes the persisted state of share-partitions dropped here (a deleted
// share group, DeleteShareGroupOffsets), so a later fetch starts them afresh rather than
// reading the old state back.
func (h *Handler) deleteShareStates(keys []share.Key) error {
	for _, k := range keys {
		if err := h.deleteShareState(k); err != nil {
			return err
		}
	}
	return nil
}

func (h *Handler) deleteShareState(k share.Key) error {
	if h.ShareStates == nil {
		return nil
	}
	node, err := h.shareStateLeader(k)
	if err != nil {
		return err
	}
	if node == h.NodeID {
		return h.ShareStates.Delete(k)
	}
	req := kmsg.NewPtrDeleteShareGroupStateRequest()
	req.GroupID = k.Group
	rt := kmsg.NewDeleteShareGroupStateRequestTopic()
	rt.TopicID = k.Topic
	rp := kmsg.NewDeleteShareGroupStateRequestTopicPartition()
	rp.Partition = k.Partition
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	r, err := askShareCoordinator[*kmsg.DeleteShareGroupStateResponse](h, node, req)
	if err != nil {
		return err
	}
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		return kerr.CoordinatorNotAvailable
	}
	if c := r.Topics[0].Partitions[0].ErrorCode; c != 0 {
		return kerr.ErrorForCode(c)
	}
	return nil
}

// initializeShareState makes k's persisted state start offset start in state epoch
// stateEpoch, with no batches, through the share coordinator (InitializeShareGroupState when
// another broker is it), as Kafka's group coordinator resets a share-partition through its
// persister: the partition's leader may be any broker.
func (h *Handler) initializeShareState(k share.Key, stateEpoch int32, start int64) error {
	if h.ShareStates == nil {
		return nil
	}
	node, err := h.shareStateLeader(k)
	if err != nil {
		return err
	}
	if node == h.NodeID {
		return h.ShareStates.Initialize(k, stateEpoch, start)
	}
	req := kmsg.NewPtrInitializeShareGroupStateRequest()
	req.GroupID = k.Group
	rt := kmsg.NewInitializeShareGroupStateRequestTopic()
	rt.TopicID = k.Topic
	rp := kmsg.NewInitializeShareGroupStateRequestTopicPartition()
	rp.Partition, rp.StateEpoch, rp.StartOffset = k.Partition, stateEpoch, start
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	r, err := askShareCoordinator[*kmsg.InitializeShareGroupStateResponse](h, node, req)
	if err != nil {
		return err
	}
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		return kerr.CoordinatorNotAvailable
	}
	if c := r.Topics[0].Partitions[0].ErrorCode; c != 0 {
		return kerr.ErrorForCode(c)
	}
	return nil
}

// shareStateMoved reports whether part, a share-partition this leader holds in memory, no
// longer matches its persisted state: the state was reset in a later state epoch
// (AlterShareGroupOffsets) or deleted (DeleteShareGroupOffsets, a deleted group) while the
// group was empty, by a group coordinator on any broker. A leader checks when a member opens
// a share session, so the group's next members see the reset. An unreadable state counts as
// unchanged: the fetch goes on from memory.
func (h *Handler) shareStateMoved(k share.Key, part *share.Part) bool {
	if h.ShareStates == nil {
		return false
	}
	s, ok, err := h.readShareStateSummary(k)
	if err != nil {
		return false
	}
	return !ok || s.StateEpoch != part.StateEpoch()
}
