package api_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/testutil"
)

// produceReq is a Produce v9 request of acks=-1 with timeout ms, one partition entry per
// (topic, partition, records) in order, a topic named again starting a new topic entry.
func produceReq(timeoutMs int32, parts ...producePart) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks = -1
	req.TimeoutMillis = timeoutMs
	for i, p := range parts {
		if i == 0 || parts[i-1].topic != p.topic || p.newTopicEntry {
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = p.topic
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p.partition, p.records
		rt := &req.Topics[len(req.Topics)-1]
		rt.Partitions = append(rt.Partitions, rp)
	}
	return req
}

type producePart struct {
	topic         string
	partition     int32
	records       []byte
	newTopicEntry bool // name the topic again in a new entry even after the same topic
}

// valueBatch is one uncompressed batch of a non-idempotent producer holding values.
func valueBatch(t *testing.T, values ...string) []byte {
	t.Helper()
	h := batch.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, BaseTimestamp: 1000, MaxTimestamp: 1000, LastOffsetDelta: int32(len(values) - 1)}
	var recs []batch.Record
	for i, v := range values {
		recs = append(recs, batch.Record{OffsetDelta: int32(i), Value: []byte(v)})
	}
	b, err := batch.Build(h, recs, batch.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// acks=-1 with timeout_ms 0 or negative: the batch is committed as soon as it is appended on
// a sole in-sync replica, so Kafka's DelayedProduce completes it before it can expire. The
// answer is success with the batch's offset, never REQUEST_TIMED_OUT (a client retrying that
// answer would write twice).
func TestProduceAcksAllZeroTimeoutCommitted(t *testing.T) {
	b := testutil.StartBroker(t)
	createTopic(t, b.Addr(), "zero", 1, nil)
	cl := newClient(t, b.Addr())
	want := int64(0)
	for _, timeout := range []int32{0, -1, -1000} {
		for i := 0; i < 20; i++ {
			resp := request[*kmsg.ProduceResponse](t, cl, produceReq(timeout, producePart{topic: "zero", records: valueBatch(t, "v")}))
			p := resp.Topics[0].Partitions[0]
			if p.ErrorCode != 0 || p.BaseOffset != want {
				t.Fatalf("timeout %d, produce %d: %v at base offset %d, want success at %d", timeout, i, kerr.ErrorForCode(p.ErrorCode), p.BaseOffset, want)
			}
			want++
		}
	}
	if off := listOffsetsOffset(t, cl, "zero", 0, -1); off != want {
		t.Fatalf("high watermark %d, want %d", off, want)
	}
}

// A Produce naming one partition several times (in one topic entry or in several entries of
// the same topic) is handled as Kafka's KafkaApis does: the partitions are collected into a
// map, so only the last copy of a partition's records is appended and the partition is
// answered once, within one entry of its topic.
func TestProduceDuplicatePartitions(t *testing.T) {
	b := testutil.StartBroker(t)
	createTopic(t, b.Addr(), "dup", 2, nil)
	cl := newClient(t, b.Addr())
	req := produceReq(5000,
		producePart{topic: "dup", partition: 0, records: valueBatch(t, "a1", "a2")},
		producePart{topic: "dup", partition: 1, records: valueBatch(t, "b1")},
		producePart{topic: "dup", partition: 0, records: valueBatch(t, "c1", "c2", "c3")},
		producePart{topic: "dup", partition: 1, records: valueBatch(t, "d1"), newTopicEntry: true},
	)
	resp := request[*kmsg.ProduceResponse](t, cl, req)
	if len(resp.Topics) != 1 {
		t.Fatalf("%d topic answers, want 1", len(resp.Topics))
	}
	got := map[int32]kmsg.ProduceResponseTopicPartition{}
	for _, p := range resp.Topics[0].Partitions {
		if _, ok := got[p.Partition]; ok {
			t.Fatalf("partition %d answered twice", p.Partition)
		}
		got[p.Partition] = p
	}
	if len(got) != 2 {
		t.Fatalf("answers for %d partitions, want 2", len(got))
	}
	for part, p := range got {
		if p.ErrorCode != 0 || p.BaseOffset != 0 {
			t.Fatalf("partition %d: %v at %d", part, kerr.ErrorForCode(p.ErrorCode), p.BaseOffset)
		}
	}
	for part, want := range map[int32]int64{0: 3, 1: 1} {
		if off := listOffsetsOffset(t, cl, "dup", part, -1); off != want {
			t.Fatalf("partition %d has %d records, want %d (the last copy only)", part, off, want)
		}
	}
	values := map[string]bool{}
	for _, r := range consumeN(t, b.Addr(), "dup", 4) {
		values[string(r.Value)] = true
	}
	for _, v := range []string{"c1", "c2", "c3", "d1"} {
		if !values[v] {
			t.Fatalf("read %v, want the last copies c1 c2 c3 d1", values)
		}
	}
}

// Kafka's LogValidator refuses, for a client's append, any control batch and any
// transactional batch without a producer id (INVALID_RECORD), wherever the batch sits in the
// records, compressed or not, and whether or not the request names a transactional id: a
// forged COMMIT or ABORT marker never reaches the log.
func TestProduceControlBatchRefusedEverywhere(t *testing.T) {
	b := testutil.StartBroker(t)
	createTopic(t, b.Addr(), "markers", 1, nil)
	cl := newClient(t, b.Addr())
	pid, epoch := initProducerID(t, cl)
	marker := func(h batch.Header, codec batch.Codec) []byte {
		h.BaseTimestamp, h.MaxTimestamp = 1000, 1000
		// A COMMIT marker's record: key version 0, type 1; value version 0, coordinator epoch 0.
		out, err := batch.Build(h, []batch.Record{{Key: []byte{0, 0, 0, 1}, Value: []byte{0, 0, 0, 0, 0, 0}}}, codec)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	txnMarker := batch.Header{ProducerID: pid, ProducerEpoch: epoch, Attributes: batch.AttrControl | batch.AttrTransactional}
	cases := map[string]struct {
		records []byte
		txnID   *string
	}{
		"control batch without a producer id":      {records: marker(batch.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Attributes: batch.AttrControl}, batch.CodecNone)},
		"control batch of a producer id":           {records: marker(batch.Header{ProducerID: pid, ProducerEpoch: epoch, Attributes: batch.AttrControl}, batch.CodecNone)},
		"transactional marker":                     {records: marker(txnMarker, batch.CodecNone)},
		"gzip transactional marker":                {records: marker(txnMarker, batch.CodecGzip)},
		"marker after a data batch":                {records: append(valueBatch(t, "x"), marker(txnMarker, batch.CodecNone)...)},
		"marker in a transactional request":        {records: marker(txnMarker, batch.CodecNone), txnID: kmsg.StringPtr("forger")},
		"transactional data without a producer id": {records: marker(batch.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Attributes: batch.AttrTransactional}, batch.CodecNone)},
		"transactional data without a producer id, transactional request": {
			records: marker(batch.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Attributes: batch.AttrTransactional}, batch.CodecNone), txnID: kmsg.StringPtr("forger"),
		},
	}
	for name, c := range cases {
		req := produceReq(5000, producePart{topic: "markers", records: c.records})
		req.TransactionID = c.txnID
		p := request[*kmsg.ProduceResponse](t, cl, req).Topics[0].Partitions[0]
		if p.ErrorCode != kerr.InvalidRecord.Code {
			t.Errorf("%s: %v, want INVALID_RECORD", name, kerr.ErrorForCode(p.ErrorCode))
		}
	}
	if off := listOffsetsOffset(t, cl, "markers", 0, -1); off != 0 {
		t.Fatalf("log end offset %d after refused batches, want 0", off)
	}
}

// A zstd batch whose records decompress to 80 MiB (80 records of 1 MiB) is accepted, as
// Kafka accepts it (no cap on the decompressed size), and read back whole by a consumer.
func TestProduceLargeDecompressedBatch(t *testing.T) {
	b := testutil.StartBroker(t)
	createTopic(t, b.Addr(), "large", 1, nil)
	cl := newClient(t, b.Addr())
	const n = 80
	h := batch.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, BaseTimestamp: 1000, MaxTimestamp: 1000 + n - 1, LastOffsetDelta: n - 1}
	value := make([]byte, 1<<20)
	recs := make([]batch.Record, n)
	for i := range recs {
		recs[i] = batch.Record{OffsetDelta: int32(i), TimestampDelta: int64(i), Value: value}
	}
	z, err := batch.Build(h, recs, batch.CodecZstd)
	if err != nil {
		t.Fatal(err)
	}
	if len(z) > 1<<20 {
		t.Fatalf("the compressed batch is %d bytes, more than max.message.bytes", len(z))
	}
	if p := produceRaw(t, cl, "large", z); p.ErrorCode != 0 {
		t.Fatalf("produce of a batch decompressing to %d MiB: %v", n, kerr.ErrorForCode(p.ErrorCode))
	}
	if off := listOffsetsOffset(t, cl, "large", 0, -1); off != n {
		t.Fatalf("high watermark %d, want %d", off, n)
	}
	// Looking up by time reads the records of the batch.
	if off := listOffsetsOffset(t, cl, "large", 0, 1000+n/2); off != n/2 {
		t.Fatalf("offset for timestamp %d: %d, want %d", 1000+n/2, off, n/2)
	}
	got := consumeN(t, b.Addr(), "large", n, kgo.FetchMaxPartitionBytes(2<<20))
	for i, r := range got {
		if r.Offset != int64(i) || len(r.Value) != len(value) {
			t.Fatalf("record %d: offset %d, %d bytes", i, r.Offset, len(r.Value))
		}
	}
	// A topic of another compression.type recompresses it, as a stream, without a cap.
	lz4 := "lz4"
	createTopic(t, b.Addr(), "large-lz4", 1, map[string]*string{"compression.type": &lz4})
	if p := produceRaw(t, cl, "large-lz4", z); p.ErrorCode != 0 {
		t.Fatalf("produce to an lz4 topic of a batch decompressing to %d MiB: %v", n, kerr.ErrorForCode(p.ErrorCode))
	}
	if got := consumeN(t, b.Addr(), "large-lz4", n, kgo.FetchMaxPartitionBytes(2<<20)); len(got) != n || len(got[n-1].Value) != len(value) {
		t.Fatalf("read %d records back from the lz4 topic", len(got))
	}
}
