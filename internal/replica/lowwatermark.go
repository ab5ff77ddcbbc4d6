package replica

import (
	"errors"
	"fmt"

	"github.com/gregor-project/gregor/internal/storage"
)

// DeleteRecords on a partition (Kafka's Partition.deleteRecordsOnLeader and
// lowWatermarkIfLeader, ReplicaManager.deleteRecords and DelayedDeleteRecords): the leader
// moves its own log start offset at once; the request is answered once the partition's low
// watermark reaches the offset asked, or at its timeout.
//
// Low watermark: the smallest log start offset over the leader and every follower in the
// replica assignment (in the ISR or not, a replica a reassignment adds too) whose broker is
// alive (ReplicationConfig.Eligible: registered and not fenced, Kafka's hasAliveBroker). A
// follower reports its log start offset in every fetch (Fetch v5+; older fetches report -1)
// and takes the leader's from the answers (Follower.HandleFetch), so the low watermark moves
// with the followers' fetches. A follower that has not fetched since this broker became leader
// has an unknown log start (-1), which holds the low watermark at -1 until it does (Kafka
// resets the replica states when a broker becomes leader; a new epoch under the same leader
// keeps them, in Kafka and here).
//
// Waiting requests sit in the LeaderState's second purgatory (purgatory.go), by the low
// watermark instead of the high watermark, and are re-checked on every follower fetch, on a
// new registration, when the leader's own log start moves and on every tick, so one waiting
// on a follower whose broker is fenced meanwhile completes at the next tick. (Kafka re-checks
// when a fetch raises the low watermark or the high watermark advances.) Each completes once:
// with the low watermark that reached it, ErrRequestTimedOut at its deadline, or
// ErrNotLeaderOrFollower when the leadership ends.

// ErrPolicyViolation: DeleteRecords on a topic whose cleanup.policy does not include delete
// (compacted only). POLICY_VIOLATION.
var ErrPolicyViolation = errors.New("replica: records of a compacted topic cannot be deleted")

// SetLogStartOffset tells the state the leader's own log start offset (after DeleteRecords
// or retention moved it). It may complete waiting deletes.
func (s *LeaderState) SetLogStartOffset(lso int64) {
	if s.resigned {
		return
	}
	s.logStartOffset = lso
	s.completeDeletes()
}

// LowWatermark is the smallest log start offset over the leader and the followers on live
// brokers (-1 while one of them has not fetched in this leadership).
func (s *LeaderState) LowWatermark() int64 {
	lw := s.logStartOffset
	for i := range s.followers {
		f := &s.followers[i]
		if f.logStartOffset < lw && s.eligible(f.id) {
			lw = f.logStartOffset
		}
	}
	return lw
}

// AddDeleteWaiter parks a DeleteRecords request until the low watermark reaches required or
// deadlineMs passes. It completes in Ready().Deleted with token, at once when the low
// watermark is there already.
func (s *LeaderState) AddDeleteWaiter(required, deadlineMs int64, token any) {
	if s.resigned {
		s.deleted = append(s.deleted, ProduceCompletion{Token: token, Err: ErrNotLeaderOrFollower, Watermark: -1})
		return
	}
	s.deletes.Add(ProduceWaiter{RequiredOffset: required, DeadlineMs: deadlineMs, Token: token})
	s.completeDeletes()
}

// WaitingDeletes is how many DeleteRecords requests wait.
func (s *LeaderState) WaitingDeletes() int { return s.deletes.Len() }

// completeDeletes answers the deletes the low watermark has reached.
func (s *LeaderState) completeDeletes() {
	if s.deletes.Len() > 0 {
		s.deleted = s.deletes.Complete(s.LowWatermark(), 0, s.deleted)
	}
}

// DeleteRecordsResult is the answer to one partition of a DeleteRecords request.
type DeleteRecordsResult struct {
	LowWatermark int64
	Err          error
}

// DeleteRecords is DeleteRecords on the leader, in Kafka's order: leadership
// (ErrNotLeaderOrFollower), cleanup.policy (ErrPolicyViolation unless it includes delete), the
// offset (-1 means the high watermark; below 0 or above the high watermark is
// storage.ErrOffsetOutOfRange). It then moves the log start offset up to offset (the leader
// epoch cache drops the epochs wholly below it; parked fetches are woken, so the followers'
// answers carry it) and returns the low watermark. When that is below offset, wait receives
// the answer: the low watermark once it reaches offset, ErrRequestTimedOut at
// nowMs+timeoutMs, or ErrNotLeaderOrFollower.
func (p *Partition) DeleteRecords(offset, nowMs, timeoutMs int64) (lw int64, wait <-chan DeleteRecordsResult, err error) {
	// Under mu, as appends and role changes: the leadership checked is the one the log start
	// moves under (a MakeFollower and a follower truncation cannot come between).
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.CheckLeader(-1); err != nil {
		return -1, nil, err
	}
	if p.Settings().CompactOnly {
		return -1, nil, fmt.Errorf("%w: %s-%d", ErrPolicyViolation, p.Topic, p.Index)
	}
	hw := p.HighWatermark()
	if offset == -1 {
		offset = hw
	}
	if offset < 0 || offset > hw {
		return -1, nil, fmt.Errorf("%w: %s-%d: delete below %d, high watermark %d", storage.ErrOffsetOutOfRange, p.Topic, p.Index, offset, hw)
	}
	if offset > p.Log().LogStartOffset() {
		if err := p.Log().SetLogStartOffset(offset); err != nil {
			return -1, nil, err
		}
		if c := p.mu.epochs; c != nil {
			if err := c.TruncateFromStart(p.Log().LogStartOffset()); err != nil {
				return -1, nil, err
			}
		}
		p.publishLSOLocked() // an open transaction's start may now be below the log start
		p.notify()
	}
	lso := p.Log().LogStartOffset()
	ls := p.mu.leader
	if p.role.Load().kind != roleLeader || ls == nil {
		return lso, nil, nil // the sole replica
	}
	ls.SetLogStartOffset(lso)
	if lw = ls.LowWatermark(); lw >= offset {
		return lw, nil, nil
	}
	ch := make(chan DeleteRecordsResult, 1)
	ls.AddDeleteWaiter(offset, nowMs+timeoutMs, ch)
	p.readyLocked()
	return lw, ch, nil
}
