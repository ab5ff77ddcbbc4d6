package storage

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/gregor-project/gregor/internal/batch"
)

func TestFaultFS(t *testing.T) {
	dir := t.TempDir()
	ffs := NewFaultFS(OS)
	f, err := ffs.OpenFile(filepath.Join(dir, "a.log"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Pattern: only *.index writes fail.
	ffs.Inject(Fault{Op: FaultWrite, Pattern: "*.index", Times: -1})
	if _, err := f.WriteAt([]byte("hello"), 0); err != nil {
		t.Fatal(err)
	}
	// Torn write, twice.
	ffs.Inject(Fault{Op: FaultWrite, Pattern: "a.log", Torn: 2, Times: 2})
	for i := range 2 {
		n, err := f.WriteAt([]byte("WORLD"), 5)
		if n != 2 || !errors.Is(err, ErrInjected) {
			t.Fatalf("torn write %d: %d %v", i, n, err)
		}
	}
	if _, err := f.WriteAt([]byte("world"), 5); err != nil {
		t.Fatal("fault outlived Times")
	}
	// A lost fsync: Sync says yes, DropUnsynced throws the data away.
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("!!"), 10); err != nil {
		t.Fatal(err)
	}
	ffs.Inject(Fault{Op: FaultSync, Lose: true})
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	ffs.Clear()
	if err := ffs.DropUnsynced(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.log")); string(b) != "helloworld" {
		t.Fatalf("%q", b)
	}
	// Custom error, on open.
	boom := errors.New("boom")
	ffs.Inject(Fault{Op: FaultOpen, Err: boom})
	if _, err := ffs.OpenFile(filepath.Join(dir, "b"), os.O_RDWR|os.O_CREATE, 0o644); err != boom {
		t.Fatal(err)
	}
	if ffs.Fired() != 4 {
		t.Fatalf("fired %d", ffs.Fired())
	}
}

// noMmapFS hides the *os.File, so indexes are read into the heap instead of mmapped.
type noMmapFS struct{ FS }

type noMmapFile struct{ File }

func (noMmapFile) OSFile() *os.File { return nil }

func (fs noMmapFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := fs.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return noMmapFile{f}, nil
}

func TestLogWithoutMmap(t *testing.T) {
	cfg := testCfg()
	cfg.IndexIntervalBytes = 100
	e := newEnv(t, cfg)
	e.fs = noMmapFS{OS}
	l := e.open(true, 0, 0)
	for i := range 60 {
		mustAppend(t, l, makeBatch(t, int64(1000+10*i), []int64{0, 5}, 100, batch.CodecNone))
	}
	leo := l.LogEndOffset()
	l.Close()
	l = e.open(true, 0, 0)
	defer l.Close()
	if l.mu.segments[0].index.mapped != nil {
		t.Fatal("mapped")
	}
	for off := int64(0); off < leo; off++ {
		if hs := mustRead(t, l, off, 1, math.MaxInt64, true); len(hs) != 1 || hs[0].BaseOffset != off&^1 {
			t.Fatalf("read(%d)", off)
		}
	}
	if off, ts, ok, _ := l.OffsetForTimestamp(1101); !ok || off != 21 || ts != 1105 {
		t.Fatalf("%d %d", off, ts)
	}
	if err := l.TruncateTo(30); err != nil || l.LogEndOffset() != 30 {
		t.Fatal(err)
	}
}

func TestIndexLookups(t *testing.T) {
	dir := t.TempDir()
	ix, err := openIndexFile(OS, filepath.Join(dir, "x.index"), offsetIndexEntrySize, 80)
	if err != nil {
		t.Fatal(err)
	}
	oi := offsetIndex{indexFile: *ix, baseOffset: 100}
	defer oi.close()
	for i := int64(1); i <= 5; i++ { // entries (100+10i, 1000i)
		if !oi.canAppend(100+10*i, 1000*i) {
			t.Fatal("canAppend")
		}
		if err := oi.append(100+10*i, 1000*i); err != nil {
			t.Fatal(err)
		}
	}
	if oi.canAppend(150, 6000) || oi.canAppend(160, 5000) || oi.canAppend(99, 6000) {
		t.Fatal("non-increasing entry accepted")
	}
	for _, c := range []struct{ target, off, pos int64 }{
		{100, 100, 0}, {109, 100, 0}, {110, 110, 1000}, {135, 130, 3000}, {999, 150, 5000},
	} {
		if o, p := oi.lookup(c.target); o != c.off || p != c.pos {
			t.Fatalf("lookup(%d) = %d, %d", c.target, o, p)
		}
	}
	if _, p := oi.lookupPosition(2500); p != 2000 {
		t.Fatal(p)
	}
	if err := oi.sanityCheck(5001); err != nil {
		t.Fatal(err)
	}
	if err := oi.sanityCheck(5000); err == nil {
		t.Fatal("entry past the log accepted")
	}
	if err := oi.truncateToPosition(3000); err != nil || oi.entries() != 2 {
		t.Fatal(oi.entries())
	}
	if oi.isFull() {
		t.Fatal("full")
	}

	tx, err := openIndexFile(OS, filepath.Join(dir, "x.timeindex"), timeIndexEntrySize, 1000)
	if err != nil {
		t.Fatal(err)
	}
	ti := timeIndex{indexFile: *tx, baseOffset: 100}
	defer ti.close()
	for _, e := range [][2]int64{{50, 101}, {50, 102}, {40, 103}, {70, 105}, {90, 105}, {95, 104}} {
		if err := ti.maybeAppend(e[0], e[1], true); err != nil {
			t.Fatal(err)
		}
	}
	// Only increasing timestamps with non-decreasing offsets are kept: (50,101) (70,105) (90,105).
	if ti.entries() != 3 {
		t.Fatal(ti.entries())
	}
	for _, c := range [][2]int64{{10, 100}, {50, 101}, {69, 101}, {70, 105}, {1000, 105}} {
		if o := ti.lookup(c[0]); o != c[1] {
			t.Fatalf("time lookup(%d) = %d", c[0], o)
		}
	}
	if err := ti.sanityCheck(105); err == nil {
		t.Fatal("entry at the log end accepted")
	}
	if err := ti.truncateToOffset(105); err != nil || ti.entries() != 1 {
		t.Fatal(ti.entries())
	}
}
