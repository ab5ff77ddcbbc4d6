package streamstest

import (
	"testing"
	"time"

	"github.com/gregor-project/gregor/streams"
	"github.com/gregor-project/gregor/streams/serde"
)

// AppID is the application.id of the driver's topology: internal topics are named
// AppID-<name>-repartition and AppID-<store>-changelog.
const AppID = "streamstest"

// Driver runs one topology for one test.
type Driver struct {
	t testing.TB
	d *streams.TestDriver
}

// Start is the driver's initial wall-clock time.
var Start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// New builds b's topology in a driver closed when the test ends.
func New(t testing.TB, b *streams.Builder) *Driver {
	t.Helper()
	d, err := streams.NewTestDriver(b, AppID, Start)
	if err != nil {
		t.Fatalf("streamstest: %v", err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("streamstest: close: %v", err)
		}
	})
	return &Driver{t: t, d: d}
}

// Raw is the byte-level driver underneath.
func (d *Driver) Raw() *streams.TestDriver { return d.d }

// AdvanceWallClock moves the driver's clock and fires wall-clock punctuators due.
func (d *Driver) AdvanceWallClock(dt time.Duration) {
	d.t.Helper()
	if err := d.d.AdvanceWallClock(dt); err != nil {
		d.t.Fatalf("streamstest: advance wall clock: %v", err)
	}
}

// InputTopic pipes typed records into a topic.
type InputTopic[K, V any] struct {
	d     *Driver
	topic string
	ks    serde.Serde[K]
	vs    serde.Serde[V]
}

// Input is topic as an input of serdes ks and vs.
func Input[K, V any](d *Driver, topic string, ks serde.Serde[K], vs serde.Serde[V]) *InputTopic[K, V] {
	return &InputTopic[K, V]{d: d, topic: topic, ks: ks, vs: vs}
}

// Pipe processes one record with timestamp ts.
func (in *InputTopic[K, V]) Pipe(k K, v V, ts time.Time) {
	in.d.t.Helper()
	kb, err := in.ks.Serialize(in.topic, k)
	if err != nil {
		in.d.t.Fatalf("streamstest: key: %v", err)
	}
	vb, err := in.vs.Serialize(in.topic, v)
	if err != nil {
		in.d.t.Fatalf("streamstest: value: %v", err)
	}
	in.PipeBytes(kb, vb, ts)
}

// PipeBytes processes one record given as bytes (nil is null: a tombstone for a table).
func (in *InputTopic[K, V]) PipeBytes(k, v []byte, ts time.Time) {
	in.d.t.Helper()
	if err := in.d.d.PipeRaw(in.topic, k, v, ts, nil); err != nil {
		in.d.t.Fatalf("streamstest: pipe into %s: %v", in.topic, err)
	}
}

// OutputTopic reads typed records from a topic.
type OutputTopic[K, V any] struct {
	d     *Driver
	topic string
	ks    serde.Serde[K]
	vs    serde.Serde[V]
}

// Output is topic (a logical name: an internal topic gets the AppID prefix) as an output
// read with ks and vs.
func Output[K, V any](d *Driver, topic string, ks serde.Serde[K], vs serde.Serde[V]) *OutputTopic[K, V] {
	return &OutputTopic[K, V]{d: d, topic: d.d.TopicName(topic), ks: ks, vs: vs}
}

// Record is an output record with its partition (-1 unless a partitioner chose one).
type Record[K, V any] struct {
	Key       K
	Value     V
	Timestamp time.Time
	Partition int32
	// NullValue is set for a record with a null value (a tombstone).
	NullValue bool
}

// ReadRecords returns the records written to the topic since the last read.
func (o *OutputTopic[K, V]) ReadRecords() []Record[K, V] {
	o.d.t.Helper()
	var out []Record[K, V]
	for _, r := range o.d.d.ReadOutput(o.topic) {
		var rr Record[K, V]
		var err error
		if r.Key != nil {
			if rr.Key, err = o.ks.Deserialize(o.topic, r.Key); err != nil {
				o.d.t.Fatalf("streamstest: key in %s: %v", o.topic, err)
			}
		}
		if r.Value == nil {
			rr.NullValue = true
		} else if rr.Value, err = o.vs.Deserialize(o.topic, r.Value); err != nil {
			o.d.t.Fatalf("streamstest: value in %s: %v", o.topic, err)
		}
		rr.Timestamp, rr.Partition = r.Timestamp, r.Partition
		out = append(out, rr)
	}
	return out
}

// ReadKeyValues returns the keys and values written to the topic since the last read.
func (o *OutputTopic[K, V]) ReadKeyValues() []streams.KeyValue[K, V] {
	o.d.t.Helper()
	var out []streams.KeyValue[K, V]
	for _, r := range o.ReadRecords() {
		out = append(out, streams.KV(r.Key, r.Value))
	}
	return out
}

// KeyValueStore is the topology's key-value store name.
func KeyValueStore[K, V any](d *Driver, name string) streams.KeyValueStore[K, V] {
	d.t.Helper()
	s, err := d.d.Store(name)
	if err != nil {
		d.t.Fatalf("streamstest: %v", err)
	}
	kv, ok := s.(streams.KeyValueStore[K, V])
	if !ok {
		d.t.Fatalf("streamstest: store %q is %T", name, s)
	}
	return kv
}

// DroppedRecords is the number of records windowed operators dropped as late.
func (d *Driver) DroppedRecords() int64 { return d.d.DroppedRecords() }

// SkippedRecords is the number of source records skipped (see streams.TestDriver).
func (d *Driver) SkippedRecords() int64 { return d.d.SkippedRecords() }
