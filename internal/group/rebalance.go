package group

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// The join phase and the transitions around it (Kafka's prepareRebalance, DelayedJoin,
// InitialDelayedJoin, onCompleteJoin, and the expirations that remove members).

// maybePrepareRebalance starts a rebalance unless one is already being prepared.
func (s *Shard) maybePrepareRebalance(g *Group) {
	switch g.state {
	case Stable, CompletingRebalance, Empty:
		s.prepareRebalance(g)
	}
}

// prepareRebalance enters PreparingRebalance: members parked in SyncGroup are told
// REBALANCE_IN_PROGRESS, and the join phase is bounded by the largest rebalance timeout, or,
// for an empty group, by group.initial.rebalance.delay.ms (extended while new members keep
// arriving, up to the rebalance timeout).
func (s *Shard) prepareRebalance(g *Group) {
	if on := s.cfg.OnRebalance; on != nil && g.state != PreparingRebalance {
		on()
	}
	if g.state == CompletingRebalance {
		s.resetAndPropagateAssignmentError(g, kerr.RebalanceInProgress)
	}
	s.timers.Cancel(timerKey{kind: timerSync, group: g.ID})
	clear(g.pendingSync)
	key := timerKey{kind: timerJoin, group: g.ID}
	if g.state == Empty {
		delay := s.cfg.InitialRebalanceDelayMs
		g.initialDelay = true
		g.initialDelayMs = delay
		g.initialRemaining = max(g.rebalanceTimeoutMs()-delay, 0)
		s.timers.Set(key, s.now+delay)
	} else {
		g.initialDelay = false
		s.timers.Set(key, s.now+g.rebalanceTimeoutMs())
	}
	g.transition(PreparingRebalance, s.now)
	s.maybeCompleteJoin(g)
}

// maybeCompleteJoin ends the join phase early once every member has rejoined (never during
// the initial delay, which always runs its course).
func (s *Shard) maybeCompleteJoin(g *Group) {
	if g.state == PreparingRebalance && !g.initialDelay && g.allJoined() {
		s.timers.Cancel(timerKey{kind: timerJoin, group: g.ID})
		s.completeJoin(g)
	}
}

// onJoinDeadline: the rebalance timeout or an initial delay ran out.
func (s *Shard) onJoinDeadline(g *Group) {
	if g.state != PreparingRebalance {
		return
	}
	if g.initialDelay {
		if g.newMemberAdded && g.initialRemaining != 0 {
			g.newMemberAdded = false
			delay := min(s.cfg.InitialRebalanceDelayMs, g.initialRemaining)
			remaining := max(g.initialRemaining-g.initialDelayMs, 0)
			g.initialDelayMs, g.initialRemaining = delay, remaining
			s.timers.Set(timerKey{kind: timerJoin, group: g.ID}, s.now+delay)
			return
		}
		g.initialDelay = false
	}
	s.completeJoin(g)
}

// completeJoin ends the join phase: dynamic members that did not rejoin are removed, a
// leader among those that did is chosen, the generation advances, and every parked
// JoinGroup is answered (the leader's with the members' metadata).
func (s *Shard) completeJoin(g *Group) {
	for _, m := range g.Members() {
		if !m.awaitingJoin() && !m.isStatic() {
			s.answerParked(g, m, kerr.UnknownMemberID)
			g.remove(m.ID)
			s.cancelHeartbeat(g, m.ID)
		}
	}
	if g.state == Dead {
		return
	}
	if !g.maybeElectNewJoinedLeader() && len(g.members) > 0 {
		// Only static members that have not rejoined are left: wait another rebalance
		// timeout; their session timeouts remove them if they are gone.
		s.timers.Set(timerKey{kind: timerJoin, group: g.ID}, s.now+g.rebalanceTimeoutMs())
		return
	}
	s.initNextGeneration(g)
	if g.state == Empty {
		// Persist the empty generation. A failure only means an older generation is
		// replayed after a restart, whose members then time out: nothing to answer.
		s.storeGroup(g, nil, func(err error) {
			if err != nil {
				s.warn(fmt.Errorf("writing empty group %s: %w", g.ID, err))
			}
		})
		return
	}
	for _, m := range g.order {
		if m.join != nil {
			s.reply(m.join.w, s.joinResult(g, m, false))
			g.setJoin(m, nil)
		}
		s.scheduleHeartbeat(g, m, int64(m.SessionTimeoutMs))
		m.isNew = false
		g.pendingSync[m.ID] = struct{}{}
	}
	g.syncGeneration = g.generation
	s.timers.Set(timerKey{kind: timerSync, group: g.ID}, s.now+g.rebalanceTimeoutMs())
}

func (s *Shard) initNextGeneration(g *Group) {
	g.generation++
	if len(g.members) > 0 {
		g.protocolName = g.selectProtocol()
		g.computeSubscribed()
		g.transition(CompletingRebalance, s.now)
	} else {
		g.protocolName = ""
		g.computeSubscribed()
		g.transition(Empty, s.now)
	}
	clear(g.pendingSync)
}

// onSyncExpired: members of the generation that never sent SyncGroup within the rebalance
// timeout are removed and the group rebalances without them.
func (s *Shard) onSyncExpired(g *Group) {
	if g.generation != g.syncGeneration || len(g.pendingSync) == 0 {
		return
	}
	if g.state != CompletingRebalance && g.state != Stable {
		return
	}
	for _, m := range g.Members() {
		if _, ok := g.pendingSync[m.ID]; ok {
			s.answerParked(g, m, kerr.UnknownMemberID)
			g.remove(m.ID)
			s.cancelHeartbeat(g, m.ID)
		}
	}
	s.prepareRebalance(g)
}

// onHeartbeatExpired: a member's session timed out. Members parked in JoinGroup or
// SyncGroup are excused (the rebalance timeout bounds them), except new members, whose
// first join is bounded by NewMemberJoinTimeoutMs.
func (s *Shard) onHeartbeatExpired(g *Group, memberID string) {
	m := g.members[memberID]
	if g.state == Dead || m == nil {
		return
	}
	if !m.isNew && (m.join != nil || m.sync != nil) {
		return
	}
	s.removeMemberAndUpdateGroup(g, m)
}

// onPendingExpired: a member id handed out with MEMBER_ID_REQUIRED was never used.
func (s *Shard) onPendingExpired(g *Group, memberID string) {
	if _, ok := g.pending[memberID]; !ok {
		return
	}
	delete(g.pending, memberID)
	s.maybeCompleteJoin(g)
}

// removeMemberAndUpdateGroup removes a member that failed or left, answering its parked
// requests with UNKNOWN_MEMBER_ID, and rebalances (or lets the join phase finish without it).
func (s *Shard) removeMemberAndUpdateGroup(g *Group, m *Member) {
	if m.join != nil {
		s.reply(m.join.w, joinError("", kerr.UnknownMemberID))
		g.setJoin(m, nil)
	}
	if m.sync != nil {
		s.reply(m.sync, syncError(kerr.UnknownMemberID))
		m.sync = nil
	}
	g.remove(m.ID)
	s.cancelHeartbeat(g, m.ID)
	switch g.state {
	case Stable, CompletingRebalance:
		s.maybePrepareRebalance(g)
	case PreparingRebalance:
		s.maybeCompleteJoin(g)
	}
}
