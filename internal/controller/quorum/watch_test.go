package quorum

import (
	"context"
	"testing"
	"time"
)

// A reader parked in WaitCommitted wakes as soon as an entry with records applies, well
// before its maxWait; with nothing new it waits maxWait and returns nothing.
func TestWaitCommittedWakesOnApply(t *testing.T) {
	// No session expiry: the idle wait below must see no entry, and broker 0 never
	// heartbeats after registering (on a loaded machine 9 s could pass before that wait).
	c := newCluster(t, 3, func(cfg *Config) { cfg.State.SessionTimeoutMs = int64(time.Hour / time.Millisecond) })
	a := c.waitActive(10 * time.Second)
	registerBroker(t, c.nodes[a], 0)
	follower := c.nodes[(a+1)%3]
	c.waitApplied(c.nodes[a].Status().Applied, 10*time.Second)
	from := follower.Status().Applied + 1

	type res struct {
		ents []Committed
		err  error
	}
	done := make(chan res, 1)
	go func() {
		e, err := follower.WaitCommitted(context.Background(), from, 10, time.Minute)
		done <- res{e, err}
	}()
	// Commit only once the reader is parked (it has asked for the change channel; nothing
	// else has yet).
	deadline := time.Now().Add(10 * time.Second)
	for {
		follower.appliedSig.mu.Lock()
		parked := follower.appliedSig.mu.ch != nil
		follower.appliedSig.mu.Unlock()
		if parked {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("reader never parked")
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := createTopic(ctx(t), c.nodes[a], "woken", 1, 1); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.err != nil || len(r.ents) == 0 || r.ents[0].Offset < from {
			t.Fatalf("woken read: %+v, %v", r.ents, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("parked reader not woken by a commit")
	}

	c.waitApplied(c.nodes[a].Status().Applied, 10*time.Second)
	from = follower.Status().Applied + 1
	start := time.Now()
	ents, err := follower.WaitCommitted(ctx(t), from, 10, 100*time.Millisecond)
	if err != nil || len(ents) != 0 || time.Since(start) < 100*time.Millisecond {
		t.Fatalf("idle wait: %v entries, err %v after %v", len(ents), err, time.Since(start))
	}

}
