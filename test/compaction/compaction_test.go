// Package compaction checks log compaction as a client sees it: a compacted topic read back
// from offset 0 holds the last value of each key at its original offset, tombstones go after
// delete.retention.ms, __consumer_offsets stops growing, and a kill -9 while the cleaner
// swaps segments loses no key's last value.
package compaction

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/internal/testutil"
)

// cleanerSets makes the cleaner look often and fit a test's memory.
var cleanerSets = []string{"log.cleaner.backoff.ms=20", "log.cleaner.dedupe.buffer.size=4194304"}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func client(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ProducerLinger(0),
		// Uncompressed, so segment.bytes rolls segments where the test counts on it.
		kgo.ProducerBatchCompression(kgo.NoCompression())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func createCompacted(t *testing.T, addr, topic string, cfg map[string]string) {
	adm := kadm.NewClient(client(t, addr))
	c := map[string]*string{}
	for k, v := range cfg {
		c[k] = &v
	}
	resp, err := adm.CreateTopic(ctxT(t, 10*time.Second), 1, 1, c, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
}

// produce writes recs in batches of 50, synchronously.
func produce(t *testing.T, cl *kgo.Client, recs []*kgo.Record) {
	for len(recs) > 0 {
		n := min(50, len(recs))
		if err := cl.ProduceSync(ctxT(t, 10*time.Second), recs[:n]...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		recs = recs[n:]
	}
}

// readAll reads partition 0 of topic from offset from up to its high watermark.
func readAll(t *testing.T, addr, topic string, from int64) []*kgo.Record {
	t.Helper()
	ctx := ctxT(t, 10*time.Second)
	adm := kadm.NewClient(client(t, addr))
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(topic, 0)
	if end.Err != nil {
		t.Fatal(end.Err)
	}
	cl := client(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(from)}}))
	defer cl.Close()
	var out []*kgo.Record
	for len(out) == 0 || out[len(out)-1].Offset < end.Offset-1 {
		if from >= end.Offset {
			return nil
		}
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("reading %s from %d: %v (read up to %d of %d)", topic, from, err, len(out), end.Offset)
		}
		if errs := fs.Errors(); len(errs) > 0 {
			t.Fatalf("fetch: %v", errs)
		}
		out = append(out, fs.Records()...)
	}
	return out
}

func record(topic, key, value string) *kgo.Record {
	r := &kgo.Record{Topic: topic, Key: []byte(key)}
	if value != "" {
		r.Value = []byte(value)
	}
	return r
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %s", what, d, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCompactedTopicKeepsLastValuePerKey writes 200 versions of 5 keys (and deletes one)
// into a topic of 2 KiB segments; the cleaner leaves the last value of each key at its
// offset, the older versions gone, the tombstone gone after delete.retention.ms, and a
// consumer starting in a removed range reads the next surviving record.
func TestCompactedTopicKeepsLastValuePerKey(t *testing.T) {
	b := testutil.StartBroker(t, cleanerSets...)
	const topic = "changelog"
	createCompacted(t, b.Addr(), topic, map[string]string{
		"cleanup.policy": "compact", "segment.bytes": "2048",
		"min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "100",
	})
	cl := client(t, b.Addr())
	var recs []*kgo.Record
	last := map[string]string{}
	for v := range 200 {
		for k := range 5 {
			key, val := fmt.Sprintf("key-%d", k), fmt.Sprintf("value-%d-%d", k, v)
			recs = append(recs, record(topic, key, val))
			last[key] = val
		}
	}
	recs = append(recs, record(topic, "key-4", "")) // a tombstone
	delete(last, "key-4")
	// Distinct keys after, so the last versions lie in sealed (cleanable) segments.
	for i := range 200 {
		key := fmt.Sprintf("filler-%03d", i)
		recs = append(recs, record(topic, key, "f"))
		last[key] = "f"
	}
	produce(t, cl, recs)
	written := int64(len(recs))

	var got []*kgo.Record
	waitFor(t, 20*time.Second, "compaction to the last value per key", func() (bool, string) {
		got = readAll(t, b.Addr(), topic, 0)
		seen := map[string]int{}
		for _, r := range got {
			seen[string(r.Key)]++
		}
		for k, n := range seen {
			if _, ok := last[k]; !ok || n != 1 {
				return false, fmt.Sprintf("%d records, key %s appears %d times", len(got), k, n)
			}
		}
		return len(seen) == len(last), fmt.Sprintf("%d keys of %d", len(seen), len(last))
	})
	prev := int64(-1)
	for _, r := range got {
		if r.Offset <= prev {
			t.Fatalf("offset %d after %d", r.Offset, prev)
		}
		prev = r.Offset
		if string(r.Value) != last[string(r.Key)] {
			t.Errorf("key %s at offset %d: value %q, want the last one %q", r.Key, r.Offset, r.Value, last[string(r.Key)])
		}
	}
	if prev != written-1 || int64(len(got)) >= written {
		t.Fatalf("read %d records ending at offset %d; want gaps in offsets 0..%d", len(got), prev, written-1)
	}
	// Offsets never change: each key's last value is where it was written.
	for _, r := range got {
		if strings.HasPrefix(string(r.Key), "key-") {
			k, _ := strconv.Atoi(strings.TrimPrefix(string(r.Key), "key-"))
			if want := int64(199*5 + k); r.Offset != want {
				t.Errorf("key %s at offset %d, written at %d", r.Key, r.Offset, want)
			}
		}
	}
	// A consumer positioned at offset 1 (removed) reads the first record surviving after it.
	from := readAll(t, b.Addr(), topic, 1)
	if len(from) == 0 || from[0].Offset != got[0].Offset {
		t.Fatalf("reading from removed offset 1: first record %v, want offset %d", from, got[0].Offset)
	}
}

// partitionLogBytes is the size of the .log files in dir. A file the cleaner renames away
// between the listing and its stat (a swap: <base>.log becomes .log.deleted, then the new
// segment takes the name) makes it list again, so a swap never counts as a missing segment.
func partitionLogBytes(t *testing.T, dir string) int64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := logBytesOnce(dir)
		if err == nil || !errors.Is(err, fs.ErrNotExist) || time.Now().After(deadline) {
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
}

func logBytesOnce(dir string) (int64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".log") {
			fi, err := e.Info()
			if errors.Is(err, os.ErrNotExist) {
				continue // swapped out by the cleaner since the listing
			}
			if err != nil {
				return 0, err
			}
			n += fi.Size()
		}
	}
	return n, nil
}

// TestConsumerOffsetsStaysBounded commits the offsets of one group's 4 partitions 3,000
// times: __consumer_offsets (16 KiB segments) comes back to a few segments after every 500
// commits instead of growing with every commit, and the last committed offsets read back
// after a restart.
func TestConsumerOffsetsStaysBounded(t *testing.T) {
	const segment = 16384
	sets := append([]string{"offsets.topic.num.partitions=1", "offsets.topic.segment.bytes=" + strconv.Itoa(segment)}, cleanerSets...)
	b := testutil.StartBroker(t, sets...)
	adm := kadm.NewClient(client(t, b.Addr()))
	ctx := ctxT(t, 60*time.Second)
	if _, err := adm.CreateTopic(ctx, 4, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the topic known to the group coordinator", func() (bool, string) {
		var offs kadm.Offsets
		offs.Add(kadm.Offset{Topic: "orders", Partition: 0, At: 0, LeaderEpoch: -1})
		resp, err := adm.CommitOffsets(ctx, "g", offs)
		if err == nil {
			err = resp.Error()
		}
		return err == nil, fmt.Sprint(err)
	})
	dir := filepath.Join(b.Dir, "__consumer_offsets-0")
	const commits = 3000
	var largest int64
	for i := 1; i <= commits; i++ {
		var offs kadm.Offsets
		for p := range int32(4) {
			offs.Add(kadm.Offset{Topic: "orders", Partition: p, At: int64(i)*10 + int64(p), LeaderEpoch: -1})
		}
		resp, err := adm.CommitOffsets(ctx, "g", offs)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
		if i%100 == 0 {
			largest = max(largest, partitionLogBytes(t, dir))
		}
		// Every 500 commits (~150 KB, several segments) the cleaner brings the topic back to a
		// handful of segments: it stops growing however long the commits go on. How far it
		// grows between two passes depends on the machine's speed, so only the return is
		// asserted.
		if i%500 == 0 {
			waitFor(t, 20*time.Second, fmt.Sprintf("__consumer_offsets cleaned after %d commits", i), func() (bool, string) {
				n := partitionLogBytes(t, dir)
				return n <= 4*segment, fmt.Sprintf("%d bytes", n)
			})
		}
	}
	t.Logf("__consumer_offsets: largest %d bytes during %d commits, %d after", largest, commits, partitionLogBytes(t, dir))

	b = b.Restart()
	fetched, err := kadm.NewClient(client(t, b.Addr())).FetchOffsets(ctxT(t, 20*time.Second), "g")
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(4) {
		o, ok := fetched.Lookup("orders", p)
		if want := int64(commits)*10 + int64(p); !ok || o.Err != nil || o.At != want {
			t.Errorf("orders-%d after restart: %+v (found %v), want %d", p, o, ok, want)
		}
	}
}

// TestKill9WhileCleaning kills a real broker while its (throttled) cleaner writes a cleaned
// segment; after the restart the cleaner finishes and every key's last value is there, once.
func TestKill9WhileCleaning(t *testing.T) {
	dir := t.TempDir()
	port := testutil.FreePort(t)
	sets := append([]string{"log.cleaner.io.max.bytes.per.second=300000"}, cleanerSets...)
	p := testutil.StartProcess(t, dir, port, sets...)
	const topic = "kv"
	createCompacted(t, p.Addr, topic, map[string]string{"cleanup.policy": "compact", "segment.bytes": "65536"})
	cl := client(t, p.Addr)
	last := map[string]string{}
	var recs []*kgo.Record
	pad := strings.Repeat("x", 100)
	for v := range 300 {
		for k := range 30 {
			key, val := fmt.Sprintf("key-%02d", k), fmt.Sprintf("%d-%d-%s", k, v, pad)
			recs = append(recs, record(topic, key, val))
			last[key] = val
		}
	}
	for i := range 1200 { // distinct keys: the last versions end up sealed
		key := fmt.Sprintf("tail-%03d", i)
		recs = append(recs, record(topic, key, pad))
		last[key] = pad
	}
	produce(t, cl, recs)
	cl.Close()

	pdir := filepath.Join(dir, topic+"-0")
	waitFor(t, 30*time.Second, "the cleaner writing a .cleaned segment", func() (bool, string) {
		ents, err := os.ReadDir(pdir)
		if err != nil {
			return false, err.Error()
		}
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".cleaned") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d files", len(ents))
	})
	p.Kill()

	p = testutil.StartProcess(t, dir, port, cleanerSets...)
	waitFor(t, 30*time.Second, "every key once, with its last value", func() (bool, string) {
		got := readAll(t, p.Addr, topic, 0)
		seen := map[string]bool{}
		for _, r := range got {
			k := string(r.Key)
			if seen[k] {
				return false, fmt.Sprintf("key %s twice among %d records", k, len(got))
			}
			seen[k] = true
			if string(r.Value) != last[k] {
				return false, fmt.Sprintf("key %s at %d: %.12q, want %.12q; files %s", k, r.Offset, r.Value, last[k], segmentFiles(pdir))
			}
		}
		return len(seen) == len(last), fmt.Sprintf("%d keys of %d", len(seen), len(last))
	})
}

func segmentFiles(dir string) string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, e := range ents {
		if fi, err := e.Info(); err == nil {
			out = append(out, fmt.Sprintf("%s:%d", e.Name(), fi.Size()))
		}
	}
	return strings.Join(out, " ")
}

// A throttled cleaner (log.cleaner.io.max.bytes.per.second) still finishes: it only paces
// its reads and writes.
func TestThrottledCleanerFinishes(t *testing.T) {
	b := testutil.StartBroker(t, append([]string{"log.cleaner.io.max.bytes.per.second=20000"}, cleanerSets...)...)
	const topic = "paced"
	createCompacted(t, b.Addr(), topic, map[string]string{
		"cleanup.policy": "compact", "segment.bytes": "2048", "min.cleanable.dirty.ratio": "0.01",
	})
	cl := client(t, b.Addr())
	var recs []*kgo.Record
	for v := range 100 {
		for k := range 5 {
			recs = append(recs, record(topic, fmt.Sprintf("key-%d", k), fmt.Sprintf("value-%d-%d", k, v)))
		}
	}
	for i := range 100 {
		recs = append(recs, record(topic, fmt.Sprintf("filler-%03d", i), "f"))
	}
	produce(t, cl, recs)
	waitFor(t, 60*time.Second, "the throttled cleaner's pass", func() (bool, string) {
		got := readAll(t, b.Addr(), topic, 0)
		return len(got) <= 105+10, fmt.Sprintf("%d of %d records left", len(got), len(recs))
	})
}
