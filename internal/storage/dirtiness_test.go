package storage

import (
	"math"
	"testing"
)

// segBases returns the base offsets and sizes of the log's segments.
func segBases(l *Log) (bases, sizes []int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, s := range l.mu.segments {
		bases, sizes = append(bases, s.baseOffset), append(sizes, s.size)
	}
	return bases, sizes
}

func sum(xs []int64) int64 {
	var n int64
	for _, x := range xs {
		n += x
	}
	return n
}

func TestCleanableState(t *testing.T) {
	e := newEnv(t, testCfg())
	l := e.open(true, 0, 0)
	defer l.Close()
	t0 := e.clock.NowMs()
	fillKeys(t, l, e.clock, 100, 10) // at t0
	old, _ := segBases(l)
	e.clock.Advance(10_000)
	fillKeys(t, l, e.clock, 100, 10) // at t0+10s
	bases, sizes := segBases(l)
	n := len(bases)
	if len(old) < 3 || n < len(old)+2 {
		t.Fatalf("segments %v then %v", old, bases)
	}
	cc := CompactionConfig{MinCleanableRatio: 0.5, MaxCompactionLagMs: math.MaxInt64}
	now := e.clock.NowMs()

	// No checkpoint: everything sealed is dirty.
	lc, err := l.CleanableState(cc, -1, -1, now)
	if err != nil {
		t.Fatal(err)
	}
	if lc.FirstDirtyOffset != 0 || !lc.ForceUpdateCheckpoint || lc.FirstUncleanableOffset != bases[n-1] ||
		lc.CleanBytes != 0 || lc.CleanableBytes != sum(sizes[:n-1]) || lc.CleanableRatio() != 1 || !lc.Cleanable() || lc.NeedsCompactionNow() {
		t.Fatalf("no checkpoint: %+v", lc)
	}
	// A checkpoint at a segment boundary splits clean from dirty bytes.
	lc, _ = l.CleanableState(cc, bases[2], -1, now)
	if lc.FirstDirtyOffset != bases[2] || lc.ForceUpdateCheckpoint || lc.CleanBytes != sum(sizes[:2]) || lc.CleanableBytes != sum(sizes[2:n-1]) {
		t.Fatalf("checkpoint at %d: %+v", bases[2], lc)
	}
	want := float64(sum(sizes[2:n-1])) / float64(sum(sizes[:n-1]))
	if lc.CleanableRatio() != want {
		t.Fatalf("ratio %v, want %v", lc.CleanableRatio(), want)
	}
	// Mostly clean: below min.cleanable.dirty.ratio.
	lc, _ = l.CleanableState(cc, bases[n-2], -1, now)
	if lc.CleanableRatio() >= 0.5 || lc.Cleanable() {
		t.Fatalf("checkpoint at %d: ratio %v, cleanable %v", bases[n-2], lc.CleanableRatio(), lc.Cleanable())
	}
	// A checkpoint past the log end is reset.
	lc, _ = l.CleanableState(cc, l.LogEndOffset()+5, -1, now)
	if lc.FirstDirtyOffset != 0 || !lc.ForceUpdateCheckpoint {
		t.Fatalf("checkpoint past the end: %+v", lc)
	}
	// The last stable offset in the middle of a segment stops cleaning at its start.
	lc, _ = l.CleanableState(cc, -1, bases[3]+1, now)
	if lc.FirstUncleanableOffset != bases[3] || lc.CleanableBytes != sum(sizes[:3]) {
		t.Fatalf("last stable offset %d: %+v", bases[3]+1, lc)
	}
	// min.compaction.lag.ms: the segments written 10 s ago may be cleaned, the recent ones
	// not (the first segment holding a recent record is the one after the old ones).
	cc.MinCompactionLagMs = 5_000
	lc, _ = l.CleanableState(cc, -1, -1, now)
	firstRecent := len(old) - 1 // the old active segment got the first recent records
	if lc.FirstUncleanableOffset != bases[firstRecent] {
		t.Fatalf("min lag: first uncleanable %d, want %d (segments %v)", lc.FirstUncleanableOffset, bases[firstRecent], bases)
	}
	cc.MinCompactionLagMs = 0
	// max.compaction.lag.ms: 30 s after t0 with a lag of 20 s, the oldest dirty record is
	// 10 s overdue, and a log below its ratio must be cleaned now.
	cc.MaxCompactionLagMs = 20_000
	cc.MinCleanableRatio = 0.99
	lc, _ = l.CleanableState(cc, bases[1], -1, t0+30_000)
	if lc.MaxCompactionDelayMs != 10_000-0 || !lc.NeedsCompactionNow() || !lc.Cleanable() {
		t.Fatalf("max lag: %+v", lc)
	}
	// Not yet due.
	lc, _ = l.CleanableState(cc, bases[1], -1, t0+15_000)
	if lc.NeedsCompactionNow() || lc.Cleanable() {
		t.Fatalf("max lag not due: %+v", lc)
	}
}

func TestFilthiest(t *testing.T) {
	logs := []LogToClean{
		{CleanBytes: 90, CleanableBytes: 10, MinCleanableRatio: 0.5},                            // 0.1: not cleanable
		{CleanBytes: 40, CleanableBytes: 60, MinCleanableRatio: 0.5},                            // 0.6
		{CleanBytes: 20, CleanableBytes: 80, MinCleanableRatio: 0.9},                            // 0.8 under its own ratio
		{CleanBytes: 30, CleanableBytes: 70, MinCleanableRatio: 0.5},                            // 0.7: the dirtiest
		{CleanBytes: 95, CleanableBytes: 5, MinCleanableRatio: 0.5, MaxCompactionDelayMs: 1},    // due
		{CleanBytes: 100, CleanableBytes: 0, MinCleanableRatio: 0.5, MaxCompactionDelayMs: 100}, // due, nothing to clean
	}
	if i := Filthiest(logs); i != 3 {
		t.Fatalf("filthiest %d, want 3", i)
	}
	if i := Filthiest([]LogToClean{logs[0], logs[4], logs[5]}); i != 1 {
		t.Fatalf("only the overdue log is cleanable; got %d", i)
	}
	if i := Filthiest([]LogToClean{logs[0], logs[2], logs[5]}); i != -1 {
		t.Fatalf("none is cleanable; got %d", i)
	}
}
