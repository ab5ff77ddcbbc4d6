package metadata

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/gregor-project/gregor/internal/controller/state"
)

// bigLog returns the committed batches of a cluster of 9 brokers and topics×partitions
// partitions (RF 3), one CreateTopics batch per topic, and the controller's snapshot of it.
func bigLog(tb testing.TB, topics, partitions int) ([]Entry, []byte) {
	h := newHarness(tb)
	var log []Entry
	commit := func(recs []state.Record) {
		h.offset++
		if err := h.c.Apply(h.offset, recs); err != nil {
			tb.Fatal(err)
		}
		log = append(log, Entry{Offset: h.offset, Records: recs})
	}
	for id := int32(1); id <= 9; id++ {
		recs, resp := h.c.RegisterBroker(h.now, state.RegisterBrokerRequest{NodeID: id, IncarnationID: state.UUID{byte(id)}, ClusterID: testCluster, Rack: fmt.Sprint("r", id%3),
			Endpoints: []state.Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9092 + id}}})
		commit(recs)
		recs, _ = h.c.Heartbeat(h.now, state.HeartbeatRequest{NodeID: id, BrokerEpoch: resp.BrokerEpoch, CurrentMetadataOffset: h.offset})
		commit(recs)
	}
	for i := range topics {
		recs, res := h.c.CreateTopics(state.CreateTopicsRequest{Topics: []state.CreatableTopic{{Name: fmt.Sprintf("topic-%04d", i), NumPartitions: int32(partitions), ReplicationFactor: 3}}})
		if res[0].Err != nil {
			tb.Fatal(res[0].Err)
		}
		commit(recs)
	}
	return log, h.c.Snapshot()
}

func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func totalAlloc() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// isrFlip is a PartitionChangeRecord that drops the last ISR member of p, or restores it.
func isrFlip(tp *Topic, i int32) *state.PartitionChangeRecord {
	p := tp.Partition(i)
	isr := p.Replicas
	if len(p.ISR) == len(p.Replicas) {
		isr = p.Replicas[:len(p.Replicas)-1]
	}
	return &state.PartitionChangeRecord{TopicID: state.UUID(tp.ID), Partition: i, PartitionEpoch: p.PartitionEpoch, Fields: state.ChangeISR, ISR: isr}
}

// At 100,000 partitions (100 topics of 1,000) the publisher's heap stays far below 200 MB,
// and one ISR change allocates about one topic's worth (a copy of its 1,000 Partition
// values), not the cluster's.
func TestPublisherScale(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 100,000 partitions")
	}
	const topics, partitions = 100, 1000
	_, snap := bigLog(t, topics, partitions)
	base := heapInUse()
	t0 := time.Now()
	p := NewPublisher()
	if err := p.ApplyBatch([]Entry{{Offset: 1, Snapshot: snap}}); err != nil {
		t.Fatal(err)
	}
	build := time.Since(t0)
	withState := heapInUse() - base
	im := p.Image()
	p = nil
	imageOnly := heapInUse() - base
	t.Logf("100k partitions: build from snapshot %v; heap %.1f MB with the state image, %.1f MB for the Image alone",
		build, float64(withState)/1e6, float64(imageOnly)/1e6)
	if withState > 200<<20 {
		t.Fatalf("publisher heap %d bytes at 100k partitions", withState)
	}
	runtime.KeepAlive(im)

	p = NewPublisher()
	if err := p.ApplyBatch([]Entry{{Offset: 1, Snapshot: snap}}); err != nil {
		t.Fatal(err)
	}
	tp := p.Image().Topic("topic-0042")
	off := p.Image().Offset
	before := totalAlloc()
	t0 = time.Now()
	const changes = 20
	for i := range changes {
		off++
		if err := p.Apply(off, []state.Record{isrFlip(p.Image().Topic("topic-0042"), int32(i))}); err != nil {
			t.Fatal(err)
		}
	}
	per := (totalAlloc() - before) / changes
	t.Logf("one ISR change at 100k partitions: %v, %d bytes allocated", time.Since(t0)/changes, per)
	if limit := uint64(partitions) * 300; per > limit { // a full rebuild allocates ~100x more
		t.Fatalf("one ISR change allocated %d bytes, more than %d", per, limit)
	}
	if got := p.Image().Topic("topic-0042"); got == tp || len(got.Partition(0).ISR) != 2 || len(tp.Partition(0).ISR) != 3 {
		t.Fatal("the ISR change was not published, or changed the old image")
	}
}

// BenchmarkPublisherBuild100k builds the Image of 100,000 partitions from a snapshot.
func BenchmarkPublisherBuild100k(b *testing.B) {
	_, snap := bigLog(b, 100, 1000)
	var heap uint64
	for b.Loop() {
		b.StopTimer()
		base := heapInUse()
		b.StartTimer()
		p := NewPublisher()
		if err := p.ApplyBatch([]Entry{{Offset: 1, Snapshot: snap}}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		heap = heapInUse() - base
		runtime.KeepAlive(p)
		b.StartTimer()
	}
	b.ReportMetric(float64(heap)/1e6, "heap-MB")
}

// BenchmarkPublisherPartitionChange100k is one ISR change applied and published at 100,000
// partitions (100 topics of 1,000).
func BenchmarkPublisherPartitionChange100k(b *testing.B) {
	_, snap := bigLog(b, 100, 1000)
	p := NewPublisher()
	if err := p.ApplyBatch([]Entry{{Offset: 1, Snapshot: snap}}); err != nil {
		b.Fatal(err)
	}
	off := p.Image().Offset
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		off++
		name := fmt.Sprintf("topic-%04d", i%100)
		if err := p.Apply(off, []state.Record{isrFlip(p.Image().Topic(name), int32(i%1000))}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPublisherReplay100k replays the log that created 100,000 partitions (118 entries)
// in one ApplyBatch, as a broker does at start-up.
func BenchmarkPublisherReplay100k(b *testing.B) {
	log, _ := bigLog(b, 100, 1000)
	for b.Loop() {
		p := NewPublisher()
		if err := p.ApplyBatch(log); err != nil {
			b.Fatal(err)
		}
	}
}
