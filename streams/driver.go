package streams

import (
	"errors"
	"fmt"
	"time"
)

// TestDriver runs a topology in memory, without a broker, deterministically: the byte-level
// core of package streamstest (use that package; it adds typed serdes and testing.TB).
//
// Every topic has one partition, so there is one task per sub-topology (partition 0).
// Records are piped in one at a time; what the topology writes is kept per topic in order.
// A record written to an internal repartition topic is processed by the sub-topology that
// reads it before PipeRaw returns, in the order written, as Kafka's TopologyTestDriver does.
// A record piped into a global table's topic updates its global store at once.
// The wall clock is the driver's own: it moves only by AdvanceWallClock.
type TestDriver struct {
	topo    *topology
	appID   string
	now     time.Time
	tasks   []*task
	outputs map[string][]RawRecord
	offsets map[string]int64
	queue   []RawRecord // records written to topics the topology reads, not yet processed
}

// RawRecord is a record as bytes, with its topic and timestamp. A nil Key or Value is null.
// Partition is the partition a partitioner chose, -1 when none did.
type RawRecord struct {
	Topic     string
	Partition int32
	Key       []byte
	Value     []byte
	Timestamp time.Time
	Headers   []Header
}

// NewTestDriver builds b's topology for application appID, with the wall clock at start.
func NewTestDriver(b *Builder, appID string, start time.Time) (*TestDriver, error) {
	t, err := b.build()
	if err != nil {
		return nil, err
	}
	d := &TestDriver{topo: t, appID: appID, now: start, outputs: map[string][]RawRecord{}, offsets: map[string]int64{}}
	for _, s := range t.subs {
		tk, err := newTask(t, TaskID{Subtopology: s.id}, appID, func() time.Time { return d.now }, d.emit,
			func(string) (int, error) { return 1, nil })
		if err != nil {
			return nil, err
		}
		d.tasks = append(d.tasks, tk)
	}
	return d, nil
}

// TopicName is the full name of a topic the topology names: internal topics (repartition,
// changelog) get the application.id as prefix, others are unchanged.
func (d *TestDriver) TopicName(logical string) string { return d.topo.topicName(d.appID, logical) }

func (d *TestDriver) emit(topic string, partition int32, key, value []byte, ts int64, headers []Header) error {
	r := RawRecord{Topic: topic, Partition: partition, Key: key, Value: value, Timestamp: fromMillis(ts), Headers: headers}
	d.outputs[topic] = append(d.outputs[topic], r)
	if d.logical(topic) != "" {
		d.queue = append(d.queue, r)
	}
	return nil
}

// logical is the logical source topic name a full topic name stands for, "" if no
// sub-topology reads it.
func (d *TestDriver) logical(topic string) string {
	for logical := range d.topo.byTopic {
		if d.topo.topicName(d.appID, logical) == topic {
			return logical
		}
	}
	return ""
}

// PipeRaw processes one record of topic (a full name), then every record it caused to be
// written to topics the topology reads.
func (d *TestDriver) PipeRaw(topic string, key, value []byte, ts time.Time, headers []Header) error {
	d.queue = append(d.queue[:0], RawRecord{Topic: topic, Key: key, Value: value, Timestamp: ts, Headers: headers})
	for len(d.queue) > 0 {
		r := d.queue[0]
		d.queue = d.queue[1:]
		logical := d.logical(r.Topic)
		if g := d.topo.globalByTopic(r.Topic); g != nil && logical == "" {
			g.apply(r.Key, r.Value)
			continue
		}
		if logical == "" {
			return fmt.Errorf("streams: the topology reads no topic %q", r.Topic)
		}
		off := d.offsets[r.Topic]
		d.offsets[r.Topic] = off + 1
		tk := d.tasks[d.topo.byTopic[logical].id]
		if err := tk.process(logical, off, r.Key, r.Value, r.Timestamp.UnixMilli(), r.Headers); err != nil {
			d.queue = d.queue[:0]
			return err
		}
	}
	return nil
}

// AdvanceWallClock moves the driver's clock by dt and fires the wall-clock punctuators due.
func (d *TestDriver) AdvanceWallClock(dt time.Duration) error {
	if dt < 0 {
		return errors.New("streams: the wall clock cannot go back")
	}
	d.now = d.now.Add(dt)
	var errs []error
	for _, tk := range d.tasks {
		errs = append(errs, tk.punctuate(WallClockTime, d.now.UnixMilli()))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return d.drain()
}

// drain processes records punctuators wrote to topics the topology reads.
func (d *TestDriver) drain() error {
	q := d.queue
	d.queue = nil
	for _, r := range q {
		if err := d.PipeRaw(r.Topic, r.Key, r.Value, r.Timestamp, r.Headers); err != nil {
			return err
		}
	}
	return nil
}

// ReadOutput returns and forgets the records written to topic (a full name) so far.
func (d *TestDriver) ReadOutput(topic string) []RawRecord {
	rs := d.outputs[topic]
	delete(d.outputs, topic)
	return rs
}

// Store returns a store of the topology as processors see it (a KeyValueStore[K, V]).
func (d *TestDriver) Store(name string) (any, error) {
	for _, tk := range d.tasks {
		if s, ok := tk.stores[name]; ok {
			return s.typed(), nil
		}
	}
	if g, ok := d.topo.globals[name]; ok {
		return g.store.typed(), nil
	}
	return nil, fmt.Errorf("streams: no store %q", name)
}

// Close closes every task's processors.
func (d *TestDriver) Close() error {
	var errs []error
	for _, tk := range d.tasks {
		errs = append(errs, tk.close())
	}
	return errors.Join(errs...)
}

// DroppedRecords is the number of records dropped as late by windowed operators, and by
// stream-stream joins (a null key or value, or older than a join window store's retention).
func (d *TestDriver) DroppedRecords() int64 {
	var n int64
	for _, tk := range d.tasks {
		n += tk.dropped
	}
	return n
}

// SkippedRecords is the number of source records skipped: undeserializable ones under a
// skipping handler, and those a timestamp extractor gave no valid time.
func (d *TestDriver) SkippedRecords() int64 {
	var n int64
	for _, tk := range d.tasks {
		n += tk.skipped
	}
	return n
}
