package replica

import (
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gregor-project/gregor/internal/storage"
)

// Get and Topic see partitions as they are opened and removed, without locks, while other
// goroutines look them up (go test -race).
func TestManagerLookups(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	logs, err := storage.OpenManager(storage.OS, t.TempDir(), log)
	if err != nil {
		t.Fatal(err)
	}
	m := NewManager(storage.OS, logs, log)
	defer m.Close()
	cfg := storage.DefaultConfig()
	cfg.SegmentIndexBytes = 1 << 12
	s := Settings{MaxMessageBytes: 1 << 20, MinInsyncReplicas: 1, Log: cfg}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // a reader racing the writers
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			for p := int32(-1); p < 12; p++ {
				if got := m.Get("t", p); got != nil && (got.Topic != "t" || got.Index != p) {
					t.Errorf("Get(t, %d) = %s-%d", p, got.Topic, got.Index)
				}
			}
			_ = m.Topic("t").Get(3)
		}
	}()
	for _, p := range []int32{0, 5, 1, 9, 2} { // out of order: the array grows twice
		if _, err := m.Open("t", p, s); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
	tp := m.Topic("t")
	for p := int32(-1); p < 12; p++ {
		want := p == 0 || p == 5 || p == 1 || p == 9 || p == 2
		if got := tp.Get(p); (got != nil) != want || got != m.Get("t", p) {
			t.Fatalf("partition %d: %v, want present %v", p, got, want)
		}
	}
	if m.Get("other", 0) != nil || m.Topic("other").Get(0) != nil {
		t.Fatal("a partition of a topic never opened")
	}
	if err := m.Remove("t", 5); err != nil {
		t.Fatal(err)
	}
	if m.Get("t", 5) != nil || m.Topic("t").Get(5) != nil || m.Get("t", 9) == nil {
		t.Fatal("Remove did not take exactly partition 5 away")
	}
}

// Close writes a producer snapshot only for what changed since the newest one: an empty log
// gets none, a written log one at its end, and a log closed again unchanged keeps that file
// (a broker of many idle partitions does not fsync a file per partition at every stop).
func TestCloseSnapshotsOnlyChangedPartitions(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	dir := t.TempDir()
	s := Settings{MaxMessageBytes: 1 << 20, MinInsyncReplicas: 1, Log: storage.DefaultConfig()}
	open := func() (*Manager, *Partition, *Partition) {
		t.Helper()
		logs, err := storage.OpenManager(storage.OS, dir, log)
		if err != nil {
			t.Fatal(err)
		}
		m := NewManager(storage.OS, logs, log)
		idle, err := m.Open("t", 0, s)
		if err != nil {
			t.Fatal(err)
		}
		busy, err := m.Open("t", 1, s)
		if err != nil {
			t.Fatal(err)
		}
		return m, idle, busy
	}
	snapshots := func(p *Partition) map[string]time.Time {
		t.Helper()
		offs, err := listSnapshots(storage.OS, p.Log().Dir())
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]time.Time{}
		for _, off := range offs {
			fi, err := os.Stat(snapshotName(p.Log().Dir(), off))
			if err != nil {
				t.Fatal(err)
			}
			out[filepath.Base(fi.Name())] = fi.ModTime()
		}
		return out
	}

	m, idle, busy := open()
	if _, err := busy.Log().Append(buildBatch(t, "a", "b"), storage.AppendOptions{AssignOffsets: true}); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if got := snapshots(idle); len(got) != 0 {
		t.Fatalf("an empty log got snapshots %v", got)
	}
	first := snapshots(busy)
	if len(first) != 1 {
		t.Fatalf("a written log got snapshots %v, want one", first)
	}

	m, idle, busy = open()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if got := snapshots(busy); len(got) != 1 || !maps.Equal(got, first) {
		t.Fatalf("closed unchanged: snapshots %v, want %v untouched", got, first)
	}
	if got := snapshots(idle); len(got) != 0 {
		t.Fatalf("an empty log got snapshots %v", got)
	}

	m, _, busy = open()
	if _, err := busy.Log().Append(buildBatch(t, "c"), storage.AppendOptions{AssignOffsets: true}); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if got := snapshots(busy); len(got) != 2 {
		t.Fatalf("written again: snapshots %v, want a new one beside the old", got)
	}
}
