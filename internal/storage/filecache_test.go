//go:build linux

package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// Logs sharing a FileCache never hold more segment files open than its budget, however many
// segments they have, and every one of them stays writable and readable: idle files are
// closed and opened again on their next use.
func TestFileCacheBudget(t *testing.T) {
	const parts, budget = 60, 16
	cfg := testCfg()
	cfg.SegmentBytes = 1024
	cache := NewFileCache(budget)
	root := t.TempDir()
	base := openFDs(t)
	opt := OpenOptions{Clean: true, Files: cache}
	logs := make([]*Log, parts)
	for p := range logs {
		l, err := Open(OS, filepath.Join(root, fmt.Sprintf("t-%d", p)), cfg, opt)
		if err != nil {
			t.Fatalf("opening log %d: %v", p, err)
		}
		logs[p] = l
	}
	check := func(when string) {
		t.Helper()
		if got := openFDs(t) - base; got > budget {
			t.Fatalf("%s: %d descriptors open, budget %d", when, got, budget)
		}
		if cache.Open() > budget {
			t.Fatalf("%s: cache counts %d open, budget %d", when, cache.Open(), budget)
		}
	}
	check("after opening")
	b := simpleBatch(t, 1, 1000, 600) // two batches fill a segment
	for round := range 4 {
		for p, l := range logs {
			mustAppend(t, l, b)
			check(fmt.Sprintf("round %d, append to log %d", round, p))
		}
	}
	for p, l := range logs {
		if l.NumSegments() < 2 {
			t.Fatalf("log %d has %d segments: want several", p, l.NumSegments())
		}
		for off := range l.LogEndOffset() {
			if hs := mustRead(t, l, off, 1, 1<<62, true); len(hs) != 1 || hs[0].BaseOffset != off {
				t.Fatalf("log %d: read(%d) = %+v", p, off, hs)
			}
			check(fmt.Sprintf("reading log %d at %d", p, off))
		}
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	check("after reading and flushing")
	if cache.Evictions() == 0 {
		t.Fatal("no file was closed to make room")
	}
	for _, l := range logs {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if got := openFDs(t) - base; got != 0 || cache.Open() != 0 {
		t.Fatalf("after Close: %d descriptors open, cache counts %d", got, cache.Open())
	}
}

// When every file the budget allows is pinned by a Slice, a read or append that needs another
// file is refused with ErrTooManyOpenFiles, the log stays online, and it works again once a
// Slice is released.
func TestFileCacheRefusesWhenAllPinned(t *testing.T) {
	const budget = 3
	cfg := testCfg()
	cache := NewFileCache(budget)
	root := t.TempDir()
	opt := OpenOptions{Clean: true, Files: cache}
	var logs []*Log
	for p := range budget + 1 {
		l, err := Open(OS, filepath.Join(root, fmt.Sprintf("t-%d", p)), cfg, opt)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		mustAppend(t, l, simpleBatch(t, 1, 1000, 100))
		logs = append(logs, l)
	}
	var pinned []Slice
	for _, l := range logs[:budget] {
		s, err := l.Read(0, 1<<20, 1<<62, true)
		if err != nil || s.Size == 0 {
			t.Fatalf("read: %v, %d bytes", err, s.Size)
		}
		pinned = append(pinned, s)
	}
	last := logs[budget]
	if _, err := last.Read(0, 1<<20, 1<<62, true); !errors.Is(err, ErrTooManyOpenFiles) {
		t.Fatalf("read with every descriptor pinned: %v, want ErrTooManyOpenFiles", err)
	}
	if _, err := last.Append(simpleBatch(t, 1, 1000, 100), AppendOptions{AssignOffsets: true}); !errors.Is(err, ErrTooManyOpenFiles) {
		t.Fatalf("append with every descriptor pinned: %v, want ErrTooManyOpenFiles", err)
	}
	// An append that needs a new segment (this batch does not fit the active one) cannot
	// create its file either.
	if _, err := last.Append(simpleBatch(t, 1, 1000, 4000), AppendOptions{AssignOffsets: true}); !errors.Is(err, ErrTooManyOpenFiles) {
		t.Fatalf("append rolling a segment with every descriptor pinned: %v, want ErrTooManyOpenFiles", err)
	}
	if last.Offline() {
		t.Fatal("a refused open took the log offline")
	}
	// The pinned slices are still whole.
	for _, s := range pinned {
		if hs := readBatches(t, s); len(hs) != 1 {
			t.Fatalf("pinned slice: %d batches", len(hs))
		}
	}
	pinned[0].Release()
	mustAppend(t, last, simpleBatch(t, 1, 1000, 100))
	mustAppend(t, last, simpleBatch(t, 1, 1000, 4000)) // rolls
	var n int
	for off := int64(0); off < last.LogEndOffset(); off++ {
		n += len(mustRead(t, last, off, 1, 1<<62, true))
	}
	if n != 3 || last.NumSegments() != 2 {
		t.Fatalf("after a release: %d batches in %d segments, want 3 in 2", n, last.NumSegments())
	}
	for _, s := range pinned[1:] {
		s.Release()
	}
}

// A Slice of a segment that retention deleted stays readable even after its file is removed
// from the directory, although the cache closed every idle file in between.
func TestFileCacheDeletedSegmentStaysReadable(t *testing.T) {
	cfg := testCfg()
	cfg.SegmentBytes = 1024
	cfg.RetentionBytes = 1
	cfg.FileDeleteDelayMs = 0
	cache := NewFileCache(2)
	e := newEnv(t, cfg)
	opt := OpenOptions{Clean: true, Files: cache, Now: e.clock.Now}
	l, err := Open(OS, e.dir, cfg, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for range 6 {
		mustAppend(t, l, simpleBatch(t, 1, 1000, 600))
	}
	s, err := l.Read(0, 1<<20, 1<<62, true)
	if err != nil || s.Size == 0 {
		t.Fatalf("read: %v", err)
	}
	defer s.Release()
	if _, err := l.DeleteExpired(e.clock.NowMs()); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() == 0 {
		t.Fatal("retention deleted nothing")
	}
	if _, err := os.Stat(segPath(e.dir, 0, logSuffix+deletedSuffix)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the deleted segment's file is still there: %v", err)
	}
	// Touch other files so that an unpinned one would have been closed.
	other, err := Open(OS, filepath.Join(e.dir+"-other"), cfg, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for range 4 {
		mustAppend(t, other, simpleBatch(t, 1, 1000, 600))
		mustRead(t, other, 0, 1, 1<<62, true)
	}
	if hs := readBatches(t, s); len(hs) != 1 || hs[0].BaseOffset != 0 {
		t.Fatalf("slice of the deleted segment: %+v", hs)
	}
}

// The budget leaves a quarter of the limit to everything else, at least 256 and at most half.
func TestBudgetFor(t *testing.T) {
	for _, c := range []struct {
		limit int64
		want  int
	}{{20000, 15000}, {1024, 768}, {400, 200}, {4096, 3072}, {1 << 20, 3 << 18}} {
		if got := budgetFor(c.limit); got != c.want {
			t.Errorf("budgetFor(%d) = %d, want %d", c.limit, got, c.want)
		}
	}
}

// An index that cannot open its file for want of a descriptor (it grows past what it holds in
// memory and maps its file) leaves the entry out: the append succeeds, the log stays online,
// and every batch reads back.
func TestIndexEntryLeftOutWithoutDescriptor(t *testing.T) {
	e, ffs := faultEnv(t)
	e.cfg.SegmentBytes = 1 << 20
	l := e.open(true, 0, 0)
	defer l.Close()
	ffs.Inject(Fault{Op: FaultOpen, Pattern: "*.index", Times: -1, Err: unix.EMFILE})
	const n = 700 // past a page of index entries (512): the index must open its file
	for i := range n {
		if _, err := l.Append(simpleBatch(t, 1, int64(1000+i), 300), AppendOptions{AssignOffsets: true}); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	if l.Offline() {
		t.Fatal("a missing descriptor took the log offline")
	}
	for off := int64(0); off < n; off += 37 {
		if hs := mustRead(t, l, off, 1, 1<<62, true); len(hs) != 1 || hs[0].BaseOffset != off {
			t.Fatalf("read(%d) = %+v", off, hs)
		}
	}
	ffs.Clear()
}
