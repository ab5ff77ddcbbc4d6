package api_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/testutil"
)

// producerBatch builds a v2 batch of n records from an idempotent producer.
func producerBatch(t *testing.T, pid int64, epoch int16, seq int32, n int) []byte {
	t.Helper()
	h := batch.Header{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, BaseTimestamp: 1000, MaxTimestamp: 1000, LastOffsetDelta: int32(n - 1)}
	var recs []batch.Record
	for i := 0; i < n; i++ {
		recs = append(recs, batch.Record{OffsetDelta: int32(i), Value: []byte{byte(seq), byte(i)}})
	}
	b, err := batch.Build(h, recs, batch.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func produceRaw(t *testing.T, cl *kgo.Client, topic string, records []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks = -1
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return request[*kmsg.ProduceResponse](t, cl, req).Topics[0].Partitions[0]
}

func initProducerID(t *testing.T, cl *kgo.Client) (int64, int16) {
	t.Helper()
	resp := request[*kmsg.InitProducerIDResponse](t, cl, kmsg.NewPtrInitProducerIDRequest())
	if resp.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	return resp.ProducerID, resp.ProducerEpoch
}

// Retries of any of the last five batches are answered with the original offsets and not
// appended again; gaps and old epochs are refused; the state survives a restart.
func TestIdempotentProducer(t *testing.T) {
	b := testutil.StartBroker(t)
	createTopic(t, b.Addr(), "idem", 1, nil)
	cl := newClient(t, b.Addr())
	pid, epoch := initProducerID(t, cl)
	pid2, _ := initProducerID(t, cl)
	if pid2 == pid {
		t.Fatal("InitProducerId handed out the same id twice")
	}
	var offsets []int64
	for i := 0; i < 6; i++ {
		r := produceRaw(t, cl, "idem", producerBatch(t, pid, epoch, int32(i*3), 3))
		if r.ErrorCode != 0 {
			t.Fatalf("batch %d: %v", i, kerr.ErrorForCode(r.ErrorCode))
		}
		offsets = append(offsets, r.BaseOffset)
	}
	// Retry of batch 1..5 (the last five): same offsets, nothing appended.
	for i := 1; i < 6; i++ {
		r := produceRaw(t, cl, "idem", producerBatch(t, pid, epoch, int32(i*3), 3))
		if r.ErrorCode != 0 || r.BaseOffset != offsets[i] {
			t.Fatalf("retry of batch %d: %v offset %d, want %d", i, kerr.ErrorForCode(r.ErrorCode), r.BaseOffset, offsets[i])
		}
	}
	if r := produceRaw(t, cl, "idem", producerBatch(t, pid, epoch, 30, 1)); r.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("gap: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := produceRaw(t, cl, "idem", producerBatch(t, pid, epoch+1, 0, 1)); r.ErrorCode != 0 {
		t.Fatalf("epoch bump: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := produceRaw(t, cl, "idem", producerBatch(t, pid, epoch, 18, 1)); r.ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("old epoch: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	end, _ := newAdmin(t, b.Addr()).ListEndOffsets(ctxT(t), "idem")
	if o, _ := end.Lookup("idem", 0); o.Offset != 19 {
		t.Fatalf("end offset %d, want 19 (6×3 + 1)", o.Offset)
	}

	b = b.Restart()
	cl = newClient(t, b.Addr())
	if r := produceRaw(t, cl, "idem", producerBatch(t, pid, epoch+1, 0, 1)); r.ErrorCode != 0 || r.BaseOffset != 18 {
		t.Fatalf("retry after restart: %v offset %d, want 18", kerr.ErrorForCode(r.ErrorCode), r.BaseOffset)
	}
	if pid3, _ := initProducerID(t, cl); pid3 <= pid2 {
		t.Fatalf("producer id %d reused after restart (had %d)", pid3, pid2)
	}
}

// kgo's default producer is idempotent; its records land once each, in order.
func TestIdempotentClientDefault(t *testing.T) {
	b := testutil.StartBroker(t)
	createTopic(t, b.Addr(), "kgo-idem", 1, nil)
	cl := newClient(t, b.Addr(), kgo.DefaultProduceTopic("kgo-idem"))
	var rs []*kgo.Record
	for i := 0; i < 1000; i++ {
		rs = append(rs, &kgo.Record{Value: []byte{byte(i)}})
	}
	produceSync(t, cl, rs...)
	got := consumeN(t, b.Addr(), "kgo-idem", 1000)
	for i, r := range got {
		if r.Offset != int64(i) || r.Value[0] != byte(i) {
			t.Fatalf("record %d: offset %d value %d", i, r.Offset, r.Value[0])
		}
	}
}
