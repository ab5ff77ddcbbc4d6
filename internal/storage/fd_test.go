//go:build linux

package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/gregor-project/gregor/internal/batch"
)

// openFDs counts this process's open file descriptors.
func openFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(ents) - 1 // ReadDir's own descriptor to the directory
}

// A segment costs at most one file descriptor (its .log, opened when first used; the FileCache
// closes idle ones): the .index and .timeindex are mmapped and closed, sealed and active alike, through appends, rolls, flushes, truncation, retention and
// a clean and an unclean restart.
func TestOneFDPerSegment(t *testing.T) {
	cfg := testCfg()
	cfg.IndexIntervalBytes = 100
	e := newEnv(t, cfg)
	base := openFDs(t)
	check := func(l *Log, when string) {
		t.Helper()
		if got, want := openFDs(t)-base, l.NumSegments(); got != want {
			t.Fatalf("%s: %d descriptors open for %d segments", when, got, want)
		}
	}
	l := e.open(true, 0, 0)
	check(l, "empty log")
	for i := range 100 {
		mustAppend(t, l, makeBatch(t, int64(1000+10*i), []int64{0, 5}, 100, batch.CodecNone))
	}
	if l.NumSegments() < 4 {
		t.Fatalf("%d segments: want several", l.NumSegments())
	}
	check(l, "after appends and rolls")
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	check(l, "after a flush")
	leo := l.LogEndOffset()
	if err := l.TruncateTo(leo - 50); err != nil {
		t.Fatal(err)
	}
	check(l, "after truncation")
	for i := range 30 {
		mustAppend(t, l, makeBatch(t, int64(3000+10*i), []int64{0, 5}, 100, batch.CodecNone))
	}
	check(l, "after appends past the truncation")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := openFDs(t) - base; got != 0 {
		t.Fatalf("%d descriptors left open after Close", got)
	}
	l = e.open(true, 0, 0)
	check(l, "after a clean restart")
	for off := int64(0); off < l.LogEndOffset(); off += 7 {
		if hs := mustRead(t, l, off, 1, 1<<62, true); len(hs) != 1 || hs[0].LastOffset() < off {
			t.Fatalf("read(%d) after a clean restart: %+v", off, hs)
		}
	}
	crash(l)
	if got := openFDs(t) - base; got != 0 {
		t.Fatalf("%d descriptors left open after a crash", got)
	}
	l = e.open(false, 0, 0)
	defer l.Close()
	check(l, "after an unclean restart")
	if _, _, ok, _ := l.OffsetForTimestamp(3050); !ok {
		t.Fatal("time index lost")
	}
}

// TestMeasureFDs opens GREGOR_FD_PARTITIONS logs of GREGOR_FD_SEGMENTS segments each (written
// first, then closed) and reports the descriptors and index mappings they hold. Skipped unless
// GREGOR_FD_PARTITIONS is set.
func TestMeasureFDs(t *testing.T) {
	parts, _ := strconv.Atoi(os.Getenv("GREGOR_FD_PARTITIONS"))
	if parts <= 0 {
		t.Skip("GREGOR_FD_PARTITIONS not set")
	}
	segs, _ := strconv.Atoi(os.Getenv("GREGOR_FD_SEGMENTS"))
	segs = max(segs, 1)
	cfg := testCfg()
	cfg.SegmentBytes = 1024
	root := t.TempDir()
	opt := OpenOptions{Clean: true}
	b := simpleBatch(t, 1, 1000, 900) // one batch fills a segment
	for p := range parts {
		l, err := Open(OS, filepath.Join(root, fmt.Sprintf("t-%d", p)), cfg, opt)
		if err != nil {
			t.Fatal(err)
		}
		for range segs {
			mustAppend(t, l, b)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	base := openFDs(t)
	start := time.Now()
	logs := make([]*Log, 0, parts)
	defer func() {
		for _, l := range logs {
			if err := l.Close(); err != nil {
				t.Error(err)
			}
		}
	}()
	n := 0
	for p := range parts {
		l, err := Open(OS, filepath.Join(root, fmt.Sprintf("t-%d", p)), cfg, opt)
		if err != nil {
			t.Fatalf("opening partition %d: %v (%d descriptors open)", p, err, openFDs(t)-base)
		}
		n += l.NumSegments()
		logs = append(logs, l)
	}
	fds := openFDs(t) - base
	t.Logf("%d partitions, %d segments: %d descriptors (%.2f per segment), %d index mappings, opened in %v", parts, n, fds, float64(fds)/float64(n), mappingsUnder(t, root), time.Since(start))
}

// Segments renamed to .deleted (retention, with file.delete.delay.ms) hold no index
// descriptors, a Slice keeps only its .log open, and a flush after the rename does not open
// the old paths.
func TestRenameWithoutIndexDescriptors(t *testing.T) {
	cfg := testCfg()
	cfg.IndexIntervalBytes = 100
	cfg.FileDeleteDelayMs = 1 << 40
	e := newEnv(t, cfg)
	base := openFDs(t)
	l := e.open(true, 0, 0)
	defer l.Close()
	fill(t, l, 40, 1, 0, 200)
	s, err := l.Read(0, 1000, 1<<62, true)
	if err != nil || s.Size == 0 {
		t.Fatal(err)
	}
	if err := l.SetLogStartOffset(l.mu.segments[2].baseOffset); err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
		if _, err := os.Stat(segPath(e.dir, 0, suffix+deletedSuffix)); err != nil {
			t.Fatalf("%s not renamed: %v", suffix, err)
		}
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if got, want := openFDs(t)-base, l.NumSegments()+1; got != want {
		t.Fatalf("%d descriptors for %d segments and a Slice", got, l.NumSegments())
	}
	readBatches(t, s) // releases it
	if got, want := openFDs(t)-base, l.NumSegments(); got != want {
		t.Fatalf("%d descriptors for %d segments", got, want)
	}
}

// A sealed index is fsynced through the FS by a descriptor opened for it: a failed open (say
// EMFILE) fails the flush but loses nothing (the log stays online, the recovery point stays,
// the next flush syncs it), a failed fsync takes the log offline.
func TestIndexSyncOpensFile(t *testing.T) {
	e, ffs := faultEnv(t)
	e.cfg.IndexIntervalBytes = 100
	l := e.open(true, 0, 0)
	defer l.Close()
	fill(t, l, 40, 1, 0, 100)
	if l.NumSegments() < 2 {
		t.Fatal("want sealed segments")
	}
	ffs.Inject(Fault{Op: FaultOpen, Pattern: "*.timeindex"})
	if err := l.Flush(); !errors.Is(err, ErrInjected) || errors.Is(err, ErrLogOffline) || l.Offline() {
		t.Fatalf("flush with a failed open: %v, offline %v", err, l.Offline())
	}
	if l.RecoveryPoint() != 0 {
		t.Fatalf("recovery point %d after a failed flush", l.RecoveryPoint())
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if l.RecoveryPoint() != l.LogEndOffset() {
		t.Fatalf("recovery point %d, log end %d", l.RecoveryPoint(), l.LogEndOffset())
	}
	fill(t, l, 40, 1, 0, 100)
	ffs.FailNextSync("*.index")
	if err := l.Flush(); !errors.Is(err, ErrInjected) || !l.Offline() {
		t.Fatalf("flush with a failed index fsync: %v, offline %v", err, l.Offline())
	}
}
