package storage

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gregor-project/gregor/internal/batch"
)

// kv is one record to write: a nil value is a tombstone.
type kv struct {
	key   string
	value []byte
}

func val(s string) []byte { return []byte(s) }

// kvBatch builds a batch of records at timestamp ts+i, with the producer fields of pid
// (-1: none), compressed with codec.
func kvBatch(t testing.TB, ts int64, codec batch.Codec, pid int64, recs ...kv) []byte {
	t.Helper()
	rs := make([]batch.Record, len(recs))
	for i, r := range recs {
		rs[i] = batch.Record{TimestampDelta: int64(i), OffsetDelta: int32(i), Key: []byte(r.key), Value: r.value}
	}
	h := batch.Header{PartitionLeaderEpoch: -1, LastOffsetDelta: int32(len(recs) - 1), BaseTimestamp: ts,
		MaxTimestamp: ts + int64(len(recs)-1), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	if pid >= 0 {
		h.ProducerID, h.ProducerEpoch, h.BaseSequence = pid, 3, 100
	}
	b, err := batch.Build(h, rs, codec)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// stored is a record as read back from the log.
type stored struct {
	off   int64
	key   string
	value string
	tomb  bool
	ts    int64
}

func (s stored) String() string {
	if s.tomb {
		return fmt.Sprintf("%d:%s=<nil>@%d", s.off, s.key, s.ts)
	}
	return fmt.Sprintf("%d:%s=%s@%d", s.off, s.key, s.value, s.ts)
}

// readRecords reads every record from the log start to the log end, checking CRCs and that
// offsets strictly increase, and returns them with every batch header seen.
func readRecords(t testing.TB, l *Log) ([]stored, []batch.Header) {
	t.Helper()
	var out []stored
	var hs []batch.Header
	last := int64(-1)
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		s, err := l.Read(off, 1<<20, math.MaxInt64, true)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		if s.Size == 0 {
			t.Fatalf("Read(%d) is empty below the log end offset %d", off, l.LogEndOffset())
		}
		b := make([]byte, s.Size)
		if _, err := s.File.ReadAt(b, s.Pos); err != nil {
			t.Fatal(err)
		}
		s.Release()
		for len(b) > 0 {
			h, err := batch.ParseHeader(b)
			if err != nil {
				t.Fatal(err)
			}
			one := b[:h.Size()]
			if _, err := batch.CheckCRC(one); err != nil {
				t.Fatal(err)
			}
			recs, err := batch.Records(one)
			if err != nil {
				t.Fatal(err)
			}
			hs = append(hs, h)
			for _, r := range recs {
				o := h.BaseOffset + int64(r.OffsetDelta)
				if o <= last {
					t.Fatalf("offset %d after %d", o, last)
				}
				last = o
				out = append(out, stored{off: o, key: string(r.Key), value: string(r.Value), tomb: r.Value == nil, ts: h.BaseTimestamp + r.TimestampDelta})
			}
			off = h.LastOffset() + 1
			b = b[h.Size():]
		}
	}
	return out, hs
}

// survivors is the model of a full clean below upper: the last record of each key, all
// records from upper on.
func survivors(all []stored, upper int64, dropTombs bool) []stored {
	lastOf := map[string]int64{}
	for _, r := range all {
		if r.off < upper {
			lastOf[r.key] = r.off
		}
	}
	var out []stored
	for _, r := range all {
		if r.off >= upper || (lastOf[r.key] == r.off && !(dropTombs && r.tomb)) {
			out = append(out, r)
		}
	}
	return out
}

func sameRecords(t testing.TB, what string, got, want []stored) {
	t.Helper()
	if slices.Equal(got, want) {
		return
	}
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	show := func(s []stored) []stored { return s[i:min(len(s), i+3)] }
	t.Fatalf("%s: %d records, want %d; from record %d got %v, want %v", what, len(got), len(want), i, show(got), show(want))
}

func activeBase(l *Log) int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.activeLocked().baseOffset
}

func newMap(t testing.TB, keys int) *OffsetMap {
	t.Helper()
	m, err := NewOffsetMap((keys+1)*offsetSlotSize, float64(keys)/float64(keys+1))
	if err != nil {
		t.Fatal(err)
	}
	if m.Capacity() != keys {
		t.Fatalf("map capacity %d, want %d", m.Capacity(), keys)
	}
	return m
}

// fillKeys appends n one-record batches cycling over keys, value "<key>-<i>".
func fillKeys(t testing.TB, l *Log, clock *testClock, n, keys int) {
	t.Helper()
	for i := range n {
		k := fmt.Sprintf("k%02d", i%keys)
		mustAppend(t, l, kvBatch(t, clock.NowMs(), batch.CodecNone, -1, kv{k, val(fmt.Sprintf("%s-%d-%s", k, i, strings.Repeat("x", 40)))}))
	}
}

func cleanOpts(e *logEnv, firstDirty int64) CleanOptions {
	return CleanOptions{FirstDirtyOffset: firstDirty, NowMs: e.clock.NowMs(), DeleteRetentionMs: 86_400_000}
}

func TestCleanKeepsLastValuePerKeyAndOffsets(t *testing.T) {
	e := newEnv(t, testCfg())
	l := e.open(true, 0, 0)
	fillKeys(t, l, e.clock, 300, 10)
	before, _ := readRecords(t, l)
	upper := activeBase(l)
	segsBefore, sizeBefore, leo := l.NumSegments(), l.Size(), l.LogEndOffset()
	if segsBefore < 4 {
		t.Fatalf("only %d segments", segsBefore)
	}

	res, err := l.Clean(newMap(t, 100), cleanOpts(e, 0))
	if err != nil {
		t.Fatal(err)
	}
	if res.EndOffset != upper || res.MapFull {
		t.Fatalf("cleaned to %d (full %v), want the active segment's base %d", res.EndOffset, res.MapFull, upper)
	}
	want := survivors(before, upper, false)
	got, _ := readRecords(t, l)
	sameRecords(t, "after cleaning", got, want)
	if l.LogEndOffset() != leo || l.LogStartOffset() != 0 {
		t.Fatalf("log offsets moved: %d..%d", l.LogStartOffset(), l.LogEndOffset())
	}
	// Segments are grouped by their sizes before cleaning (as Kafka does): full ones are
	// cleaned one by one.
	if n := l.NumSegments(); n != segsBefore || res.SegmentsCleaned != segsBefore-1 {
		t.Fatalf("%d segments after cleaning %d into %d, want %d", n, res.SegmentsCleaned, res.SegmentsWritten, segsBefore)
	}
	if l.Size() >= sizeBefore/2 {
		t.Fatalf("log is %d bytes after cleaning, was %d", l.Size(), sizeBefore)
	}
	// Nothing is left but the segment files.
	for _, ent := range mustReadDir(t, e.dir) {
		if strings.HasSuffix(ent, cleanedSuffix) || strings.HasSuffix(ent, swapSuffix) {
			t.Fatalf("leftover %s", ent)
		}
	}

	// The new segment's indexes load back after a clean close, and survive a full recovery.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = e.open(true, 0, 0)
	got, _ = readRecords(t, l)
	sameRecords(t, "after a clean reopen", got, want)
	if strings.Contains(e.logs.String(), "rebuilding") {
		t.Fatalf("indexes of the cleaned segment were rebuilt:\n%s", e.logs)
	}
	crash(l)
	l = e.open(false, 0, 0)
	defer l.Close()
	got, _ = readRecords(t, l)
	sameRecords(t, "after recovery", got, want)

	// A second pass with nothing new dirty keeps the records and groups the small cleaned
	// segments into one (they hold 10 small records).
	res, err = l.Clean(newMap(t, 100), cleanOpts(e, res.EndOffset))
	if err != nil {
		t.Fatal(err)
	}
	got, _ = readRecords(t, l)
	sameRecords(t, "after a second pass", got, want)
	if n := l.NumSegments(); n != 2 || res.SegmentsWritten != 1 {
		t.Fatalf("%d segments after the second pass wrote %d, want 2", n, res.SegmentsWritten)
	}
}

func mustReadDir(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestCleanReadsAcrossGaps(t *testing.T) {
	e := newEnv(t, testCfg())
	l := e.open(true, 0, 0)
	defer l.Close()
	fillKeys(t, l, e.clock, 200, 7)
	before, _ := readRecords(t, l)
	upper := activeBase(l)
	if _, err := l.Clean(newMap(t, 50), cleanOpts(e, 0)); err != nil {
		t.Fatal(err)
	}
	want := survivors(before, upper, false)
	// From every offset, a consumer (reading on past empty batches, as clients do) gets the
	// first surviving record at or after it first.
	for off := int64(0); off < l.LogEndOffset(); off++ {
		i, _ := slices.BinarySearchFunc(want, off, func(s stored, o int64) int { return int(s.off - o) })
		if got := nextRecord(t, l, off); got != want[i] {
			t.Fatalf("a read from %d gets %v first; the next survivor is %v", off, got, want[i])
		}
	}
}

// nextRecord reads from off as a consumer does and returns the first record at or after it.
func nextRecord(t testing.TB, l *Log, off int64) stored {
	t.Helper()
	for off < l.LogEndOffset() {
		s, err := l.Read(off, 1<<20, math.MaxInt64, true)
		if err != nil || s.Size == 0 {
			t.Fatalf("Read(%d): %v, %d bytes", off, err, s.Size)
		}
		b := make([]byte, s.Size)
		if _, err := s.File.ReadAt(b, s.Pos); err != nil {
			t.Fatal(err)
		}
		s.Release()
		for len(b) > 0 {
			h, err := batch.ParseHeader(b)
			if err != nil {
				t.Fatal(err)
			}
			if h.LastOffset() < off {
				t.Fatalf("Read(%d) returned batch %d..%d", off, h.BaseOffset, h.LastOffset())
			}
			recs, err := batch.Records(b[:h.Size()])
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				if o := h.BaseOffset + int64(r.OffsetDelta); o >= off {
					return stored{off: o, key: string(r.Key), value: string(r.Value), tomb: r.Value == nil, ts: h.BaseTimestamp + r.TimestampDelta}
				}
			}
			off = h.LastOffset() + 1
			b = b[h.Size():]
		}
	}
	t.Fatalf("no record from %d", off)
	return stored{}
}

func TestCleanTombstonesKeptUntilHorizon(t *testing.T) {
	e := newEnv(t, testCfg())
	l := e.open(true, 0, 0)
	defer l.Close()
	t0 := e.clock.NowMs()
	mustAppend(t, l, kvBatch(t, t0, batch.CodecNone, -1, kv{"a", val("a1")}, kv{"b", val("b1")}))
	mustAppend(t, l, kvBatch(t, t0, batch.CodecNone, -1, kv{"a", nil}, kv{"c", val("c1")})) // offsets 2, 3
	fillKeys(t, l, e.clock, 100, 5)                                                         // rolls
	before, _ := readRecords(t, l)
	upper := activeBase(l)

	const retention = 1000
	opt := cleanOpts(e, 0)
	opt.DeleteRetentionMs = retention
	res, err := l.Clean(newMap(t, 50), opt)
	if err != nil {
		t.Fatal(err)
	}
	got, hs := readRecords(t, l)
	sameRecords(t, "first pass", got, survivors(before, upper, false))
	var horizon int64 = -1
	for _, h := range hs {
		if h.BaseOffset == 2 {
			var ok bool
			if horizon, ok = h.DeleteHorizonMs(); !ok {
				t.Fatalf("the tombstone's batch has no delete horizon: attributes %#x", h.Attributes)
			}
		} else if _, ok := h.DeleteHorizonMs(); ok {
			t.Fatalf("batch %d without tombstones got a delete horizon", h.BaseOffset)
		}
	}
	if horizon != t0+retention {
		t.Fatalf("delete horizon %d, want %d", horizon, t0+retention)
	}
	// Timestamps survive the stamping (the tombstone was written at t0, "c" at t0+1).
	if got[0] != (stored{off: 1, key: "b", value: "b1", ts: t0 + 1}) || got[1] != (stored{off: 2, key: "a", tomb: true, ts: t0}) ||
		got[2] != (stored{off: 3, key: "c", value: "c1", ts: t0 + 1}) {
		t.Fatalf("first records %v", got[:3])
	}

	// Just before the horizon the tombstone stays, with the same horizon.
	e.clock.Advance(retention - 1)
	opt = cleanOpts(e, res.EndOffset)
	opt.DeleteRetentionMs = retention
	if res, err = l.Clean(newMap(t, 50), opt); err != nil {
		t.Fatal(err)
	}
	got2, hs := readRecords(t, l)
	sameRecords(t, "before the horizon", got2, got)
	if h, _ := hs[1].DeleteHorizonMs(); hs[1].BaseOffset != 2 || h != horizon {
		t.Fatalf("horizon changed to %d", h)
	}
	// At the horizon it goes; "c" of the same batch stays.
	e.clock.Advance(1)
	opt.NowMs = e.clock.NowMs()
	if res, err = l.Clean(newMap(t, 50), opt); err != nil {
		t.Fatal(err)
	}
	if res.TombstonesPurged != 1 {
		t.Fatalf("%d tombstones purged", res.TombstonesPurged)
	}
	got3, _ := readRecords(t, l)
	sameRecords(t, "after the horizon", got3, survivors(before, upper, true))
	if got3[0].key != "b" || got3[1].key != "c" {
		t.Fatalf("first records %v", got3[:2])
	}
}

func TestCleanMultiPassWithTinyMap(t *testing.T) {
	e := newEnv(t, testCfg())
	l := e.open(true, 0, 0)
	defer l.Close()
	const keys = 30
	fillKeys(t, l, e.clock, 3*keys, keys)
	fillKeys(t, l, e.clock, 60, 3) // rolls, and leaves the 30 keys below the active segment
	before, _ := readRecords(t, l)
	upper := activeBase(l)
	want := survivors(before, upper, false)
	lastOf := map[string]stored{}
	for _, r := range want {
		lastOf[r.key] = r
	}

	m := newMap(t, 4)
	passes, firstDirty := 0, int64(0)
	for firstDirty < upper {
		res, err := l.Clean(m, cleanOpts(e, firstDirty))
		if err != nil {
			t.Fatal(err)
		}
		passes++
		if res.EndOffset <= firstDirty {
			t.Fatalf("pass %d made no progress from %d", passes, firstDirty)
		}
		if res.EndOffset < upper && !res.MapFull {
			t.Fatalf("pass %d stopped at %d without a full map", passes, res.EndOffset)
		}
		firstDirty = res.EndOffset
		// Between passes every key's last value is still there, and nothing reappears.
		got, _ := readRecords(t, l)
		seen := map[int64]bool{}
		for _, r := range got {
			seen[r.off] = true
		}
		for _, r := range lastOf {
			if !seen[r.off] {
				t.Fatalf("after pass %d the last value of %s (offset %d) is gone", passes, r.key, r.off)
			}
		}
		if passes > 100 {
			t.Fatal("no end of passes")
		}
	}
	if passes < 5 {
		t.Fatalf("%d passes for %d keys in a map of 4", passes, keys)
	}
	got, _ := readRecords(t, l)
	sameRecords(t, "after all passes", got, want)
}

func TestCleanCompressedAndProducerBatches(t *testing.T) {
	e := newEnv(t, testCfg())
	l := e.open(true, 0, 0)
	defer l.Close()
	codecs := []batch.Codec{batch.CodecGzip, batch.CodecSnappy, batch.CodecLZ4, batch.CodecZstd, batch.CodecNone}
	codecAt := map[int64]batch.Codec{}
	for i := range 40 {
		c := codecs[i%len(codecs)]
		info := mustAppend(t, l, kvBatch(t, e.clock.NowMs(), c, 7, kv{fmt.Sprintf("k%d", i%3), val(fmt.Sprintf("v%d", i))},
			kv{fmt.Sprintf("u%d", i), val(strings.Repeat("y", 30))}, kv{fmt.Sprintf("k%d", (i+1)%3), val(fmt.Sprintf("w%d", i))}))
		codecAt[info.FirstOffset] = c
	}
	fillKeys(t, l, e.clock, 40, 2)
	before, hsBefore := readRecords(t, l)
	upper := activeBase(l)
	if _, err := l.Clean(newMap(t, 200), cleanOpts(e, 0)); err != nil {
		t.Fatal(err)
	}
	got, hs := readRecords(t, l)
	sameRecords(t, "after cleaning", got, survivors(before, upper, false))
	orig := map[int64]batch.Header{}
	for _, h := range hsBefore {
		orig[h.BaseOffset] = h
	}
	thinned := 0
	for _, h := range hs {
		o, ok := orig[h.BaseOffset]
		if !ok {
			t.Fatalf("batch at %d did not exist", h.BaseOffset)
		}
		if h.Codec() != o.Codec() || h.LastOffsetDelta != o.LastOffsetDelta || h.ProducerID != o.ProducerID ||
			h.ProducerEpoch != o.ProducerEpoch || h.BaseSequence != o.BaseSequence || h.PartitionLeaderEpoch != o.PartitionLeaderEpoch {
			t.Fatalf("batch %d changed: %+v, was %+v", h.BaseOffset, h, o)
		}
		if c, ok := codecAt[h.BaseOffset]; ok && h.Codec() != c {
			t.Fatalf("batch %d codec %d, written with %d", h.BaseOffset, h.Codec(), c)
		}
		if h.RecordCount < o.RecordCount {
			thinned++
		}
	}
	if thinned == 0 {
		t.Fatal("no batch was rewritten")
	}
}

func TestCleanKeepsLastBatchOfActiveProducer(t *testing.T) {
	e := newEnv(t, testCfg())
	l := e.open(true, 0, 0)
	defer l.Close()
	mustAppend(t, l, kvBatch(t, e.clock.NowMs(), batch.CodecNone, 9, kv{"p", val("1")})) // offset 0
	mustAppend(t, l, kvBatch(t, e.clock.NowMs(), batch.CodecNone, 9, kv{"q", val("1")})) // offset 1: producer 9's last
	mustAppend(t, l, kvBatch(t, e.clock.NowMs(), batch.CodecNone, 8, kv{"q", val("2")})) // offset 2: overwrites it
	mustAppend(t, l, kvBatch(t, e.clock.NowMs(), batch.CodecNone, 8, kv{"p", val("2")})) // offset 3
	fillKeys(t, l, e.clock, 100, 4)
	opt := cleanOpts(e, 0)
	opt.ActiveProducers = map[int64]int64{9: 1}
	if _, err := l.Clean(newMap(t, 50), opt); err != nil {
		t.Fatal(err)
	}
	_, hs := readRecords(t, l)
	if hs[0].BaseOffset != 1 || hs[0].RecordCount != 0 || hs[0].ProducerID != 9 || hs[0].BaseSequence != 100 || hs[0].ProducerEpoch != 3 {
		t.Fatalf("first batch %+v, want producer 9's last batch kept empty", hs[0])
	}
	if hs[1].BaseOffset != 2 {
		t.Fatalf("second batch at %d", hs[1].BaseOffset)
	}
}

// TestCleanCrashDuringSwap fails the swap at each step, crashes, and reopens: the log then
// holds either every old record or exactly the cleaned ones, and no swap file is left.
func TestCleanCrashDuringSwap(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fault   func(l *Log) Fault
		offline bool // the failure came after the commit point
	}{
		{"index rename", func(*Log) Fault { return Fault{Op: FaultRename, Pattern: "*.index.cleaned"} }, false},
		{"timeindex rename", func(*Log) Fault { return Fault{Op: FaultRename, Pattern: "*.timeindex.cleaned"} }, false},
		{"commit rename", func(*Log) Fault { return Fault{Op: FaultRename, Pattern: "*.log.cleaned"} }, false},
		{"cleaned log fsync", func(*Log) Fault { return Fault{Op: FaultSync, Pattern: "*.log.cleaned"} }, false},
		{"dir fsync at the commit", func(*Log) Fault { return Fault{Op: FaultSyncDir} }, true},
		{"first old segment renamed", func(*Log) Fault { return Fault{Op: FaultRename, Pattern: "*.log"} }, true},
		{"third old segment renamed", func(l *Log) Fault {
			return Fault{Op: FaultRename, Pattern: segmentName(l.mu.segments[2].baseOffset) + logSuffix}
		}, true},
		{"final index rename", func(*Log) Fault { return Fault{Op: FaultRename, Pattern: "*.index.swap"} }, true},
		{"final log rename", func(*Log) Fault { return Fault{Op: FaultRename, Pattern: "*.log.swap"} }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, ffs := faultEnv(t)
			l := e.open(true, 0, 0)
			fillKeys(t, l, e.clock, 300, 10)
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			before, _ := readRecords(t, l)
			upper := activeBase(l)
			after := survivors(before, upper, false)
			// One group, so that one swap replaces every sealed segment.
			cfg := l.Config()
			cfg.SegmentBytes = 1 << 20
			l.Reconfigure(cfg)

			ffs.Inject(tc.fault(l))
			_, err := l.Clean(newMap(t, 100), cleanOpts(e, 0))
			if !errors.Is(err, ErrInjected) {
				t.Fatalf("clean: %v", err)
			}
			if l.Offline() != tc.offline {
				t.Fatalf("offline %v after %v", l.Offline(), err)
			}
			if !tc.offline {
				got, _ := readRecords(t, l)
				sameRecords(t, "online after the failure", got, before)
				for _, n := range mustReadDir(t, e.dir) {
					if strings.HasSuffix(n, cleanedSuffix) || strings.HasSuffix(n, swapSuffix) {
						t.Fatalf("leftover %s", n)
					}
				}
			}
			ffs.Clear()
			crash(l)
			l = e.open(false, 0, 0)
			defer l.Close()
			got, _ := readRecords(t, l)
			want := before
			if tc.offline {
				want = after
			}
			sameRecords(t, "after the crash", got, want)
			for _, n := range mustReadDir(t, e.dir) {
				if strings.HasSuffix(n, cleanedSuffix) || strings.HasSuffix(n, swapSuffix) || strings.HasSuffix(n, deletedSuffix) {
					t.Fatalf("leftover %s after reopening", n)
				}
			}
			// And cleaning works again.
			if _, err := l.Clean(newMap(t, 100), cleanOpts(e, 0)); err != nil {
				t.Fatal(err)
			}
			got, _ = readRecords(t, l)
			sameRecords(t, "cleaned after the crash", got, after)
		})
	}
}

// TestRecoveryDiscardsUncommittedSwap leaves the files of a swap that never reached its
// commit point (what a kill at that moment leaves) and checks Open removes them.
func TestRecoveryDiscardsUncommittedSwap(t *testing.T) {
	e := newEnv(t, testCfg())
	l := e.open(true, 0, 0)
	fillKeys(t, l, e.clock, 200, 10)
	before, _ := readRecords(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"00000000000000000000.index.swap", "00000000000000000000.timeindex.swap", "00000000000000000000.log.cleaned"} {
		if err := os.WriteFile(filepath.Join(e.dir, n), bytes.Repeat([]byte{1}, 100), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l = e.open(false, 0, 0)
	defer l.Close()
	got, _ := readRecords(t, l)
	sameRecords(t, "after reopening", got, before)
	for _, n := range mustReadDir(t, e.dir) {
		if strings.HasSuffix(n, cleanedSuffix) || strings.HasSuffix(n, swapSuffix) {
			t.Fatalf("leftover %s", n)
		}
	}
}

func TestCleanerOffsetCheckpoint(t *testing.T) {
	dir := t.TempDir()
	want := map[TopicPartition]int64{{"__consumer_offsets", 3}: 1234, {"compacted", 0}: 0}
	if err := WriteCheckpoint(OS, dir, CleanerOffsetCheckpointFile, want); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, CleanerOffsetCheckpointFile))
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != "0\n2\n__consumer_offsets 3 1234\ncompacted 0 0\n" {
		t.Fatalf("file %q", b)
	}
	got, err := ReadCheckpoint(OS, filepath.Join(dir, CleanerOffsetCheckpointFile))
	if err != nil || len(got) != 2 || got[TopicPartition{"__consumer_offsets", 3}] != 1234 {
		t.Fatalf("read back %v, %v", got, err)
	}
}

func TestOffsetMapBounded(t *testing.T) {
	m, err := NewOffsetMap(24*1000, 0.9)
	if err != nil {
		t.Fatal(err)
	}
	if m.Capacity() != 900 {
		t.Fatalf("capacity %d", m.Capacity())
	}
	for i := range 900 {
		if !m.put([]byte(fmt.Sprint("key", i)), int64(i)) {
			t.Fatalf("put %d refused", i)
		}
	}
	if m.put([]byte("one more"), 1000) {
		t.Fatal("a full map took a new key")
	}
	if !m.put([]byte("key5"), 1001) || m.get([]byte("key5")) != 1001 || m.get([]byte("key6")) != 6 || m.get([]byte("absent")) != -1 {
		t.Fatal("lookups")
	}
	if m.LatestOffset() != 1001 {
		t.Fatalf("latest %d", m.LatestOffset())
	}
	m.clear()
	if m.Len() != 0 || m.get([]byte("key5")) != -1 || m.LatestOffset() != -1 {
		t.Fatal("clear")
	}
	if _, err := NewOffsetMap(24, 0.9); err == nil {
		t.Fatal("a map with no room for a key")
	}
}

// TestCleanAbortsWhenSegmentsChange takes the window, lets retention delete the first
// segment while the pass runs, and checks the swap is given up with nothing changed.
func TestCleanAbortsWhenSegmentsChange(t *testing.T) {
	e := newEnv(t, testCfg())
	l := e.open(true, 0, 0)
	defer l.Close()
	fillKeys(t, l, e.clock, 300, 10)
	c := &cleaning{l: l, m: newMap(t, 100), opt: cleanOpts(e, 0)}
	c.opt.IOBufferSize = 4096
	c.rd.ioSize = c.opt.IOBufferSize
	firstDirty, upper, err := c.window()
	defer func() {
		for _, cs := range c.segs {
			cs.s.decRef()
		}
	}()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.buildOffsetMap(firstDirty, upper, newTxnTracker(nil)); err != nil {
		t.Fatal(err)
	}
	c.txn = newTxnTracker(nil)
	if err := l.SetLogStartOffset(c.segs[1].base); err != nil {
		t.Fatal(err)
	}
	before, _ := readRecords(t, l)
	err = c.cleanGroup(c.segs[:1])
	if !errors.Is(err, ErrCleaningAborted) {
		t.Fatalf("swap over a deleted segment: %v", err)
	}
	got, _ := readRecords(t, l)
	sameRecords(t, "after the aborted swap", got, before)
	for _, n := range mustReadDir(t, e.dir) {
		if strings.HasSuffix(n, cleanedSuffix) || strings.HasSuffix(n, swapSuffix) {
			t.Fatalf("leftover %s", n)
		}
	}
	if l.Offline() {
		t.Fatal("offline after an aborted swap")
	}
}

// TestCleanRandomized writes random keys, values and tombstones across random segment
// rolls, cleans in passes with random map sizes and clock steps, and checks after each pass
// against the records written: offsets and contents unchanged, nothing reappears, every
// key's last record survives (a tombstone until its horizon), everything from the first
// uncleanable offset on is untouched; and once all is cleaned before any horizon, exactly
// the last record of each key is left.
func TestCleanRandomized(t *testing.T) {
	for seed := 1; seed <= 4; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(seed), 11))
			cfg := testCfg()
			cfg.SegmentBytes = int64(1024 + rng.IntN(4096))
			e := newEnv(t, cfg)
			l := e.open(true, 0, 0)
			defer l.Close()
			const retention = horizonSlack
			keys := 5 + rng.IntN(40)
			codecs := []batch.Codec{batch.CodecNone, batch.CodecNone, batch.CodecZstd, batch.CodecLZ4}
			firstDirty := int64(0)
			horizonPassed := false
			for round := 0; round < 3; round++ {
				for range 40 + rng.IntN(80) {
					n := 1 + rng.IntN(4)
					recs := make([]kv, n)
					for i := range recs {
						recs[i].key = fmt.Sprintf("k%d", rng.IntN(keys))
						if rng.IntN(8) > 0 {
							recs[i].value = val(fmt.Sprintf("v%d-%s", rng.IntN(1000), strings.Repeat("z", rng.IntN(60))))
						}
					}
					mustAppend(t, l, kvBatch(t, e.clock.NowMs(), codecs[rng.IntN(len(codecs))], -1, recs...))
				}
				before, _ := readRecords(t, l)
				upper := activeBase(l)
				for pass := 0; pass < 2; pass++ {
					m := newMap(t, 1+rng.IntN(keys+5))
					if rng.IntN(4) == 0 {
						e.clock.Advance(rng.Int64N(2 * retention))
					}
					opt := cleanOpts(e, firstDirty)
					opt.DeleteRetentionMs = retention
					res, err := l.Clean(m, opt)
					if err != nil {
						t.Fatal(err)
					}
					firstDirty = res.EndOffset
					horizonPassed = horizonPassed || res.TombstonesPurged > 0
					got, hs := readRecords(t, l)
					checkCleaned(t, before, got, hs, upper, opt.NowMs)
				}
				// Clean the rest without moving the clock; then, if no horizon has
				// passed yet, the model is exact.
				for firstDirty < upper {
					res, err := l.Clean(newMap(t, 2+keys/2), CleanOptions{FirstDirtyOffset: firstDirty, NowMs: e.clock.NowMs(), DeleteRetentionMs: retention})
					if err != nil {
						t.Fatal(err)
					}
					firstDirty = res.EndOffset
					horizonPassed = horizonPassed || res.TombstonesPurged > 0
				}
				got, hs := readRecords(t, l)
				checkCleaned(t, before, got, hs, upper, e.clock.NowMs())
				if !horizonPassed {
					sameRecords(t, "fully cleaned", got, survivors(before, upper, false))
				}
			}
		})
	}
}

// checkCleaned checks a cleaned log (got, with its batch headers) against what it held
// before the pass.
func checkCleaned(t *testing.T, before, got []stored, hs []batch.Header, upper, nowMs int64) {
	t.Helper()
	byOff := map[int64]stored{}
	for _, r := range before {
		byOff[r.off] = r
	}
	have := map[int64]bool{}
	for _, r := range got {
		if byOff[r.off] != r {
			t.Fatalf("record %v was not in the log before (%v)", r, byOff[r.off])
		}
		have[r.off] = true
	}
	horizonOf := map[int64]int64{} // offset -> its batch's horizon
	for _, h := range hs {
		if hz, ok := h.DeleteHorizonMs(); ok {
			for o := h.BaseOffset; o <= h.LastOffset(); o++ {
				horizonOf[o] = hz
			}
		}
	}
	last := map[string]stored{}
	for _, r := range before {
		if r.off >= upper && !have[r.off] {
			t.Fatalf("record %v at or past the first uncleanable offset %d is gone", r, upper)
		}
		if r.off < upper {
			last[r.key] = r
		}
	}
	for _, r := range last {
		if !have[r.off] && !r.tomb {
			t.Fatalf("the last value of %s (%v) is gone", r.key, r)
		}
	}
	// A purged tombstone took every older record of its key with it.
	for _, r := range got {
		if l := last[r.key]; r.off < upper && l.tomb && !have[l.off] {
			t.Fatalf("%v survives its key's purged tombstone at %d", r, l.off)
		}
	}
	// A tombstone a pass has kept carries its horizon, which has not passed unless no pass
	// ran since.
	for _, r := range got {
		if hz, ok := horizonOf[r.off]; r.tomb && ok && hz > nowMs+horizonSlack {
			t.Fatalf("tombstone %v has horizon %d, past now %d + retention", r, hz, nowMs)
		}
	}
}

// horizonSlack is the delete.retention.ms of TestCleanRandomized.
const horizonSlack = 10_000

// TestCleanSegmentLargerThanIOBuffer cleans segments several times larger than the write
// buffer (as every segment of a log with the default segment.bytes is), with batches both
// smaller and larger than the buffer: each flush of the buffer lands where its batches
// belong, so every record reads back after the pass.
func TestCleanSegmentLargerThanIOBuffer(t *testing.T) {
	e := newEnv(t, testCfg())
	l := e.open(true, 0, 0)
	defer l.Close()
	fillKeys(t, l, e.clock, 120, 100) // one-record batches, mostly distinct keys
	big := kvBatch(t, e.clock.NowMs(), batch.CodecNone, -1, kv{"big", val(strings.Repeat("b", 1500))})
	mustAppend(t, l, big)
	fillKeys(t, l, e.clock, 60, 3)
	before, _ := readRecords(t, l)
	upper := activeBase(l)
	opt := cleanOpts(e, 0)
	opt.IOBufferSize = 1024 // a batch of ~70 bytes fills it in 15, the big one overflows it
	if _, err := l.Clean(newMap(t, 200), opt); err != nil {
		t.Fatal(err)
	}
	got, _ := readRecords(t, l)
	sameRecords(t, "after cleaning with a small write buffer", got, survivors(before, upper, false))
}

// TestCleanLaterGroupFails fails the second group of a pass at each of its steps (its file
// created, fsynced, swapped in) while the first group's swap may still be running: the pass
// returns the error, the first group stays swapped in, the later ones stay as they were, no
// .cleaned or .swap file is left, and the next pass cleans the rest.
func TestCleanLaterGroupFails(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   FaultOp
	}{
		{"created", FaultOpen},
		{"fsynced", FaultSync},
		{"swapped in", FaultRename},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, ffs := faultEnv(t)
			l := e.open(true, 0, 0)
			defer l.Close()
			fillKeys(t, l, e.clock, 600, 10)
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			before, _ := readRecords(t, l)
			after := survivors(before, activeBase(l), false)
			l.mu.RLock()
			if len(l.mu.segments) < 4 {
				l.mu.RUnlock()
				t.Fatalf("%d segments: want at least 3 sealed ones, one group each", len(l.mu.segments))
			}
			second := l.mu.segments[1].baseOffset
			l.mu.RUnlock()
			var want []stored
			for _, r := range after {
				if r.off < second {
					want = append(want, r)
				}
			}
			for _, r := range before {
				if r.off >= second {
					want = append(want, r)
				}
			}

			ffs.Inject(Fault{Op: tc.op, Pattern: segmentName(second) + logSuffix + cleanedSuffix})
			res, err := l.Clean(newMap(t, 100), cleanOpts(e, 0))
			if !errors.Is(err, ErrInjected) {
				t.Fatalf("clean: %v", err)
			}
			if l.Offline() {
				t.Fatalf("offline after %v", err)
			}
			if res.SegmentsCleaned != 1 || res.SegmentsWritten != 1 {
				t.Fatalf("%d segments cleaned into %d: want the first group only", res.SegmentsCleaned, res.SegmentsWritten)
			}
			got, _ := readRecords(t, l)
			sameRecords(t, "after the failed pass", got, want)
			for _, n := range mustReadDir(t, e.dir) {
				if strings.HasSuffix(n, cleanedSuffix) || strings.HasSuffix(n, swapSuffix) {
					t.Fatalf("leftover %s", n)
				}
			}
			ffs.Clear()
			if _, err := l.Clean(newMap(t, 100), cleanOpts(e, 0)); err != nil {
				t.Fatal(err)
			}
			got, _ = readRecords(t, l)
			sameRecords(t, "after the next pass", got, after)
		})
	}
}
