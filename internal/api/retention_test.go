package api_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/internal/testutil"
)

// Retention and time-based rolling as the running broker applies them: its background loop
// (log.retention.check.interval.ms) deletes old segments, ListOffsets earliest follows, and
// what is left reads back intact.

// retentionSets makes the broker's retention loop run every 20 ms.
var retentionSets = []string{"log.retention.check.interval.ms=20"}

// uncompressed keeps batch sizes as the tests compute them (franz-go compresses by default,
// and these values compress well).
var uncompressed = kgo.ProducerBatchCompression(kgo.NoCompression())

// segmentFiles lists the base offsets of a partition's .log files on disk, ascending.
func segmentFiles(t *testing.T, dir, topic string, part int) []int64 {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, fmt.Sprintf("%s-%d", topic, part)))
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".log")
		if !ok || len(name) != 20 {
			continue
		}
		base, err := strconv.ParseInt(name, 10, 64)
		if err != nil {
			t.Fatalf("segment file %s: %v", e.Name(), err)
		}
		out = append(out, base)
	}
	slices.Sort(out)
	return out
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not synchronisation
	}
}

// value is record i's payload: recognisable and 200 bytes long.
func value(i int) []byte {
	v := bytes.Repeat([]byte{byte('a' + i%26)}, 200)
	copy(v, fmt.Sprintf("record-%04d|", i))
	return v
}

// produceOneBatchEach produces records i in [from, to) as one batch each, with timestamp ts
// (the zero time means now).
func produceOneBatchEach(t *testing.T, cl *kgo.Client, topic string, from, to int, ts time.Time) {
	t.Helper()
	for i := from; i < to; i++ {
		produceSync(t, cl, &kgo.Record{Topic: topic, Value: value(i), Timestamp: ts})
	}
}

// checkTail consumes from the earliest offset to the end and checks every record is the one
// produced at its offset (record i at offset i).
func checkTail(t *testing.T, addr, topic string, earliest, end int64) {
	t.Helper()
	got := consumeN(t, addr, topic, int(end-earliest))
	for i, r := range got {
		want := earliest + int64(i)
		if r.Offset != want || !bytes.Equal(r.Value, value(int(want))) {
			t.Fatalf("record %d: offset %d value %.12q, want offset %d value %.12q", i, r.Offset, r.Value, want, value(int(want)))
		}
	}
}

func TestRetentionBytesDeletesOldSegments(t *testing.T) {
	b := testutil.StartBroker(t, retentionSets...)
	createTopic(t, b.Addr(), "bysize", 1, map[string]*string{
		"segment.bytes":        sp("1024"),
		"retention.bytes":      sp("2048"),
		"file.delete.delay.ms": sp("0"),
	})
	cl := newClient(t, b.Addr(), kgo.ProducerLinger(0), uncompressed)
	const n = 40
	produceOneBatchEach(t, cl, "bysize", 0, n, time.Time{})

	// ~270-byte batches (one record each, uncompressed), three to a 1 KiB segment: 40
	// batches make 14 segments, and keeping at least 2 KiB keeps the last three or four.
	var earliest int64
	var segs []int64
	waitFor(t, 10*time.Second, "retention.bytes to delete old segments", func() bool {
		// Files first: the log start moves before the deleted segments' files go, so an
		// earliest read after the listing is at least the listing's first segment.
		segs = segmentFiles(t, b.Dir, "bysize", 0)
		earliest = listOffsetsOffset(t, cl, "bysize", 0, -2)
		return len(segs) <= 4 && earliest > 0 && earliest == segs[0]
	})
	if earliest != segs[0] {
		t.Fatalf("ListOffsets earliest %d, but the first segment on disk starts at %d (%v)", earliest, segs[0], segs)
	}
	if latest := listOffsetsOffset(t, cl, "bysize", 0, -1); latest != n {
		t.Fatalf("ListOffsets latest %d, want %d: retention must not move the end", latest, n)
	}
	if earliest > n-8 {
		t.Fatalf("retention.bytes=2048 kept too little: earliest %d of %d", earliest, n)
	}
	checkTail(t, b.Addr(), "bysize", earliest, n)
	// The leader epoch cache follows the log start (OffsetForLeaderEpoch never names an
	// offset retention deleted).
	waitFor(t, 10*time.Second, "the leader epoch cache trimmed to the log start", func() bool {
		es := b.Handler().Replicas.Get("bysize", 0).Epochs().Entries()
		return len(es) > 0 && es[0].StartOffset >= earliest
	})

	// A consumer asking for a deleted offset is told it is out of range, and the log start
	// offset survives a restart.
	b = b.Restart()
	cl = newClient(t, b.Addr())
	if got := listOffsetsOffset(t, cl, "bysize", 0, -2); got != earliest {
		t.Fatalf("log start offset after restart %d, want %d", got, earliest)
	}
}

func TestRetentionMsDeletesExpiredSegments(t *testing.T) {
	b := testutil.StartBroker(t, retentionSets...)
	createTopic(t, b.Addr(), "bytime", 1, map[string]*string{
		"segment.bytes":        sp("1024"),
		"retention.ms":         sp("3600000"), // one hour
		"file.delete.delay.ms": sp("0"),
	})
	cl := newClient(t, b.Addr(), kgo.ProducerLinger(0), uncompressed)
	// Twenty records stamped two hours ago (expired), then twenty stamped now.
	produceOneBatchEach(t, cl, "bytime", 0, 20, time.Now().Add(-2*time.Hour))
	produceOneBatchEach(t, cl, "bytime", 20, 40, time.Time{})

	var earliest int64
	waitFor(t, 10*time.Second, "retention.ms to delete the expired segments", func() bool {
		earliest = listOffsetsOffset(t, cl, "bytime", 0, -2)
		return earliest >= 18 // every segment holding only expired records is gone
	})
	if earliest > 20 {
		t.Fatalf("retention.ms deleted unexpired records: earliest %d, the first fresh record is at 20", earliest)
	}
	if segs := segmentFiles(t, b.Dir, "bytime", 0); segs[0] != earliest {
		t.Fatalf("ListOffsets earliest %d, first segment on disk %v", earliest, segs)
	}
	checkTail(t, b.Addr(), "bytime", earliest, 40)
}

// When every record has expired, the whole log goes, the active segment included, and the
// log start offset reaches the log end offset; later records go on from there.
func TestRetentionMsExpiresTheWholeLog(t *testing.T) {
	b := testutil.StartBroker(t, retentionSets...)
	createTopic(t, b.Addr(), "allgone", 1, map[string]*string{
		"retention.ms":         sp("60000"),
		"file.delete.delay.ms": sp("0"),
	})
	cl := newClient(t, b.Addr(), kgo.ProducerLinger(0), uncompressed)
	produceOneBatchEach(t, cl, "allgone", 0, 5, time.Now().Add(-time.Hour))
	waitFor(t, 10*time.Second, "the expired log to be deleted", func() bool {
		return listOffsetsOffset(t, cl, "allgone", 0, -2) == 5
	})
	if segs := segmentFiles(t, b.Dir, "allgone", 0); len(segs) != 1 || segs[0] != 5 {
		t.Fatalf("segments on disk %v, want one empty segment at 5", segs)
	}
	produceOneBatchEach(t, cl, "allgone", 5, 7, time.Time{})
	checkTail(t, b.Addr(), "allgone", 5, 7)
}

// segment.ms rolls an idle active segment even when nothing more is appended (the retention
// loop rolls it), so the next record starts a new segment file.
func TestSegmentMsRollsIdleSegment(t *testing.T) {
	b := testutil.StartBroker(t, retentionSets...)
	createTopic(t, b.Addr(), "roll", 1, map[string]*string{"segment.ms": sp("100")})
	cl := newClient(t, b.Addr(), kgo.ProducerLinger(0), uncompressed)
	// One small record cannot fill a segment (segment.bytes is 1 GiB): only time rolls it.
	produceOneBatchEach(t, cl, "roll", 0, 1, time.Time{})
	waitFor(t, 10*time.Second, "segment.ms to roll the idle segment", func() bool {
		return slices.Equal(segmentFiles(t, b.Dir, "roll", 0), []int64{0, 1})
	})
	produceOneBatchEach(t, cl, "roll", 1, 2, time.Time{})
	fi, err := os.Stat(filepath.Join(b.Dir, "roll-0", "00000000000000000001.log"))
	if err != nil || fi.Size() == 0 {
		t.Fatalf("the record after the roll is not in the new segment: %v", err)
	}
	waitFor(t, 10*time.Second, "segment.ms to roll the second segment", func() bool {
		return slices.Equal(segmentFiles(t, b.Dir, "roll", 0), []int64{0, 1, 2})
	})
	// An empty active segment is never rolled, however long it waits: no file appears past
	// offset 2 until a record does (watched over three segment.ms periods).
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		if segs := segmentFiles(t, b.Dir, "roll", 0); !slices.Equal(segs, []int64{0, 1, 2}) {
			t.Fatalf("an empty active segment was rolled: %v", segs)
		}
		time.Sleep(20 * time.Millisecond) // observation window for a negative check
	}
	checkTail(t, b.Addr(), "roll", 0, 2)
}
