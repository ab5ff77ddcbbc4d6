package server

import (
	"testing"
	"time"
)

// The pool is non-strict, as Kafka's broker pool: a request gets in whenever any bytes are
// left, even one larger than what is left, and waiters get in in arrival order as bytes come
// back.
func TestMemoryPoolNonStrictInOrder(t *testing.T) {
	if NewMemoryPool(0) != nil || NewMemoryPool(-1) != nil {
		t.Fatal("a pool of 0 or -1 bytes must be no pool (no limit)")
	}
	p := NewMemoryPool(100)
	never := make(chan struct{})
	if waited, ok := p.acquire(60, never); waited || !ok {
		t.Fatalf("first 60 of 100 bytes: waited %v ok %v", waited, ok)
	}
	if waited, ok := p.acquire(90, never); waited || !ok { // 40 left: it gets in anyway
		t.Fatalf("90 bytes with 40 left: waited %v ok %v", waited, ok)
	}
	if got := p.Available(); got != -50 {
		t.Fatalf("available %d, want -50", got)
	}
	// Pool overdrawn: two waiters, served in order.
	got := make(chan int, 2)
	for _, n := range []int64{10, 20} {
		go func() {
			if _, ok := p.acquire(n, never); ok {
				got <- int(n)
			}
		}()
		waitFor(t, func() bool { p.mu.Lock(); defer p.mu.Unlock(); return len(p.mu.waiters) == int(n/10) })
	}
	p.release(60) // available 10: the first waiter gets in, leaving 0
	if n := <-got; n != 10 {
		t.Fatalf("first waiter let in: %d bytes, want the 10 that waited first", n)
	}
	select {
	case n := <-got:
		t.Fatalf("%d bytes let in with the pool empty", n)
	default:
	}
	p.release(1)
	if n := <-got; n != 20 {
		t.Fatalf("second waiter: %d", n)
	}
	if a := p.Available(); a != -19 {
		t.Fatalf("available %d, want -19", a)
	}
}

// A connection waiting for memory gives up when the server stops, taking nothing.
func TestMemoryPoolStop(t *testing.T) {
	p := NewMemoryPool(10)
	never := make(chan struct{})
	p.acquire(10, never)
	stop := make(chan struct{})
	done := make(chan bool)
	go func() {
		_, ok := p.acquire(5, stop)
		done <- ok
	}()
	waitFor(t, func() bool { p.mu.Lock(); defer p.mu.Unlock(); return len(p.mu.waiters) == 1 })
	close(stop)
	if <-done {
		t.Fatal("acquire succeeded after stop")
	}
	p.release(10)
	if a := p.Available(); a != 10 {
		t.Fatalf("available %d after everything went back, want 10", a)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
		time.Sleep(time.Millisecond)
	}
}
