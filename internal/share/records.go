package share

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf16"
)

// StateTopic is the compacted internal topic holding share-partition state.
const StateTopic = "__share_group_state"

// Record types of __share_group_state, the int16 that opens every key (Kafka's coordinator
// record api keys).
const (
	recSnapshot int16 = 0 // ShareSnapshotKey / ShareSnapshotValue: a share-partition's whole state
	recUpdate   int16 = 1 // ShareUpdateKey / ShareUpdateValue: the batches changed since a snapshot
)

// Record errors: a record this coordinator does not understand is skipped on load.
var (
	errCorruptStateRecord = errors.New("corrupt __share_group_state record")
	errUnknownStateRecord = errors.New("unknown __share_group_state record type")
)

// PartitionState is a share-partition's persisted state (WriteShareGroupState's and
// ReadShareGroupState's fields): the state epoch (bumped when the state is initialized
// anew), the leader epoch of the partition leader that wrote it last, the start offset and
// the state batches of [StartOffset, ...).
type PartitionState struct {
	StateEpoch  int32
	LeaderEpoch int32
	Start       int64
	Batches     []StateBatch
}

// StateKey is the coordinator key of a share-partition, "group:topic-id:partition" as Kafka
// forms it (the topic id in Kafka's base64 form); it routes the share-partition to a
// __share_group_state partition.
func StateKey(k Key) string {
	return k.Group + ":" + base64.RawURLEncoding.EncodeToString(k.Topic[:]) + ":" + strconv.Itoa(int(k.Partition))
}

// ParseStateKey reads a coordinator key "group:topic-id:partition" (FindCoordinator's SHARE
// key type), as Kafka's SharePartitionKey does: exactly three parts, a non-empty group, a
// topic id in Kafka's base64 form and a non-negative partition.
func ParseStateKey(key string) (Key, error) {
	parts := strings.Split(key, ":")
	if len(parts) != 3 || parts[0] == "" {
		return Key{}, fmt.Errorf("share coordinator key %q is not group:topic-id:partition", key)
	}
	id, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil || len(id) != 16 {
		return Key{}, fmt.Errorf("share coordinator key %q: invalid topic id", key)
	}
	p, err := strconv.ParseInt(parts[2], 10, 32)
	if err != nil || p < 0 {
		return Key{}, fmt.Errorf("share coordinator key %q: invalid partition", key)
	}
	k := Key{Group: parts[0], Partition: int32(p)}
	copy(k.Topic[:], id)
	return k, nil
}

// StatePartitionFor is the __share_group_state partition of k, of n: Kafka's
// Utils.abs(key.hashCode()) % n over StateKey, with Java's String.hashCode (31*h + c over
// the UTF-16 code units, wrapping int32) and Integer.MIN_VALUE mapped to 0.
func StatePartitionFor(key string, n int32) int32 {
	var h int32
	for _, r := range key {
		if r >= 0x10000 {
			hi, lo := utf16.EncodeRune(r)
			h = 31*h + hi
			h = 31*h + lo
		} else {
			h = 31*h + r
		}
	}
	switch {
	case h == math.MinInt32:
		h = 0
	case h < 0:
		h = -h
	}
	return h % n
}

// WireState is a state as Kafka's state batches carry it: 0 Available, 2 Acknowledged, 4
// Archived (Acquired is written as Available).
func WireState(s State) int8 {
	switch s {
	case Acknowledged:
		return 2
	case Archived:
		return 4
	}
	return 0
}

// StateOfWire is the state of a state batch's DeliveryState, false for an unknown one.
func StateOfWire(b int8) (State, bool) {
	st, err := stateOfWire(b)
	return st, err == nil
}

func stateOfWire(b int8) (State, error) {
	switch b {
	case 0:
		return Available, nil
	case 2:
		return Acknowledged, nil
	case 4:
		return Archived, nil
	}
	return 0, fmt.Errorf("%w: delivery state %d", errCorruptStateRecord, b)
}

// stateRecordKey is the key of a ShareSnapshot (typ 0) or ShareUpdate (typ 1) record:
// int16 type, then (not flexible) GroupId string (int16 length), TopicId uuid, Partition int32.
func stateRecordKey(typ int16, k Key) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(typ))
	b = binary.BigEndian.AppendUint16(b, uint16(len(k.Group)))
	b = append(b, k.Group...)
	b = append(b, k.Topic[:]...)
	return binary.BigEndian.AppendUint32(b, uint32(k.Partition))
}

// snapshotValue is a ShareSnapshotValue v0 (flexible): int16 version, SnapshotEpoch uint16,
// StateEpoch int32, LeaderEpoch int32, StartOffset int64, StateBatches compact array of
// {FirstOffset int64, LastOffset int64, DeliveryState int8, DeliveryCount int16, tags},
// tags.
func snapshotValue(snapshotEpoch uint16, s PartitionState) []byte {
	b := binary.BigEndian.AppendUint16(nil, 0)
	b = binary.BigEndian.AppendUint16(b, snapshotEpoch)
	b = binary.BigEndian.AppendUint32(b, uint32(s.StateEpoch))
	b = binary.BigEndian.AppendUint32(b, uint32(s.LeaderEpoch))
	b = binary.BigEndian.AppendUint64(b, uint64(s.Start))
	return append(appendBatches(b, s.Batches), 0)
}

// updateValue is a ShareUpdateValue v0 (flexible): int16 version, SnapshotEpoch int32,
// LeaderEpoch int32, StartOffset int64 (-1: unchanged), StateBatches as in a snapshot, tags.
func updateValue(snapshotEpoch int32, leaderEpoch int32, start int64, batches []StateBatch) []byte {
	b := binary.BigEndian.AppendUint16(nil, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(snapshotEpoch))
	b = binary.BigEndian.AppendUint32(b, uint32(leaderEpoch))
	b = binary.BigEndian.AppendUint64(b, uint64(start))
	return append(appendBatches(b, batches), 0)
}

func appendBatches(b []byte, bs []StateBatch) []byte {
	b = binary.AppendUvarint(b, uint64(len(bs))+1)
	for _, sb := range bs {
		b = binary.BigEndian.AppendUint64(b, uint64(sb.First))
		b = binary.BigEndian.AppendUint64(b, uint64(sb.Last))
		b = append(b, byte(WireState(sb.State)))
		b = binary.BigEndian.AppendUint16(b, uint16(sb.Deliveries))
		b = append(b, 0) // no tagged fields
	}
	return b
}

// stateReader decodes the fixed-width fields of a record; the first short read marks it.
type stateReader struct {
	b   []byte
	bad bool
}

func (r *stateReader) take(n int) []byte {
	if r.bad || len(r.b) < n {
		r.bad = true
		return make([]byte, n)
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}
func (r *stateReader) i16() int16 { return int16(binary.BigEndian.Uint16(r.take(2))) }
func (r *stateReader) i32() int32 { return int32(binary.BigEndian.Uint32(r.take(4))) }
func (r *stateReader) i64() int64 { return int64(binary.BigEndian.Uint64(r.take(8))) }
func (r *stateReader) uvarint() uint64 {
	if r.bad {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

// skipTags skips a tagged-field section.
func (r *stateReader) skipTags() {
	for n := r.uvarint(); n > 0 && !r.bad; n-- {
		r.uvarint()
		r.take(int(r.uvarint()))
	}
}

func (r *stateReader) batches() []StateBatch {
	n := r.uvarint()
	if n == 0 || n-1 > uint64(len(r.b)) {
		r.bad = true
		return nil
	}
	out := make([]StateBatch, 0, n-1)
	for i := uint64(1); i < n && !r.bad; i++ {
		first, last := r.i64(), r.i64()
		st, err := stateOfWire(int8(r.take(1)[0]))
		if err != nil {
			r.bad = true
		}
		out = append(out, StateBatch{First: first, Last: last, State: st, Deliveries: r.i16()})
		r.skipTags()
	}
	return out
}

// parseStateKey decodes a record key: its type and share-partition.
func parseStateKey(b []byte) (int16, Key, error) {
	r := stateReader{b: b}
	typ := r.i16()
	if !r.bad && typ != recSnapshot && typ != recUpdate {
		return typ, Key{}, fmt.Errorf("%w: %d", errUnknownStateRecord, typ)
	}
	var k Key
	k.Group = string(r.take(int(uint16(r.i16()))))
	copy(k.Topic[:], r.take(16))
	k.Partition = r.i32()
	if r.bad {
		return 0, Key{}, fmt.Errorf("%w: key", errCorruptStateRecord)
	}
	return typ, k, nil
}

// parseSnapshot decodes a ShareSnapshotValue.
func parseSnapshot(b []byte) (PartitionState, error) {
	r := stateReader{b: b}
	if v := r.i16(); !r.bad && v != 0 {
		return PartitionState{}, fmt.Errorf("%w: snapshot value version %d", errUnknownStateRecord, v)
	}
	r.take(2) // SnapshotEpoch
	s := PartitionState{StateEpoch: r.i32(), LeaderEpoch: r.i32(), Start: r.i64()}
	s.Batches = r.batches()
	r.skipTags()
	if r.bad {
		return PartitionState{}, fmt.Errorf("%w: snapshot value", errCorruptStateRecord)
	}
	return s, nil
}

// parseUpdate decodes a ShareUpdateValue: leader epoch, start offset (-1: unchanged) and
// the changed batches.
func parseUpdate(b []byte) (int32, int64, []StateBatch, error) {
	r := stateReader{b: b}
	if v := r.i16(); !r.bad && v != 0 {
		return 0, 0, nil, fmt.Errorf("%w: update value version %d", errUnknownStateRecord, v)
	}
	r.i32() // SnapshotEpoch
	le, start := r.i32(), r.i64()
	bs := r.batches()
	r.skipTags()
	if r.bad {
		return 0, 0, nil, fmt.Errorf("%w: update value", errCorruptStateRecord)
	}
	return le, start, bs, nil
}

// applyUpdate merges changed batches into a state (ShareUpdate replay, as Kafka combines an
// update with the snapshot before it): the changed offsets take the update's state, the
// start offset moves if the update carries one, and batches below it are dropped.
func applyUpdate(s PartitionState, leaderEpoch int32, start int64, changed []StateBatch) PartitionState {
	p := Restore(Config{MaxLocks: math.MaxInt}, s.Start, s.Batches)
	if start > p.start {
		p.SkipTo(start)
	}
	for _, c := range changed {
		for off := max(c.First, p.start); off <= c.Last; off++ {
			for p.End() <= off {
				p.recs = append(p.recs, record{})
			}
			r := &p.recs[off-p.start]
			r.state, r.deliveries = c.State, c.Deliveries
		}
	}
	p.advance()
	s.LeaderEpoch = max(s.LeaderEpoch, leaderEpoch)
	s.Start, s.Batches = p.Snapshot()
	return s
}
