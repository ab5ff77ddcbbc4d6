package api_test

import (
	"encoding/binary"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/testutil"
)

// Each bad produce gets its Kafka error code and leaves what is stored untouched.
func TestProduceBadInput(t *testing.T) {
	b := testutil.StartBroker(t, "message.max.bytes=5000")
	createTopic(t, b.Addr(), "bad", 1, nil)
	cl := newClient(t, b.Addr())
	good := producerBatch(t, -1, -1, -1, 3)
	if r := produceRaw(t, cl, "bad", good); r.ErrorCode != 0 {
		t.Fatalf("good batch: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)-1] ^= 0xff
	truncated := good[:len(good)-5]
	lying := append([]byte(nil), good...)
	binary.BigEndian.PutUint32(lying[8:], 1<<30) // batch length far past the bytes sent
	big := producerBatchValue(t, 6000)
	cases := []struct {
		name    string
		topic   string
		records []byte
		want    *kerr.Error
	}{
		{"crc mismatch", "bad", flipped, kerr.CorruptMessage},
		{"truncated batch", "bad", truncated, kerr.CorruptMessage},
		{"length past the end", "bad", lying, kerr.CorruptMessage},
		{"larger than message.max.bytes", "bad", big, kerr.MessageTooLarge},
		{"unknown topic", "nope", good, kerr.UnknownTopicOrPartition},
		{"legacy format in produce v9", "bad", legacyMessageSet(1, []byte("k"), []byte("v")), kerr.InvalidRecord},
	}
	for _, c := range cases {
		if r := produceRaw(t, cl, c.topic, c.records); r.ErrorCode != c.want.Code {
			t.Errorf("%s: got %v, want %v", c.name, kerr.ErrorForCode(r.ErrorCode), c.want)
		}
	}
	got := consumeN(t, b.Addr(), "bad", 3)
	if len(got) != 3 || got[2].Offset != 2 {
		t.Fatalf("stored records changed: %d records", len(got))
	}
	// Invalid topic names in Metadata requests.
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("bad topic!")
	req.Topics = append(req.Topics, rt)
	req.AllowAutoTopicCreation = true
	resp := request[*kmsg.MetadataResponse](t, cl, req)
	if resp.Topics[0].ErrorCode != kerr.InvalidTopicException.Code {
		t.Fatalf("metadata for an invalid name: %v", kerr.ErrorForCode(resp.Topics[0].ErrorCode))
	}
}

func producerBatchValue(t *testing.T, size int) []byte {
	t.Helper()
	h := batch.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	b, err := batch.Build(h, []batch.Record{{Value: make([]byte, size)}}, batch.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// legacyMessageSet builds one uncompressed message of magic 0 or 1.
func legacyMessageSet(magic byte, key, value []byte) []byte {
	m := []byte{magic, 0}
	if magic == 1 {
		m = binary.BigEndian.AppendUint64(m, 1_650_000_000_000)
	}
	m = binary.BigEndian.AppendUint32(m, uint32(len(key)))
	m = append(m, key...)
	m = binary.BigEndian.AppendUint32(m, uint32(len(value)))
	m = append(m, value...)
	msg := binary.BigEndian.AppendUint32(nil, crc32.ChecksumIEEE(m))
	msg = append(msg, m...)
	set := binary.BigEndian.AppendUint64(nil, 0)
	set = binary.BigEndian.AppendUint32(set, uint32(len(msg)))
	return append(set, msg...)
}

// Produce v2 with v0 and v1 message sets: up-converted and readable by a modern consumer,
// and by an old Fetch version as a message set again.
func TestLegacyProduce(t *testing.T) {
	b := testutil.StartBroker(t)
	createTopic(t, b.Addr(), "legacy", 1, nil)
	// A client pinned to Kafka 0.10.0's versions: Produce v2 and Fetch v2 (message format v1).
	cl := newClient(t, b.Addr(), kgo.MaxVersions(kversion.V0_10_0()))
	for _, magic := range []byte{0, 1} {
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(2)
		req.Acks = 1
		req.TimeoutMillis = 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "legacy"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = legacyMessageSet(magic, []byte("k"), []byte{'v', '0' + magic})
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		r := request[*kmsg.ProduceResponse](t, cl, req).Topics[0].Partitions[0]
		if r.ErrorCode != 0 || r.BaseOffset != int64(magic) {
			t.Fatalf("magic %d: %v offset %d", magic, kerr.ErrorForCode(r.ErrorCode), r.BaseOffset)
		}
	}
	got := consumeN(t, b.Addr(), "legacy", 2)
	if string(got[0].Value) != "v0" || string(got[1].Value) != "v1" || string(got[1].Key) != "k" {
		t.Fatalf("records: %q %q", got[0].Value, got[1].Value)
	}
	if got[1].Timestamp.UnixMilli() != 1_650_000_000_000 {
		t.Fatalf("v1 timestamp lost: %v", got[1].Timestamp)
	}
	fr := fetchReq(t, b.Addr(), "legacy", 0, 0, 0)
	fr.SetVersion(2)
	resp := request[*kmsg.FetchResponse](t, cl, fr)
	raw := resp.Topics[0].Partitions[0].RecordBatches
	if len(raw) < 26 || raw[16] != 1 {
		t.Fatalf("fetch v2 should return magic 1 messages, got %d bytes", len(raw))
	}
}

// Clients cannot write to internal topics: only the group coordinator appends to
// __consumer_offsets (Kafka answers INVALID_TOPIC_EXCEPTION).
func TestProduceToInternalTopicRefused(t *testing.T) {
	b := testutil.StartBroker(t)
	cl := newClient(t, b.Addr())
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey = "g" // creates __consumer_offsets
	req.CoordinatorKeys = []string{"g"}
	request[*kmsg.FindCoordinatorResponse](t, cl, req)
	r := produceRaw(t, cl, "__consumer_offsets", producerBatch(t, -1, -1, -1, 1))
	if r.ErrorCode != kerr.InvalidTopicException.Code {
		t.Fatalf("produce to __consumer_offsets: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}
