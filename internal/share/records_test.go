package share

import (
	"encoding/binary"
	"errors"
	"reflect"
	"testing"
)

var stateKey = Key{Group: "workers", Topic: [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, Partition: 7}

// A ShareSnapshot's key and value decode to what was encoded, and the key is Kafka's: the
// record type, then the group as an int16-length string, the topic id and the partition.
func TestSnapshotRecordRoundTrip(t *testing.T) {
	s := PartitionState{StateEpoch: 3, LeaderEpoch: 9, Start: 100, Batches: []StateBatch{
		{First: 100, Last: 104, State: Acknowledged, Deliveries: 1},
		{First: 105, Last: 105, State: Available, Deliveries: 2},
		{First: 106, Last: 110, State: Archived, Deliveries: 5},
	}}
	key := stateRecordKey(recSnapshot, stateKey)
	if want := 2 + 2 + len(stateKey.Group) + 16 + 4; len(key) != want || binary.BigEndian.Uint16(key) != 0 {
		t.Fatalf("key %x: %d bytes, want %d starting with type 0", key, len(key), want)
	}
	typ, k, err := parseStateKey(key)
	if err != nil || typ != recSnapshot || k != stateKey {
		t.Fatalf("key decoded to %d %+v %v", typ, k, err)
	}
	got, err := parseSnapshot(snapshotValue(0, s))
	if err != nil || !reflect.DeepEqual(got, s) {
		t.Fatalf("snapshot decoded to %+v %v, want %+v", got, err, s)
	}
	if _, err := parseSnapshot(snapshotValue(0, s)[:20]); !errors.Is(err, errCorruptStateRecord) {
		t.Fatalf("truncated snapshot: %v", err)
	}
	if _, _, err := parseStateKey(stateRecordKey(5, stateKey)); !errors.Is(err, errUnknownStateRecord) {
		t.Fatalf("record type 5: %v", err)
	}
}

// Replay keeps the latest snapshot per key, merges the updates after it (changed offsets
// take the update's state, the start offset moves), and a tombstone ends the key.
func TestReplayState(t *testing.T) {
	states := map[Key]PartitionState{}
	replay := func(key, value []byte) {
		t.Helper()
		if err := replayState(states, key, value); err != nil {
			t.Fatal(err)
		}
	}
	snap := stateRecordKey(recSnapshot, stateKey)
	replay(snap, snapshotValue(0, PartitionState{LeaderEpoch: 1, Start: 0, Batches: []StateBatch{{First: 0, Last: 9, State: Available, Deliveries: 1}}}))
	replay(snap, snapshotValue(1, PartitionState{LeaderEpoch: 2, Start: 10, Batches: []StateBatch{{First: 10, Last: 19, State: Available, Deliveries: 1}}}))
	replay(stateRecordKey(recUpdate, stateKey), updateValue(1, 3, -1, []StateBatch{{First: 10, Last: 12, State: Acknowledged, Deliveries: 1}, {First: 15, Last: 15, State: Archived, Deliveries: 1}}))
	want := PartitionState{LeaderEpoch: 3, Start: 13, Batches: []StateBatch{
		{First: 13, Last: 14, State: Available, Deliveries: 1},
		{First: 15, Last: 15, State: Archived, Deliveries: 1},
		{First: 16, Last: 19, State: Available, Deliveries: 1},
	}}
	if got := states[stateKey]; !reflect.DeepEqual(got, want) {
		t.Fatalf("replayed %+v, want %+v", got, want)
	}
	replay(stateRecordKey(recUpdate, stateKey), updateValue(1, 3, 16, nil))
	if got := states[stateKey]; got.Start != 16 || len(got.Batches) != 1 || got.Batches[0].First != 16 {
		t.Fatalf("after an update moving the start to 16: %+v", got)
	}
	replay(snap, nil)
	if _, ok := states[stateKey]; ok {
		t.Fatal("state kept after a tombstone")
	}
}

// A Partition rebuilt from a persisted state is where the original stood, every Acquired
// record Available again with its delivery count.
func TestRestoreFromPersistedState(t *testing.T) {
	cfg := Config{MaxLocks: 100, DeliveryLimit: 5, LockDurationMs: 1000}
	p := NewPartition(cfg, 0)
	p.Acquire("a", 0, 10, 10)
	if err := p.Acknowledge("a", 0, 3, AckAccept, 0); err != nil {
		t.Fatal(err)
	}
	s, err := parseSnapshot(snapshotValue(0, p.State(4, 0)))
	if err != nil {
		t.Fatal(err)
	}
	r := Restore(cfg, s.Start, s.Batches)
	if r.Start() != 4 || r.End() != 10 {
		t.Fatalf("restored window [%d, %d), want [4, 10)", r.Start(), r.End())
	}
	runs := r.Acquire("b", 0, 10, 10)
	if len(runs) != 1 || runs[0] != (Run{First: 4, Last: 9, Deliveries: 2}) {
		t.Fatalf("acquired %+v after the restore, want 4-9 with delivery count 2", runs)
	}
}

func TestParseStateKey(t *testing.T) {
	k := Key{Group: "g", Topic: [16]byte{1, 2, 3, 250}, Partition: 7}
	got, err := ParseStateKey(StateKey(k))
	if err != nil || got != k {
		t.Fatalf("ParseStateKey(%q) = %+v, %v", StateKey(k), got, err)
	}
	for _, bad := range []string{"", "g", "g:x:0", ":AAAAAAAAAAAAAAAAAAAAAA:0", "g:AAAAAAAAAAAAAAAAAAAAAA:-1", "g:AAAAAAAAAAAAAAAAAAAAAA:x", "a:b:AAAAAAAAAAAAAAAAAAAAAA:0"} {
		if _, err := ParseStateKey(bad); err == nil {
			t.Errorf("ParseStateKey(%q) accepted", bad)
		}
	}
}
