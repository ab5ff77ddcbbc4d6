package replica

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregor-project/gregor/internal/storage"
)

const testLagMs = 10_000

// isrHarness drives a LeaderState for broker 1 with a fake clock and collects its outputs.
type isrHarness struct {
	t          *testing.T
	s          *LeaderState
	now        int64
	ineligible map[int32]bool
	completed  []ProduceCompletion
	proposal   *ISRChange // the last proposal Ready returned
}

func reg3(isr ...int32) Registration {
	return Registration{Leader: 1, LeaderEpoch: 5, PartitionEpoch: 10, Replicas: []int32{1, 2, 3}, ISR: isr}
}

func newISRHarness(t *testing.T, reg Registration, leo, hw int64) *isrHarness {
	t.Helper()
	h := &isrHarness{t: t, now: 1_000_000, ineligible: map[int32]bool{}}
	cfg := ReplicationConfig{LocalID: 1, ReplicaLagTimeMaxMs: testLagMs, Eligible: func(id int32) bool { return !h.ineligible[id] }}
	s, err := NewLeaderState(cfg, reg, leo, hw, h.now)
	if err != nil {
		t.Fatal(err)
	}
	h.s = s
	h.ready()
	return h
}

// ready drains the state's outputs into the harness.
func (h *isrHarness) ready() LeaderReady {
	rd := h.s.Ready()
	h.completed = append(h.completed, rd.Completed...)
	if rd.Proposal != nil {
		h.proposal = rd.Proposal
	}
	return rd
}

func (h *isrHarness) advance(ms int64) { h.now += ms }

func (h *isrHarness) fetch(id int32, off int64) {
	h.t.Helper()
	if err := h.s.FollowerFetched(id, off, 0, h.now); err != nil {
		h.t.Fatalf("fetch %d at %d: %v", id, off, err)
	}
	h.ready()
}

func (h *isrHarness) appendTo(leo int64) {
	h.t.Helper()
	if err := h.s.Appended(leo, h.now); err != nil {
		h.t.Fatal(err)
	}
	h.ready()
}

func (h *isrHarness) tick() LeaderReady {
	h.s.Tick(h.now)
	return h.ready()
}

// takeProposal returns the proposal made since the last call, failing when there is none.
func (h *isrHarness) takeProposal() *ISRChange {
	h.t.Helper()
	p := h.proposal
	if p == nil {
		h.t.Fatal("no ISR change proposed")
	}
	h.proposal = nil
	return p
}

func (h *isrHarness) noProposal() {
	h.t.Helper()
	if h.proposal != nil {
		h.t.Fatalf("unexpected proposal %+v", *h.proposal)
	}
}

// accept answers p as the controller would after applying it.
func (h *isrHarness) accept(p *ISRChange) {
	h.s.HandleAlterPartition(p.ID, AlterPartitionResult{Leader: 1, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch + 1, ISR: p.NewISR}, h.now)
	h.ready()
}

func (h *isrHarness) hw(want int64) {
	h.t.Helper()
	if got := h.s.HighWatermark(); got != want {
		h.t.Fatalf("high watermark %d, want %d", got, want)
	}
}

func (h *isrHarness) isr(want ...int32) {
	h.t.Helper()
	if got := h.s.ISR(); !slices.Equal(got, want) {
		h.t.Fatalf("ISR %v, want %v", got, want)
	}
}

func (h *isrHarness) wait(token int, required int64, minISR int32) {
	h.s.AddWaiter(ProduceWaiter{RequiredOffset: required, MinISR: minISR, DeadlineMs: h.now + 30_000, Token: token})
	h.ready()
}

// done returns the completion of token, failing if it has not completed.
func (h *isrHarness) done(token int) error {
	h.t.Helper()
	for _, c := range h.completed {
		if c.Token == token {
			return c.Err
		}
	}
	h.t.Fatalf("produce %d has not completed", token)
	return nil
}

func (h *isrHarness) notDone(token int) {
	h.t.Helper()
	for _, c := range h.completed {
		if c.Token == token {
			h.t.Fatalf("produce %d completed early (%v)", token, c.Err)
		}
	}
}

// The high watermark is the minimum log end offset over the ISR; it waits for members that
// have not fetched yet and never goes back.
func TestLeaderHighWatermark(t *testing.T) {
	h := newISRHarness(t, reg3(1, 2, 3), 10, 7)
	h.hw(7) // the followers' log end offsets are unknown in a new leader epoch
	h.fetch(2, 10)
	h.hw(7)
	h.fetch(3, 8)
	h.hw(8)
	h.appendTo(15)
	h.hw(8)
	h.fetch(3, 10)
	h.hw(10)
	h.fetch(2, 15)
	h.hw(10)
	h.fetch(3, 15)
	h.hw(15)
	// A follower reporting an older position (it lost unflushed data) does not move it back.
	h.fetch(3, 12)
	h.hw(15)
	if rd := h.s.Ready(); rd.HWAdvanced || rd.HighWatermark != 15 {
		t.Fatalf("Ready after draining: %+v", rd)
	}

	// The ISR is the leader alone: every append is committed at once.
	h1 := newISRHarness(t, reg3(1), 0, 0)
	h1.appendTo(4)
	h1.hw(4)
	// ...unless a follower outside the ISR is caught up and about to join: then it waits.
	h1.fetch(2, 4)
	proposal := h1.takeProposal()
	if !proposal.Expand || !slices.Equal(proposal.NewISR, []int32{1, 2}) {
		t.Fatalf("expansion %+v", *proposal)
	}
	h1.appendTo(9)
	h1.hw(4)
	h1.fetch(2, 9)
	h1.hw(9)

	// Bad input.
	if err := h.s.FollowerFetched(4, 0, 0, h.now); !errors.Is(err, ErrNotLeaderOrFollower) {
		t.Fatalf("fetch from a non-replica: %v", err)
	}
	if err := h.s.FollowerFetched(2, 16, 0, h.now); !errors.Is(err, storage.ErrOffsetOutOfRange) {
		t.Fatalf("fetch past the log end offset: %v", err)
	}
	if err := h.s.Appended(3, h.now); err == nil {
		t.Fatal("the leader's log end offset went back")
	}
	if _, err := NewLeaderState(ReplicationConfig{LocalID: 2}, reg3(1, 2, 3), 0, 0, 0); !errors.Is(err, ErrNotLeaderOrFollower) {
		t.Fatalf("leading another broker's registration: %v", err)
	}
}

// Kafka's lastCaughtUpTimeMs rule, step by step.
func TestLeaderLastCaughtUp(t *testing.T) {
	h := newISRHarness(t, reg3(1, 2, 3), 100, 100)
	start := h.now
	f := func() *followerState { return h.s.follower(2) }

	h.advance(100)
	h.fetch(2, 100) // at the leader's log end offset: caught up now
	if f().lastCaughtUpMs != start+100 {
		t.Fatalf("lastCaughtUp %d", f().lastCaughtUpMs-start)
	}
	h.advance(100)
	h.appendTo(120)
	h.advance(100)
	h.fetch(2, 100) // behind, but at the leader's end offset of its previous fetch: caught up as of then
	if f().lastCaughtUpMs != start+100 {
		t.Fatalf("lastCaughtUp %d", f().lastCaughtUpMs-start)
	}
	h.advance(100)
	h.appendTo(140)
	h.advance(100)
	h.fetch(2, 120) // reached the leader's end offset as of the previous fetch (t=300)
	if f().lastCaughtUpMs != start+300 {
		t.Fatalf("lastCaughtUp %d", f().lastCaughtUpMs-start)
	}
	h.advance(100)
	h.fetch(2, 130) // 130 < 140, the leader's end offset at the previous fetch: not caught up
	if f().lastCaughtUpMs != start+300 {
		t.Fatalf("lastCaughtUp %d", f().lastCaughtUpMs-start)
	}

	// Under constant load a follower that keeps fetching what was there at its previous fetch
	// stays in the ISR forever, though it never equals the leader's end offset.
	h2 := newISRHarness(t, reg3(1, 2, 3), 0, 0)
	leo := int64(0)
	for range 100 {
		pos2, pos3 := leo, leo
		leo += 10
		h2.appendTo(leo)
		h2.advance(1000)
		h2.fetch(2, pos2)
		h2.fetch(3, pos3)
		h2.tick()
		h2.noProposal()
	}
}

// A lagging member is proposed out of the ISR after replica.lag.time.max.ms; while the
// shrink is pending it still holds the high watermark back and nothing else is proposed.
func TestLeaderShrink(t *testing.T) {
	h := newISRHarness(t, reg3(1, 2, 3), 0, 0)
	h.fetch(2, 0)
	h.fetch(3, 0)
	h.appendTo(10)
	h.wait(1, 10, 2)
	h.advance(testLagMs / 2)
	h.fetch(2, 10) // follower 2 caught up; follower 3 stops fetching
	h.hw(0)
	h.tick()
	h.noProposal() // 3 is not behind for long enough yet
	h.advance(testLagMs/2 + 1)
	h.fetch(2, 10)
	h.tick()
	p := h.takeProposal()
	if p.Expand || !slices.Equal(p.NewISR, []int32{1, 2}) || p.LeaderEpoch != 5 || p.PartitionEpoch != 10 {
		t.Fatalf("shrink %+v", *p)
	}
	if !slices.Equal(h.s.MaximalISR(), []int32{1, 2, 3}) {
		t.Fatalf("maximal ISR during a pending shrink: %v", h.s.MaximalISR())
	}
	h.hw(0)
	h.notDone(1)
	h.advance(testLagMs)
	h.tick()
	h.noProposal() // one change at a time
	h.accept(p)
	h.isr(1, 2)
	if h.s.PartitionEpoch() != 11 || h.s.Pending() != nil {
		t.Fatalf("partition epoch %d, pending %v", h.s.PartitionEpoch(), h.s.Pending())
	}
	h.hw(10)
	if err := h.done(1); err != nil {
		t.Fatalf("acks=all after the shrink: %v", err)
	}
	// The returning follower rejoins once it has reached the high watermark.
	h.fetch(3, 5)
	h.noProposal()
	h.fetch(3, 10)
	p = h.takeProposal()
	if !p.Expand || !slices.Equal(p.NewISR, []int32{1, 2, 3}) || p.PartitionEpoch != 11 {
		t.Fatalf("expansion %+v", *p)
	}
	h.accept(p)
	h.isr(1, 2, 3)
}

// Expansion needs the high watermark and the start of the leader epoch, an eligible broker,
// and no other change in flight; a pending expansion already counts for the high watermark.
func TestLeaderExpand(t *testing.T) {
	// New leader epoch at log end offset 50, high watermark 40, follower 3 out of the ISR.
	h := newISRHarness(t, reg3(1, 2), 50, 40)
	if h.s.LeaderEpochStartOffset() != 50 {
		t.Fatal(h.s.LeaderEpochStartOffset())
	}
	h.fetch(3, 45) // past the high watermark but not at the epoch start: it may still diverge
	h.noProposal()
	h.ineligible[3] = true
	h.fetch(3, 50)
	h.noProposal() // fenced or shutting down
	h.fetch(2, 50)
	h.hw(50) // an ineligible follower does not hold the high watermark
	delete(h.ineligible, 3)
	h.appendTo(60)
	h.fetch(3, 50)
	p := h.takeProposal()
	if !slices.Equal(h.s.MaximalISR(), []int32{1, 2, 3}) || !slices.Equal(h.s.ISR(), []int32{1, 2}) {
		t.Fatalf("ISR %v maximal %v", h.s.ISR(), h.s.MaximalISR())
	}
	h.fetch(2, 60)
	h.hw(50) // held by 3, which the controller may have added already
	h.fetch(3, 60)
	h.hw(60)
	h.accept(p)
	h.isr(1, 2, 3)
}

// Every kind of AlterPartition answer.
func TestLeaderAlterPartitionAnswers(t *testing.T) {
	type outcome int
	const (
		committed outcome = iota
		dropped           // may propose again
		blocked           // waits for metadata
		resend            // the same proposal again
	)
	cases := []struct {
		name string
		res  func(p *ISRChange) AlterPartitionResult
		want outcome
	}{
		{"accepted", func(p *ISRChange) AlterPartitionResult {
			return AlterPartitionResult{Leader: 1, LeaderEpoch: 5, PartitionEpoch: 11, ISR: p.NewISR}
		}, committed},
		{"accepted, nothing changed (same partition epoch)", func(p *ISRChange) AlterPartitionResult {
			return AlterPartitionResult{Leader: 1, LeaderEpoch: 5, PartitionEpoch: 10, ISR: p.NewISR}
		}, committed},
		{"success for another leader epoch", func(p *ISRChange) AlterPartitionResult {
			return AlterPartitionResult{Leader: 1, LeaderEpoch: 6, PartitionEpoch: 11, ISR: p.NewISR}
		}, blocked},
		{"success with an older partition epoch", func(p *ISRChange) AlterPartitionResult {
			return AlterPartitionResult{Leader: 1, LeaderEpoch: 5, PartitionEpoch: 9, ISR: p.NewISR}
		}, blocked},
		{"OPERATION_NOT_ATTEMPTED", errRes(kerr.OperationNotAttempted), dropped},
		{"INELIGIBLE_REPLICA", errRes(kerr.IneligibleReplica), dropped},
		{"FENCED_LEADER_EPOCH", errRes(kerr.FencedLeaderEpoch), blocked},
		{"INVALID_UPDATE_VERSION", errRes(kerr.InvalidUpdateVersion), blocked},
		{"NOT_LEADER_OR_FOLLOWER", errRes(kerr.NotLeaderForPartition), blocked},
		{"UNKNOWN_TOPIC_ID", errRes(kerr.UnknownTopicID), blocked},
		{"NEW_LEADER_ELECTED", errRes(kerr.NewLeaderElected), blocked},
		{"NOT_CONTROLLER", errRes(kerr.NotController), resend},
		{"network error", func(*ISRChange) AlterPartitionResult {
			return AlterPartitionResult{Err: errors.New("connection reset")}
		}, resend},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newISRHarness(t, reg3(1, 2, 3), 0, 0)
			h.fetch(2, 0)
			h.advance(testLagMs + 1)
			h.fetch(2, 0)
			h.tick()
			p := h.takeProposal()
			// An answer to another proposal id is ignored.
			h.s.HandleAlterPartition(p.ID+1, AlterPartitionResult{Err: kerr.OperationNotAttempted}, h.now)
			if h.s.Pending() != p {
				t.Fatal("an answer to another proposal was applied")
			}
			h.s.HandleAlterPartition(p.ID, tc.res(p), h.now)
			h.ready()
			switch tc.want {
			case committed:
				h.isr(1, 2)
				if h.s.Pending() != nil {
					t.Fatal("still pending")
				}
			case dropped:
				h.isr(1, 2, 3)
				if h.s.Pending() != nil {
					t.Fatal("still pending")
				}
				h.noProposal()
				h.tick()
				if q := h.takeProposal(); q.ID == p.ID || !slices.Equal(q.NewISR, p.NewISR) {
					t.Fatalf("proposed again: %+v", *q)
				}
			case blocked:
				h.isr(1, 2, 3)
				if h.s.Pending() != p {
					t.Fatal("not pending")
				}
				h.advance(testLagMs)
				h.tick()
				h.noProposal()
				// Metadata brings the controller's state and unblocks.
				if ok, err := h.s.UpdateRegistration(Registration{Leader: 1, LeaderEpoch: 5, PartitionEpoch: 12, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}, h.now); !ok || err != nil {
					t.Fatal(ok, err)
				}
				if h.s.Pending() != nil || h.s.PartitionEpoch() != 12 {
					t.Fatal("metadata did not replace the pending change")
				}
				h.tick()
				if q := h.takeProposal(); q.PartitionEpoch != 12 {
					t.Fatalf("new proposal %+v", *q)
				}
			case resend:
				if q := h.takeProposal(); q != p {
					t.Fatalf("resent %+v, want the pending proposal", q)
				}
				if h.s.Pending() != p {
					t.Fatal("not pending")
				}
			}
		})
	}
}

func errRes(e *kerr.Error) func(*ISRChange) AlterPartitionResult {
	return func(*ISRChange) AlterPartitionResult {
		return AlterPartitionResult{Err: fmt.Errorf("%w: from the controller", e), Leader: 1, LeaderEpoch: 5, PartitionEpoch: 10}
	}
}

// acks=all: refused before the append under min.insync.replicas, answered when the high
// watermark passes, NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank meanwhile, timed
// out, or failed when leadership moves.
func TestLeaderAcksAll(t *testing.T) {
	h := newISRHarness(t, reg3(1, 2, 3), 0, 0)
	if err := h.s.CheckAppend(true, 3); err != nil {
		t.Fatal(err)
	}
	if err := h.s.CheckAppend(true, 4); !errors.Is(err, ErrNotEnoughReplicas) {
		t.Fatalf("min.insync.replicas above the ISR: %v", err)
	}
	h.fetch(2, 0)
	h.fetch(3, 0)
	h.appendTo(5)
	h.wait(1, 5, 2)
	h.appendTo(8)
	h.wait(2, 8, 3)
	h.fetch(2, 8)
	h.notDone(1)
	h.fetch(3, 5)
	if err := h.done(1); err != nil {
		t.Fatal(err)
	}
	h.notDone(2)
	// Follower 3 stops; the ISR shrinks to {1, 2}, below produce 2's min.insync.replicas 3.
	h.advance(testLagMs + 1)
	h.fetch(2, 8)
	h.tick()
	h.accept(h.takeProposal())
	if err := h.done(2); !errors.Is(err, ErrNotEnoughReplicasAfterAppend) {
		t.Fatalf("produce 2: %v", err)
	}
	if err := h.s.CheckAppend(true, 3); !errors.Is(err, ErrNotEnoughReplicas) {
		t.Fatalf("after the shrink: %v", err)
	}
	if err := h.s.CheckAppend(false, 3); err != nil {
		t.Fatalf("acks=1 is not checked: %v", err)
	}
	// Follower 2 stops too: produce 3 times out.
	h.appendTo(10)
	h.s.AddWaiter(ProduceWaiter{RequiredOffset: 10, MinISR: 1, DeadlineMs: h.now + 500, Token: 3})
	h.advance(499)
	h.tick()
	h.notDone(3)
	if d, ok := h.s.NextDeadline(); !ok || d != h.now+1 {
		t.Fatal(d, ok)
	}
	h.advance(1)
	h.tick()
	if err := h.done(3); !errors.Is(err, ErrRequestTimedOut) {
		t.Fatalf("produce 3: %v", err)
	}
	// Another broker leads now: waiting produces fail, the state is finished.
	h.appendTo(12)
	h.wait(4, 12, 1)
	if _, err := h.s.UpdateRegistration(Registration{Leader: 2, LeaderEpoch: 6, PartitionEpoch: 12, Replicas: []int32{1, 2, 3}, ISR: []int32{2}}, h.now); !errors.Is(err, ErrNotLeaderOrFollower) {
		t.Fatal(err)
	}
	h.ready()
	if err := h.done(4); !errors.Is(err, ErrNotLeaderOrFollower) {
		t.Fatalf("produce 4: %v", err)
	}
	if err := h.s.CheckAppend(true, 1); !errors.Is(err, ErrNotLeaderOrFollower) {
		t.Fatal(err)
	}
	h.wait(5, 13, 1)
	if err := h.done(5); !errors.Is(err, ErrNotLeaderOrFollower) {
		t.Fatal(err)
	}
	if !h.s.Resigned() {
		t.Fatal("not resigned")
	}
}

// Metadata: stale states are ignored; a newer partition epoch is adopted; a new leader epoch
// with this broker still leading resets the followers' catch-up state but keeps waiting
// produces; replica set changes add and drop followers.
func TestLeaderUpdateRegistration(t *testing.T) {
	h := newISRHarness(t, reg3(1, 2, 3), 0, 0)
	h.fetch(2, 0)
	h.fetch(3, 0)
	h.appendTo(10)
	h.wait(1, 10, 1)
	for _, stale := range []Registration{
		{Leader: 2, LeaderEpoch: 4, PartitionEpoch: 20, Replicas: []int32{1, 2, 3}, ISR: []int32{2}},
		{Leader: 1, LeaderEpoch: 5, PartitionEpoch: 10, Replicas: []int32{1, 2}, ISR: []int32{1}},
	} {
		if ok, err := h.s.UpdateRegistration(stale, h.now); ok || err != nil {
			t.Fatalf("stale %+v applied: %v %v", stale, ok, err)
		}
	}
	h.isr(1, 2, 3)
	// The controller fenced 3 and removed it on its own.
	h.ineligible[3] = true
	if ok, err := h.s.UpdateRegistration(Registration{Leader: 1, LeaderEpoch: 5, PartitionEpoch: 11, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}}, h.now); !ok || err != nil {
		t.Fatal(ok, err)
	}
	h.isr(1, 2)
	h.fetch(2, 10)
	h.hw(10)
	if err := h.done(1); err != nil {
		t.Fatal(err)
	}
	// A reassignment replaces 3 by 4 and bumps the leader epoch.
	h.appendTo(20)
	h.wait(2, 20, 1)
	if ok, err := h.s.UpdateRegistration(Registration{Leader: 1, LeaderEpoch: 6, PartitionEpoch: 12, Replicas: []int32{1, 2, 4}, ISR: []int32{1, 2}}, h.now); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if h.s.LeaderEpoch() != 6 || h.s.LeaderEpochStartOffset() != 20 {
		t.Fatalf("epoch %d starts at %d", h.s.LeaderEpoch(), h.s.LeaderEpochStartOffset())
	}
	if leo, ok := h.s.FollowerLogEndOffset(2); !ok || leo != 10 {
		t.Fatalf("follower 2 lost its position across epochs of one leader: %d %v", leo, ok)
	}
	if _, ok := h.s.FollowerLogEndOffset(3); ok {
		t.Fatal("follower 3 is still tracked")
	}
	if err := h.s.FollowerFetched(3, 0, 0, h.now); !errors.Is(err, ErrNotLeaderOrFollower) {
		t.Fatal(err)
	}
	h.fetch(4, 20)
	if p := h.takeProposal(); !slices.Equal(p.NewISR, []int32{1, 2, 4}) || p.LeaderEpoch != 6 {
		t.Fatalf("expansion %+v", *p)
	}
	h.fetch(2, 20)
	h.hw(20)
	if err := h.done(2); err != nil {
		t.Fatal(err)
	}
}
