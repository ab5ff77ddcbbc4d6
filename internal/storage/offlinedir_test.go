package storage

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A failed log dir goes offline alone: its logs refuse every call, its partitions are not
// re-created elsewhere, new partitions go to the healthy dir, Usage says which dir failed,
// and the healthy dir keeps its checkpoints and clean-shutdown marker.
func TestFailDirTakesOnlyThatDirOffline(t *testing.T) {
	dirs := tempDirs(t, 2)
	m := openDirs(t, dirs)
	var logs []*Log
	for p := range 4 {
		l, err := m.GetOrCreate("t", int32(p), testCfg())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(simpleBatch(t, 1, 1000, 10), AppendOptions{AssignOffsets: true}); err != nil {
			t.Fatal(err)
		}
		logs = append(logs, l)
	}
	failed, err := m.FailDir(dirs[1], errors.New("disk gone"))
	if err != nil {
		t.Fatal(err)
	}
	if !failed.First || failed.AllFailed || len(failed.Partitions) != 2 || failed.ID != m.DirIDs()[1] {
		t.Fatalf("FailDir = %+v", failed)
	}
	for p, l := range logs {
		inFailed := m.DirOf("t", int32(p)) == filepath.Clean(dirs[1])
		_, aerr := l.Append(simpleBatch(t, 1, 1000, 10), AppendOptions{AssignOffsets: true})
		if inFailed != errors.Is(aerr, ErrLogOffline) || (!inFailed && aerr != nil) {
			t.Errorf("partition %d (in failed dir %v): append: %v", p, inFailed, aerr)
		}
		_, gerr := m.GetOrCreate("t", int32(p), testCfg())
		if inFailed != errors.Is(gerr, ErrLogOffline) || (!inFailed && gerr != nil) {
			t.Errorf("partition %d (in failed dir %v): GetOrCreate: %v", p, inFailed, gerr)
		}
	}
	for p := 4; p < 7; p++ {
		if _, err := m.GetOrCreate("t", int32(p), testCfg()); err != nil {
			t.Fatal(err)
		}
		if got := m.DirOf("t", int32(p)); got != filepath.Clean(dirs[0]) {
			t.Errorf("new partition %d placed in %s", p, got)
		}
	}
	if _, _, err := m.CreateFuture("t", 4, dirs[1]); !errors.Is(err, ErrLogOffline) {
		t.Errorf("a move into the failed dir: %v", err)
	}
	us := m.Usage()
	if us[0].Offline || !us[1].Offline || len(us[1].Sizes) != 0 || len(us[0].Sizes) != 5 {
		t.Errorf("usage = %+v", us)
	}
	if again, _ := m.FailDir(dirs[1], errors.New("again")); again.First {
		t.Error("a second FailDir of one dir did something")
	}
	if err := m.Close(); !errors.Is(err, ErrLogDirOffline) {
		t.Errorf("close with a failed dir: %v, want ErrLogDirOffline", err)
	}
	if _, err := os.Stat(filepath.Join(dirs[0], CleanShutdownFile)); err != nil {
		t.Errorf("healthy dir has no clean-shutdown marker: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dirs[1], CleanShutdownFile)); !os.IsNotExist(err) {
		t.Errorf("failed dir got a clean-shutdown marker: %v", err)
	}
}

// Once every dir has failed, FailDir says so and no partition can be placed.
func TestFailDirAllFailed(t *testing.T) {
	dirs := tempDirs(t, 2)
	m := openDirs(t, dirs)
	defer m.Close()
	if f, _ := m.FailDir(dirs[0], errors.New("x")); f.AllFailed {
		t.Fatal("one of two dirs failed: all failed")
	}
	if f, _ := m.FailDir(dirs[1], errors.New("y")); !f.AllFailed {
		t.Fatal("both dirs failed: not all failed")
	}
	if _, err := m.GetOrCreate("t", 0, testCfg()); !errors.Is(err, ErrLogOffline) {
		t.Errorf("GetOrCreate with every dir failed: %v", err)
	}
}
