package api_test

import (
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/gregor-project/gregor/internal/testutil"
)

// A fetch with min_bytes parks until records arrive, then answers with them.
func TestFetchLongPoll(t *testing.T) {
	b := testutil.StartBroker(t)
	createTopic(t, b.Addr(), "poll", 1, nil)
	cl := newClient(t, b.Addr())
	done := make(chan parkedFetch, 1)
	req := fetchReq(t, b.Addr(), "poll", 0, 0, 20000)
	// The goroutine reports through done only: it may outlive a test that failed first.
	ctx := ctxT(t)
	go func() {
		resp, err := cl.Request(ctx, req)
		fr, _ := resp.(*kmsg.FetchResponse)
		done <- parkedFetch{fr, err}
	}()
	select {
	case <-done:
		t.Fatal("fetch answered before any record existed")
	case <-time.After(200 * time.Millisecond): // not synchronisation: a negative check window
	}
	produceSync(t, newClient(t, b.Addr()), &kgo.Record{Topic: "poll", Value: []byte("wake")})
	select {
	case r := <-done:
		if r.resp == nil {
			t.Fatalf("no response: %v", r.err)
		}
		p := r.resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.HighWatermark != 1 || len(p.RecordBatches) == 0 {
			t.Fatalf("partition answer %+v", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("parked fetch was not woken by the append")
	}
}

// parkedFetch is the outcome of a fetch sent on its own goroutine.
type parkedFetch struct {
	resp *kmsg.FetchResponse
	err  error
}

// An empty fetch with max_wait returns empty once max_wait passes.
func TestFetchMaxWaitExpires(t *testing.T) {
	b := testutil.StartBroker(t)
	createTopic(t, b.Addr(), "idle", 1, nil)
	req := fetchReq(t, b.Addr(), "idle", 0, 0, 100)
	resp := request[*kmsg.FetchResponse](t, newClient(t, b.Addr()), req)
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || len(p.RecordBatches) != 0 || p.HighWatermark != 0 {
		t.Fatalf("partition answer %+v", p)
	}
}

// fetchReq is a Fetch for one partition. kgo sends it at the highest version both sides
// speak, which names topics by id, so the id is filled in too.
func fetchReq(t *testing.T, addr, topic string, part int32, offset int64, maxWait int32) *kmsg.FetchRequest {
	t.Helper()
	td, err := newAdmin(t, addr).ListTopics(ctxT(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(11)
	req.MaxWaitMillis = maxWait
	req.MinBytes = 1
	req.MaxBytes = 1 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rt.TopicID = td[topic].ID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = part
	rp.FetchOffset = offset
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// Fetch errors: offset past the end, unknown partition, unknown session.
func TestFetchErrors(t *testing.T) {
	b := testutil.StartBroker(t)
	createTopic(t, b.Addr(), "fe", 1, nil)
	cl := newClient(t, b.Addr())
	produceSync(t, cl, &kgo.Record{Topic: "fe", Value: []byte("x")})
	resp := request[*kmsg.FetchResponse](t, cl, fetchReq(t, b.Addr(), "fe", 0, 5, 0))
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.OffsetOutOfRange.Code || p.HighWatermark != 1 {
		t.Fatalf("fetch past end: %+v", p)
	}
	resp = request[*kmsg.FetchResponse](t, cl, fetchReq(t, b.Addr(), "fe", 9, 0, 0))
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown partition: %+v", p)
	}
	req := fetchReq(t, b.Addr(), "fe", 0, 0, 0)
	req.SessionID, req.SessionEpoch = 12345, 1 // incremental (epoch -1 would close it: sessionless)
	resp = request[*kmsg.FetchResponse](t, cl, req)
	if resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("unknown session: error %d", resp.ErrorCode)
	}
}

// A topic whose compression.type is zstd answers Fetch versions below 10 with
// UNSUPPORTED_COMPRESSION_TYPE and no records, as Kafka does (KIP-110): those clients predate
// zstd. Found by the compatibility suite (sarama and kafka-python pinned to old versions).
func TestFetchZstdTopicOldVersions(t *testing.T) {
	b := testutil.StartBroker(t)
	zstd := "zstd"
	createTopic(t, b.Addr(), "z", 1, map[string]*string{"compression.type": &zstd})
	produceSync(t, newClient(t, b.Addr()), &kgo.Record{Topic: "z", Value: []byte("x")})
	for _, v := range []int16{0, 3, 4, 9, 10, 11} {
		vs := kversion.Stable()
		vs.SetMaxKeyVersion(kmsg.Fetch.Int16(), v)
		cl := newClient(t, b.Addr(), kgo.MaxVersions(vs))
		p := request[*kmsg.FetchResponse](t, cl, fetchReq(t, b.Addr(), "z", 0, 0, 0)).Topics[0].Partitions[0]
		if v < 10 && (p.ErrorCode != kerr.UnsupportedCompressionType.Code || len(p.RecordBatches) != 0) {
			t.Fatalf("fetch v%d: error %d, %d record bytes; want UNSUPPORTED_COMPRESSION_TYPE", v, p.ErrorCode, len(p.RecordBatches))
		}
		if v >= 10 && (p.ErrorCode != 0 || len(p.RecordBatches) == 0) {
			t.Fatalf("fetch v%d: error %d, %d record bytes; want the record", v, p.ErrorCode, len(p.RecordBatches))
		}
	}
}

// Per-partition and total max bytes limit a response, but the first partition always returns
// at least one whole batch (KIP-74).
func TestFetchMaxBytes(t *testing.T) {
	b := testutil.StartBroker(t)
	createTopic(t, b.Addr(), "mb", 1, nil)
	cl := newClient(t, b.Addr(), kgo.DefaultProduceTopic("mb"))
	for i := 0; i < 10; i++ {
		v := make([]byte, 1000)
		rand.Read(v) // incompressible, so each batch is over 1000 bytes
		produceSync(t, cl, &kgo.Record{Value: v})
	}
	req := fetchReq(t, b.Addr(), "mb", 0, 0, 0)
	req.Topics[0].Partitions[0].PartitionMaxBytes = 10
	resp := request[*kmsg.FetchResponse](t, cl, req)
	p := resp.Topics[0].Partitions[0]
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(p.RecordBatches); err != nil || len(p.RecordBatches) != int(rb.Length)+12 {
		t.Fatalf("want exactly one whole batch, got %d bytes (%v)", len(p.RecordBatches), err)
	}
	req = fetchReq(t, b.Addr(), "mb", 0, 0, 0)
	req.MaxBytes = 3500
	resp = request[*kmsg.FetchResponse](t, cl, req)
	if n := len(resp.Topics[0].Partitions[0].RecordBatches); n > 3500 || n < 2000 {
		t.Fatalf("max_bytes 3500 returned %d bytes", n)
	}
}

// ListOffsets: earliest, latest, by timestamp (first record at or after it) and max timestamp.
func TestListOffsets(t *testing.T) {
	b := testutil.StartBroker(t)
	createTopic(t, b.Addr(), "lo", 1, nil)
	cl := newClient(t, b.Addr(), kgo.DefaultProduceTopic("lo"))
	base := time.UnixMilli(1_600_000_000_000)
	for i := 0; i < 20; i++ {
		ts := base.Add(time.Duration(i*10) * time.Second)
		if i == 7 {
			ts = base.Add(time.Hour) // the max timestamp, out of order
		}
		produceSync(t, cl, &kgo.Record{Value: []byte(fmt.Sprint(i)), Timestamp: ts})
	}
	adm := newAdmin(t, b.Addr())
	ctx := ctxT(t)
	check := func(name string, got kadm.ListedOffsets, want int64) {
		t.Helper()
		o, ok := got.Lookup("lo", 0)
		if !ok || o.Err != nil || o.Offset != want {
			t.Fatalf("%s: got %+v, want offset %d", name, o, want)
		}
	}
	start, _ := adm.ListStartOffsets(ctx, "lo")
	check("earliest", start, 0)
	end, _ := adm.ListEndOffsets(ctx, "lo")
	check("latest", end, 20)
	at, _ := adm.ListOffsetsAfterMilli(ctx, base.Add(45*time.Second).UnixMilli(), "lo")
	check("by time", at, 5)
	after, _ := adm.ListOffsetsAfterMilli(ctx, base.Add(2*time.Hour).UnixMilli(), "lo")
	check("after the last", after, 20) // kadm maps "none" to the end offset
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(7)
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "lo"
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -3
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := request[*kmsg.ListOffsetsResponse](t, cl, req)
	if p := resp.Topics[0].Partitions[0]; p.Offset != 7 || p.Timestamp != base.Add(time.Hour).UnixMilli() {
		t.Fatalf("max timestamp: %+v", p)
	}
}
