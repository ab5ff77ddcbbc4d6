package storage

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fill appends n single-record batches with timestamps ts0, ts0+step, ...
func fill(t *testing.T, l *Log, n int, ts0, step int64, valueSize int) {
	t.Helper()
	for i := range n {
		mustAppend(t, l, simpleBatch(t, 1, ts0+int64(i)*step, valueSize))
	}
}

func TestRetentionByTime(t *testing.T) {
	cfg := testCfg()
	cfg.RetentionMs = 10_000
	e := newEnv(t, cfg)
	l := e.open(true, 0, 0)
	defer l.Close()
	now := e.clock.NowMs()
	fill(t, l, 60, now, 1000, 200) // one record per second
	segs := l.NumSegments()
	if segs < 4 {
		t.Fatalf("%d segments", segs)
	}
	if n, err := l.DeleteExpired(now + 5000); err != nil || n != 0 {
		t.Fatalf("deleted %d too early: %v", n, err)
	}
	// At now+40s every segment whose newest record is older than now+30s goes.
	n, err := l.DeleteExpired(now + 40_000)
	if err != nil || n == 0 {
		t.Fatalf("deleted %d: %v", n, err)
	}
	lso := l.LogStartOffset()
	if lso != l.mu.segments[0].baseOffset || lso == 0 {
		t.Fatalf("LSO %d first segment %d", lso, l.mu.segments[0].baseOffset)
	}
	// The first remaining segment holds a record younger than the cut, its predecessor none.
	if l.mu.segments[0].maxTimestamp < now+30_000 || lso-1 > 30 {
		t.Fatalf("wrong segments deleted: LSO %d max ts %d", lso, l.mu.segments[0].maxTimestamp-now)
	}
	if _, err := l.Read(lso-1, 100, math.MaxInt64, true); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatal("read below LSO after retention")
	}
	if _, err := os.Stat(segPath(e.dir, 0, logSuffix)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("segment 0 still on disk: %v", err)
	}
	// Everything expired, including the active segment: it is rolled, the LEO survives.
	leo := l.LogEndOffset()
	if _, err := l.DeleteExpired(now + 1_000_000); err != nil {
		t.Fatal(err)
	}
	if l.NumSegments() != 1 || l.LogStartOffset() != leo || l.LogEndOffset() != leo || l.Size() != 0 {
		t.Fatalf("after expiring all: %d segments LSO %d LEO %d", l.NumSegments(), l.LogStartOffset(), l.LogEndOffset())
	}
	if info := mustAppend(t, l, simpleBatch(t, 1, now, 10)); info.FirstOffset != leo {
		t.Fatalf("append after full expiry at %d", info.FirstOffset)
	}
	// The empty active segment alone is never deleted.
	if n, err := l.DeleteExpired(now + 1_000_000); err != nil || l.LogEndOffset() != leo+1 {
		t.Fatalf("%d %v", n, err)
	}
}

func TestRetentionRespectsHighWatermark(t *testing.T) {
	cfg := testCfg()
	cfg.RetentionMs = 0
	e := newEnv(t, cfg)
	l := e.open(true, 0, 0)
	defer l.Close()
	fill(t, l, 40, 1, 0, 200)
	l.SetHighWatermark(l.mu.segments[1].baseOffset + 1) // inside the second segment
	if n, err := l.DeleteExpired(e.clock.NowMs()); err != nil || n != 1 {
		t.Fatalf("deleted %d: %v", n, err)
	}
	if err := l.SetLogStartOffset(l.LogEndOffset()); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("LSO past HW: %v", err)
	}
}

func TestRetentionByBytes(t *testing.T) {
	cfg := testCfg()
	e := newEnv(t, cfg)
	l := e.open(true, 0, 0)
	defer l.Close()
	fill(t, l, 80, e.clock.NowMs(), 0, 200)
	total := l.Size()
	cfg.RetentionBytes = total / 2
	l.Reconfigure(cfg)
	n, err := l.DeleteExpired(e.clock.NowMs())
	if err != nil || n == 0 {
		t.Fatalf("deleted %d: %v", n, err)
	}
	if l.Size() < cfg.RetentionBytes {
		t.Fatalf("deleted too much: %d < %d", l.Size(), cfg.RetentionBytes)
	}
	if l.Size()-l.mu.segments[0].size >= cfg.RetentionBytes {
		t.Fatalf("deleted too little: %d without the first segment is still >= %d", l.Size()-l.mu.segments[0].size, cfg.RetentionBytes)
	}
	if l.LogStartOffset() != l.mu.segments[0].baseOffset {
		t.Fatal("LSO not moved")
	}
}

func TestSetLogStartOffset(t *testing.T) {
	e := newEnv(t, testCfg())
	l := e.open(true, 0, 0)
	fill(t, l, 60, 1, 0, 200)
	second, third := l.mu.segments[1].baseOffset, l.mu.segments[2].baseOffset
	segs := l.NumSegments()
	// Inside the second segment: the first segment goes, reads from the LSO work.
	if err := l.SetLogStartOffset(second + 1); err != nil {
		t.Fatal(err)
	}
	if l.NumSegments() != segs-1 || l.LogStartOffset() != second+1 {
		t.Fatalf("%d segments, LSO %d", l.NumSegments(), l.LogStartOffset())
	}
	if hs := mustRead(t, l, second+1, 100, math.MaxInt64, true); len(hs) != 1 || hs[0].BaseOffset != second+1 {
		t.Fatalf("%+v", hs)
	}
	if _, err := l.Read(second, 100, math.MaxInt64, true); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatal(err)
	}
	// Going backwards changes nothing; past the LEO is refused.
	if err := l.SetLogStartOffset(1); err != nil || l.LogStartOffset() != second+1 {
		t.Fatal("moved backwards")
	}
	if err := l.SetLogStartOffset(l.LogEndOffset() + 1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatal(err)
	}
	// Exactly at a segment base deletes everything below it.
	if err := l.SetLogStartOffset(third); err != nil || l.mu.segments[0].baseOffset != third {
		t.Fatal("segment below LSO kept")
	}
	if l.RecoveryPoint() < third {
		t.Fatal("recovery point below the log start offset")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// The LSO comes back from the checkpoint value given to Open.
	l = e.open(true, 0, third+2)
	defer l.Close()
	if l.LogStartOffset() != third+2 {
		t.Fatal(l.LogStartOffset())
	}
}

func TestFileDeleteDelay(t *testing.T) {
	cfg := testCfg()
	cfg.FileDeleteDelayMs = 1000
	e := newEnv(t, cfg)
	l := e.open(true, 0, 0)
	fill(t, l, 40, 1, 0, 200)
	if err := l.SetLogStartOffset(l.mu.segments[1].baseOffset); err != nil {
		t.Fatal(err)
	}
	deleted := segPath(e.dir, 0, logSuffix) + deletedSuffix
	if _, err := os.Stat(deleted); err != nil {
		t.Fatalf("no .deleted file: %v", err)
	}
	if _, err := l.DeleteExpired(e.clock.NowMs() + 999); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(deleted); err != nil {
		t.Fatalf(".deleted file removed early: %v", err)
	}
	if _, err := l.DeleteExpired(e.clock.NowMs() + 1000); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(deleted); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf(".deleted file kept: %v", err)
	}
	// Leftovers are removed by Open.
	if err := os.WriteFile(filepath.Join(e.dir, segmentName(999)+".log.deleted"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = e.open(true, 0, 0)
	defer l.Close()
	ents, _ := os.ReadDir(e.dir)
	for _, en := range ents {
		if strings.HasSuffix(en.Name(), deletedSuffix) {
			t.Fatalf("leftover %s", en.Name())
		}
	}
}

func TestSliceOutlivesDeletedSegment(t *testing.T) {
	e := newEnv(t, testCfg())
	l := e.open(true, 0, 0)
	defer l.Close()
	fill(t, l, 40, 1, 0, 200)
	s, err := l.Read(0, 1000, math.MaxInt64, true)
	if err != nil || s.Size == 0 {
		t.Fatal(err)
	}
	want := make([]byte, s.Size)
	if _, err := s.File.ReadAt(want, s.Pos); err != nil {
		t.Fatal(err)
	}
	if err := l.SetLogStartOffset(l.mu.segments[2].baseOffset); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(segPath(e.dir, 0, logSuffix)); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("segment file not removed")
	}
	got := make([]byte, s.Size)
	if _, err := s.File.ReadAt(got, s.Pos); err != nil {
		t.Fatalf("slice unreadable after deletion: %v", err)
	}
	if string(got) != string(want) {
		t.Fatal("slice bytes changed")
	}
	if fd := s.File.OSFile(); fd == nil {
		t.Fatal("no OS file for sendfile")
	}
	s.Release()
	if _, err := s.File.ReadAt(got, s.Pos); err == nil {
		t.Fatal("file still open after the last Release")
	}
}
