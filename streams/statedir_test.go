package streams

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The pebble key-value core and the in-memory one agree with a map under random writes,
// deletions and batches, across close and reopen of the pebble one.
func TestKVStoresMatchReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	dir := filepath.Join(t.TempDir(), "kv")
	open := func() pebbleKV {
		p, err := openPebble(dir, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		return pebbleKV{p}
	}
	pk := open()
	defer func() {
		if err := pk.close(); err != nil {
			t.Error(err)
		}
	}()
	mk := newMemBytes()
	ref := map[string]string{}
	for step := range 2000 {
		k := []byte(fmt.Sprintf("k%d", rng.IntN(50)))
		switch op := rng.IntN(10); {
		case op < 5:
			v := []byte(fmt.Sprint(step))
			for _, s := range []kvBytes{pk, mk} {
				if err := s.set(k, v); err != nil {
					t.Fatal(err)
				}
			}
			ref[string(k)] = string(v)
		case op < 7:
			for _, s := range []kvBytes{pk, mk} {
				if err := s.set(k, nil); err != nil {
					t.Fatal(err)
				}
			}
			delete(ref, string(k))
		case op < 9:
			recs := []kvPair{{k, []byte("b"), 0}, {[]byte("k0"), nil, 0}, {k, []byte(fmt.Sprint("b", step)), 0}}
			for _, s := range []kvBytes{pk, mk} {
				if err := s.apply(recs); err != nil {
					t.Fatal(err)
				}
			}
			ref[string(k)] = fmt.Sprint("b", step)
			if string(k) != "k0" {
				delete(ref, "k0")
			}
		default:
			if err := pk.flush(); err != nil {
				t.Fatal(err)
			}
			if err := pk.close(); err != nil {
				t.Fatal(err)
			}
			pk = open()
		}
		for name, s := range map[string]kvBytes{"pebble": pk, "memory": mk} {
			var keys []string
			got := map[string]string{}
			if err := s.scan(func(k, v []byte) bool {
				keys = append(keys, string(k))
				got[string(k)] = string(v)
				return true
			}); err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, ref) || !slices.IsSorted(keys) {
				t.Fatalf("step %d: %s holds %v (keys %v), want %v", step, name, got, keys, ref)
			}
			if n, err := s.count(); err != nil || n != len(ref) {
				t.Fatalf("step %d: %s count %d %v, want %d", step, name, n, err, len(ref))
			}
			v, ok, err := s.get(k)
			if want, wok := ref[string(k)]; err != nil || ok != wok || string(v) != want {
				t.Fatalf("step %d: %s get(%s) = %q %v %v", step, name, k, v, ok, err)
			}
		}
	}
}

// A write that was not flushed is gone after close (the store keeps no log of its own; the
// changelog tail past the checkpoint restores it), a flushed one stays; wipe empties.
func TestPebbleFlushCloseWipe(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "kv")
	p, err := openPebble(dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	s := pebbleKV{p}
	if err := s.set([]byte("flushed"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.set([]byte("unflushed"), []byte("2")); err != nil {
		t.Fatal(err)
	}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	if err := p.open(); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.get([]byte("flushed")); err != nil || !ok {
		t.Fatalf("flushed write lost: %v %v", ok, err)
	}
	if _, ok, err := s.get([]byte("unflushed")); err != nil || ok {
		t.Fatalf("unflushed write survived a close: %v %v", ok, err)
	}
	if err := s.wipe(); err != nil {
		t.Fatal(err)
	}
	if n, err := s.count(); err != nil || n != 0 {
		t.Fatalf("after wipe: %d entries, %v", n, err)
	}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
}

func TestCheckpointFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), checkpointFile)
	if got, err := readCheckpoint(path); got != nil || err != nil {
		t.Fatalf("missing checkpoint: %v %v", got, err)
	}
	want := map[topicPartition]int64{{"app-counts-changelog", 0}: 41, {"app-other-changelog", 3}: 0}
	if err := writeCheckpoint(path, want); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Kafka's OffsetCheckpoint layout: version, count, one "topic partition offset" a line.
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	slices.Sort(lines[2:])
	if strings.Join(lines, "|") != "0|2|app-counts-changelog 0 41|app-other-changelog 3 0" {
		t.Fatalf("checkpoint file:\n%s", b)
	}
	got, err := readCheckpoint(path)
	if err != nil || !maps.Equal(got, want) {
		t.Fatalf("read back %v %v, want %v", got, err, want)
	}
	for _, bad := range []string{"1\n0\n", "0\n2\nt 0 1\n", "0\n1\nt x 1\n", "0\n1\nt 0 1\nu 0 2\n"} {
		if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := readCheckpoint(path); err == nil {
			t.Errorf("checkpoint %q read as %v", bad, got)
		}
	}
}

// A task directory is held by one locker at a time: a second lock fails while the first
// is held (in this process, and in another process), and succeeds once it is released.
func TestTaskDirectoryLock(t *testing.T) {
	dir := t.TempDir()
	l, err := lockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockDir(dir); !errors.Is(err, errDirLocked) {
		t.Fatalf("second lock in the same process: %v", err)
	}
	if _, err := exec.LookPath("flock"); err == nil {
		out, err := exec.Command("flock", "-n", filepath.Join(dir, ".lock"), "true").CombinedOutput()
		if err == nil {
			t.Fatalf("another process took the lock held here: %s", out)
		}
	}
	if err := l.unlock(); err != nil {
		t.Fatal(err)
	}
	l2, err := lockDir(dir)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	if err := l2.unlock(); err != nil {
		t.Fatal(err)
	}
}

// CleanUp deletes the application's state directory, but not a task directory another
// instance holds.
func TestCleanUp(t *testing.T) {
	root := t.TempDir()
	b := windowedCounts("")
	a, err := New(b, Config{ApplicationID: "app", Brokers: []string{"127.0.0.1:1"}, StateDir: root})
	if err != nil {
		t.Fatal(err)
	}
	held, err := a.topo.state.lockTask(TaskID{Subtopology: 0, Partition: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "app", "0_0", "wc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := a.CleanUp(); !errors.Is(err, errDirLocked) {
		t.Fatalf("CleanUp with a held task directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "app", "0_0")); !os.IsNotExist(err) {
		t.Fatalf("free task directory not removed: %v", err)
	}
	if err := held.unlock(); err != nil {
		t.Fatal(err)
	}
	if err := a.CleanUp(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "app")); !os.IsNotExist(err) {
		t.Fatalf("application directory not removed: %v", err)
	}
}

// A store type other than Persistent and InMemory is refused, in the configuration and on
// an operator.
func TestUnknownStoreType(t *testing.T) {
	if _, err := New(windowedCounts(""), Config{ApplicationID: "a", Brokers: []string{"x:1"}, DefaultDSLStore: "rocksDB"}); err == nil {
		t.Fatal("New accepted default.dsl.store rocksDB")
	}
	if _, err := New(windowedCounts("leveldb"), Config{ApplicationID: "a", Brokers: []string{"x:1"}}); err == nil {
		t.Fatal("New accepted an operator's store type leveldb")
	}
	if _, err := New(windowedCounts(InMemory), Config{ApplicationID: "a", Brokers: []string{"x:1"}, StateDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
}
