//go:build linux

package storage

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gregor-project/gregor/internal/batch"
)

// mountTmpfs mounts a tmpfs of size at a new directory, unmounted when the test ends. On a
// tmpfs, faulting in a page of a hole through a mapping allocates it (a read fault too), and a
// fault the file system cannot satisfy is SIGBUS: the place where index mappings can kill a
// process.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("this test needs to mount a small tmpfs (run it as root, or with CAP_SYS_ADMIN): mount: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			// Still in use (a failed test left a log open): detach it anyway.
			out2, err2 := exec.Command("umount", "-l", dir).CombinedOutput()
			t.Errorf("umount %s: %v\n%s (lazily: %v %s)", dir, err, out, err2, out2)
		}
	})
	return dir
}

// mappingsUnder counts this process's memory mappings of files under dir.
func mappingsUnder(t testing.TB, dir string) int {
	t.Helper()
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Fatalf("no /proc/self/maps: %v", err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) >= 6 && strings.HasPrefix(fields[5], dir+"/") {
			n++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// fdsUnder counts this process's open descriptors of files under dir.
func fdsUnder(t testing.TB, dir string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("no /proc/self/fd: %v", err)
	}
	n := 0
	for _, e := range ents {
		if p, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && strings.HasPrefix(p, dir+"/") {
			n++
		}
	}
	return n
}

// allocatedBytes is the disk space a file holds (st_blocks), which a sparse file's holes do
// not count in.
func allocatedBytes(t testing.TB, path string) int64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

// An index file preallocated (sparse) to segment.index.bytes, as earlier versions left the
// active segment's after a crash, is read back without touching its hole: on a tmpfs much
// smaller than the file, opening the log allocates nothing in it (scanning it through a
// mapping allocated every page, and the SIGBUS of the full tmpfs killed the process at every
// start), and every record reads back. Mapped (the entries fill pages) and, on an FS without
// an *os.File (no SEEK_HOLE: the whole file is read backwards with pread), on the heap.
func TestLoadTouchesOnlyTheEntries(t *testing.T) {
	for _, c := range []struct {
		name string
		fs   FS
	}{{"os", OS}, {"no-mmap", noMmapFS{OS}}} {
		t.Run(c.name, func(t *testing.T) { testLoadTouchesOnlyTheEntries(t, c.fs) })
	}
}

func testLoadTouchesOnlyTheEntries(t *testing.T, fs FS) {
	cfg := testCfg()
	cfg.SegmentBytes = 256 << 10
	cfg.IndexIntervalBytes = 100 // an entry for every batch
	cfg.SegmentIndexBytes = 10 << 20
	e := newEnv(t, cfg)
	e.fs = fs
	e.dir = filepath.Join(mountTmpfs(t, "2m"), "topic-0")
	l := e.open(true, 0, 0)
	page := os.Getpagesize()
	for i := 0; l.NumSegments() < 2 || len(l.activeLocked().index.buf) < page; i++ {
		if i > 10000 {
			t.Fatal("no active segment with a page of index entries")
		}
		mustAppend(t, l, makeBatch(t, int64(1000+10*i), []int64{0, 5}, 100, batch.CodecNone))
	}
	leo := l.LogEndOffset()
	active := l.activeLocked().baseOffset
	sealed := l.mu.segments[0].baseOffset
	crash(l)

	// Clean (the active segment's indexes are loaded and kept) and unclean (rebuilt).
	for _, clean := range []bool{true, false} {
		// The old layout: the active segment's indexes preallocated, sparse, to 10 MB; a
		// sealed one's too (a crash between a roll and the trim).
		before := map[string]int64{}
		for _, base := range []int64{active, sealed} {
			for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
				p := segPath(e.dir, base, suffix)
				if err := os.Truncate(p, int64(cfg.SegmentIndexBytes)); err != nil {
					t.Fatal(err)
				}
				before[p] = allocatedBytes(t, p)
			}
		}
		l = e.open(clean, leo, 0)
		// Untouched files hold no more than before; files cut (trimmed when sealed, rebuilt
		// by recovery) no more than their new length.
		for p, was := range before {
			got, size := allocatedBytes(t, p), fileSize(t, p)
			if limit := max(was, (size+int64(page)-1)/int64(page)*int64(page)); size == int64(cfg.SegmentIndexBytes) && got > was || got > limit {
				t.Fatalf("clean=%v: %s (%d bytes long) holds %d bytes after the open, %d before: load touched its hole", clean, p, size, got, was)
			}
		}
		if s := l.mu.segments[0]; (s.index.mapped != nil) != (fs == OS) || s.index.entries() == 0 {
			t.Fatalf("clean=%v: sealed index: mapped %v, %d entries", clean, s.index.mapped != nil, s.index.entries())
		}
		for off := int64(0); off < leo; off += 3 {
			if hs := mustRead(t, l, off, 1, math.MaxInt64, true); len(hs) != 1 || hs[0].LastOffset() < off {
				t.Fatalf("clean=%v: read(%d): %+v", clean, off, hs)
			}
		}
		if off, _, ok, err := l.OffsetForTimestamp(1505); err != nil || !ok || off != 101 {
			t.Fatalf("clean=%v: offset for timestamp: %d %v %v", clean, off, ok, err)
		}
		for i := range 20 {
			mustAppend(t, l, makeBatch(t, int64(100_000+10*i), []int64{0, 5}, 100, batch.CodecNone))
		}
		leo = l.LogEndOffset()
		crash(l)
	}
	l = e.open(false, 0, 0)
	defer l.Close()
	if got := 2 * len(readAllOffsets(t, l)); int64(got) != leo { // two records a batch
		t.Fatalf("%d records after the last restart, want %d", got, leo)
	}
}

// On a full disk the active index cannot be extended: the append fails with the ENOSPC and
// takes the log offline (the process lives: the mapping is only written where space was
// allocated first), and after a restart every acknowledged record reads back.
func TestIndexAllocationFailureTakesLogOffline(t *testing.T) {
	e, ffs := faultEnv(t)
	e.cfg.IndexIntervalBytes = 1 // an index entry for every batch
	e.cfg.SegmentBytes = 1 << 20
	l := e.open(true, 0, 0)
	// One page of index entries is allocated at a time: fill past the first.
	perPage := os.Getpagesize() / offsetIndexEntrySize
	fill(t, l, perPage, 1000, 1, 10)
	acked := l.LogEndOffset()
	ffs.Inject(Fault{Op: FaultAllocate, Pattern: "*.index", Times: -1, Err: &os.PathError{Op: "fallocate", Path: "x.index", Err: syscall.ENOSPC}})
	var err error
	for i := 0; err == nil && i < 2*perPage; i++ {
		if _, err = l.Append(simpleBatch(t, 1, int64(5000+i), 10), AppendOptions{AssignOffsets: true}); err == nil {
			acked = l.LogEndOffset()
		}
	}
	if !errors.Is(err, ErrLogOffline) || !errors.Is(err, syscall.ENOSPC) || !l.Offline() {
		t.Fatalf("append with the index out of space: %v (offline %v)", err, l.Offline())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	ffs.Clear()
	l = e.open(false, 0, 0)
	defer l.Close()
	if got := int64(len(readAllOffsets(t, l))); got < acked {
		t.Fatalf("%d records after the restart, %d acknowledged", got, acked)
	}
	if _, _, ok, err := l.OffsetForTimestamp(5000); err != nil || !ok {
		t.Fatalf("time index after the restart: %v %v", ok, err)
	}
}

// A fault writing through a mapping (here: the file cut under it, so the page is past its
// end) is an error, not a crash of the process.
func TestMappedWriteFaultIsAnError(t *testing.T) {
	dir := t.TempDir()
	ix, err := openIndexFile(OS, filepath.Join(dir, "x.index"), offsetIndexEntrySize, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	x := offsetIndex{indexFile: *ix}
	defer x.close()
	n := int64(os.Getpagesize()/offsetIndexEntrySize + 1) // over a page of entries: mapped, with room
	for i := int64(1); i <= n; i++ {
		if err := x.append(10*i, 100*i); err != nil {
			t.Fatal(err)
		}
	}
	if !x.rw || x.alloc <= len(x.buf) {
		t.Fatalf("rw %v, %d bytes allocated for %d: want room in a read-write mapping", x.rw, x.alloc, len(x.buf))
	}
	if err := os.Truncate(x.path, 0); err != nil {
		t.Fatal(err)
	}
	if err := x.append(10*(n+1), 100*(n+1)); !errors.Is(err, errMappingFault) {
		t.Fatalf("write through a mapping past the end of its file: %v", err)
	}
}

// Where the file system cannot allocate ahead (no fallocate) the active indexes live on the
// heap, open their files only while writing them, and read back after a clean and an unclean
// restart.
func TestNoAllocateFallsBackToHeap(t *testing.T) {
	e, ffs := faultEnv(t)
	e.cfg.IndexIntervalBytes = 100 // an entry for every batch
	e.cfg.SegmentBytes = 1 << 20
	ffs.Inject(Fault{Op: FaultAllocate, Times: -1, Err: fmt.Errorf("%w: test", errNoAllocate)})
	base := openFDs(t)
	l := e.open(true, 0, 0)
	for i := range 2 * os.Getpagesize() / offsetIndexEntrySize { // two pages of entries
		mustAppend(t, l, makeBatch(t, int64(1000+10*i), []int64{0, 5}, 100, batch.CodecNone))
	}
	act := l.activeLocked()
	if l.NumSegments() != 1 || !act.index.noRW || act.index.mapped != nil || len(act.index.buf) <= os.Getpagesize() {
		t.Fatalf("%d segments; active index: noRW %v, mapped %v, %d bytes of entries", l.NumSegments(), act.index.noRW, act.index.mapped != nil, len(act.index.buf))
	}
	if got, want := openFDs(t)-base, l.NumSegments(); got != want {
		t.Fatalf("%d descriptors for %d segments with heap indexes", got, want)
	}
	leo := l.LogEndOffset()
	for _, clean := range []bool{true, false} {
		if clean {
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
		} else {
			crash(l)
		}
		l = e.open(clean, 0, 0)
		for off := int64(0); off < leo; off += 3 {
			if hs := mustRead(t, l, off, 1, math.MaxInt64, true); len(hs) != 1 || hs[0].LastOffset() < off {
				t.Fatalf("clean=%v: read(%d): %+v", clean, off, hs)
			}
		}
		if off, _, ok, _ := l.OffsetForTimestamp(1505); !ok || off != 101 {
			t.Fatalf("clean=%v: offset for timestamp %d %v", clean, off, ok)
		}
		if got, want := openFDs(t)-base, l.NumSegments(); got != want {
			t.Fatalf("clean=%v: %d descriptors for %d segments", clean, got, want)
		}
	}
	l.Close()
}

// An index with no entries is not mapped, nor one with less than a page of them: idle
// partitions cost one descriptor each and no mapping, opened anew, appended to (below
// index.interval.bytes: no entry), reopened cleanly (which adds a time index entry) and
// uncleanly (which rebuilds the indexes); an index is mapped once it has a page of entries,
// and unmapped again when truncated to none.
func TestEmptyIndexNotMapped(t *testing.T) {
	cfg := testCfg()
	cfg.SegmentBytes = 1 << 20
	cfg.IndexIntervalBytes = 100
	root := t.TempDir()
	const parts = 50
	open := func(p int, clean bool) *Log {
		l, err := Open(OS, filepath.Join(root, fmt.Sprintf("t-%d", p)), cfg, OpenOptions{Clean: clean})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	check := func(logs []*Log, when string, wantMaps int) {
		t.Helper()
		if got := mappingsUnder(t, root); got != wantMaps {
			t.Fatalf("%s: %d mappings for %d partitions, want %d", when, got, len(logs), wantMaps)
		}
		if got := fdsUnder(t, root); got != len(logs) {
			t.Fatalf("%s: %d descriptors for %d partitions", when, got, len(logs))
		}
	}
	var logs []*Log
	for p := range parts {
		logs = append(logs, open(p, true))
	}
	check(logs, "new partitions", 0)
	for _, l := range logs {
		mustAppend(t, l, simpleBatch(t, 1, 1000, 100)) // below index.interval.bytes: no entry
	}
	check(logs, "after a small append", 0)
	for i, l := range logs {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		logs[i] = open(i, true)
	}
	check(logs, "after a clean restart", 0)
	for i, l := range logs {
		crash(l)
		logs[i] = open(i, false)
	}
	check(logs, "after an unclean restart", 0)
	// One partition gets a page of index entries: its two active indexes are mapped.
	fill(t, logs[0], os.Getpagesize()/offsetIndexEntrySize+1, 2000, 1, 200)
	if logs[0].NumSegments() != 1 || logs[0].activeLocked().index.entries() == 0 {
		t.Fatal("want index entries in the active segment")
	}
	check(logs, "after appends to one partition", 2)
	if err := logs[0].TruncateTo(1); err != nil {
		t.Fatal(err)
	}
	check(logs, "after truncating its indexes to nothing", 0)
	for _, l := range logs {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	check(nil, "after closing", 0)
}
