package compat_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/gregor-project/gregor/compat"
)

// oldClient is a client pinned to an old Kafka version, with the message format its
// Produce and Fetch versions carry.
type oldClient struct {
	Client
	magic int // 0 or 1
}

func oldClients() []oldClient {
	return []oldClient{
		{saramaClient{version: sarama.V0_10_0_0, name: "sarama (Version V0_10_0_0)"}, 1},
		{saramaClient{version: sarama.V0_9_0_0, name: "sarama (Version V0_9_0_0)"}, 0},
		{saramaClient{version: sarama.V0_8_2_0, name: "sarama (Version V0_8_2_0)"}, 0},
		{kafkaPython([]int{0, 10}, "kafka-python (api_version 0.10)"), 1},
		{kafkaPython([]int{0, 9}, "kafka-python (api_version 0.9)"), 0},
	}
}

// TestOldFormats: clients speaking old protocol versions write message format v0/v1 (which
// the broker up-converts to v2 batches) and read with old Fetch versions (down-converted),
// sharing topics with a current client (franz-go). Records of magic 0 carry no timestamp:
// a current client reads -1 (Kafka's NO_TIMESTAMP), as from Kafka.
func TestOldFormats(t *testing.T) {
	t.Parallel()
	for i, c := range oldClients() {
		info := c.Info()
		name := info.Name
		info.Variant, info.Order = strings.SplitN(name, " ", 2)[0], 100+i
		recordClient(info)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			runOld(t, c, name)
		})
	}
}

func runOld(t *testing.T, c oldClient, name string) {
	b := startBroker(t)
	caps := c.Caps()
	sc := compat.SectionOld
	var ref []Rec
	step(t, sc, name, "produce", func(t *stepT) {
		createTopic(t, b.Addr(), "old", 3, nil)
		var all []Rec
		base := tsBase()
		for _, codec := range caps.Codecs {
			o := genOpts{prefix: codec, n: 15}
			if caps.Timestamps {
				o.tsBase = base + int64(len(all))*1000
			}
			recs := genRecords(o)
			t.check(c.Produce(ctxFor(t, time.Minute), b.Addr(), "old", codec, recs), "produce "+codec)
			all = append(all, recs...)
		}
		ref = refRead(t, b.Addr(), "old")
		checkSame(t, all, ref, cmpOpts{noPosition: true, noTimestamps: !caps.Timestamps})
		compressed := map[string]bool{}
		var stamped []string
		for _, r := range ref {
			want := strings.SplitN(r.id(), "-", 2)[0]
			compressed[r.Codec] = compressed[r.Codec] || r.Codec == want
			if c.magic == 0 && r.Timestamp != -1 {
				stamped = append(stamped, fmt.Sprintf("%s: %d", r.id(), r.Timestamp))
			}
		}
		if len(stamped) > 0 {
			t.Errorf("%d records of message format v0 read with a timestamp, want -1 (none), e.g. %s", len(stamped), stamped[0])
		}
		for _, codec := range caps.Codecs {
			if !compressed[codec] {
				t.Errorf("no record stored with codec %s", codec)
			}
		}
		t.Note("message format v%d; codecs: %s", c.magic, strings.Join(caps.Codecs, ", "))
	})
	step(t, sc, name, "consume", func(t *stepT) {
		if len(ref) == 0 {
			t.Fatal("nothing was produced")
		}
		got, err := c.Consume(ctxFor(t, time.Minute), b.Addr(), "old", len(ref))
		t.check(err, "consume")
		checkSame(t, ref, got, cmpOpts{})
	})
	step(t, sc, name, "read-new", func(t *stepT) {
		// Written by a current client: v2 batches with headers and timestamps, every codec
		// that message formats v0/v1 have (zstd has none).
		createTopic(t, b.Addr(), "new", 3, nil)
		var want []Rec
		for i, codec := range []string{"none", "gzip", "snappy", "lz4"} {
			recs := genRecords(genOpts{prefix: "new" + codec, n: 10, headers: true, tsBase: tsBase() + int64(i)*10_000})
			want = append(want, refProduce(t, b.Addr(), "new", recs, kgoCodec(codec))...)
		}
		if c.magic == 0 {
			for i := range want {
				want[i].Timestamp = -1 // message format v0 has no timestamps
			}
		}
		got, err := c.Consume(ctxFor(t, time.Minute), b.Addr(), "new", len(want))
		t.check(err, "consume")
		checkSame(t, want, got, cmpOpts{noHeaders: true})
		t.Note("headers dropped: message format v%d has none", c.magic)
	})
	step(t, sc, name, "group", func(t *stepT) {
		groupStep(t, c, &b)
	})
	step(t, sc, name, "zstd-topic", func(t *stepT) {
		zstd := "zstd"
		createTopic(t, b.Addr(), "zstd", 1, map[string]*string{"compression.type": &zstd})
		want := refProduce(t, b.Addr(), "zstd", genRecords(genOpts{prefix: "zstd", n: 5, partition: func(int) int32 { return 0 }}))
		exp := c.Expect("zstd-topic")
		got, err := c.Consume(ctxFor(t, 10*time.Second), b.Addr(), "zstd", len(want))
		if err == nil || !exp.Match(err) {
			t.Fatalf("read a zstd topic with an old Fetch version: got %v (%d records), want %s", err, len(got), exp.Desc)
		}
		t.Note("%s", exp.Desc)
	})
}
