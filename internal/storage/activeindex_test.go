package storage

import (
	"math"
	"os"
	"testing"

	"github.com/gregor-project/gregor/internal/batch"
)

// The active segment's indexes are mmapped read-write once they hold a page of entries, not
// held on the heap, over files allocated a little ahead of their entries (never the whole
// segment.index.bytes); sealing trims them to their entries and maps them read-only; a crash
// leaves the allocated zeros, which the next start reads as no entries; a clean close leaves
// exact files.
func TestActiveIndexMapped(t *testing.T) {
	cfg := testCfg()
	cfg.SegmentBytes = 256 << 10
	cfg.IndexIntervalBytes = 100 // an entry for every batch
	cfg.SegmentIndexBytes = 64 << 10
	e := newEnv(t, cfg)
	l := e.open(true, 0, 0)
	page := os.Getpagesize()
	act := l.activeLocked()
	for i := 0; l.NumSegments() < 2 || len(act.index.buf) < page+offsetIndexEntrySize || len(act.timeIndex.buf) < page; i++ {
		if i > 10000 {
			t.Fatal("no active segment with a page of index entries")
		}
		mustAppend(t, l, makeBatch(t, int64(1000+10*i), []int64{0, 5}, 100, batch.CodecNone))
		act = l.activeLocked()
	}
	for _, x := range []*indexFile{&act.index.indexFile, &act.timeIndex.indexFile} {
		if !x.rw || x.mapped == nil || x.entries() == 0 {
			t.Fatalf("%s: rw %v, mapped %v, %d entries", x.path, x.rw, x.mapped != nil, x.entries())
		}
		got := fileSize(t, x.path)
		if got != int64(x.alloc) || got < int64(len(x.buf)) || got%int64(os.Getpagesize()) != 0 || got > int64(len(x.buf)+allocChunk) {
			t.Fatalf("%s is %d bytes (allocated %d) for %d bytes of entries: want whole pages, at most %d ahead", x.path, got, x.alloc, len(x.buf), allocChunk)
		}
		if len(x.mapped) < x.preallocBytes() {
			t.Fatalf("%s: mapping of %d bytes, want room for %d", x.path, len(x.mapped), x.preallocBytes())
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

	// A crash: the files keep their allocated zeros; the next (unclean) start reads them back.
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

	// A clean close seals the active segment: exact files, mapped read-only on the next start
	// (and read-write again only when written to).
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = e.open(true, 0, 0)
	defer l.Close()
	act = l.activeLocked()
	for _, x := range []*indexFile{&act.index.indexFile, &act.timeIndex.indexFile} {
		if got := fileSize(t, x.path); got != int64(len(x.buf)) || x.entries() == 0 || x.rw || (x.mapped != nil) != (len(x.buf) >= os.Getpagesize()) {
			t.Fatalf("%s after a clean restart: %d bytes for %d bytes of entries, rw %v, mapped %v", x.path, got, len(x.buf), x.rw, x.mapped != nil)
		}
	}
	for off := int64(0); off < leo; off += 5 {
		if hs := mustRead(t, l, off, 1, math.MaxInt64, true); len(hs) != 1 || hs[0].LastOffset() < off {
			t.Fatalf("read(%d) after a clean restart: %+v", off, hs)
		}
	}
	// Sealed segments' indexes are read-only mappings trimmed to their entries (or, less than
	// a page of them, on the heap).
	if len(l.mu.segments) < 2 {
		t.Fatalf("%d segments: want sealed ones", len(l.mu.segments))
	}
	for _, s := range l.mu.segments[:len(l.mu.segments)-1] {
		if s.index.rw || (s.index.mapped != nil) != (len(s.index.buf) >= os.Getpagesize()) || fileSize(t, s.indexPath()) != int64(len(s.index.buf)) {
			t.Fatalf("sealed %s: rw %v, mapped %v", s.indexPath(), s.index.rw, s.index.mapped != nil)
		}
	}
}
