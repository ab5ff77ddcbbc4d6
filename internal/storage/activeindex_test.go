package storage

import (
	"math"
	"os"
	"testing"

	"github.com/gregor-project/gregor/internal/batch"
)

// The active segment's indexes are mmapped read-write over preallocated files, not held on the
// heap; sealing trims them to their entries and maps them read-only; a crash leaves the
// preallocated zeros, which the next start reads as no entries.
func TestActiveIndexMapped(t *testing.T) {
	cfg := testCfg()
	cfg.SegmentBytes = 8192
	cfg.IndexIntervalBytes = 100
	cfg.SegmentIndexBytes = 4096
	e := newEnv(t, cfg)
	l := e.open(true, 0, 0)
	for i := range 40 {
		mustAppend(t, l, makeBatch(t, int64(1000+10*i), []int64{0, 5}, 100, batch.CodecNone))
	}
	act := l.activeLocked()
	for _, x := range []*indexFile{&act.index.indexFile, &act.timeIndex.indexFile} {
		if !x.rw || x.mapped == nil || x.entries() == 0 {
			t.Fatalf("%s: rw %v, mapped %v, %d entries", x.path, x.rw, x.mapped != nil, x.entries())
		}
		if got := fileSize(t, x.path); got != int64(x.preallocBytes()) {
			t.Fatalf("%s is %d bytes, want the preallocated %d", x.path, got, x.preallocBytes())
		}
	}
	entries := act.index.entries()
	leo := l.LogEndOffset()

	// Truncation zeroes the dropped entries in the file.
	if err := l.TruncateTo(leo - 10); err != nil {
		t.Fatal(err)
	}
	if act.index.entries() >= entries {
		t.Fatalf("%d entries after truncation, %d before", act.index.entries(), entries)
	}
	b, err := os.ReadFile(act.index.path)
	if err != nil {
		t.Fatal(err)
	}
	if !allZero(b[len(act.index.buf):]) {
		t.Fatal("dropped index entries left in the file")
	}
	for i := range 10 {
		mustAppend(t, l, makeBatch(t, int64(2000+10*i), []int64{0, 5}, 100, batch.CodecNone))
	}
	leo = l.LogEndOffset()

	// A crash: the files stay preallocated; the next (unclean) start reads them back.
	crash(l)
	l = e.open(false, 0, 0)
	for off := int64(0); off < leo; off += 7 {
		if hs := mustRead(t, l, off, 1, math.MaxInt64, true); len(hs) != 1 || hs[0].LastOffset() < off {
			t.Fatalf("read(%d) after a crash: %+v", off, hs)
		}
	}
	if _, _, ok, _ := l.OffsetForTimestamp(2050); !ok {
		t.Fatal("time index lost after a crash")
	}

	// A clean close seals the active segment: exact files, mapped read-only on the next start.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = e.open(true, 0, 0)
	defer l.Close()
	act = l.activeLocked()
	if got := fileSize(t, act.index.path); got != int64(len(act.index.buf)) && got != int64(act.index.preallocBytes()) {
		t.Fatalf("index file of %d bytes for %d bytes of entries", got, len(act.index.buf))
	}
	for off := int64(0); off < leo; off += 5 {
		if hs := mustRead(t, l, off, 1, math.MaxInt64, true); len(hs) != 1 || hs[0].LastOffset() < off {
			t.Fatalf("read(%d) after a clean restart: %+v", off, hs)
		}
	}
	// Sealed segments' indexes are read-only mappings trimmed to their entries.
	if len(l.mu.segments) < 2 {
		t.Fatalf("%d segments: want sealed ones", len(l.mu.segments))
	}
	for _, s := range l.mu.segments[:len(l.mu.segments)-1] {
		if s.index.rw || (s.index.entries() > 0 && s.index.mapped == nil) || fileSize(t, s.indexPath()) != int64(len(s.index.buf)) {
			t.Fatalf("sealed %s: rw %v, mapped %v", s.indexPath(), s.index.rw, s.index.mapped != nil)
		}
	}
}
