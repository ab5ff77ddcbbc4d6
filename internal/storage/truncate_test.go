package storage

import (
	"errors"
	"math"
	"os"
	"testing"

	"github.com/gregor-project/gregor/internal/batch"
)

func TestTruncateTo(t *testing.T) {
	cfg := testCfg()
	cfg.IndexIntervalBytes = 100
	e := newEnv(t, cfg)
	l := e.open(true, 0, 0)
	// 60 batches of 2 records at increasing timestamps: offsets 0..119.
	for i := range 60 {
		mustAppend(t, l, makeBatch(t, int64(1000+10*i), []int64{0, 5}, 100, batch.CodecNone))
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	segs := l.NumSegments()
	second := l.mu.segments[1].baseOffset
	// Truncate into the middle of the second segment, at a batch boundary.
	to := second + 4
	if err := l.TruncateTo(to); err != nil {
		t.Fatal(err)
	}
	if l.LogEndOffset() != to || l.NumSegments() != 2 || l.RecoveryPoint() != to {
		t.Fatalf("LEO %d segments %d (was %d) rp %d", l.LogEndOffset(), l.NumSegments(), segs, l.RecoveryPoint())
	}
	if ts, off := l.MaxTimestamp(); off != to-1 || ts != 1000+10*(to/2-1)+5 {
		t.Fatalf("max ts %d at %d after truncation", ts, off)
	}
	if _, _, ok, _ := l.OffsetForTimestamp(1000 + 10*(to/2)); ok {
		t.Fatal("found a truncated timestamp")
	}
	if _, err := l.Read(to+1, 100, math.MaxInt64, true); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatal("read past the truncation point")
	}
	if len(readAllOffsets(t, l)) != int(to/2) {
		t.Fatal("batches below the truncation point")
	}
	// Appending continues at the truncation point, in the same (now active) segment.
	if info := mustAppend(t, l, simpleBatch(t, 2, 5000, 100)); info.FirstOffset != to {
		t.Fatal(info)
	}
	for range 30 {
		mustAppend(t, l, simpleBatch(t, 2, 5000, 100))
	}
	leo := l.LogEndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = e.open(false, 0, 0) // full recovery agrees
	if l.LogEndOffset() != leo || len(readAllOffsets(t, l)) != int(leo/2) {
		t.Fatal("reopen after truncation")
	}
	// Truncating to a segment's base empties it; no-op past the LEO.
	base := l.mu.segments[1].baseOffset
	if err := l.TruncateTo(leo + 10); err != nil || l.LogEndOffset() != leo {
		t.Fatal("truncate past LEO")
	}
	if err := l.TruncateTo(base); err != nil || l.LogEndOffset() != base || l.NumSegments() != 2 || l.activeLocked().size != 0 {
		t.Fatalf("truncate to base: LEO %d", l.LogEndOffset())
	}
	l.Close()
}

func TestTruncateFullyAndStartAt(t *testing.T) {
	e := newEnv(t, testCfg())
	l := e.open(true, 0, 0)
	defer l.Close()
	fill(t, l, 40, 1, 0, 200)
	if err := l.TruncateFullyAndStartAt(1000); err != nil {
		t.Fatal(err)
	}
	if l.NumSegments() != 1 || l.LogStartOffset() != 1000 || l.LogEndOffset() != 1000 || l.RecoveryPoint() != 1000 || l.Size() != 0 {
		t.Fatal("state")
	}
	if _, err := os.Stat(segPath(e.dir, 0, logSuffix)); !os.IsNotExist(err) {
		t.Fatal("old segment kept")
	}
	if info := mustAppend(t, l, simpleBatch(t, 1, 1, 1)); info.FirstOffset != 1000 {
		t.Fatal(info)
	}
	// Starting over at the current active segment's own base reuses the name.
	if err := l.TruncateFullyAndStartAt(1000); err != nil || l.LogEndOffset() != 1000 || l.Size() != 0 {
		t.Fatalf("%v", err)
	}
	// Below the first segment, TruncateTo does the same.
	fill(t, l, 3, 1, 0, 1)
	if err := l.TruncateTo(5); err != nil || l.LogEndOffset() != 5 || l.LogStartOffset() != 5 {
		t.Fatalf("%v LEO %d", err, l.LogEndOffset())
	}
}

func TestScanBatches(t *testing.T) {
	e := newEnv(t, testCfg())
	l := e.open(true, 0, 0)
	defer l.Close()
	for i := range 50 {
		mustAppend(t, l, simpleBatch(t, 3, int64(i), 100))
	}
	var got []int64
	err := l.ScanBatches(31, func(h batch.Header) error {
		got = append(got, h.BaseOffset)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 40 || got[0] != 30 || got[39] != 147 {
		t.Fatalf("%d batches from %v", len(got), got[:1])
	}
	for i := 1; i < len(got); i++ {
		if got[i] != got[i-1]+3 {
			t.Fatal("gap")
		}
	}
	stop := errors.New("stop")
	n := 0
	if err := l.ScanBatches(0, func(batch.Header) error { n++; return stop }); err != stop || n != 1 {
		t.Fatal("error not returned")
	}
}
