package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gregor-project/gregor/internal/batch"
)

// epochCacheEnv is a log and its leader epoch cache.
type epochCacheEnv struct {
	*logEnv
	l *Log
	c *LeaderEpochCache
}

func newEpochEnv(t *testing.T) *epochCacheEnv {
	e := &epochCacheEnv{logEnv: newEnv(t, testCfg())}
	e.l = e.open(true, 0, 0)
	t.Cleanup(func() { e.l.Close() })
	e.reopenCache()
	return e
}

func (e *epochCacheEnv) reopenCache() {
	e.t.Helper()
	c, err := OpenLeaderEpochCache(e.fs, e.l, e.logs.Logger())
	if err != nil {
		e.t.Fatal(err)
	}
	e.c = c
}

// appendEpoch appends a batch of n records as the leader of epoch, assigning the epoch first
// as the replica layer does.
func (e *epochCacheEnv) appendEpoch(epoch int32, n int) AppendInfo {
	e.t.Helper()
	if err := e.c.Assign(epoch, e.l.LogEndOffset()); err != nil {
		e.t.Fatal(err)
	}
	info, err := e.l.Append(simpleBatch(e.t, n, 1000, 10), AppendOptions{AssignOffsets: true, LeaderEpoch: epoch})
	if err != nil {
		e.t.Fatal(err)
	}
	return info
}

func (e *epochCacheEnv) fileText() string {
	e.t.Helper()
	b, err := os.ReadFile(filepath.Join(e.dir, LeaderEpochCheckpointFile))
	if err != nil {
		e.t.Fatal(err)
	}
	return string(b)
}

func entries(pairs ...int64) []EpochEntry {
	var es []EpochEntry
	for i := 0; i < len(pairs); i += 2 {
		es = append(es, EpochEntry{int32(pairs[i]), pairs[i+1]})
	}
	return es
}

func checkEntries(t *testing.T, c *LeaderEpochCache, want []EpochEntry) {
	t.Helper()
	if got := c.Entries(); !slices.Equal(got, want) {
		t.Fatalf("entries %v, want %v", got, want)
	}
}

// EndOffsetFor against one cache, every case of KIP-101/KIP-279.
func TestLeaderEpochEndOffsetFor(t *testing.T) {
	es := entries(0, 0, 1, 5, 3, 10, 6, 20)
	const leo = 25
	cases := []struct {
		name      string
		requested int32
		epoch     int32
		end       int64
	}{
		{"undefined epoch", UndefinedEpoch, UndefinedEpoch, UndefinedEpochOffset},
		{"first epoch ends where the second starts", 0, 0, 5},
		{"middle epoch", 1, 1, 10},
		{"unknown epoch between two: the largest epoch below it and the next start (KIP-279)", 2, 1, 10},
		{"another gap", 4, 3, 20},
		{"gap before the latest", 5, 3, 20},
		{"latest epoch ends at the log end offset", 6, 6, leo},
		{"newer than the latest", 7, UndefinedEpoch, UndefinedEpochOffset},
	}
	for _, tc := range cases {
		ep, end := endOffsetFor(es, tc.requested, leo)
		if ep != tc.epoch || end != tc.end {
			t.Errorf("%s: EndOffsetFor(%d) = (%d, %d), want (%d, %d)", tc.name, tc.requested, ep, end, tc.epoch, tc.end)
		}
	}
	// Retention moved the start past epochs 0 and 1: a request older than the first entry
	// gets the requested epoch and the first entry's start, so the asker truncates there.
	trimmed := truncateEpochsFromStart(es, 12)
	if !slices.Equal(trimmed, entries(3, 12, 6, 20)) {
		t.Fatalf("truncated from start: %v", trimmed)
	}
	for _, req := range []int32{0, 1, 2} {
		if ep, end := endOffsetFor(trimmed, req, leo); ep != req || end != 12 {
			t.Errorf("EndOffsetFor(%d) after retention = (%d, %d), want (%d, 12)", req, ep, end, req)
		}
	}
	if ep, end := endOffsetFor(nil, 0, leo); ep != UndefinedEpoch || end != UndefinedEpochOffset {
		t.Errorf("empty cache: (%d, %d)", ep, end)
	}
}

func TestLeaderEpochAssign(t *testing.T) {
	e := newEpochEnv(t)
	c := e.c
	checkEntries(t, c, nil)
	if c.LatestEpoch() != UndefinedEpoch {
		t.Fatal("latest epoch of an empty cache")
	}
	steps := []struct {
		name  string
		epoch int32
		start int64
		want  []EpochEntry
	}{
		{"first", 1, 0, entries(1, 0)},
		{"same epoch, later offset: no change", 1, 7, entries(1, 0)},
		{"next epoch", 2, 10, entries(1, 0, 2, 10)},
		{"same epoch, earlier offset: moves the start back", 2, 8, entries(1, 0, 2, 8)},
		{"a leader that wrote nothing is replaced at the same offset", 3, 12, entries(1, 0, 2, 8, 3, 12)},
		{"...by the next one", 4, 12, entries(1, 0, 2, 8, 4, 12)},
		{"an older epoch replaces itself and the newer entries", 2, 15, entries(1, 0, 2, 15)},
		{"a start offset below existing ones removes them", 5, 5, entries(1, 0, 5, 5)},
	}
	for _, st := range steps {
		if err := c.Assign(st.epoch, st.start); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		checkEntries(t, c, st.want)
	}
	if !strings.Contains(e.logs.String(), "removed conflicting entries") {
		t.Fatal("conflicting removals are not logged")
	}
	for _, bad := range []EpochEntry{{-1, 0}, {0, -1}} {
		if err := c.Assign(bad.Epoch, bad.StartOffset); !errors.Is(err, ErrInvalidEpochEntry) {
			t.Fatalf("Assign(%v): %v", bad, err)
		}
	}
	if got := e.fileText(); got != "0\n2\n1 0\n5 5\n" {
		t.Fatalf("file %q", got)
	}
}

func TestLeaderEpochTruncate(t *testing.T) {
	e := newEpochEnv(t)
	c := e.c
	for _, en := range entries(0, 0, 2, 10, 4, 20, 7, 30) {
		if err := c.Assign(en.Epoch, en.StartOffset); err != nil {
			t.Fatal(err)
		}
	}
	if got := []int32{c.EpochForOffset(0), c.EpochForOffset(9), c.EpochForOffset(10), c.EpochForOffset(29), c.EpochForOffset(1000)}; !slices.Equal(got, []int32{0, 0, 2, 4, 7}) {
		t.Fatalf("EpochForOffset: %v", got)
	}
	if err := c.TruncateFromEnd(31); err != nil { // keeps the entry at 30
		t.Fatal(err)
	}
	checkEntries(t, c, entries(0, 0, 2, 10, 4, 20, 7, 30))
	if err := c.TruncateFromEnd(30); err != nil { // removes it: 30 is gone from the log
		t.Fatal(err)
	}
	checkEntries(t, c, entries(0, 0, 2, 10, 4, 20))
	if err := c.TruncateFromEnd(-1); err != nil {
		t.Fatal(err)
	}
	checkEntries(t, c, entries(0, 0, 2, 10, 4, 20))
	if err := c.TruncateFromStart(10); err != nil { // exclusive: the entry at 10 stays as it is
		t.Fatal(err)
	}
	checkEntries(t, c, entries(2, 10, 4, 20))
	if err := c.TruncateFromStart(15); err != nil {
		t.Fatal(err)
	}
	checkEntries(t, c, entries(2, 15, 4, 20))
	if c.EpochForOffset(14) != UndefinedEpoch {
		t.Fatal("epoch for an offset before the first entry")
	}
	if err := c.TruncateFromStart(100); err != nil {
		t.Fatal(err)
	}
	checkEntries(t, c, entries(4, 100))
	if got := e.fileText(); got != "0\n1\n4 100\n" {
		t.Fatalf("file %q", got)
	}
	if err := c.Clear(); err != nil {
		t.Fatal(err)
	}
	checkEntries(t, c, nil)
	if got := e.fileText(); got != "0\n0\n" {
		t.Fatalf("file %q", got)
	}
}

// The file survives a reopen; a missing file is rebuilt from the batches' epochs.
func TestLeaderEpochOpenAndRebuild(t *testing.T) {
	e := newEpochEnv(t)
	e.appendEpoch(0, 3) // 0..2
	e.appendEpoch(0, 2) // 3..4
	e.appendEpoch(2, 4) // 5..8
	e.appendEpoch(5, 1) // 9
	e.appendEpoch(5, 1) // 10
	want := entries(0, 0, 2, 5, 5, 9)
	checkEntries(t, e.c, want)
	if got := e.fileText(); got != "0\n3\n0 0\n2 5\n5 9\n" {
		t.Fatalf("file %q", got)
	}
	e.reopenCache()
	checkEntries(t, e.c, want)

	if err := os.Remove(filepath.Join(e.dir, LeaderEpochCheckpointFile)); err != nil {
		t.Fatal(err)
	}
	e.reopenCache()
	checkEntries(t, e.c, want)
	if e.fileText() != "0\n3\n0 0\n2 5\n5 9\n" {
		t.Fatal("the rebuilt cache was not written")
	}

	// Rebuilding after the log start offset moved into epoch 2's batch: the entry starts at
	// the log start offset, not at the batch's base offset.
	e.l.SetHighWatermark(e.l.LogEndOffset())
	if err := e.l.SetLogStartOffset(6); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(e.dir, LeaderEpochCheckpointFile)); err != nil {
		t.Fatal(err)
	}
	e.reopenCache()
	checkEntries(t, e.c, entries(2, 6, 5, 9))
}

// Open repairs a file that is ahead of the log (entries past the log end offset, as after a
// crash between Assign and the append, or a lost truncation) or behind it (an Assign lost).
func TestLeaderEpochOpenRepairs(t *testing.T) {
	e := newEpochEnv(t)
	e.appendEpoch(1, 5) // 0..4
	e.appendEpoch(3, 5) // 5..9
	path := filepath.Join(e.dir, LeaderEpochCheckpointFile)

	// Ahead: epoch 4 assigned at 10 but its batch never written; epoch 9 at 40 left over.
	if err := os.WriteFile(path, []byte("0\n4\n1 0\n3 5\n4 10\n9 40\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.reopenCache()
	checkEntries(t, e.c, entries(1, 0, 3, 5))
	if e.fileText() != "0\n2\n1 0\n3 5\n" {
		t.Fatalf("repaired file %q", e.fileText())
	}

	// Behind: the file lost epoch 3 and the log's last batch is epoch 3.
	if err := os.WriteFile(path, []byte("0\n1\n1 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.reopenCache()
	checkEntries(t, e.c, entries(1, 0, 3, 5))
	if !strings.Contains(e.logs.String(), "behind the log") {
		t.Fatal("the tail scan is not logged")
	}

	// Behind the log start offset: the first entry moves up to it.
	e.l.SetHighWatermark(e.l.LogEndOffset())
	if err := e.l.SetLogStartOffset(7); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("0\n2\n1 0\n3 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.reopenCache()
	checkEntries(t, e.c, entries(3, 7))
}

func TestLeaderEpochMalformedFile(t *testing.T) {
	for _, bad := range []string{
		"",
		"1\n0\n",
		"0\n2\n1 0\n",
		"0\n1\n1\n",
		"0\n1\n-1 0\n",
		"0\n1\n1 x\n",
		"0\n2\n2 0\n1 5\n",   // epochs decrease
		"0\n2\n1 5\n2 5\n",   // start offsets do not increase
		"0\n1\n1 0\nextra\n", // trailing data
		"0\n-1\n",
	} {
		if _, err := parseEpochCheckpoint([]byte(bad)); !errors.Is(err, errMalformedEpochCheckpoint) {
			t.Errorf("parse %q: %v", bad, err)
		}
	}
	if es, err := parseEpochCheckpoint([]byte("0\n2\n1 0\n4 17\n")); err != nil || !slices.Equal(es, entries(1, 0, 4, 17)) {
		t.Fatalf("parse: %v %v", es, err)
	}

	e := newEpochEnv(t)
	e.appendEpoch(2, 3)
	if err := os.WriteFile(filepath.Join(e.dir, LeaderEpochCheckpointFile), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.reopenCache()
	checkEntries(t, e.c, entries(2, 0))
	if !strings.Contains(e.logs.String(), "malformed") {
		t.Fatal("a malformed file is not logged")
	}
}

// A failed file write changes nothing: the caller sees the error before appending.
func TestLeaderEpochWriteFailure(t *testing.T) {
	e := newEpochEnv(t)
	ffs := NewFaultFS(OS)
	e.fs = ffs
	e.reopenCache()
	if err := e.c.Assign(1, 0); err != nil {
		t.Fatal(err)
	}
	// Assign(2, 0) drops epoch 1 (a truncation): written durably, so a failing fsync fails it.
	ffs.FailNextSync(LeaderEpochCheckpointFile + ".tmp")
	if err := e.c.Assign(2, 0); !errors.Is(err, ErrInjected) {
		t.Fatalf("Assign with a failing fsync: %v", err)
	}
	checkEntries(t, e.c, entries(1, 0))
	// An append-side Assign is not fsynced, but a failing write still fails it.
	ffs.FailNextWrite(LeaderEpochCheckpointFile + ".tmp")
	if err := e.c.Assign(2, 5); !errors.Is(err, ErrInjected) {
		t.Fatalf("Assign with a failing write: %v", err)
	}
	checkEntries(t, e.c, entries(1, 0))
	ffs.FailNextWrite(LeaderEpochCheckpointFile + ".tmp")
	if err := e.c.TruncateFromEnd(0); !errors.Is(err, ErrInjected) {
		t.Fatalf("TruncateFromEnd with a failing write: %v", err)
	}
	checkEntries(t, e.c, entries(1, 0))
	if e.fileText() != "0\n1\n1 0\n" {
		t.Fatalf("file %q", e.fileText())
	}
}

// AssignBatches takes the epochs of a follower's fetched batches, one file write for many.
func TestLeaderEpochAssignBatches(t *testing.T) {
	e := newEpochEnv(t)
	var raw []byte
	off := int64(0)
	for _, ep := range []int32{-1, 0, 0, 3, 3, 4} {
		b := simpleBatch(t, 2, 1000, 10)
		setBatch(b, off, ep)
		raw = append(raw, b...)
		off += 2
	}
	if err := e.c.AssignBatches(raw); err != nil {
		t.Fatal(err)
	}
	checkEntries(t, e.c, entries(0, 2, 3, 6, 4, 10))
	if err := e.c.AssignBatches(raw[:10]); !errors.Is(err, ErrInvalidBatch) {
		t.Fatalf("torn batches: %v", err)
	}
	if err := e.c.AssignBatches(nil); err != nil {
		t.Fatal(err)
	}
}

// setBatch stamps a batch's base offset and leader epoch, as the leader's Append does.
func setBatch(b []byte, base int64, epoch int32) {
	batch.SetBaseOffset(b, base)
	batch.SetPartitionLeaderEpoch(b, epoch)
}

// Readers take no lock and always see a well-formed cache while a writer changes it.
func TestLeaderEpochConcurrentReaders(t *testing.T) {
	e := newEpochEnv(t)
	e.fs = noSyncFS{OS}
	e.reopenCache()
	c := e.c
	done := make(chan struct{})
	errs := make(chan string, 1)
	for range 2 {
		go func() {
			for {
				select {
				case <-done:
					errs <- ""
					return
				default:
				}
				es := c.Entries()
				for i := 1; i < len(es); i++ {
					if es[i].Epoch <= es[i-1].Epoch || es[i].StartOffset <= es[i-1].StartOffset {
						errs <- fmt.Sprintf("entries out of order: %v", es)
						return
					}
				}
				// Each call sees one whole version: a defined answer is never for a newer epoch
				// than asked, and never ends before the epoch's start.
				req := int32(len(es))
				if ep, end := c.EndOffsetFor(req, 1<<40); end != UndefinedEpochOffset && (ep > req || end < 0) {
					errs <- fmt.Sprintf("EndOffsetFor(%d) = %d, %d", req, ep, end)
					return
				}
			}
		}()
	}
	for i := range 200 {
		if err := c.Assign(int32(i), int64(10*i)); err != nil {
			t.Fatal(err)
		}
		if i%10 == 9 {
			if err := c.TruncateFromEnd(int64(10 * (i - 2))); err != nil {
				t.Fatal(err)
			}
			if err := c.TruncateFromStart(int64(5 * i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(done)
	for range 2 {
		if msg := <-errs; msg != "" {
			t.Fatal(msg)
		}
	}
}

// noSyncFS skips fsyncs, for tests that write many small files.
type noSyncFS struct{ FS }

type noSyncFile struct{ File }

func (noSyncFile) Sync() error { return nil }

func (fs noSyncFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := fs.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return noSyncFile{f}, nil
}

func (noSyncFS) SyncDir(string) error { return nil }
