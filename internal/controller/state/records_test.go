package state

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"
)

func sampleRecords() []Record {
	tid := UUID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	return []Record{
		&RegisterBrokerRecord{NodeID: 3, IncarnationID: UUID{9}, BrokerEpoch: 1 << 40, Endpoints: []Endpoint{
			{Name: "PLAINTEXT", Host: "h1", Port: 9092, SecurityProtocol: 0},
			{Name: "SSL", Host: "::1", Port: 65535, SecurityProtocol: 1},
		}, Rack: "r1", ClusterID: "c", Fenced: true, InControlledShutdown: false, RegisteredOffset: -1},
		&RegisterBrokerRecord{NodeID: 0, RegisteredOffset: 7},
		&UnregisterBrokerRecord{NodeID: 3, BrokerEpoch: 12},
		&BrokerRegistrationChangeRecord{NodeID: 3, BrokerEpoch: 12, Fenced: SetFalse, InControlledShutdown: SetTrue},
		&TopicRecord{Name: "orders", TopicID: tid},
		&PartitionRecord{TopicID: tid, Partition: 2, Replicas: ids(1, 2, 3), ISR: ids(1, 3), Adding: ids(3), Removing: ids(2), Leader: 1, LeaderEpoch: 5, PartitionEpoch: 9},
		&PartitionRecord{TopicID: tid, Replicas: ids(1), ISR: ids(1), Leader: NoLeader},
		&PartitionChangeRecord{TopicID: tid, Partition: 1, PartitionEpoch: 4, Fields: ChangeLeader | ChangeISR, BumpLeaderEpoch: true, Leader: NoLeader, ISR: ids(2)},
		&PartitionChangeRecord{TopicID: tid, Partition: 0, Fields: ChangeReplicas | ChangeAdding | ChangeRemoving, Replicas: ids(4, 5, 1), Adding: ids(4, 5), Removing: ids(1)},
		&ConfigRecord{ResourceType: ResourceTopic, ResourceName: "orders", Name: "retention.ms", Value: "1000"},
		&ConfigRecord{ResourceType: ResourceBroker, Name: "log.retention.ms", Delete: true},
		&RemoveTopicRecord{TopicID: tid},
		&ProducerIDsRecord{BrokerID: 2, BrokerEpoch: 3, NextProducerID: 5000},
		&SnapshotHeaderRecord{Offset: 77, NextBrokerEpoch: 8, NextProducerID: 9000},
	}
}

func TestRecordsRoundTrip(t *testing.T) {
	recs := sampleRecords()
	b := EncodeBatch(recs)
	got, err := DecodeBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, recs) {
		t.Fatalf("round trip:\n got %#v\nwant %#v", got, recs)
	}
	// Every record type has a decoder and a distinct number.
	seen := map[RecordType]bool{}
	for _, r := range recs {
		seen[r.Type()] = true
	}
	for typ := TypeRegisterBroker; typ <= TypeSnapshotHeader; typ++ {
		if !seen[typ] || newRecord(typ) == nil {
			t.Errorf("record type %d not covered", typ)
		}
	}
	if got, err := DecodeBatch(EncodeBatch(nil)); err != nil || len(got) != 0 {
		t.Errorf("empty batch: %v %v", got, err)
	}
}

func TestDecodeRefusesBadInput(t *testing.T) {
	good := EncodeBatch(sampleRecords())
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"bad magic", append([]byte{0x00}, good[1:]...)},
		{"bad format", append([]byte{batchMagic, 9}, good[2:]...)},
		{"trailing byte", append(append([]byte{}, good...), 0)},
		{"huge count", []byte{batchMagic, batchFormat, 0xff, 0xff, 0xff, 0xff, 0x0f}},
		{"unknown type", EncodeBatch([]Record{fakeRecord{typ: 999}})},
		{"newer version", EncodeBatch([]Record{fakeRecord{typ: TypeRemoveTopic, ver: 1, body: make([]byte, 16)}})},
		{"short body", EncodeBatch([]Record{fakeRecord{typ: TypeRemoveTopic, body: make([]byte, 15)}})},
		{"long body", EncodeBatch([]Record{fakeRecord{typ: TypeRemoveTopic, body: make([]byte, 17)}})},
		{"bad bool", EncodeBatch([]Record{fakeRecord{typ: TypeConfig, body: []byte{4, 0, 1, 'k', 0, 7}}})},
		{"unknown change field", EncodeBatch([]Record{fakeRecord{typ: TypePartitionChange, body: append(make([]byte, 16), 0, 0, 0x40, 0)}})},
		{"huge array", EncodeBatch([]Record{fakeRecord{typ: TypePartition, body: append(make([]byte, 16), 0, 0xff, 0xff, 0x03)}})},
	} {
		if _, err := DecodeBatch(tc.b); !errors.Is(err, ErrCorruptRecord) {
			t.Errorf("%s: err %v, want ErrCorruptRecord", tc.name, err)
		}
	}
	// Every truncation of a valid batch fails cleanly.
	for n := range len(good) {
		if _, err := DecodeBatch(good[:n]); err == nil {
			t.Fatalf("truncated to %d bytes: decoded", n)
		}
	}
	// Random corruption never panics.
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		b := append([]byte{}, good...)
		for range 1 + rng.IntN(4) {
			b[rng.IntN(len(b))] = byte(rng.Uint32())
		}
		_, _ = DecodeBatch(b) // must not panic; may or may not decode
	}
}

func FuzzDecodeBatch(f *testing.F) {
	f.Add(EncodeBatch(sampleRecords()))
	f.Add([]byte{batchMagic, batchFormat, 1, 2, 8, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, err := DecodeBatch(b)
		if err != nil {
			return
		}
		again, err := DecodeBatch(EncodeBatch(recs))
		if err != nil || !reflect.DeepEqual(again, recs) {
			t.Fatalf("re-encode differs: %v", err)
		}
		im := NewImage()
		_ = im.Apply(0, recs) // must not panic
	})
}

// fakeRecord writes arbitrary bytes under a chosen type and version.
type fakeRecord struct {
	typ  RecordType
	ver  uint64
	body []byte
}

func (f fakeRecord) Type() RecordType        { return f.typ }
func (f fakeRecord) version() uint64         { return f.ver }
func (f fakeRecord) encode(e *encoder)       { e.b = append(e.b, f.body...) }
func (f fakeRecord) decode(*decoder, uint64) {}
