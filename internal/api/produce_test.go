package api_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/internal/testutil"
)

// Records produced with keys, headers and explicit timestamps come back byte for byte, in
// order per partition, with every compression codec.
func TestProduceConsumeEveryCodec(t *testing.T) {
	b := testutil.StartBroker(t)
	codecs := map[string]kgo.CompressionCodec{
		"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
	}
	for name, codec := range codecs {
		t.Run(name, func(t *testing.T) {
			topic := "codec-" + name
			createTopic(t, b.Addr(), topic, 3, nil)
			cl := newClient(t, b.Addr(), kgo.ProducerBatchCompression(codec), kgo.DefaultProduceTopic(topic))
			var want []*kgo.Record
			base := time.UnixMilli(1_700_000_000_000)
			for i := 0; i < 300; i++ {
				r := &kgo.Record{
					Key:       []byte(fmt.Sprintf("key-%d", i%7)),
					Value:     bytes.Repeat([]byte{byte(i)}, 10+i%50),
					Headers:   []kgo.RecordHeader{{Key: "h", Value: []byte(fmt.Sprint(i))}},
					Timestamp: base.Add(time.Duration(i) * time.Millisecond),
				}
				want = append(want, r)
			}
			produceSync(t, cl, want...)
			got := consumeN(t, b.Addr(), topic, len(want))
			if len(got) != len(want) {
				t.Fatalf("got %d records, want %d", len(got), len(want))
			}
			byKey := map[string][]*kgo.Record{}
			for _, r := range got {
				byKey[string(r.Key)] = append(byKey[string(r.Key)], r)
			}
			seen := map[string]int{}
			for _, w := range want {
				k := string(w.Key)
				g := byKey[k][seen[k]]
				seen[k]++
				if !bytes.Equal(g.Value, w.Value) || !g.Timestamp.Equal(w.Timestamp) || len(g.Headers) != 1 ||
					g.Headers[0].Key != "h" || !bytes.Equal(g.Headers[0].Value, w.Headers[0].Value) {
					t.Fatalf("record mismatch for key %s: got %+v want %+v", k, g, w)
				}
				if g.Partition != w.Partition || g.Offset != w.Offset {
					t.Fatalf("record at p%d o%d came back at p%d o%d", w.Partition, w.Offset, g.Partition, g.Offset)
				}
			}
		})
	}
}

// acks=0 and acks=1 produce without idempotence; offsets are contiguous.
func TestProduceAcks(t *testing.T) {
	b := testutil.StartBroker(t)
	createTopic(t, b.Addr(), "acks", 1, nil)
	for n, acks := range []kgo.Acks{kgo.NoAck(), kgo.LeaderAck()} {
		cl := newClient(t, b.Addr(), kgo.RequiredAcks(acks), kgo.DisableIdempotentWrite(), kgo.DefaultProduceTopic("acks"))
		for i := 0; i < 50; i++ {
			produceSync(t, cl, &kgo.Record{Value: []byte(fmt.Sprint(i))})
		}
		// An acks=0 produce returns once written to the socket: the next client's records,
		// on a connection of their own, could be appended before this one's last ones.
		waitFor(t, 10*time.Second, "the records to be appended", func() bool {
			return listOffsetsOffset(t, cl, "acks", 0, -1) == int64(50*(n+1))
		})
	}
	got := consumeN(t, b.Addr(), "acks", 100)
	for i, r := range got {
		if r.Offset != int64(i) || string(r.Value) != fmt.Sprint(i%50) {
			t.Fatalf("record %d: offset %d value %q", i, r.Offset, r.Value)
		}
	}
}

// A record larger than max.message.bytes is refused with MESSAGE_TOO_LARGE; a topic-level
// max.message.bytes applies to that topic only.
func TestMessageTooLarge(t *testing.T) {
	b := testutil.StartBroker(t)
	small := "2000"
	createTopic(t, b.Addr(), "small", 1, map[string]*string{"max.message.bytes": &small})
	cl := newClient(t, b.Addr(), kgo.ProducerBatchMaxBytes(1<<20), kgo.RecordRetries(0))
	big := make([]byte, 4000)
	rand.Read(big) // incompressible: the batch stays over the limit whatever the codec
	err := cl.ProduceSync(ctxT(t), &kgo.Record{Topic: "small", Value: big}).FirstErr()
	if !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("got %v, want MESSAGE_TOO_LARGE", err)
	}
	produceSync(t, cl, &kgo.Record{Topic: "small", Value: make([]byte, 1000)})
}

// A batch larger than the topic's segment.bytes (but within max.message.bytes) is refused
// with RECORD_LIST_TOO_LARGE, as Kafka's log refuses it, not an unknown server error.
func TestBatchLargerThanSegment(t *testing.T) {
	b := testutil.StartBroker(t)
	seg := "2048"
	createTopic(t, b.Addr(), "tiny-segments", 1, map[string]*string{"segment.bytes": &seg})
	cl := newClient(t, b.Addr(), kgo.ProducerBatchMaxBytes(1<<20), kgo.RecordRetries(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	err := cl.ProduceSync(ctxT(t), &kgo.Record{Topic: "tiny-segments", Value: make([]byte, 4000)}).FirstErr()
	if !errors.Is(err, kerr.RecordListTooLarge) {
		t.Fatalf("got %v, want RECORD_LIST_TOO_LARGE", err)
	}
	produceSync(t, cl, &kgo.Record{Topic: "tiny-segments", Value: make([]byte, 1000)})
}

// Produce to an unknown topic with auto-creation off fails with UNKNOWN_TOPIC_OR_PARTITION;
// with it on (the default) the topic is created with num.partitions.
func TestAutoCreateTopics(t *testing.T) {
	t.Run("on", func(t *testing.T) {
		b := testutil.StartBroker(t, "num.partitions=4")
		cl := newClient(t, b.Addr(), kgo.AllowAutoTopicCreation())
		produceSync(t, cl, &kgo.Record{Topic: "auto", Value: []byte("x")})
		td, err := newAdmin(t, b.Addr()).ListTopics(ctxT(t), "auto")
		if err != nil || len(td["auto"].Partitions) != 4 {
			t.Fatalf("auto-created topic: %v %+v", err, td)
		}
	})
	t.Run("off", func(t *testing.T) {
		b := testutil.StartBroker(t, "auto.create.topics.enable=false")
		cl := newClient(t, b.Addr(), kgo.AllowAutoTopicCreation(), kgo.RecordDeliveryTimeout(2*time.Second))
		err := cl.ProduceSync(ctxT(t), &kgo.Record{Topic: "auto", Value: []byte("x")}).FirstErr()
		if err == nil {
			t.Fatal("produce to unknown topic succeeded with auto-creation off")
		}
		td, _ := newAdmin(t, b.Addr()).ListTopics(ctxT(t))
		if td.Has("auto") {
			t.Fatal("topic was created with auto.create.topics.enable=false")
		}
	})
}

// message.timestamp.type=LogAppendTime replaces producer timestamps with the broker's.
func TestLogAppendTime(t *testing.T) {
	b := testutil.StartBroker(t)
	lat := "LogAppendTime"
	createTopic(t, b.Addr(), "lat", 1, map[string]*string{"message.timestamp.type": &lat})
	cl := newClient(t, b.Addr(), kgo.DefaultProduceTopic("lat"))
	before := time.Now().Add(-time.Second)
	old := time.UnixMilli(1000)
	produceSync(t, cl, &kgo.Record{Value: []byte("a"), Timestamp: old})
	r := consumeN(t, b.Addr(), "lat", 1)[0]
	if r.Timestamp.Before(before) || r.Attrs.TimestampType() != 1 {
		t.Fatalf("timestamp %v type %d: want broker time and LogAppendTime", r.Timestamp, r.Attrs.TimestampType())
	}
}

// compression.type=gzip recompresses whatever the producer sent.
func TestTopicCompressionRecompresses(t *testing.T) {
	b := testutil.StartBroker(t)
	gz := "gzip"
	createTopic(t, b.Addr(), "gz", 1, map[string]*string{"compression.type": &gz})
	cl := newClient(t, b.Addr(), kgo.DefaultProduceTopic("gz"), kgo.ProducerBatchCompression(kgo.NoCompression()))
	produceSync(t, cl, &kgo.Record{Value: bytes.Repeat([]byte("abc"), 1000)})
	r := consumeN(t, b.Addr(), "gz", 1)[0]
	if r.Attrs.CompressionType() != 1 || len(r.Value) != 3000 {
		t.Fatalf("codec %d len %d: want gzip (1) and the same value", r.Attrs.CompressionType(), len(r.Value))
	}
}

// Everything written before a clean shutdown is served after a restart, and new offsets
// continue where they stopped.
func TestRestartServesData(t *testing.T) {
	b := testutil.StartBroker(t)
	createTopic(t, b.Addr(), "durable", 2, nil)
	cl := newClient(t, b.Addr(), kgo.DefaultProduceTopic("durable"))
	for i := 0; i < 100; i++ {
		produceSync(t, cl, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint(i))})
	}
	cl.Close()
	b = b.Restart()
	cl = newClient(t, b.Addr(), kgo.DefaultProduceTopic("durable"))
	produceSync(t, cl, &kgo.Record{Key: []byte("new"), Value: []byte("new"), Partition: 0})
	got := consumeN(t, b.Addr(), "durable", 101)
	if len(got) != 101 {
		t.Fatalf("got %d records after restart, want 101", len(got))
	}
}
