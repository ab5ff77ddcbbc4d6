package replica

import (
	"errors"
	"testing"
)

// lwHarness drives a LeaderState of broker 1 (replicas 1, 2, 3) through DeleteRecords waits
// with a fake clock, collecting the completed deletes by token.
type lwHarness struct {
	t      *testing.T
	s      *LeaderState
	now    int64
	fenced map[int32]bool
	done   map[int]ProduceCompletion
}

func newLWHarness(t *testing.T, isr ...int32) *lwHarness {
	t.Helper()
	h := &lwHarness{t: t, now: 1_000_000, fenced: map[int32]bool{}, done: map[int]ProduceCompletion{}}
	cfg := ReplicationConfig{LocalID: 1, ReplicaLagTimeMaxMs: 10_000, Eligible: func(id int32) bool { return !h.fenced[id] }}
	reg := Registration{Leader: 1, LeaderEpoch: 3, PartitionEpoch: 7, Replicas: []int32{1, 2, 3}, ISR: isr}
	s, err := NewLeaderState(cfg, reg, 100, 100, h.now)
	if err != nil {
		t.Fatal(err)
	}
	h.s = s
	h.ready()
	return h
}

func (h *lwHarness) ready() {
	for _, c := range h.s.Ready().Deleted {
		tok := c.Token.(int)
		if _, dup := h.done[tok]; dup {
			h.t.Fatalf("delete %d completed twice", tok)
		}
		h.done[tok] = c
	}
}

// fetch is follower id's fetch at the log end with log start offset lso.
func (h *lwHarness) fetch(id int32, lso int64) {
	h.t.Helper()
	if err := h.s.FollowerFetched(id, 100, lso, h.now); err != nil {
		h.t.Fatalf("fetch of %d: %v", id, err)
	}
	h.ready()
}

// deleteTo moves the leader's log start to off and parks delete token there.
func (h *lwHarness) deleteTo(token int, off, timeoutMs int64) {
	h.s.SetLogStartOffset(off)
	h.park(token, off, timeoutMs)
}

// park parks delete token until the low watermark reaches off, timing out after timeoutMs.
func (h *lwHarness) park(token int, off, timeoutMs int64) {
	h.s.AddDeleteWaiter(off, h.now+timeoutMs, token)
	h.ready()
}

func (h *lwHarness) lw(want int64) {
	h.t.Helper()
	if got := h.s.LowWatermark(); got != want {
		h.t.Fatalf("low watermark %d, want %d", got, want)
	}
}

func (h *lwHarness) waiting(token int) {
	h.t.Helper()
	if c, ok := h.done[token]; ok {
		h.t.Fatalf("delete %d completed early: low watermark %d, %v", token, c.Watermark, c.Err)
	}
}

func (h *lwHarness) completed(token int, lw int64, err error) {
	h.t.Helper()
	c, ok := h.done[token]
	if !ok {
		h.t.Fatalf("delete %d still waiting (low watermark %d)", token, h.s.LowWatermark())
	}
	if !errors.Is(c.Err, err) || (err == nil && c.Watermark != lw) {
		h.t.Fatalf("delete %d: low watermark %d, %v; want %d, %v", token, c.Watermark, c.Err, lw, err)
	}
}

// The low watermark is the smallest log start offset over the leader and every follower of
// the assignment, in the ISR or not (Kafka's lowWatermarkIfLeader); a follower that has not
// fetched in this leadership has an unknown (-1) one, which holds the low watermark at -1.
func TestLowWatermarkOverEveryReplica(t *testing.T) {
	h := newLWHarness(t, 1, 2) // 3 is a replica outside the ISR
	h.lw(-1)
	h.deleteTo(1, 40, 30_000)
	h.waiting(1)
	h.fetch(2, 40)
	h.lw(-1) // 3 has not fetched yet
	h.waiting(1)
	h.fetch(3, 0)
	h.lw(0)
	h.waiting(1) // 3, outside the ISR, still counts
	h.fetch(3, 40)
	h.completed(1, 40, nil)
	h.lw(40)

	// The leader's own log start counts as well: followers ahead of it (they never are for
	// long) do not lift the low watermark past it.
	h.fetch(2, 50)
	h.fetch(3, 50)
	h.lw(40)

	// A delete whose offset the low watermark already reached completes at once, with the
	// low watermark (which may be past the offset asked).
	h.park(2, 30, 30_000)
	h.completed(2, 40, nil)
}

// Several deletes wait at once and complete in offset order as the low watermark moves.
func TestLowWatermarkCompletesInOrder(t *testing.T) {
	h := newLWHarness(t, 1, 2, 3)
	h.fetch(2, 0)
	h.fetch(3, 0)
	h.deleteTo(1, 10, 30_000)
	h.deleteTo(2, 20, 30_000)
	h.fetch(2, 20)
	h.fetch(3, 10)
	h.completed(1, 10, nil)
	h.waiting(2)
	h.fetch(3, 20)
	h.completed(2, 20, nil)
}

// A fenced broker's replica does not count (Kafka counts replicas on alive brokers only); the
// leader re-checks on its tick, so a delete waiting on a replica that gets fenced completes.
func TestLowWatermarkIgnoresFencedReplicas(t *testing.T) {
	h := newLWHarness(t, 1, 2, 3)
	h.fetch(2, 0)
	h.fetch(3, 0)
	h.deleteTo(1, 40, 30_000)
	h.fetch(2, 40)
	h.waiting(1)
	h.fenced[3] = true
	h.s.Tick(h.now)
	h.ready()
	h.completed(1, 40, nil)
	h.lw(40)
	h.fenced[3] = false // registered again: counts again
	h.lw(0)
}

// A delete not reached by its deadline times out (REQUEST_TIMED_OUT); one waiting when the
// leadership ends fails with NOT_LEADER_OR_FOLLOWER.
func TestLowWatermarkTimeoutAndResign(t *testing.T) {
	h := newLWHarness(t, 1, 2, 3)
	h.fetch(2, 0)
	h.fetch(3, 0)
	h.deleteTo(1, 40, 500)
	h.deleteTo(2, 40, 5_000)
	h.now += 499
	h.s.Tick(h.now)
	h.ready()
	h.waiting(1)
	h.now++
	h.s.Tick(h.now)
	h.ready()
	h.completed(1, 0, ErrRequestTimedOut)
	h.waiting(2)
	if n := h.s.WaitingDeletes(); n != 1 {
		t.Fatalf("%d deletes waiting, want 1", n)
	}
	h.s.Resign(ErrNotLeaderOrFollower)
	h.ready()
	h.completed(2, 0, ErrNotLeaderOrFollower)
	h.park(3, 40, 5_000)
	h.completed(3, 0, ErrNotLeaderOrFollower)
}

// A new leadership does not know where its followers' logs start until they fetch: the low
// watermark is -1 until every live follower has (Kafka resets the replica states).
func TestLowWatermarkAfterNewLeaderEpoch(t *testing.T) {
	h := newLWHarness(t, 1, 2, 3)
	h.fetch(2, 30)
	h.fetch(3, 30)
	h.s.SetLogStartOffset(30)
	h.lw(30)
	// The same leader in a later epoch keeps what it learnt.
	if _, err := h.s.UpdateRegistration(Registration{Leader: 1, LeaderEpoch: 4, PartitionEpoch: 8, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}, h.now); err != nil {
		t.Fatal(err)
	}
	h.lw(30)
	// A reassignment adding replica 4: it counts once it is a replica, unknown until it fetches.
	if _, err := h.s.UpdateRegistration(Registration{Leader: 1, LeaderEpoch: 4, PartitionEpoch: 9, Replicas: []int32{1, 2, 3, 4}, ISR: []int32{1, 2, 3}}, h.now); err != nil {
		t.Fatal(err)
	}
	h.lw(-1)
	h.fetch(4, 30)
	h.lw(30)
}
