package storage

import (
	"math"
	"testing"
)

// checkPublished fails unless the lock-free mirror (pub) equals the locked fields.
func checkPublished(t *testing.T, l *Log, when string) {
	t.Helper()
	l.mu.RLock()
	defer l.mu.RUnlock()
	if got, want := l.pub.logStartOffset.Load(), l.mu.logStartOffset; got != want {
		t.Errorf("%s: published log start offset %d, locked %d", when, got, want)
	}
	if got, want := l.pub.logEndOffset.Load(), l.mu.logEndOffset; got != want {
		t.Errorf("%s: published log end offset %d, locked %d", when, got, want)
	}
	if got, want := l.pub.open.Load(), l.mu.state == stateOpen; got != want {
		t.Errorf("%s: published open %v, locked open %v", when, got, want)
	}
}

// Every change of the log start/end offsets or the state is published for the lock-free
// readers: open, append, roll, retention, DeleteRecords, truncation, offline, close.
func TestPublishedOffsets(t *testing.T) {
	cfg := testCfg()
	fs := NewFaultFS(OS)
	e := newEnv(t, cfg)
	e.fs = fs
	l := e.open(true, 0, 0)
	checkPublished(t, l, "open")
	for i := range 40 {
		mustAppend(t, l, simpleBatch(t, 2, int64(i), 200))
	}
	checkPublished(t, l, "append")
	if l.NumSegments() < 3 {
		t.Fatalf("%d segments: want rolls", l.NumSegments())
	}
	second := l.mu.segments[1].baseOffset
	if err := l.SetLogStartOffset(second + 1); err != nil {
		t.Fatal(err)
	}
	checkPublished(t, l, "SetLogStartOffset")
	if err := l.TruncateTo(l.LogEndOffset() - 3); err != nil {
		t.Fatal(err)
	}
	checkPublished(t, l, "TruncateTo")
	if err := l.TruncateFullyAndStartAt(500); err != nil {
		t.Fatal(err)
	}
	checkPublished(t, l, "TruncateFullyAndStartAt")
	// The fast path answers a read at the end without the lock, exactly as the locked one.
	if s, err := l.Read(500, 100, math.MaxInt64, true); err != nil || s.Size != 0 {
		t.Fatalf("read at the end: %+v %v", s, err)
	}
	mustAppend(t, l, simpleBatch(t, 2, 1, 200))
	fs.FailNextWrite("*.log")
	if _, err := l.Append(simpleBatch(t, 2, 1, 200), AppendOptions{AssignOffsets: true}); err == nil {
		t.Fatal("append with a failed write succeeded")
	}
	checkPublished(t, l, "offline")
	if !l.Offline() {
		t.Fatal("not offline after a failed write")
	}
	if _, err := l.Read(l.LogEndOffset(), 100, math.MaxInt64, true); err == nil {
		t.Fatal("an offline log answered a read at its end")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	checkPublished(t, l, "close")
}
