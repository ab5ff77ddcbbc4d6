package group

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Record formats of __consumer_offsets, as Kafka writes them (see the package comment).
const (
	offsetKeyVersion   = 1 // OffsetCommitKey (0 and 1 are the same layout)
	groupKeyVersion    = 2 // GroupMetadataKey
	groupValueVersion  = 3 // GroupMetadataValue with instance ids and the state timestamp
	offsetValueVersion = 3 // OffsetCommitValue with leader epoch, no expire timestamp
	offsetValueExpire  = 1 // OffsetCommitValue with an explicit expire timestamp
)

func groupKey(group string) []byte {
	k := kmsg.GroupMetadataKey{Version: groupKeyVersion, Group: group}
	return k.AppendTo(nil)
}

func offsetKey(group string, tp TopicPartition) []byte {
	k := kmsg.OffsetCommitKey{Version: offsetKeyVersion, Group: group, Topic: tp.Topic, Partition: tp.Partition}
	return k.AppendTo(nil)
}

func offsetValue(o *Offset) []byte {
	v := kmsg.NewOffsetCommitValue()
	v.Version = offsetValueVersion
	if o.ExpireTimestamp >= 0 {
		v.Version = offsetValueExpire
	}
	v.Offset, v.LeaderEpoch, v.Metadata = o.Offset, o.LeaderEpoch, o.Metadata
	v.CommitTimestamp, v.ExpireTimestamp = o.CommitTimestamp, o.ExpireTimestamp
	return v.AppendTo(nil)
}

// groupValue encodes the group's current generation with the given assignment (nil: the
// members' current assignments).
func groupValue(g *Group, assignment map[string][]byte) []byte {
	v := kmsg.NewGroupMetadataValue()
	v.Version = groupValueVersion
	v.ProtocolType = g.protocolType
	v.Generation = g.generation
	if g.protocolName != "" {
		v.Protocol = strPtr(g.protocolName)
	}
	if g.leader != "" {
		v.Leader = strPtr(g.leader)
	}
	v.CurrentStateTimestamp = g.stateTime
	for _, m := range g.order {
		vm := kmsg.NewGroupMetadataValueMember()
		vm.MemberID, vm.InstanceID = m.ID, m.InstanceID
		vm.ClientID, vm.ClientHost = m.ClientID, m.ClientHost
		vm.RebalanceTimeoutMillis, vm.SessionTimeoutMillis = m.RebalanceTimeoutMs, m.SessionTimeoutMs
		vm.Subscription = m.metadata(g.protocolName)
		if vm.Subscription == nil {
			vm.Subscription = []byte{}
		}
		if a, ok := assignment[m.ID]; ok || assignment != nil {
			vm.Assignment = a
		} else {
			vm.Assignment = m.Assignment
		}
		if vm.Assignment == nil {
			vm.Assignment = []byte{}
		}
		v.Members = append(v.Members, vm)
	}
	return v.AppendTo(nil)
}

// storeGroup persists the group's generation (Kafka's storeGroup); done runs with the
// append's outcome.
func (s *Shard) storeGroup(g *Group, assignment map[string][]byte, done func(error)) {
	s.write([]Record{{Key: groupKey(g.ID), Value: groupValue(g, assignment)}}, done)
}

// Replay applies one record read back from __consumer_offsets while loading (before
// LoadComplete). Later records override earlier ones; a nil value deletes. Record types of
// other group protocols are refused with ErrUnknownRecord; the loader skips them.
func (s *Shard) Replay(key, value []byte) error {
	return s.replay(key, value, noProducer)
}

// noProducer is the producer id of a batch that is not transactional.
const noProducer = -1

// replay applies one record, of a transactional batch of producerID unless that is
// noProducer.
func (s *Shard) replay(key, value []byte, producerID int64) error {
	s.order++
	if len(key) < 2 {
		return fmt.Errorf("%w: %d-byte key", ErrCorruptRecord, len(key))
	}
	switch v := int16(binary.BigEndian.Uint16(key)); v {
	case 0, 1:
		return s.replayOffset(key, value, producerID)
	case 2:
		return s.replayGroup(key, value)
	case cgMetadataKey, cgPartitionMetadataKey, cgMemberMetadataKey, cgTargetMetadataKey, cgTargetMemberKey, cgCurrentAssignmentKey:
		return s.replayConsumer(v, key, value)
	default:
		return fmt.Errorf("%w: key version %d", ErrUnknownRecord, v)
	}
}

// ErrCorruptRecord: a __consumer_offsets record that does not decode.
var ErrCorruptRecord = errors.New("group: corrupt __consumer_offsets record")

func (s *Shard) replayOffset(key, value []byte, producerID int64) error {
	var k kmsg.OffsetCommitKey
	if err := k.ReadFrom(key); err != nil {
		return fmt.Errorf("%w: offset key: %v", ErrCorruptRecord, err)
	}
	tp := TopicPartition{k.Topic, k.Partition}
	g := s.groups[k.Group]
	if value == nil {
		// A tombstone deletes the committed offset and every pending transactional one of
		// the partition written before it (Kafka's replay does the same).
		if g != nil {
			delete(g.offsets, tp)
		}
		s.dropPendingTxn(k.Group, tp)
		return nil
	}
	var v kmsg.OffsetCommitValue
	if err := v.ReadFrom(value); err != nil {
		return fmt.Errorf("%w: offset value of %s %s-%d: %v", ErrCorruptRecord, k.Group, k.Topic, k.Partition, err)
	}
	if g == nil {
		// Offsets without group metadata: a simple group (or one whose metadata comes later).
		g = newGroup(k.Group, -1)
		s.groups[g.ID] = g
	}
	o := &Offset{Offset: v.Offset, LeaderEpoch: -1, Metadata: v.Metadata, CommitTimestamp: v.CommitTimestamp, ExpireTimestamp: -1}
	if v.Version >= 3 {
		o.LeaderEpoch = v.LeaderEpoch
	}
	if v.Version == 1 {
		o.ExpireTimestamp = v.ExpireTimestamp
	}
	o.order = s.order
	if producerID != noProducer {
		s.addPendingTxn(producerID, k.Group, tp, o)
		return nil
	}
	g.offsets[tp] = o
	return nil
}

func (s *Shard) replayGroup(key, value []byte) error {
	var k kmsg.GroupMetadataKey
	if err := k.ReadFrom(key); err != nil {
		return fmt.Errorf("%w: group key: %v", ErrCorruptRecord, err)
	}
	old := s.groups[k.Group]
	if value == nil {
		// The group was deleted; offsets written after the tombstone (simple commits) stay.
		if old != nil && len(old.offsets) > 0 {
			g := newGroup(k.Group, -1)
			g.offsets = old.offsets
			s.groups[g.ID] = g
		} else {
			delete(s.groups, k.Group)
		}
		return nil
	}
	var v kmsg.GroupMetadataValue
	if err := v.ReadFrom(value); err != nil {
		return fmt.Errorf("%w: group value of %s: %v", ErrCorruptRecord, k.Group, err)
	}
	g := newGroup(k.Group, -1)
	if old != nil {
		g.offsets = old.offsets
	}
	g.protocolType = v.ProtocolType
	g.generation = v.Generation
	if v.Protocol != nil {
		g.protocolName = *v.Protocol
	}
	if v.Version >= 2 {
		g.stateTime = v.CurrentStateTimestamp
	}
	for _, vm := range v.Members {
		m := &Member{
			ID: vm.MemberID, InstanceID: vm.InstanceID, ClientID: vm.ClientID, ClientHost: vm.ClientHost,
			RebalanceTimeoutMs: vm.RebalanceTimeoutMillis, SessionTimeoutMs: vm.SessionTimeoutMillis,
			ProtocolType: g.protocolType,
			Protocols:    []MemberProtocol{{Name: g.protocolName, Metadata: bytes.Clone(vm.Subscription)}},
			Assignment:   bytes.Clone(vm.Assignment),
		}
		if v.Version == 0 || m.RebalanceTimeoutMs < 0 {
			m.RebalanceTimeoutMs = m.SessionTimeoutMs
		}
		if g.members[m.ID] != nil {
			return fmt.Errorf("%w: group %s lists member %s twice", ErrCorruptRecord, g.ID, m.ID)
		}
		g.add(m)
	}
	if len(g.members) > 0 {
		if v.Leader == nil || g.members[*v.Leader] == nil {
			return fmt.Errorf("%w: group %s has members but leader %v is not one", ErrCorruptRecord, g.ID, v.Leader)
		}
		g.leader = *v.Leader
		g.state = Stable
	}
	s.groups[g.ID] = g
	return nil
}
