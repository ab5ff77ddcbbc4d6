package group

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kbin"
)

// Consumer group records in __consumer_offsets, in Kafka's formats (the
// group-coordinator's ConsumerGroup*Key/Value message schemas, which kmsg does not
// generate). A key is a non-flexible struct starting with its int16 version; a value starts
// with its int16 version (0 for all of these) followed by a flexible struct (compact
// strings and arrays, a tagged-field section at the end of every struct):
//
//	key 3  ConsumerGroupMetadataKey{GroupId}            -> {Epoch int32}
//	key 4  ConsumerGroupPartitionMetadataKey{GroupId}   -> {Topics [{TopicId uuid, TopicName,
//	                                                        NumPartitions int32, PartitionMetadata []}]}
//	key 5  ConsumerGroupMemberMetadataKey{GroupId, MemberId} -> {InstanceId?, RackId?, ClientId,
//	                                                        ClientHost, SubscribedTopicNames [],
//	                                                        SubscribedTopicRegex?, RebalanceTimeoutMs,
//	                                                        ServerAssignor?; tag 0: ClassicMemberMetadata
//	                                                        {SessionTimeoutMs, SupportedProtocols [{Name, Metadata}]}}
//	key 6  ConsumerGroupTargetAssignmentMetadataKey{GroupId} -> {AssignmentEpoch int32}
//	key 7  ConsumerGroupTargetAssignmentMemberKey{GroupId, MemberId} -> {TopicPartitions [{TopicId, Partitions []int32}]}
//	key 8  ConsumerGroupCurrentMemberAssignmentKey{GroupId, MemberId} -> {MemberEpoch, PreviousMemberEpoch,
//	                                                        State int8, AssignedPartitions, PartitionsPendingRevocation}
//
// A null value is a tombstone: the member's record is gone (5, 7, 8) or the group is
// deleted (3, 4, 6). Kafka 4.0 also persists resolved regular expressions (key 16); here
// they are resolved again from the topics when needed, so that record is not written.
const (
	cgMetadataKey          = 3
	cgPartitionMetadataKey = 4
	cgMemberMetadataKey    = 5
	cgTargetMetadataKey    = 6
	cgTargetMemberKey      = 7
	cgCurrentAssignmentKey = 8
)

func cgKey(version int16, group string, member ...string) []byte {
	b := kbin.AppendInt16(nil, version)
	b = kbin.AppendString(b, group)
	for _, m := range member {
		b = kbin.AppendString(b, m)
	}
	return b
}

func valueHeader() []byte { return kbin.AppendInt16(nil, 0) }

func appendTags(b []byte) []byte { return kbin.AppendUvarint(b, 0) } // no tagged fields

func appendTopicPartitions(b []byte, a Assignment) []byte {
	ids := a.sortedIDs()
	b = kbin.AppendCompactArrayLen(b, len(ids))
	for _, id := range ids {
		b = kbin.AppendUuid(b, id)
		b = kbin.AppendCompactArrayLen(b, len(a[id]))
		for _, p := range a[id] {
			b = kbin.AppendInt32(b, p)
		}
		b = appendTags(b)
	}
	return b
}

func cgEpochRecord(group string, epoch int32) Record {
	v := kbin.AppendInt32(valueHeader(), epoch)
	return Record{Key: cgKey(cgMetadataKey, group), Value: appendTags(v)}
}

func cgSubMetaRecord(group string, meta map[string]topicMeta) Record {
	names := make([]string, 0, len(meta))
	for n := range meta {
		names = append(names, n)
	}
	slices.Sort(names)
	v := kbin.AppendCompactArrayLen(valueHeader(), len(names))
	for _, n := range names {
		v = kbin.AppendUuid(v, meta[n].ID)
		v = kbin.AppendCompactString(v, n)
		v = kbin.AppendInt32(v, meta[n].Partitions)
		v = kbin.AppendCompactArrayLen(v, 0) // PartitionMetadata (racks): unused since Kafka 4.0
		v = appendTags(v)
	}
	return Record{Key: cgKey(cgPartitionMetadataKey, group), Value: appendTags(v)}
}

func nilIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func cgMemberRecord(group string, m *ConsumerMember) Record {
	v := kbin.AppendCompactNullableString(valueHeader(), m.InstanceID)
	v = kbin.AppendCompactNullableString(v, m.RackID)
	v = kbin.AppendCompactString(v, m.ClientID)
	v = kbin.AppendCompactString(v, m.ClientHost)
	v = kbin.AppendCompactArrayLen(v, len(m.SubscribedTopics))
	for _, t := range m.SubscribedTopics {
		v = kbin.AppendCompactString(v, t)
	}
	v = kbin.AppendCompactNullableString(v, nilIfEmpty(m.SubscribedRegex))
	v = kbin.AppendInt32(v, m.RebalanceTimeoutMs)
	v = kbin.AppendCompactNullableString(v, nilIfEmpty(m.ServerAssignor))
	if m.Classic == nil {
		return Record{Key: cgKey(cgMemberMetadataKey, group, m.ID), Value: appendTags(v)}
	}
	c := kbin.AppendInt32(nil, m.Classic.SessionTimeoutMs)
	c = kbin.AppendCompactArrayLen(c, len(m.Classic.Protocols))
	for _, p := range m.Classic.Protocols {
		c = kbin.AppendCompactString(c, p.Name)
		c = kbin.AppendCompactBytes(c, p.Metadata)
		c = appendTags(c)
	}
	c = appendTags(c)
	v = kbin.AppendUvarint(v, 1) // one tagged field
	v = kbin.AppendUvarint(v, 0) // tag 0: ClassicMemberMetadata
	v = kbin.AppendUvarint(v, uint32(len(c)))
	v = append(v, c...)
	return Record{Key: cgKey(cgMemberMetadataKey, group, m.ID), Value: v}
}

func cgTargetEpochRecord(group string, epoch int32) Record {
	v := kbin.AppendInt32(valueHeader(), epoch)
	return Record{Key: cgKey(cgTargetMetadataKey, group), Value: appendTags(v)}
}

func cgTargetRecord(group, member string, a Assignment) Record {
	return Record{Key: cgKey(cgTargetMemberKey, group, member), Value: appendTags(appendTopicPartitions(valueHeader(), a))}
}

func cgCurrentRecord(group string, m *ConsumerMember) Record {
	v := kbin.AppendInt32(valueHeader(), m.MemberEpoch)
	v = kbin.AppendInt32(v, m.PreviousMemberEpoch)
	v = kbin.AppendInt8(v, int8(m.State))
	v = appendTopicPartitions(v, m.Assigned)
	v = appendTopicPartitions(v, m.PendingRevocation)
	return Record{Key: cgKey(cgCurrentAssignmentKey, group, m.ID), Value: appendTags(v)}
}

// cgMemberTombstones removes a member, in Kafka's order: current assignment, target, metadata.
func cgMemberTombstones(group, member string) []Record {
	return []Record{
		{Key: cgKey(cgCurrentAssignmentKey, group, member)},
		{Key: cgKey(cgTargetMemberKey, group, member)},
		{Key: cgKey(cgMemberMetadataKey, group, member)},
	}
}

// consumerTombstones deletes a consumer group's records (Kafka's createGroupTombstoneRecords).
func consumerTombstones(g *Group) []Record {
	var recs []Record
	ms := g.cons.sortedMembers()
	for _, m := range ms {
		recs = append(recs, Record{Key: cgKey(cgCurrentAssignmentKey, g.ID, m.ID)})
	}
	for _, m := range ms {
		recs = append(recs, Record{Key: cgKey(cgTargetMemberKey, g.ID, m.ID)})
	}
	recs = append(recs, Record{Key: cgKey(cgTargetMetadataKey, g.ID)})
	for _, m := range ms {
		recs = append(recs, Record{Key: cgKey(cgMemberMetadataKey, g.ID, m.ID)})
	}
	return append(recs, Record{Key: cgKey(cgPartitionMetadataKey, g.ID)}, Record{Key: cgKey(cgMetadataKey, g.ID)})
}

// consumerGroupRecords writes a whole consumer group (after converting a classic one).
func consumerGroupRecords(g *Group) []Record {
	cg := g.cons
	ms := cg.sortedMembers()
	var recs []Record
	for _, m := range ms {
		recs = append(recs, cgMemberRecord(g.ID, m))
	}
	recs = append(recs, cgEpochRecord(g.ID, cg.epoch))
	for _, m := range ms {
		recs = append(recs, cgTargetRecord(g.ID, m.ID, cg.target[m.ID]))
	}
	recs = append(recs, cgTargetEpochRecord(g.ID, cg.assignmentEpoch))
	for _, m := range ms {
		recs = append(recs, cgCurrentRecord(g.ID, m))
	}
	return recs
}

// tombstones are the records deleting g's group metadata (not its offsets).
func (g *Group) tombstones() []Record {
	if g.cons != nil {
		return consumerTombstones(g)
	}
	return []Record{{Key: groupKey(g.ID)}}
}

// Replay.

type cgReader struct{ kbin.Reader }

func newReader(b []byte) *cgReader { return &cgReader{kbin.Reader{Src: b}} }

// skipTags skips a tagged-field section, returning tag 0's bytes if present.
func (r *cgReader) skipTags() []byte {
	var tag0 []byte
	for n := r.Uvarint(); n > 0 && r.Ok(); n-- {
		tag := r.Uvarint()
		data := r.Span(int(r.Uvarint()))
		if tag == 0 {
			tag0 = data
		}
	}
	return tag0
}

func (r *cgReader) topicPartitions() Assignment {
	a := Assignment{}
	for n := r.CompactArrayLen(); n > 0 && r.Ok(); n-- {
		id := r.Uuid()
		var ps []int32
		for k := r.CompactArrayLen(); k > 0 && r.Ok(); k-- {
			ps = append(ps, r.Int32())
		}
		r.skipTags()
		if ps = normalized(ps); len(ps) > 0 {
			a[id] = union(a[id], ps)
		}
	}
	return a
}

func (r *cgReader) compactStrings() []string {
	var ss []string
	for n := r.CompactArrayLen(); n > 0 && r.Ok(); n-- {
		ss = append(ss, r.CompactString())
	}
	return ss
}

// replayConsumer applies a consumer group record (key versions 3 to 8).
func (s *Shard) replayConsumer(version int16, key, value []byte) error {
	kr := newReader(key[2:])
	group := kr.String()
	var member string
	if version == cgMemberMetadataKey || version == cgTargetMemberKey || version == cgCurrentAssignmentKey {
		member = kr.String()
	}
	if err := kr.Complete(); err != nil {
		return fmt.Errorf("%w: consumer group key version %d: %v", ErrCorruptRecord, version, err)
	}
	g := s.groups[group]
	if value == nil {
		if g == nil || g.cons == nil {
			return nil
		}
		s.replayConsumerTombstone(g, version, member)
		return nil
	}
	r := newReader(value)
	r.Int16() // value version: 0 (a newer one would add fields after these)
	cg := s.consumerGroupForReplay(group)
	switch version {
	case cgMetadataKey:
		cg.epoch = r.Int32()
	case cgPartitionMetadataKey:
		cg.subMeta = r.partitionMetadata()
	case cgMemberMetadataKey:
		if err := cg.replayMemberMetadata(r, group, member); err != nil {
			return err
		}
	case cgTargetMetadataKey:
		cg.assignmentEpoch = r.Int32()
	case cgTargetMemberKey:
		cg.target[member] = r.topicPartitions()
	case cgCurrentAssignmentKey:
		cg.replayCurrentAssignment(r, member)
	}
	if err := r.Complete(); err != nil {
		return fmt.Errorf("%w: consumer group value version %d of %s: %v", ErrCorruptRecord, version, group, err)
	}
	return nil
}

// consumerGroupForReplay returns the consumer protocol state of group, making the group, or
// its consumer state (keeping the offsets already replayed), when a record of it is the
// first seen.
func (s *Shard) consumerGroupForReplay(group string) *consumerGroup {
	g := s.groups[group]
	if g == nil {
		g = newGroup(group, -1)
		s.groups[group] = g
	}
	if g.cons == nil {
		offsets := g.offsets
		newConsumerGroupFor(g, -1)
		g.offsets = offsets
	}
	return g.cons
}

// partitionMetadata reads a ConsumerGroupPartitionMetadataValue's topics (the racks of
// each partition are skipped: nothing here uses them).
func (r *cgReader) partitionMetadata() map[string]topicMeta {
	meta := map[string]topicMeta{}
	for n := r.CompactArrayLen(); n > 0 && r.Ok(); n-- {
		id := r.Uuid()
		name := r.CompactString()
		parts := r.Int32()
		for k := r.CompactArrayLen(); k > 0 && r.Ok(); k-- {
			r.Int32()
			r.compactStrings()
			r.skipTags()
		}
		r.skipTags()
		meta[name] = topicMeta{ID: id, Partitions: parts}
	}
	return meta
}

// replayMemberMetadata applies a ConsumerGroupMemberMetadataValue: member's subscription
// and client details, and its classic protocol metadata (tag 0) when it joined with the
// classic protocol. The member's epochs and assignment are kept.
func (cg *consumerGroup) replayMemberMetadata(r *cgReader, group, member string) error {
	old := cg.members[member]
	m := &ConsumerMember{ID: member, MemberEpoch: 0, Assigned: Assignment{}, PendingRevocation: Assignment{}}
	if old != nil {
		m = old.clone()
	}
	m.InstanceID = r.CompactNullableString()
	m.RackID = r.CompactNullableString()
	m.ClientID = r.CompactString()
	m.ClientHost = r.CompactString()
	m.SubscribedTopics = sortedStrings(r.compactStrings())
	if m.SubscribedTopics == nil {
		m.SubscribedTopics = []string{}
	}
	m.SubscribedRegex = ""
	if re := r.CompactNullableString(); re != nil {
		m.SubscribedRegex = *re
	}
	m.RebalanceTimeoutMs = r.Int32()
	m.ServerAssignor = ""
	if a := r.CompactNullableString(); a != nil {
		m.ServerAssignor = *a
	}
	m.Classic = nil
	if tag0 := r.skipTags(); tag0 != nil {
		cr := newReader(tag0)
		c := &ClassicMemberMetadata{SessionTimeoutMs: cr.Int32()}
		for n := cr.CompactArrayLen(); n > 0 && cr.Ok(); n-- {
			p := MemberProtocol{Name: cr.CompactString(), Metadata: slices.Clone(cr.CompactBytes())}
			cr.skipTags()
			c.Protocols = append(c.Protocols, p)
		}
		cr.skipTags()
		if err := cr.Complete(); err != nil {
			return fmt.Errorf("%w: classic metadata of %s/%s: %v", ErrCorruptRecord, group, member, err)
		}
		m.Classic = c
	}
	cg.put(old, m)
	return nil
}

// replayCurrentAssignment applies a ConsumerGroupCurrentMemberAssignmentValue: member's
// epochs, state and assigned and pending partitions. A state this version does not know
// reads as MemberUnknown.
func (cg *consumerGroup) replayCurrentAssignment(r *cgReader, member string) {
	old := cg.members[member]
	m := &ConsumerMember{ID: member, SubscribedTopics: []string{}}
	if old != nil {
		m = old.clone()
	}
	m.MemberEpoch = r.Int32()
	m.PreviousMemberEpoch = r.Int32()
	m.State = MemberState(r.Int8())
	switch m.State {
	case MemberStable, MemberUnrevokedPartitions, MemberUnreleasedPartitions:
	default:
		m.State = MemberUnknown
	}
	m.Assigned = r.topicPartitions()
	m.PendingRevocation = r.topicPartitions()
	cg.put(old, m)
}

func (s *Shard) replayConsumerTombstone(g *Group, version int16, member string) {
	cg := g.cons
	switch version {
	case cgMetadataKey:
		// The group is deleted; its offsets (separate records) stay, as a simple group's.
		if len(g.offsets) > 0 {
			n := newGroup(g.ID, -1)
			n.offsets = g.offsets
			s.groups[g.ID] = n
		} else {
			delete(s.groups, g.ID)
		}
	case cgPartitionMetadataKey:
		cg.subMeta = map[string]topicMeta{}
	case cgMemberMetadataKey:
		cg.put(cg.members[member], nil)
		delete(cg.target, member)
	case cgTargetMetadataKey:
		cg.assignmentEpoch = 0
	case cgTargetMemberKey:
		delete(cg.target, member)
	case cgCurrentAssignmentKey:
		if old := cg.members[member]; old != nil {
			m := old.clone()
			m.MemberEpoch, m.PreviousMemberEpoch, m.State = 0, 0, MemberStable
			m.Assigned, m.PendingRevocation = Assignment{}, Assignment{}
			cg.put(old, m)
		}
	}
}
