package api_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/api"
	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/testutil"
)

// Handler-level benchmarks of the hot paths: a request decoded once is answered b.N times by
// the broker's handler, with no network and no client in the measurement, so ns/op and
// allocs/op are the broker's own cost per request. cpu-ns/op is the process's CPU time per
// request (all threads, GC included), which stays meaningful when other work shares the
// machine and stretches ns/op.

// cpuClock measures process CPU time for the cpu-ns/op metric.
type cpuClock struct{ start time.Duration }

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func startCPU() cpuClock { return cpuClock{processCPU()} }

func (c cpuClock) report(b *testing.B) {
	b.ReportMetric(float64(processCPU()-c.start)/float64(b.N), "cpu-ns/op")
}

// benchBroker starts a broker with topic holding partitions partitions. Segments of 64 MiB and
// retention.bytes of 128 MiB checked every 200 ms keep a produce benchmark's data (and dirty
// page cache) bounded however many iterations it runs.
func benchBroker(b *testing.B, topic string, partitions int32) (*testutil.Broker, *api.Handler) {
	b.Helper()
	br := testutil.StartBroker(b, "log.segment.bytes=67108864", "log.retention.bytes=134217728", "log.retention.check.interval.ms=200")
	cl, err := kgo.NewClient(kgo.SeedBrokers(br.Addr()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, nil, topic)
	if err != nil || resp.Err != nil {
		b.Fatalf("create topic: %v %v", err, resp.Err)
	}
	return br, br.Handler()
}

// benchRecords is an uncompressed v2 batch of n records with size-byte values.
func benchRecords(b *testing.B, n, size int) []byte {
	b.Helper()
	recs := make([]batch.Record, n)
	for i := range recs {
		recs[i] = batch.Record{OffsetDelta: int32(i), Value: bytes.Repeat([]byte{'A' + byte(i%26)}, size)}
	}
	now := time.Now().UnixMilli()
	h := batch.Header{LastOffsetDelta: int32(n - 1), BaseTimestamp: now, MaxTimestamp: now, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	raw, err := batch.Build(h, recs, batch.CodecNone)
	if err != nil {
		b.Fatal(err)
	}
	return raw
}

// benchProduceReq is a produce (v9, acks=all) of one batch to each of partitions partitions.
func benchProduceReq(topic string, partitions int, records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks = -1
	req.TimeoutMillis = 30000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	for p := range partitions {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = int32(p)
		rp.Records = records
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// benchHandle answers req; a Raw answer's body size is returned as written, before its Done
// (which recycles it) is called.
func benchHandle(b *testing.B, h *api.Handler, req kmsg.Request) (api.Reply, int) {
	r := h.Handle(context.Background(), &api.Conn{ClientID: "bench"}, req)
	size := 0
	if r.Raw != nil {
		size = r.Raw.Size()
		if r.Raw.Done != nil {
			r.Raw.Done()
		}
	}
	return r, size
}

// Produce of one 1 MiB batch of 100-byte records (what a franz-go producer sends with
// 1 MiB batches): validation, offset assignment and the write to the page cache.
func BenchmarkHandlerProduce1MiB(b *testing.B) {
	_, h := benchBroker(b, "p", 1)
	recs := benchRecords(b, 9000, 100)
	req := benchProduceReq("p", 1, recs)
	b.SetBytes(int64(len(recs)))
	b.ReportAllocs()
	cpu := startCPU()
	for b.Loop() {
		r, _ := benchHandle(b, h, req)
		if pr := r.Msg.(*kmsg.ProduceResponse); pr.Topics[0].Partitions[0].ErrorCode != 0 {
			b.Fatalf("produce error %d", pr.Topics[0].Partitions[0].ErrorCode)
		}
	}
	cpu.report(b)
}

// Produce of small batches to many partitions in one request: the per-partition cost.
func BenchmarkHandlerProduce100Partitions(b *testing.B) {
	_, h := benchBroker(b, "p", 100)
	recs := benchRecords(b, 10, 100)
	req := benchProduceReq("p", 100, recs)
	b.SetBytes(int64(100 * len(recs)))
	b.ReportAllocs()
	cpu := startCPU()
	for b.Loop() {
		benchHandle(b, h, req)
	}
	cpu.report(b)
}

// benchFetchReq is a fetch (v11, by name) of partitions partitions at the given offsets.
func benchFetchReq(topic string, offsets []int64, minBytes int32, maxWait int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(11)
	req.ReplicaID = -1
	req.MaxWaitMillis = maxWait
	req.MinBytes = minBytes
	req.MaxBytes = 64 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	for p, off := range offsets {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = int32(p)
		rp.FetchOffset = off
		rp.PartitionMaxBytes = 1 << 20
		rp.CurrentLeaderEpoch = -1
		rp.LogStartOffset = -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// A consumer caught up on 1,000 partitions polling with max_wait 0: the cost of looking at
// every partition and answering "nothing new".
func BenchmarkHandlerFetchCaughtUp1000(b *testing.B) {
	_, h := benchBroker(b, "f", 1000)
	recs := benchRecords(b, 1, 100)
	benchHandle(b, h, benchProduceReq("f", 1000, recs))
	offs := make([]int64, 1000)
	for i := range offs {
		offs[i] = 1
	}
	req := benchFetchReq("f", offs, 0, 0)
	b.ReportAllocs()
	cpu := startCPU()
	for b.Loop() {
		benchHandle(b, h, req)
	}
	cpu.report(b)
}

// A fetch of one small batch from each of 1,000 partitions.
func BenchmarkHandlerFetchData1000(b *testing.B) {
	_, h := benchBroker(b, "f", 1000)
	recs := benchRecords(b, 10, 100)
	benchHandle(b, h, benchProduceReq("f", 1000, recs))
	req := benchFetchReq("f", make([]int64, 1000), 0, 0)
	b.ReportAllocs()
	cpu := startCPU()
	for b.Loop() {
		if _, size := benchHandle(b, h, req); size < 1000*len(recs) {
			b.Fatal("short fetch answer")
		}
	}
	cpu.report(b)
}

// A caught-up fetch of 1,000 partitions that parks (min_bytes 1) until one produce lands:
// registering on every partition, the wake-up, the re-read and the answer.
func BenchmarkHandlerFetchParkWake1000(b *testing.B) {
	_, h := benchBroker(b, "f", 1000)
	recs := benchRecords(b, 1, 100)
	prod := benchProduceReq("f", 1, recs)
	benchHandle(b, h, benchProduceReq("f", 1000, recs))
	offs := make([]int64, 1000)
	for i := range offs {
		offs[i] = 1
	}
	b.ReportAllocs()
	cpu := startCPU()
	for b.Loop() {
		// Every partition is at its end, so the fetch parks until the next produce.
		offs[0] = h.Replicas.Get("f", 0).HighWatermark()
		req := benchFetchReq("f", offs, 1, 10000)
		done := make(chan api.Reply, 1)
		go func() { done <- h.Handle(context.Background(), &api.Conn{ClientID: "bench"}, req) }()
		// Produce until the parked fetch answers (a produce may land before it parks).
		for answered := false; !answered; {
			benchHandle(b, h, prod)
			select {
			case r := <-done:
				if r.Raw != nil && r.Raw.Done != nil {
					r.Raw.Done()
				}
				answered = true
			case <-time.After(20 * time.Microsecond):
			}
		}
	}
	cpu.report(b)
}

// Connection-level benchmarks: a raw TCP client sends the same encoded request and reads the
// whole answer, so the server's framing, response writing and sendfile are measured too. The
// client does nothing but copy bytes; cpu-ns/op includes it (both run in this process).

// rawClient speaks just enough of the protocol to send one request and drain its answer.
type rawClient struct {
	c   net.Conn
	req []byte
	buf []byte
}

func newRawClient(b *testing.B, addr string, req kmsg.Request) *rawClient {
	b.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	body := []byte{0, 0, 0, 0}
	body = binary.BigEndian.AppendUint16(body, uint16(req.Key()))
	body = binary.BigEndian.AppendUint16(body, uint16(req.GetVersion()))
	body = binary.BigEndian.AppendUint32(body, 1) // correlation id
	body = binary.BigEndian.AppendUint16(body, 5)
	body = append(body, "bench"...)
	if req.IsFlexible() {
		body = append(body, 0)
	}
	body = req.AppendTo(body)
	binary.BigEndian.PutUint32(body, uint32(len(body)-4))
	return &rawClient{c: c, req: body, buf: make([]byte, 1<<20)}
}

// roundTrip sends the request and reads the answer, returning its size.
func (rc *rawClient) roundTrip(b *testing.B) int {
	if _, err := rc.c.Write(rc.req); err != nil {
		b.Fatal(err)
	}
	if _, err := io.ReadFull(rc.c, rc.buf[:4]); err != nil {
		b.Fatal(err)
	}
	n := int(binary.BigEndian.Uint32(rc.buf))
	for left := n; left > 0; {
		m, err := rc.c.Read(rc.buf[:min(left, len(rc.buf))])
		if err != nil {
			b.Fatal(err)
		}
		left -= m
	}
	return n
}

func BenchmarkConnFetchCaughtUp1000(b *testing.B) {
	br, h := benchBroker(b, "f", 1000)
	benchHandle(b, h, benchProduceReq("f", 1000, benchRecords(b, 1, 100)))
	offs := make([]int64, 1000)
	for i := range offs {
		offs[i] = 1
	}
	rc := newRawClient(b, br.Addr(), benchFetchReq("f", offs, 0, 0))
	b.ReportAllocs()
	cpu := startCPU()
	for b.Loop() {
		rc.roundTrip(b)
	}
	cpu.report(b)
}

// A fetch answered with one small batch (10 x 100 B) from each of 1,000 partitions: what a
// consumer keeping up with many partitions gets.
func BenchmarkConnFetchData1000(b *testing.B) {
	br, h := benchBroker(b, "f", 1000)
	recs := benchRecords(b, 10, 100)
	benchHandle(b, h, benchProduceReq("f", 1000, recs))
	rc := newRawClient(b, br.Addr(), benchFetchReq("f", make([]int64, 1000), 0, 0))
	b.ReportAllocs()
	cpu := startCPU()
	for b.Loop() {
		if n := rc.roundTrip(b); n < 1000*len(recs) {
			b.Fatalf("short answer: %d bytes", n)
		}
	}
	cpu.report(b)
}

// A fetch answered with 8 MiB from one partition: the sendfile path.
func BenchmarkConnFetch8MiB(b *testing.B) {
	br, h := benchBroker(b, "f", 1)
	recs := benchRecords(b, 9000, 100)
	for range 9 {
		benchHandle(b, h, benchProduceReq("f", 1, recs))
	}
	req := benchFetchReq("f", []int64{0}, 0, 0)
	req.Topics[0].Partitions[0].PartitionMaxBytes = 8 << 20
	rc := newRawClient(b, br.Addr(), req)
	b.SetBytes(8 << 20)
	b.ReportAllocs()
	cpu := startCPU()
	for b.Loop() {
		rc.roundTrip(b)
	}
	cpu.report(b)
}

// A produce of one 1 MiB batch over the connection.
func BenchmarkConnProduce1MiB(b *testing.B) {
	br, _ := benchBroker(b, "p", 1)
	recs := benchRecords(b, 9000, 100)
	rc := newRawClient(b, br.Addr(), benchProduceReq("p", 1, recs))
	b.SetBytes(int64(len(recs)))
	b.ReportAllocs()
	cpu := startCPU()
	for b.Loop() {
		rc.roundTrip(b)
	}
	cpu.report(b)
}
