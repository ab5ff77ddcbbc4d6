package api_test

import (
	"crypto/rand"
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/replica"
	"github.com/gregor-project/gregor/internal/testutil"
	"github.com/gregor-project/gregor/internal/wire"
)

const (
	limitFetchMaxBytes = 1 << 20 // the test broker's fetch.max.bytes
	limitBatch         = 100_000 // bytes of one incompressible record (one batch)
	limitBatches       = 24      // 2.4 MB in the log, over fetch.max.bytes
)

// startLimitBroker starts a broker with fetch.max.bytes 1 MiB and a topic "big" of one
// partition holding limitBatches batches of ~100 KB and then one batch of 1.5 MB (larger
// than fetch.max.bytes) at offset limitBatches.
func startLimitBroker(t *testing.T) *testutil.Broker {
	t.Helper()
	b := testutil.StartBroker(t, "fetch.max.bytes=1048576", "message.max.bytes=3000000")
	createTopic(t, b.Addr(), "big", 1, nil)
	cl := newClient(t, b.Addr(), kgo.DefaultProduceTopic("big"), kgo.ProducerBatchMaxBytes(3_000_000))
	for i := 0; i < limitBatches; i++ {
		v := make([]byte, limitBatch)
		rand.Read(v)
		produceSync(t, cl, &kgo.Record{Value: v})
	}
	v := make([]byte, 1_500_000)
	rand.Read(v)
	produceSync(t, cl, &kgo.Record{Value: v})
	return b
}

// fetchAll is a Fetch of "big" asking for as much as the protocol allows, naming partition 0
// once per offset given, in one topic entry each.
func fetchAll(t *testing.T, b *testutil.Broker, offsets ...int64) *kmsg.FetchRequest {
	t.Helper()
	req := fetchReq(t, b.Addr(), "big", 0, offsets[0], 0)
	req.MaxBytes = math.MaxInt32
	req.Topics[0].Partitions[0].PartitionMaxBytes = math.MaxInt32
	for _, o := range offsets[1:] {
		rt := req.Topics[0]
		rp := rt.Partitions[0]
		rp.FetchOffset = o
		rt.Partitions = []kmsg.FetchRequestTopicPartition{rp}
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// batches decodes the record batches of a partition's answer.
func batches(t *testing.T, b []byte) []kmsg.RecordBatch {
	t.Helper()
	var out []kmsg.RecordBatch
	for len(b) > 0 {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b); err != nil {
			t.Fatalf("records: %v", err)
		}
		out = append(out, rb)
		b = b[12+rb.Length:]
	}
	return out
}

// fetch.max.bytes bounds an answer whatever the request asks for (Kafka's
// min(request max_bytes, fetch.max.bytes)), except that the first batch is returned whole
// when it alone is larger (KIP-74).
func TestFetchMaxBytesBrokerCap(t *testing.T) {
	b := startLimitBroker(t)
	cl := newClient(t, b.Addr(), kgo.BrokerMaxReadBytes(1<<30))
	resp := request[*kmsg.FetchResponse](t, cl, fetchAll(t, b, 0))
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("error %d", p.ErrorCode)
	}
	if n := len(p.RecordBatches); n > limitFetchMaxBytes || n < limitFetchMaxBytes-2*limitBatch {
		t.Fatalf("max_bytes 2^31-1 with fetch.max.bytes 1 MiB answered %d record bytes", n)
	}
	// From the 1.5 MB batch: it is answered whole, and alone.
	resp = request[*kmsg.FetchResponse](t, cl, fetchAll(t, b, limitBatches))
	p = resp.Topics[0].Partitions[0]
	if bs := batches(t, p.RecordBatches); len(bs) != 1 || bs[0].FirstOffset != limitBatches || len(p.RecordBatches) <= limitFetchMaxBytes {
		t.Fatalf("batch over fetch.max.bytes: %d batches, %d bytes", len(bs), len(p.RecordBatches))
	}
}

// A partition named several times in one Fetch is answered once, as Kafka reads the request
// into an insertion-ordered map: at the place of its first mention, with the fetch offset of
// its last; the bytes are counted once.
func TestFetchRepeatedPartition(t *testing.T) {
	b := startLimitBroker(t)
	cl := newClient(t, b.Addr(), kgo.BrokerMaxReadBytes(1<<30))
	offsets := make([]int64, 20)
	offsets[len(offsets)-1] = 3
	resp := request[*kmsg.FetchResponse](t, cl, fetchAll(t, b, offsets...))
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		n := 0
		for _, rt := range resp.Topics {
			n += len(rt.Partitions)
		}
		t.Fatalf("partition named 20 times: answered in %d topics, %d partitions", len(resp.Topics), n)
	}
	p := resp.Topics[0].Partitions[0]
	bs := batches(t, p.RecordBatches)
	if len(bs) == 0 || bs[0].FirstOffset != 3 || len(p.RecordBatches) > limitFetchMaxBytes {
		t.Fatalf("want records from offset 3 (the last mention), at most fetch.max.bytes: %d batches, %d bytes", len(bs), len(p.RecordBatches))
	}

	// Within one topic entry, and around another topic: big[0] big[0] other[0] big[0] is
	// answered big[0] other[0].
	createTopic(t, b.Addr(), "other", 1, nil)
	req := fetchAll(t, b, 0)
	rt := req.Topics[0]
	rt.Partitions = append(rt.Partitions, rt.Partitions[0])
	other := fetchReq(t, b.Addr(), "other", 0, 0, 0).Topics[0]
	req.Topics = []kmsg.FetchRequestTopic{rt, other, req.Topics[0]}
	resp = request[*kmsg.FetchResponse](t, cl, req)
	names := map[[16]byte]string{rt.TopicID: "big", other.TopicID: "other"}
	var got []string
	for _, rt := range resp.Topics {
		for range rt.Partitions {
			name := rt.Topic // v13+ answers by topic id only
			if name == "" {
				name = names[rt.TopicID]
			}
			got = append(got, name)
		}
	}
	if len(got) != 2 || got[0] != "big" || got[1] != "other" {
		t.Fatalf("big[0] big[0] other[0] big[0] answered %v, want [big other]", got)
	}
}

// A follower's fetch is bounded by the leader's fetch.max.bytes too, as in Kafka (the
// follower asks for its replica.fetch.response.max.bytes; the leader caps that). Broker 99
// is played with raw requests, as in replication_test.go.
func TestFetchMaxBytesFollower(t *testing.T) {
	b := startLimitBroker(t)
	h := b.Handler()
	p := h.Replicas.Get("big", 0)
	if p == nil {
		t.Fatal("partition not open")
	}
	if leader, _, _ := p.Role(); leader < 0 {
		h.Replicas.SetReplication(replica.ReplicationOptions{LocalID: h.NodeID})
	}
	_, epoch, _ := p.Role()
	reg := replica.LeaderAndISR{Leader: h.NodeID, LeaderEpoch: epoch + 1, PartitionEpoch: p.Registration().PartitionEpoch + 1,
		Replicas: []int32{h.NodeID, fakeFollower}, ISR: []int32{h.NodeID}}
	if err := p.MakeLeader(reg, time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	conn, err := wire.Dial(ctxT(t), b.Addr(), "test-follower")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID, req.MinBytes, req.MaxBytes = fakeFollower, 1, math.MaxInt32
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "big"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.PartitionMaxBytes = epoch+1, -1, math.MaxInt32
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := conn.Request(ctxT(t), req)
	if err != nil {
		t.Fatal(err)
	}
	fp := resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
	if n := len(fp.RecordBatches); fp.ErrorCode != 0 || n > limitFetchMaxBytes || n < limitFetchMaxBytes-2*limitBatch {
		t.Fatalf("follower fetch of 2^31-1 bytes: error %d, %d record bytes; want at most fetch.max.bytes", fp.ErrorCode, n)
	}
}
