package storage

import (
	"errors"
	"math"
	"os"
	"testing"

	"github.com/gregor-project/gregor/internal/batch"
)

func TestAppendAssignsOffsetsAndReadsBack(t *testing.T) {
	e := newEnv(t, testCfg())
	l := e.open(true, 0, 0)
	defer l.Close()

	b := simpleBatch(t, 3, e.clock.NowMs(), 10)
	info, err := l.Append(b, AppendOptions{AssignOffsets: true, LeaderEpoch: 7})
	if err != nil {
		t.Fatal(err)
	}
	if info.FirstOffset != 0 || info.LastOffset != 2 || info.Records != 3 || info.Bytes != len(b) || info.LogAppendTime != -1 {
		t.Fatalf("info %+v", info)
	}
	// Two batches in one append, with LogAppendTime.
	two := append(simpleBatch(t, 2, 5, 10), simpleBatch(t, 4, 6, 10)...)
	info, err = l.Append(two, AppendOptions{AssignOffsets: true, LogAppendTimeMs: 12345, LeaderEpoch: 8})
	if err != nil {
		t.Fatal(err)
	}
	if info.FirstOffset != 3 || info.LastOffset != 8 || info.LogAppendTime != 12345 || info.MaxTimestamp != 12345 || info.Records != 6 {
		t.Fatalf("info %+v", info)
	}
	// The caller's buffer was patched in place.
	if h, _ := batch.ParseHeader(two); h.BaseOffset != 3 || h.PartitionLeaderEpoch != 8 || h.MaxTimestamp != 12345 {
		t.Fatalf("buffer not patched: %+v", h)
	}
	if l.LogEndOffset() != 9 {
		t.Fatalf("LEO %d", l.LogEndOffset())
	}
	hs := mustRead(t, l, 0, 1<<20, math.MaxInt64, false)
	if len(hs) != 3 || hs[0].BaseOffset != 0 || hs[1].BaseOffset != 3 || hs[2].BaseOffset != 5 || hs[2].LastOffset() != 8 {
		t.Fatalf("read %+v", hs)
	}
	if hs[0].PartitionLeaderEpoch != 7 || hs[2].PartitionLeaderEpoch != 8 || hs[2].Attributes&batch.AttrLogAppendTime == 0 {
		t.Fatalf("epochs/attrs not stored: %+v", hs)
	}
	// Reading from inside a batch returns that whole batch.
	if hs := mustRead(t, l, 6, 1<<20, math.MaxInt64, false); len(hs) != 1 || hs[0].BaseOffset != 5 {
		t.Fatalf("read(6) %+v", hs)
	}
	// Records decode.
	s, _ := l.Read(5, 1<<20, math.MaxInt64, false)
	buf := make([]byte, s.Size)
	if _, err := s.File.ReadAt(buf, s.Pos); err != nil {
		t.Fatal(err)
	}
	s.Release()
	recs, err := batch.Records(buf)
	if err != nil || len(recs) != 4 || string(recs[3].Key) != "k3" {
		t.Fatalf("records %v %v", recs, err)
	}
}

func TestFollowerAppendChecksOffsets(t *testing.T) {
	e := newEnv(t, testCfg())
	l := e.open(true, 0, 0)
	defer l.Close()
	b := simpleBatch(t, 2, 1, 10)
	batch.SetBaseOffset(b, 10) // a follower may start past the LEO
	if _, err := l.Append(b, AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if l.LogEndOffset() != 12 {
		t.Fatalf("LEO %d", l.LogEndOffset())
	}
	b = simpleBatch(t, 2, 1, 10)
	batch.SetBaseOffset(b, 11)
	if _, err := l.Append(b, AppendOptions{}); !errors.Is(err, ErrOffsetOutOfOrder) {
		t.Fatalf("overlapping follower append: %v", err)
	}
	// Non-monotonic within one append.
	b1, b2 := simpleBatch(t, 2, 1, 10), simpleBatch(t, 2, 1, 10)
	batch.SetBaseOffset(b1, 20)
	batch.SetBaseOffset(b2, 21)
	if _, err := l.Append(append(b1, b2...), AppendOptions{}); !errors.Is(err, ErrOffsetOutOfOrder) {
		t.Fatalf("out of order batches: %v", err)
	}
	if l.LogEndOffset() != 12 {
		t.Fatalf("LEO moved: %d", l.LogEndOffset())
	}
	// Garbage and truncated input.
	if _, err := l.Append([]byte("nonsense bytes that are not a batch at all, long enough for a header......."), AppendOptions{AssignOffsets: true}); !errors.Is(err, ErrInvalidBatch) {
		t.Fatalf("garbage: %v", err)
	}
	if _, err := l.Append(simpleBatch(t, 1, 1, 10)[:70], AppendOptions{AssignOffsets: true}); !errors.Is(err, ErrInvalidBatch) {
		t.Fatalf("short: %v", err)
	}
	if _, err := l.Append(simpleBatch(t, 1, 1, 5000), AppendOptions{AssignOffsets: true}); !errors.Is(err, ErrRecordBatchTooLarge) {
		t.Fatalf("too large: %v", err)
	}
}

func TestRollBySizeAndReadAcrossSegments(t *testing.T) {
	e := newEnv(t, testCfg())
	l := e.open(true, 0, 0)
	var sizes []int
	for i := range 100 {
		b := simpleBatch(t, 1+i%3, e.clock.NowMs(), 100)
		sizes = append(sizes, len(b))
		mustAppend(t, l, b)
	}
	if l.NumSegments() < 3 {
		t.Fatalf("expected rolls, have %d segments", l.NumSegments())
	}
	leo := l.LogEndOffset()
	check := func(l *Log) {
		t.Helper()
		var total int64
		for off := int64(0); off < leo; off++ {
			hs := mustRead(t, l, off, 1<<20, math.MaxInt64, false)
			if len(hs) == 0 || hs[0].BaseOffset > off || hs[0].LastOffset() < off {
				t.Fatalf("read(%d) returned %+v", off, hs)
			}
		}
		// Walk the whole log batch by batch: every segment's batches, no gaps.
		next := int64(0)
		for next < leo {
			hs := mustRead(t, l, next, 1<<20, math.MaxInt64, false)
			for _, h := range hs {
				if h.BaseOffset != next {
					t.Fatalf("gap: want %d got %d", next, h.BaseOffset)
				}
				next = h.LastOffset() + 1
				total += int64(h.Size())
			}
		}
		if total != l.Size() {
			t.Fatalf("size %d, read %d", l.Size(), total)
		}
		for i := range l.mu.segments[:len(l.mu.segments)-1] {
			if l.mu.segments[i].size > e.cfg.SegmentBytes {
				t.Fatalf("segment %d has %d bytes", i, l.mu.segments[i].size)
			}
		}
	}
	check(l)
	// Segment files are named by base offset.
	for _, s := range l.mu.segments {
		for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
			if _, err := os.Stat(segPath(e.dir, s.baseOffset, suf)); err != nil {
				t.Fatal(err)
			}
		}
	}
	n := l.NumSegments()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = e.open(true, 0, 0)
	defer l.Close()
	if l.LogEndOffset() != leo || l.NumSegments() != n {
		t.Fatalf("reopen: LEO %d segments %d", l.LogEndOffset(), l.NumSegments())
	}
	check(l)
	mustAppend(t, l, simpleBatch(t, 1, 1, 10))
	if l.LogEndOffset() != leo+1 {
		t.Fatal("append after reopen")
	}
}

func TestRollByTime(t *testing.T) {
	cfg := testCfg()
	cfg.SegmentMs = 1000
	e := newEnv(t, cfg)
	l := e.open(true, 0, 0)
	defer l.Close()
	mustAppend(t, l, simpleBatch(t, 1, e.clock.NowMs(), 10))
	e.clock.Advance(500)
	mustAppend(t, l, simpleBatch(t, 1, e.clock.NowMs(), 10))
	if l.NumSegments() != 1 {
		t.Fatal("rolled too early")
	}
	e.clock.Advance(600) // 1100ms after the first batch's timestamp
	mustAppend(t, l, simpleBatch(t, 1, e.clock.NowMs(), 10))
	if l.NumSegments() != 2 || l.activeLocked().baseOffset != 2 {
		t.Fatalf("expected a roll at offset 2: %d segments", l.NumSegments())
	}
	// Idle: MaybeRoll rolls once segment.ms passed, and not before; never an empty segment.
	if err := l.MaybeRoll(e.clock.Advance(999)); err != nil || l.NumSegments() != 2 {
		t.Fatalf("early idle roll: %v %d", err, l.NumSegments())
	}
	if err := l.MaybeRoll(e.clock.Advance(2)); err != nil || l.NumSegments() != 3 {
		t.Fatalf("idle roll: %v %d", err, l.NumSegments())
	}
	if err := l.MaybeRoll(e.clock.Advance(5000)); err != nil || l.NumSegments() != 3 {
		t.Fatalf("rolled an empty segment: %v %d", err, l.NumSegments())
	}
	if hs := mustRead(t, l, 2, 1000, math.MaxInt64, false); len(hs) != 1 || hs[0].BaseOffset != 2 {
		t.Fatalf("%+v", hs)
	}
}

func TestReadLimits(t *testing.T) {
	e := newEnv(t, testCfg())
	l := e.open(true, 0, 0)
	defer l.Close()
	var sizes []int32
	for range 10 { // 10 batches of 2 records: offsets 0..19, within one segment
		b := simpleBatch(t, 2, 1, 100)
		sizes = append(sizes, int32(len(b)))
		mustAppend(t, l, b)
	}
	sz := sizes[0]
	if l.NumSegments() != 1 {
		t.Fatal("want one segment")
	}
	inf := int64(math.MaxInt64)
	cases := []struct {
		name      string
		off       int64
		maxBytes  int32
		maxOffset int64
		minOne    bool
		want      []int64 // base offsets
	}{
		{"all", 0, 1 << 20, inf, false, []int64{0, 2, 4, 6, 8, 10, 12, 14, 16, 18}},
		{"bytes cut at batch boundary", 0, 3*sz + sz/2, inf, false, []int64{0, 2, 4}},
		{"bytes exact", 0, 3 * sz, inf, false, []int64{0, 2, 4}},
		{"first batch larger, no minOne", 4, sz - 1, inf, false, nil},
		{"first batch larger, minOne", 4, sz - 1, inf, true, []int64{4}},
		{"zero bytes minOne", 4, 0, inf, true, []int64{4}},
		{"maxOffset exclusive", 0, 1 << 20, 6, false, []int64{0, 2, 4}},
		{"maxOffset inside batch", 0, 1 << 20, 7, false, []int64{0, 2, 4}},
		{"maxOffset at first batch", 6, 1 << 20, 7, true, nil},
		{"offset inside batch", 5, 2 * sz, inf, false, []int64{4, 6}},
		{"offset at maxOffset", 10, 1 << 20, 10, false, nil},
		{"at LEO", 20, 1 << 20, inf, true, nil},
	}
	for _, c := range cases {
		hs := mustRead(t, l, c.off, c.maxBytes, c.maxOffset, c.minOne)
		var got []int64
		for _, h := range hs {
			got = append(got, h.BaseOffset)
		}
		if len(got) != len(c.want) {
			t.Fatalf("%s: got %v want %v", c.name, got, c.want)
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Fatalf("%s: got %v want %v", c.name, got, c.want)
			}
		}
	}
	if _, err := l.Read(21, 100, inf, true); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("past LEO: %v", err)
	}
	if err := l.SetLogStartOffset(4); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Read(3, 100, inf, true); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("below LSO: %v", err)
	}
	if hs := mustRead(t, l, 4, 100, inf, true); len(hs) != 1 || hs[0].BaseOffset != 4 {
		t.Fatalf("at LSO: %+v", hs)
	}
}

// TestReadUsesIndexForLimits exercises the index jumps of Read on a segment with many index
// entries: every (offset, maxBytes, maxOffset) answer must equal a plain header walk.
func TestReadUsesIndexForLimits(t *testing.T) {
	cfg := testCfg()
	cfg.SegmentBytes = 1 << 20
	cfg.IndexIntervalBytes = 300
	e := newEnv(t, cfg)
	l := e.open(true, 0, 0)
	defer l.Close()
	type bi struct{ base, last, size int64 }
	var all []bi
	for i := range 60 {
		b := simpleBatch(t, 1+i%4, 1, 50+(i*37)%200)
		info := mustAppend(t, l, b)
		all = append(all, bi{info.FirstOffset, info.LastOffset, int64(len(b))})
	}
	if l.activeLocked().index.entries() < 10 {
		t.Fatalf("only %d index entries", l.activeLocked().index.entries())
	}
	leo := l.LogEndOffset()
	for off := int64(0); off < leo; off += 3 {
		for _, maxBytes := range []int32{0, 100, 500, 1000, 3000, 100000} {
			for _, maxOff := range []int64{off, off + 1, off + 5, off + 40, leo} {
				// Expected by walking.
				var want []int64
				var total int64
				for _, b := range all {
					if b.last < off {
						continue
					}
					if b.last >= maxOff {
						break
					}
					if total+b.size > int64(maxBytes) && !(len(want) == 0) {
						break
					}
					if total+b.size > int64(maxBytes) && len(want) == 0 {
						want = append(want, b.base) // minOne
						break
					}
					want = append(want, b.base)
					total += b.size
				}
				hs := mustRead(t, l, off, maxBytes, maxOff, true)
				if len(hs) != len(want) {
					t.Fatalf("off %d maxBytes %d maxOff %d: got %d batches want %v", off, maxBytes, maxOff, len(hs), want)
				}
				for i := range hs {
					if hs[i].BaseOffset != want[i] {
						t.Fatalf("off %d maxBytes %d maxOff %d: batch %d is %d want %d", off, maxBytes, maxOff, i, hs[i].BaseOffset, want[i])
					}
				}
			}
		}
	}
}

func TestEmptyLog(t *testing.T) {
	e := newEnv(t, testCfg())
	l := e.open(false, 0, 0)
	defer l.Close()
	if l.LogEndOffset() != 0 || l.LogStartOffset() != 0 || l.NumSegments() != 1 || l.Size() != 0 {
		t.Fatal("empty log state")
	}
	if s, err := l.Read(0, 100, math.MaxInt64, true); err != nil || s.Size != 0 {
		t.Fatalf("%v %v", s, err)
	}
	if ts, off := l.MaxTimestamp(); ts != -1 || off != -1 {
		t.Fatalf("max ts %d %d", ts, off)
	}
	if _, _, ok, err := l.OffsetForTimestamp(0); ok || err != nil {
		t.Fatal("found a timestamp in an empty log")
	}
	if info, err := l.Append(nil, AppendOptions{AssignOffsets: true}); err != nil || info.FirstOffset != -1 {
		t.Fatalf("%+v %v", info, err)
	}
	// A new log may start at a checkpointed log start offset.
	e2 := newEnv(t, testCfg())
	l2 := e2.open(false, 0, 42)
	defer l2.Close()
	if l2.LogEndOffset() != 42 || l2.LogStartOffset() != 42 {
		t.Fatal("start offset")
	}
	if info := mustAppend(t, l2, simpleBatch(t, 1, 1, 1)); info.FirstOffset != 42 {
		t.Fatal(info)
	}
}

// A follower batch whose last offset overflows int64 must be refused: appended, it would make
// the log end offset negative, let any later base offset pass the order check, and recovery
// would cut it and everything after it as corrupt.
func TestFollowerAppendRejectsOffsetOverflow(t *testing.T) {
	e := newEnv(t, testCfg())
	l := e.open(true, 0, 0)
	defer l.Close()
	b := simpleBatch(t, 3, 1, 10)
	batch.SetBaseOffset(b, math.MaxInt64-1)
	if _, err := l.Append(b, AppendOptions{}); !errors.Is(err, ErrOffsetOutOfOrder) {
		t.Fatalf("append of offsets past MaxInt64: %v", err)
	}
	if l.LogEndOffset() != 0 {
		t.Fatalf("LEO %d", l.LogEndOffset())
	}
}
