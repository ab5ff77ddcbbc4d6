package compat_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// compactedTopic writes 40 versions of 4 keys, then 60 records of distinct keys, to the one
// partition of "compacted" (2 KiB segments, cleaned as soon as anything is dirty), waits
// until the broker's cleaner has left one record per key, and returns the survivors as the
// reference client reads them: far fewer than the offsets they span, with gaps.
func compactedTopic(t testing.TB, addr string) []Rec {
	t.Helper()
	compact, seg, ratio := "compact", "2048", "0.01"
	createTopic(t, addr, "compacted", 1, map[string]*string{
		"cleanup.policy": &compact, "segment.bytes": &seg, "min.cleanable.dirty.ratio": &ratio,
	})
	var recs []Rec
	for v := range 40 {
		for k := range 4 {
			id := fmt.Sprintf("cmp-%d-%02d", k, v)
			recs = append(recs, Rec{Partition: 0, Key: []byte(fmt.Sprintf("key-%d", k)), Value: []byte(id + "|value")})
		}
	}
	for i := range 60 {
		id := fmt.Sprintf("fill-%02d", i)
		recs = append(recs, Rec{Partition: 0, Key: []byte(id), Value: []byte(id + "|filler")})
	}
	// Uncompressed, so segment.bytes rolls segments where the sizes above count on it, in
	// batches that fit a segment.
	written := refProduce(t, addr, "compacted", recs, kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(1024))
	end := written[len(written)-1].Offset + 1
	last := map[string]int64{}
	for _, r := range written {
		last[string(r.Key)] = r.Offset
	}
	var got []Rec
	ctx := ctxFor(t, 30*time.Second)
	err := waitFor(ctx, "the cleaner leaving one record per key", func() bool {
		got = readTo(t, addr, "compacted", end)
		if len(got) != len(last) {
			return false
		}
		for _, r := range got {
			if last[string(r.Key)] != r.Offset {
				return false
			}
		}
		return true
	})
	if err != nil {
		t.Fatalf("%v: %d records of %d keys read", err, len(got), len(last))
	}
	return got
}

// readTo reads partition 0 of topic with franz-go from offset 0 until the record before end.
func readTo(t testing.TB, addr, topic string, end int64) []Rec {
	t.Helper()
	ctx := ctxFor(t, 10*time.Second)
	cl := refClient(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}}))
	defer cl.Close()
	var out []Rec
	for len(out) == 0 || out[len(out)-1].Offset < end-1 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reference read of %s: %d records, not up to offset %d", topic, len(out), end-1)
		}
		for _, e := range fs.Errors() {
			t.Fatalf("reference read of %s: %v", topic, e.Err)
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, fromKgo(r)) })
	}
	return out
}

// logStart is partition 0's log start offset.
func logStart(t testing.TB, addr, topic string) int64 {
	t.Helper()
	starts, err := kadm.NewClient(refClient(t, addr)).ListStartOffsets(ctxFor(t, 10*time.Second), topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	s, _ := starts.Lookup(topic, 0)
	return s.Offset
}
