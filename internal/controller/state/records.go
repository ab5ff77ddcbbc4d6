package state

import (
	"fmt"
)

// Records are the entries of the metadata log. Replaying them in order from an empty Image
// (or from a snapshot, which is itself a list of records) rebuilds the cluster metadata;
// nothing else changes an Image.
//
// # Wire format
//
// A batch is what one command produces and what one raft entry carries; it applies as a
// unit (all its records get the entry's offset):
//
//	batch  = magic:0xC7  format:1  count:uvarint  record*count
//	record = length:uvarint  body                         (length = len(body))
//	body   = type:uvarint  version:uvarint  fields
//
// The fields of each record type are listed on its Go type, in order, using the primitives
// documented in codec.go. Versioning: a record type's fields only ever grow at the end; a
// version-N decoder reads the fields of every version <= N and refuses a newer version (a
// controller must not apply a record it cannot fully understand). A record whose fields do
// not consume exactly length bytes is corrupt.

// RecordType identifies a record's Go type on the wire. The numbers are permanent.
type RecordType uint16

const (
	TypeRegisterBroker           RecordType = 1
	TypeUnregisterBroker         RecordType = 2
	TypeBrokerRegistrationChange RecordType = 3
	TypeTopic                    RecordType = 4
	TypePartition                RecordType = 5
	TypePartitionChange          RecordType = 6
	TypeConfig                   RecordType = 7
	TypeRemoveTopic              RecordType = 8
	TypeProducerIDs              RecordType = 9
	TypeSnapshotHeader           RecordType = 10
	// Security (issue 12): SCRAM credentials, ACLs and client quotas.
	TypeUserScramCredential       RecordType = 11
	TypeRemoveUserScramCredential RecordType = 12
	TypeAccessControlEntry        RecordType = 13
	TypeRemoveAccessControlEntry  RecordType = 14
	TypeClientQuota               RecordType = 15
	// Delegation tokens (tokens.go).
	TypeDelegationToken       RecordType = 16
	TypeRemoveDelegationToken RecordType = 17
)

// Record is one metadata log record.
type Record interface {
	Type() RecordType
	// version is the version this code writes (and the highest it reads).
	version() uint64
	encode(e *encoder)
	decode(d *decoder, version uint64)
}

// RegisterBrokerRecord registers a broker (or re-registers it after a restart), replacing
// any earlier registration of the same node id.
//
//	NodeID int32 | IncarnationID uuid | BrokerEpoch varint | endpoints: count uvarint, then
//	(Name string | Host string | Port int32 | SecurityProtocol int16)* | Rack string |
//	ClusterID string | Fenced bool | InControlledShutdown bool | RegisteredOffset varint
//
// RegisteredOffset is -1 in the log (the record's own offset is used) and the original offset
// in snapshots.
type RegisterBrokerRecord struct {
	NodeID               int32
	IncarnationID        UUID
	BrokerEpoch          int64
	Endpoints            []Endpoint
	Rack                 string
	ClusterID            string
	Fenced               bool
	InControlledShutdown bool
	RegisteredOffset     int64
}

// UnregisterBrokerRecord removes a broker's registration.
//
//	NodeID int32 | BrokerEpoch varint
type UnregisterBrokerRecord struct {
	NodeID      int32
	BrokerEpoch int64
}

// Tri-state values of BrokerRegistrationChangeRecord fields.
const (
	NoChange int8 = 0
	SetTrue  int8 = 1
	SetFalse int8 = -1
)

// BrokerRegistrationChangeRecord fences, unfences or marks a broker as shutting down.
//
//	NodeID int32 | BrokerEpoch varint | Fenced int8 (as varint) | InControlledShutdown int8
//
// Fenced and InControlledShutdown are NoChange, SetTrue or SetFalse. The record applies only
// to the registration with BrokerEpoch.
type BrokerRegistrationChangeRecord struct {
	NodeID               int32
	BrokerEpoch          int64
	Fenced               int8
	InControlledShutdown int8
}

// TopicRecord creates a topic; its partitions follow as PartitionRecords.
//
//	Name string | TopicID uuid
type TopicRecord struct {
	Name    string
	TopicID UUID
}

// PartitionRecord creates (or, in a snapshot, restores) one partition. Partitions of a
// topic are created in order: Partition must equal the topic's partition count.
//
//	TopicID uuid | Partition int32 | Replicas int32s | ISR int32s | Adding int32s |
//	Removing int32s | Leader int32 | LeaderEpoch int32 | PartitionEpoch int32
type PartitionRecord struct {
	TopicID        UUID
	Partition      int32
	Replicas       []int32
	ISR            []int32
	Adding         []int32
	Removing       []int32
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
}

// Fields of a PartitionChangeRecord that are present (a bit set).
const (
	ChangeLeader   uint64 = 1 << iota // Leader
	ChangeISR                         // ISR
	ChangeReplicas                    // Replicas
	ChangeAdding                      // Adding
	ChangeRemoving                    // Removing
)

// PartitionChangeRecord changes a partition's leader, ISR or assignment.
//
//	TopicID uuid | Partition int32 | PartitionEpoch int32 | Fields uvarint |
//	BumpLeaderEpoch bool | [Leader int32] | [ISR int32s] | [Replicas int32s] |
//	[Adding int32s] | [Removing int32s]
//
// Bracketed fields are present when their bit is set in Fields. PartitionEpoch is the epoch
// the change was computed against: the record applies only if it still matches (a stale
// change is refused, never half-applied). Applying it increments PartitionEpoch, and
// LeaderEpoch when BumpLeaderEpoch is set (the command sets it whenever the leader changes
// or a replica leaves the assignment, so the old leader's and removed replicas' requests
// are fenced).
type PartitionChangeRecord struct {
	TopicID         UUID
	Partition       int32
	PartitionEpoch  int32
	Fields          uint64
	BumpLeaderEpoch bool
	Leader          int32
	ISR             []int32
	Replicas        []int32
	Adding          []int32
	Removing        []int32
}

// ConfigRecord sets or deletes one config override.
//
//	ResourceType int8 (as varint) | ResourceName string | Name string | Value string |
//	Delete bool
type ConfigRecord struct {
	ResourceType int8
	ResourceName string
	Name         string
	Value        string
	Delete       bool
}

// RemoveTopicRecord deletes a topic, its partitions and its config overrides.
//
//	TopicID uuid
type RemoveTopicRecord struct {
	TopicID UUID
}

// ProducerIDsRecord hands the producer ids [previous NextProducerID, NextProducerID) to a
// broker.
//
//	BrokerID int32 | BrokerEpoch varint | NextProducerID varint
type ProducerIDsRecord struct {
	BrokerID       int32
	BrokerEpoch    int64
	NextProducerID int64
}

// SnapshotHeaderRecord is the first record of a snapshot and appears nowhere else: the
// counters an image keeps beside its brokers, topics and configs.
//
//	Offset varint | NextBrokerEpoch varint | NextProducerID varint
type SnapshotHeaderRecord struct {
	Offset          int64
	NextBrokerEpoch int64
	NextProducerID  int64
}

func (*RegisterBrokerRecord) Type() RecordType           { return TypeRegisterBroker }
func (*UnregisterBrokerRecord) Type() RecordType         { return TypeUnregisterBroker }
func (*BrokerRegistrationChangeRecord) Type() RecordType { return TypeBrokerRegistrationChange }
func (*TopicRecord) Type() RecordType                    { return TypeTopic }
func (*PartitionRecord) Type() RecordType                { return TypePartition }
func (*PartitionChangeRecord) Type() RecordType          { return TypePartitionChange }
func (*ConfigRecord) Type() RecordType                   { return TypeConfig }
func (*RemoveTopicRecord) Type() RecordType              { return TypeRemoveTopic }
func (*ProducerIDsRecord) Type() RecordType              { return TypeProducerIDs }
func (*SnapshotHeaderRecord) Type() RecordType           { return TypeSnapshotHeader }

func (*RegisterBrokerRecord) version() uint64           { return 0 }
func (*UnregisterBrokerRecord) version() uint64         { return 0 }
func (*BrokerRegistrationChangeRecord) version() uint64 { return 0 }
func (*TopicRecord) version() uint64                    { return 0 }
func (*PartitionRecord) version() uint64                { return 0 }
func (*PartitionChangeRecord) version() uint64          { return 0 }
func (*ConfigRecord) version() uint64                   { return 0 }
func (*RemoveTopicRecord) version() uint64              { return 0 }
func (*ProducerIDsRecord) version() uint64              { return 0 }
func (*SnapshotHeaderRecord) version() uint64           { return 0 }

func newRecord(t RecordType) Record {
	switch t {
	case TypeRegisterBroker:
		return &RegisterBrokerRecord{}
	case TypeUnregisterBroker:
		return &UnregisterBrokerRecord{}
	case TypeBrokerRegistrationChange:
		return &BrokerRegistrationChangeRecord{}
	case TypeTopic:
		return &TopicRecord{}
	case TypePartition:
		return &PartitionRecord{}
	case TypePartitionChange:
		return &PartitionChangeRecord{}
	case TypeConfig:
		return &ConfigRecord{}
	case TypeRemoveTopic:
		return &RemoveTopicRecord{}
	case TypeProducerIDs:
		return &ProducerIDsRecord{}
	case TypeSnapshotHeader:
		return &SnapshotHeaderRecord{}
	case TypeClientQuota:
		return &ClientQuotaRecord{}
	case TypeDelegationToken:
		return &DelegationTokenRecord{}
	case TypeRemoveDelegationToken:
		return &RemoveDelegationTokenRecord{}
	}
	return newSecurityRecord(t)
}

func (r *RegisterBrokerRecord) encode(e *encoder) {
	e.int32(r.NodeID)
	e.uuid(r.IncarnationID)
	e.varint(r.BrokerEpoch)
	e.uvarint(uint64(len(r.Endpoints)))
	for _, ep := range r.Endpoints {
		e.string(ep.Name)
		e.string(ep.Host)
		e.int32(ep.Port)
		e.int16(ep.SecurityProtocol)
	}
	e.string(r.Rack)
	e.string(r.ClusterID)
	e.bool(r.Fenced)
	e.bool(r.InControlledShutdown)
	e.varint(r.RegisteredOffset)
}

func (r *RegisterBrokerRecord) decode(d *decoder, _ uint64) {
	r.NodeID = d.int32()
	r.IncarnationID = d.uuid()
	r.BrokerEpoch = d.varint()
	n := d.count(4) // an endpoint is at least 4 bytes
	if n > 0 {
		r.Endpoints = make([]Endpoint, n)
		for i := range r.Endpoints {
			r.Endpoints[i] = Endpoint{Name: d.string(), Host: d.string(), Port: d.int32(), SecurityProtocol: d.int16()}
		}
	}
	r.Rack = d.string()
	r.ClusterID = d.string()
	r.Fenced = d.bool()
	r.InControlledShutdown = d.bool()
	r.RegisteredOffset = d.varint()
}

func (r *UnregisterBrokerRecord) encode(e *encoder) {
	e.int32(r.NodeID)
	e.varint(r.BrokerEpoch)
}

func (r *UnregisterBrokerRecord) decode(d *decoder, _ uint64) {
	r.NodeID = d.int32()
	r.BrokerEpoch = d.varint()
}

func (r *BrokerRegistrationChangeRecord) encode(e *encoder) {
	e.int32(r.NodeID)
	e.varint(r.BrokerEpoch)
	e.varint(int64(r.Fenced))
	e.varint(int64(r.InControlledShutdown))
}

func (r *BrokerRegistrationChangeRecord) decode(d *decoder, _ uint64) {
	r.NodeID = d.int32()
	r.BrokerEpoch = d.varint()
	r.Fenced = triState(d)
	r.InControlledShutdown = triState(d)
}

func triState(d *decoder) int8 {
	v := d.varint()
	if v < -1 || v > 1 {
		d.fail("tri-state")
		return 0
	}
	return int8(v)
}

func (r *TopicRecord) encode(e *encoder) {
	e.string(r.Name)
	e.uuid(r.TopicID)
}

func (r *TopicRecord) decode(d *decoder, _ uint64) {
	r.Name = d.string()
	r.TopicID = d.uuid()
}

func (r *PartitionRecord) encode(e *encoder) {
	e.uuid(r.TopicID)
	e.int32(r.Partition)
	e.int32s(r.Replicas)
	e.int32s(r.ISR)
	e.int32s(r.Adding)
	e.int32s(r.Removing)
	e.int32(r.Leader)
	e.int32(r.LeaderEpoch)
	e.int32(r.PartitionEpoch)
}

func (r *PartitionRecord) decode(d *decoder, _ uint64) {
	r.TopicID = d.uuid()
	r.Partition = d.int32()
	r.Replicas = d.int32s()
	r.ISR = d.int32s()
	r.Adding = d.int32s()
	r.Removing = d.int32s()
	r.Leader = d.int32()
	r.LeaderEpoch = d.int32()
	r.PartitionEpoch = d.int32()
}

const allChangeFields = ChangeLeader | ChangeISR | ChangeReplicas | ChangeAdding | ChangeRemoving

func (r *PartitionChangeRecord) encode(e *encoder) {
	e.uuid(r.TopicID)
	e.int32(r.Partition)
	e.int32(r.PartitionEpoch)
	e.uvarint(r.Fields)
	e.bool(r.BumpLeaderEpoch)
	if r.Fields&ChangeLeader != 0 {
		e.int32(r.Leader)
	}
	if r.Fields&ChangeISR != 0 {
		e.int32s(r.ISR)
	}
	if r.Fields&ChangeReplicas != 0 {
		e.int32s(r.Replicas)
	}
	if r.Fields&ChangeAdding != 0 {
		e.int32s(r.Adding)
	}
	if r.Fields&ChangeRemoving != 0 {
		e.int32s(r.Removing)
	}
}

func (r *PartitionChangeRecord) decode(d *decoder, _ uint64) {
	r.TopicID = d.uuid()
	r.Partition = d.int32()
	r.PartitionEpoch = d.int32()
	r.Fields = d.uvarint()
	if r.Fields&^allChangeFields != 0 {
		d.fail("partition change fields")
	}
	r.BumpLeaderEpoch = d.bool()
	if r.Fields&ChangeLeader != 0 {
		r.Leader = d.int32()
	}
	if r.Fields&ChangeISR != 0 {
		r.ISR = d.int32s()
	}
	if r.Fields&ChangeReplicas != 0 {
		r.Replicas = d.int32s()
	}
	if r.Fields&ChangeAdding != 0 {
		r.Adding = d.int32s()
	}
	if r.Fields&ChangeRemoving != 0 {
		r.Removing = d.int32s()
	}
}

func (r *ConfigRecord) encode(e *encoder) {
	e.varint(int64(r.ResourceType))
	e.string(r.ResourceName)
	e.string(r.Name)
	e.string(r.Value)
	e.bool(r.Delete)
}

func (r *ConfigRecord) decode(d *decoder, _ uint64) {
	t := d.varint()
	if t < -128 || t > 127 {
		d.fail("resource type")
	}
	r.ResourceType = int8(t)
	r.ResourceName = d.string()
	r.Name = d.string()
	r.Value = d.string()
	r.Delete = d.bool()
}

func (r *RemoveTopicRecord) encode(e *encoder)           { e.uuid(r.TopicID) }
func (r *RemoveTopicRecord) decode(d *decoder, _ uint64) { r.TopicID = d.uuid() }

func (r *ProducerIDsRecord) encode(e *encoder) {
	e.int32(r.BrokerID)
	e.varint(r.BrokerEpoch)
	e.varint(r.NextProducerID)
}

func (r *ProducerIDsRecord) decode(d *decoder, _ uint64) {
	r.BrokerID = d.int32()
	r.BrokerEpoch = d.varint()
	r.NextProducerID = d.varint()
}

func (r *SnapshotHeaderRecord) encode(e *encoder) {
	e.varint(r.Offset)
	e.varint(r.NextBrokerEpoch)
	e.varint(r.NextProducerID)
}

func (r *SnapshotHeaderRecord) decode(d *decoder, _ uint64) {
	r.Offset = d.varint()
	r.NextBrokerEpoch = d.varint()
	r.NextProducerID = d.varint()
}

// Batch framing constants.
const (
	batchMagic  byte = 0xC7
	batchFormat byte = 1
)

// appendRecord appends one length-prefixed record to e, reusing scratch for the body.
func appendRecord(e *encoder, scratch *encoder, r Record) {
	scratch.b = scratch.b[:0]
	scratch.uvarint(uint64(r.Type()))
	scratch.uvarint(r.version())
	r.encode(scratch)
	e.uvarint(uint64(len(scratch.b)))
	e.b = append(e.b, scratch.b...)
}

// EncodeBatch encodes records as one batch.
func EncodeBatch(recs []Record) []byte {
	e := &encoder{b: make([]byte, 0, 16+32*len(recs))}
	e.b = append(e.b, batchMagic, batchFormat)
	e.uvarint(uint64(len(recs)))
	var scratch encoder
	for _, r := range recs {
		appendRecord(e, &scratch, r)
	}
	return e.b
}

// DecodeBatch decodes a batch written by EncodeBatch.
func DecodeBatch(b []byte) ([]Record, error) {
	if len(b) < 2 || b[0] != batchMagic {
		return nil, fmt.Errorf("%w: not a record batch", ErrCorruptRecord)
	}
	if b[1] != batchFormat {
		return nil, fmt.Errorf("%w: record batch format %d", ErrCorruptRecord, b[1])
	}
	d := &decoder{b: b[2:]}
	n := d.count(2) // a record is at least 2 bytes
	if d.err != nil {
		return nil, d.err
	}
	recs := make([]Record, 0, n)
	for range n {
		r, err := decodeRecord(d)
		if err != nil {
			return nil, err
		}
		recs = append(recs, r)
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last record", ErrCorruptRecord, len(d.b))
	}
	return recs, nil
}

func decodeRecord(d *decoder) (Record, error) {
	n := d.count(1)
	if d.err != nil {
		return nil, d.err
	}
	body := &decoder{b: d.b[:n]}
	d.b = d.b[n:]
	typ := body.uvarint()
	ver := body.uvarint()
	if body.err != nil {
		return nil, body.err
	}
	if typ > 0xffff {
		return nil, fmt.Errorf("%w: record type %d", ErrCorruptRecord, typ)
	}
	r := newRecord(RecordType(typ))
	if r == nil {
		return nil, fmt.Errorf("%w: unknown record type %d", ErrCorruptRecord, typ)
	}
	if ver > r.version() {
		return nil, fmt.Errorf("%w: record type %d version %d is newer than %d", ErrCorruptRecord, typ, ver, r.version())
	}
	r.decode(body, ver)
	if body.err != nil {
		return nil, fmt.Errorf("record type %d: %w", typ, body.err)
	}
	if len(body.b) != 0 {
		return nil, fmt.Errorf("%w: record type %d has %d trailing bytes", ErrCorruptRecord, typ, len(body.b))
	}
	return r, nil
}
