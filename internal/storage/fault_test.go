package storage

import (
	"errors"
	"math"
	"path/filepath"
	"testing"
)

func faultEnv(t *testing.T) (*logEnv, *FaultFS) {
	e := newEnv(t, testCfg())
	ffs := NewFaultFS(OS)
	e.fs = ffs
	return e, ffs
}

func TestFailedWriteTakesLogOffline(t *testing.T) {
	for _, torn := range []int{0, 100} {
		e, ffs := faultEnv(t)
		l := e.open(true, 0, 0)
		fill(t, l, 10, 1, 0, 100)
		leo := l.LogEndOffset()
		if torn > 0 {
			ffs.TornWrite("*.log", torn)
		} else {
			ffs.FailNextWrite("*.log")
		}
		_, err := l.Append(simpleBatch(t, 1, 1, 100), AppendOptions{AssignOffsets: true})
		if !errors.Is(err, ErrInjected) || !errors.Is(err, ErrLogOffline) {
			t.Fatalf("append error %v", err)
		}
		if ffs.Fired() != 1 {
			t.Fatal("fault not fired")
		}
		// Offline for everything afterwards, even with the fault gone.
		if _, err := l.Append(simpleBatch(t, 1, 1, 100), AppendOptions{AssignOffsets: true}); !errors.Is(err, ErrLogOffline) {
			t.Fatalf("append after failure: %v", err)
		}
		if _, err := l.Read(0, 100, math.MaxInt64, true); !errors.Is(err, ErrLogOffline) {
			t.Fatalf("read after failure: %v", err)
		}
		if err := l.Flush(); !errors.Is(err, ErrLogOffline) {
			t.Fatalf("flush after failure: %v", err)
		}
		if !l.Offline() || l.LogEndOffset() != leo {
			t.Fatal("state after failure")
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		// Reopened (unclean: no marker after an offline log), the earlier data reads back
		// and the torn bytes are gone.
		l = e.open(false, 0, 0)
		if l.LogEndOffset() != leo || len(readAllOffsets(t, l)) != 10 {
			t.Fatalf("torn=%d: LEO %d after reopen", torn, l.LogEndOffset())
		}
		l.Close()
	}
}

func TestFailedFsyncSurfacesFromFlush(t *testing.T) {
	e, ffs := faultEnv(t)
	l := e.open(true, 0, 0)
	defer l.Close()
	fill(t, l, 5, 1, 0, 100)
	ffs.FailNextSync("*.log")
	err := l.Flush()
	if !errors.Is(err, ErrInjected) || !errors.Is(err, ErrLogOffline) {
		t.Fatalf("flush error %v", err)
	}
	if l.RecoveryPoint() != 0 {
		t.Fatal("recovery point moved past a failed fsync")
	}
	if _, err := l.Append(simpleBatch(t, 1, 1, 100), AppendOptions{AssignOffsets: true}); !errors.Is(err, ErrLogOffline) {
		t.Fatal(err)
	}
}

func TestFlushMovesRecoveryPoint(t *testing.T) {
	e, ffs := faultEnv(t)
	l := e.open(true, 0, 0)
	defer l.Close()
	fill(t, l, 40, 1, 0, 100) // several segments
	if l.RecoveryPoint() != 0 {
		t.Fatal("recovery point before flush")
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if l.RecoveryPoint() != l.LogEndOffset() {
		t.Fatal("recovery point after flush")
	}
	// A failed directory sync also fails the flush.
	cfg := e.cfg
	l2dir := filepath.Join(t.TempDir(), "t-1")
	l2, err := Open(ffs, l2dir, cfg, OpenOptions{Clean: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	fill(t, l2, 1, 1, 0, 10)
	ffs.Inject(Fault{Op: FaultSyncDir})
	if err := l2.Flush(); !errors.Is(err, ErrInjected) {
		t.Fatalf("dir sync: %v", err)
	}
}

// TestFlushMessages: flush.messages makes Append fsync.
func TestFlushMessages(t *testing.T) {
	cfg := testCfg()
	cfg.FlushIntervalMessages = 3
	e := newEnv(t, cfg)
	l := e.open(true, 0, 0)
	defer l.Close()
	mustAppend(t, l, simpleBatch(t, 2, 1, 10))
	if l.RecoveryPoint() != 0 {
		t.Fatal("flushed early")
	}
	mustAppend(t, l, simpleBatch(t, 1, 1, 10))
	if l.RecoveryPoint() != 3 {
		t.Fatalf("recovery point %d", l.RecoveryPoint())
	}
}

// TestLostFsync: data that was never fsynced is lost in a crash; what Flush covered is not.
func TestLostFsync(t *testing.T) {
	e, ffs := faultEnv(t)
	l := e.open(true, 0, 0)
	fill(t, l, 20, 1, 0, 100)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	rp := l.RecoveryPoint()
	fill(t, l, 20, 1, 0, 100)
	// Crash: drop the log without Close, then lose the page cache.
	crash(l)
	if err := ffs.DropUnsynced(); err != nil {
		t.Fatal(err)
	}
	l = e.open(false, rp, 0)
	defer l.Close()
	// Only the flushed batches survive. A segment rolled after the flush may survive empty,
	// leaving a gap of lost offsets, as in Kafka: offsets are not reused. A reader in the gap
	// gets nothing until the next append, then that batch.
	leo := l.LogEndOffset()
	if leo < rp || leo > 40 {
		t.Fatalf("LEO %d, recovery point was %d", leo, rp)
	}
	info := mustAppend(t, l, simpleBatch(t, 1, 1, 10))
	offs := readAllOffsets(t, l)
	if len(offs) != 21 || offs[19] != 19 || offs[20] != leo || info.FirstOffset != leo {
		t.Fatalf("%d batches survive (%v), recovery point was %d", len(offs), offs, rp)
	}
}
