package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Several log dirs: placement, per-dir checkpoints and markers, and moves between dirs.

func openDirs(t *testing.T, dirs []string) *Manager {
	t.Helper()
	m, err := OpenDirs(OS, dirs, (&testLogger{}).Logger())
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Format("c1", 1); err != nil {
		t.Fatal(err)
	}
	return m
}

func tempDirs(t *testing.T, n int) []string {
	root := t.TempDir()
	var out []string
	for i := range n {
		out = append(out, filepath.Join(root, fmt.Sprintf("d%d", i)))
	}
	return out
}

// countByDir counts the partitions of each dir.
func countByDir(m *Manager) map[string]int {
	out := map[string]int{}
	for _, u := range m.Usage() {
		out[u.Path] = len(u.Sizes)
	}
	return out
}

// Partitions created at once spread evenly: a creation in progress counts for placement.
func TestOpenDirsPlacesNewPartitionsInTheEmptiestDir(t *testing.T) {
	dirs := tempDirs(t, 3)
	m := openDirs(t, dirs)
	defer m.Close()
	var wg sync.WaitGroup
	for p := range 9 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := m.GetOrCreate("t", int32(p), testCfg()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for _, d := range dirs {
		if n := countByDir(m)[d]; n != 3 {
			t.Fatalf("%s holds %d partitions, want 3: %v", d, n, countByDir(m))
		}
	}
	// Deleting two from one dir makes it the emptiest: the next two go there.
	var in0 []int32
	for p := range 9 {
		if m.DirOf("t", int32(p)) == dirs[0] {
			in0 = append(in0, int32(p))
		}
	}
	for _, p := range in0[:2] {
		if err := m.Delete("t", p); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []int32{20, 21} {
		if _, err := m.GetOrCreate("t", p, testCfg()); err != nil {
			t.Fatal(err)
		}
		if d := m.DirOf("t", p); d != dirs[0] {
			t.Fatalf("t-%d went to %s, want the emptiest %s", p, d, dirs[0])
		}
	}
	// A preferred dir (AlterReplicaLogDirs before the replica exists) wins over placement.
	if err := m.SetPreferredDir("t", 30, dirs[2]); err != nil {
		t.Fatal(err)
	}
	if _, err := m.GetOrCreate("t", 30, testCfg()); err != nil {
		t.Fatal(err)
	}
	if d := m.DirOf("t", 30); d != dirs[2] {
		t.Fatalf("t-30 went to %s, want the preferred %s", d, dirs[2])
	}
	if err := m.SetPreferredDir("t", 31, "/not/a/log/dir"); !errors.Is(err, ErrLogDirNotFound) {
		t.Fatalf("preferred dir outside log.dirs: %v", err)
	}
}

// Each dir checkpoints its own partitions and gets its own clean-shutdown marker; directory
// ids differ; a restart finds every partition where it was.
func TestOpenDirsCheckpointsPerDir(t *testing.T) {
	dirs := tempDirs(t, 2)
	m := openDirs(t, dirs)
	for p := range 4 {
		l, err := m.GetOrCreate("t", int32(p), testCfg())
		if err != nil {
			t.Fatal(err)
		}
		mustAppend(t, l, simpleBatch(t, 3, 1, 10))
	}
	where := map[int32]string{}
	for p := range 4 {
		where[int32(p)] = m.DirOf("t", int32(p))
	}
	ids := m.DirIDs()
	if ids[0].IsZero() || ids[1].IsZero() || ids[0] == ids[1] {
		t.Fatalf("directory ids %v", ids)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, CleanShutdownFile)); err != nil {
			t.Fatalf("%s: no clean-shutdown marker: %v", d, err)
		}
		ck, err := ReadCheckpoint(OS, filepath.Join(d, RecoveryPointCheckpointFile))
		if err != nil {
			t.Fatal(err)
		}
		for p, pd := range where {
			if _, ok := ck[TopicPartition{"t", p}]; ok != (pd == d) || (ok && ck[TopicPartition{"t", p}] != 3) {
				t.Fatalf("%s's recovery points %v; t-%d is in %s", d, ck, p, pd)
			}
		}
	}
	m2 := openDirs(t, dirs)
	defer m2.Close()
	if !m2.CleanShutdown() || !slices.Equal(m2.DirIDs(), ids) {
		t.Fatalf("reopen: clean %v, ids %v (were %v)", m2.CleanShutdown(), m2.DirIDs(), ids)
	}
	for p, d := range where {
		if got := m2.DirOf("t", p); got != d {
			t.Fatalf("t-%d reopened in %s, was in %s", p, got, d)
		}
		l, err := m2.GetOrCreate("t", p, testCfg())
		if err != nil || l.LogEndOffset() != 3 {
			t.Fatalf("t-%d: %v, end %d", p, err, l.LogEndOffset())
		}
	}
}

// A future log is copied, swapped in with the log start offset kept, and the old directory
// removed; a future log whose partition is gone is removed at open.
func TestFutureLogCopyAndSwap(t *testing.T) {
	dirs := tempDirs(t, 2)
	m := openDirs(t, dirs)
	cur, err := m.GetOrCreate("t", 0, testCfg())
	if err != nil {
		t.Fatal(err)
	}
	for range 40 { // several 4 KiB segments
		mustAppend(t, cur, simpleBatch(t, 2, 1, 100))
	}
	cur.SetHighWatermark(cur.LogEndOffset())
	if err := cur.SetLogStartOffset(11); err != nil {
		t.Fatal(err)
	}
	from := m.DirOf("t", 0)
	dest := dirs[0]
	if from == dest {
		dest = dirs[1]
	}
	fl, created, err := m.CreateFuture("t", 0, dest)
	if err != nil || !created || fl.LogStartOffset() != 11 {
		t.Fatalf("create future: %v %v", err, created)
	}
	if u := m.Usage(); len(u[slices.Index(m.Dirs(), dest)].Future) != 1 {
		t.Fatalf("usage shows no future log in %s: %+v", dest, u)
	}
	since := cur.Truncations()
	for {
		n, err := CopyBatches(fl, cur, 1000, since)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	mustAppend(t, cur, simpleBatch(t, 2, 1, 100)) // behind again: the swap refuses
	if _, err := m.SwapFuture("t", 0, nil); err == nil {
		t.Fatal("swapped a future log behind the current one")
	}
	if _, err := CopyBatches(fl, cur, 1<<20, since); err != nil {
		t.Fatal(err)
	}
	nl, err := m.SwapFuture("t", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if nl.LogStartOffset() != 11 || nl.LogEndOffset() != 82 || m.DirOf("t", 0) != dest || m.Get("t", 0) != nl {
		t.Fatalf("after the swap: %d..%d in %s", nl.LogStartOffset(), nl.LogEndOffset(), m.DirOf("t", 0))
	}
	if _, err := os.Stat(filepath.Join(from, "t-0")); !os.IsNotExist(err) {
		t.Fatalf("old directory left: %v", err)
	}
	if got := mustRead(t, nl, 80, 1<<20, 82, true); len(got) != 1 || got[0].BaseOffset != 80 {
		t.Fatalf("read the last batch from the new log: %+v", got)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	// A future log of a partition that no longer exists is removed at open.
	stray := filepath.Join(from, "gone-0."+strings.Repeat("ab", 16)+"-future")
	if err := os.MkdirAll(stray, 0o755); err != nil {
		t.Fatal(err)
	}
	m2 := openDirs(t, dirs)
	defer m2.Close()
	if _, err := os.Stat(stray); !os.IsNotExist(err) {
		t.Fatalf("stray future directory kept: %v", err)
	}
	if m2.DirOf("t", 0) != dest {
		t.Fatalf("t-0 reopened in %s, want %s", m2.DirOf("t", 0), dest)
	}
	l, err := m2.GetOrCreate("t", 0, testCfg())
	if err != nil || l.LogStartOffset() != 11 || l.LogEndOffset() != 82 {
		t.Fatalf("reopened t-0: %v", err)
	}
}
