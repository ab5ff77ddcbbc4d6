package replica

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregor-project/gregor/internal/storage"
)

// The leader side of Kafka's ISR replication protocol for one partition, as a deterministic
// core (after Kafka's Partition: maybeIncrementLeaderHW, maybeExpandIsr, maybeShrinkIsr and
// the PendingExpandIsr/PendingShrinkIsr states of KIP-497). No goroutines, no clock: the caller
// feeds it the leader's log end offset, followers' fetch positions, the time, controller
// answers and metadata, and collects what to do from Ready.
//
// State. The committed ISR is the controller's, as last heard (metadata or an AlterPartition
// answer), with its partition epoch. At most one ISR change is in flight (pending); while it
// is, no other is proposed. The maximal ISR is the committed ISR plus the replicas a pending
// expansion adds: a pending shrink still counts the replicas it removes, because the
// controller may refuse it; a pending expansion already counts the replica it adds, because
// the controller may have accepted it.
//
// Follower state (per replica, Kafka's ReplicaState): its log end offset as its last fetch
// showed it (-1 until it fetches in this leader epoch), and lastCaughtUpMs, by Kafka's rule:
// a fetch at or past the leader's log end offset catches the follower up as of that fetch; a
// fetch at or past the leader's log end offset at the time of the follower's previous fetch
// catches it up as of that previous fetch. A follower is caught up while its log end offset
// equals the leader's or lastCaughtUpMs is within replica.lag.time.max.ms.
//
// Rules:
//   - High watermark: the minimum log end offset over the leader, the maximal ISR and the
//     followers outside it that are caught up and eligible (about to join, as Kafka waits for
//     them). It never decreases. (Unlike Kafka 3.7+ with eligible leader replicas, it also
//     advances when the ISR is below min.insync.replicas.)
//   - Expansion: a follower outside the ISR whose log end offset reached the high watermark
//     and the start of this leader epoch, and which is eligible (not fenced or shutting down).
//   - Shrink: ISR members that are not caught up (Tick).
//   - acks=all: refused before the append (ErrNotEnoughReplicas) when the committed ISR is
//     smaller than min.insync.replicas; answered when the high watermark passes the append,
//     with ErrNotEnoughReplicasAfterAppend if the maximal ISR shrank below it meanwhile.
//   - DeleteRecords (lowwatermark.go): a request waits until the low watermark, the smallest
//     log start offset over the leader and the followers on live brokers, reaches its offset.
//   - Fencing: proposals carry the leader epoch and the partition epoch they are based on; the
//     controller refuses stale ones. An answer that does not match the pending proposal is
//     ignored; a refusal that means "your view is stale" blocks new proposals until metadata
//     brings the partition's new state.
//
// Safety invariants (checked by the property test): the high watermark never decreases;
// after the leader's first advance past its starting high watermark, every member of the
// controller's ISR has every record below it; no acks=all append succeeds before every member
// of the maximal ISR, and at least min.insync.replicas replicas, have it.
//
// Not safe for concurrent use; the partition's lock guards it.

// Sentinel errors of replication, translated to Kafka codes at the api boundary.
var (
	// ErrNotEnoughReplicasAfterAppend: an acks=all append reached the high watermark, but the
	// ISR had shrunk below min.insync.replicas. NOT_ENOUGH_REPLICAS_AFTER_APPEND.
	ErrNotEnoughReplicasAfterAppend = errors.New("replica: records written to fewer in-sync replicas than min.insync.replicas")
	// ErrNotLeaderOrFollower: this broker does not lead the partition (or no longer does), or
	// the fetching broker is not one of its replicas. NOT_LEADER_OR_FOLLOWER.
	ErrNotLeaderOrFollower = errors.New("replica: not the leader or follower of the partition")
)

// ReplicationConfig is the leader's replication settings.
type ReplicationConfig struct {
	LocalID             int32 // this broker's node id
	ReplicaLagTimeMaxMs int64 // replica.lag.time.max.ms
	// Eligible reports whether a broker may join an ISR (KIP-841: not fenced, not in
	// controlled shutdown). nil means every broker is.
	Eligible func(id int32) bool
}

// Registration is the partition's state as the controller publishes it.
type Registration struct {
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
	Replicas       []int32
	ISR            []int32
}

// ISRChange is a proposed ISR, to send to the controller in an AlterPartition request.
type ISRChange struct {
	ID             uint64 // identifies the proposal within its LeaderState
	LeaderEpoch    int32
	PartitionEpoch int32 // the partition epoch of the ISR it changes
	NewISR         []int32
	Expand         bool // true: adds a replica; false: removes replicas
}

// AlterPartitionResult is the controller's answer to an ISRChange: the partition's state once
// the change applied, or Err (a *kerr.Error, or any error for a failed request).
type AlterPartitionResult struct {
	Err            error
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
	ISR            []int32
}

// LeaderReady is what the caller must act on after feeding a LeaderState (etcd raft's Ready):
// publish the high watermark when it advanced (and wake parked fetches), send Proposal to the
// controller, answer Completed produces and Deleted DeleteRecords waits (whose Watermark is
// the low watermark that completed them).
type LeaderReady struct {
	HighWatermark int64
	HWAdvanced    bool
	Proposal      *ISRChange
	Completed     []ProduceCompletion
	Deleted       []ProduceCompletion
}

// neverCaughtUp is the lastCaughtUpMs of a follower that has not been caught up in this
// leader epoch: far enough in the past that no clock makes it recent, near enough that
// nowMs - neverCaughtUp does not overflow.
const neverCaughtUp = math.MinInt64 / 2

// followerState is what the leader knows of one follower (Kafka's ReplicaState).
type followerState struct {
	id                 int32
	logEndOffset       int64 // -1: not fetched in this leader epoch
	logStartOffset     int64
	lastFetchLeaderLEO int64 // the leader's log end offset at the follower's previous fetch
	lastFetchMs        int64
	lastCaughtUpMs     int64
}

// LeaderState is the leader-side replication state of one partition.
type LeaderState struct {
	cfg ReplicationConfig

	leaderEpoch      int32
	partitionEpoch   int32
	epochStartOffset int64 // the log end offset when this leader epoch began
	replicas         []int32
	isr              []int32 // committed
	pending          *ISRChange
	blocked          bool // the controller refused pending as stale: wait for metadata
	followers        []followerState
	leo, hw          int64
	purgatory        ProducePurgatory
	nextID           uint64
	resigned         bool
	logStartOffset   int64            // the leader's own (SetLogStartOffset)
	deletes          ProducePurgatory // waiting DeleteRecords, by the low watermark

	// Outputs not yet taken by Ready.
	hwAdvanced bool
	proposal   *ISRChange
	completed  []ProduceCompletion
	deleted    []ProduceCompletion
}

// NewLeaderState starts leading reg (whose Leader must be cfg.LocalID) with the log at leo and
// the high watermark the partition had (a follower's, or one from the checkpoint). The caller
// must assign reg.LeaderEpoch at leo in the leader epoch cache before appending.
func NewLeaderState(cfg ReplicationConfig, reg Registration, leo, hw int64, nowMs int64) (*LeaderState, error) {
	if reg.Leader != cfg.LocalID {
		return nil, fmt.Errorf("%w: broker %d, leader %d", ErrNotLeaderOrFollower, cfg.LocalID, reg.Leader)
	}
	if !slices.Contains(reg.Replicas, cfg.LocalID) {
		return nil, fmt.Errorf("%w: broker %d is not among the replicas %v", ErrNotLeaderOrFollower, cfg.LocalID, reg.Replicas)
	}
	s := &LeaderState{cfg: cfg, leo: leo, hw: min(max(hw, 0), leo)}
	s.adopt(reg, nowMs, true)
	s.maybeAdvanceHW(nowMs)
	return s, nil
}

// adopt takes reg's replicas, ISR and epochs; a new leader epoch resets the followers' fetch
// state (Kafka's resetReplicaState): as the first leader epoch of this LeaderState their log
// end offsets are unknown; a later one keeps them. ISR members count as caught up now, others
// as never.
func (s *LeaderState) adopt(reg Registration, nowMs int64, first bool) {
	newEpoch := first || reg.LeaderEpoch > s.leaderEpoch
	old := s.followers
	s.followers = make([]followerState, 0, len(reg.Replicas))
	for _, id := range reg.Replicas {
		if id == s.cfg.LocalID {
			continue
		}
		f := followerState{id: id, logEndOffset: -1, logStartOffset: -1, lastFetchLeaderLEO: -1, lastCaughtUpMs: neverCaughtUp}
		if i := slices.IndexFunc(old, func(o followerState) bool { return o.id == id }); i >= 0 {
			f = old[i]
		}
		if newEpoch {
			f.lastCaughtUpMs = neverCaughtUp
			if slices.Contains(reg.ISR, id) {
				f.lastCaughtUpMs = nowMs
			}
			if !first {
				f.lastFetchLeaderLEO, f.lastFetchMs = s.leo, nowMs
			}
		}
		s.followers = append(s.followers, f)
	}
	if newEpoch {
		s.epochStartOffset = s.leo
	}
	s.leaderEpoch, s.partitionEpoch = reg.LeaderEpoch, reg.PartitionEpoch
	s.replicas = slices.Clone(reg.Replicas)
	s.isr = slices.Clone(reg.ISR)
	s.pending, s.blocked = nil, false
}

// UpdateRegistration applies the partition's state from metadata. A state older than the one
// held (lower leader epoch, or the same leader epoch and a partition epoch not above it) is
// ignored: applied is false. When another broker leads now, every waiting produce fails with
// ErrNotLeaderOrFollower, the LeaderState is finished, and the error is returned. A new leader
// epoch with this broker still leading starts a new epoch at the current log end offset (the
// caller assigns it in the leader epoch cache). Any pending proposal is dropped: the new state
// answers it.
func (s *LeaderState) UpdateRegistration(reg Registration, nowMs int64) (applied bool, err error) {
	if s.resigned {
		return false, ErrNotLeaderOrFollower
	}
	if reg.LeaderEpoch < s.leaderEpoch || (reg.LeaderEpoch == s.leaderEpoch && reg.PartitionEpoch <= s.partitionEpoch) {
		return false, nil
	}
	if reg.Leader != s.cfg.LocalID || !slices.Contains(reg.Replicas, s.cfg.LocalID) {
		s.Resign(ErrNotLeaderOrFollower)
		return true, fmt.Errorf("%w: broker %d leads epoch %d", ErrNotLeaderOrFollower, reg.Leader, reg.LeaderEpoch)
	}
	s.adopt(reg, nowMs, false)
	s.maybeAdvanceHW(nowMs)
	s.completeDeletes()
	return true, nil
}

// Resign ends the leadership: every waiting produce fails with err, later inputs fail with
// ErrNotLeaderOrFollower.
func (s *LeaderState) Resign(err error) {
	if s.resigned {
		return
	}
	s.resigned = true
	s.completed = s.purgatory.FailAll(err, s.completed)
	s.deleted = s.deletes.FailAll(err, s.deleted)
	s.pending, s.proposal = nil, nil
}

// Appended tells the state the leader's log end offset after an append.
func (s *LeaderState) Appended(leo int64, nowMs int64) error {
	if s.resigned {
		return ErrNotLeaderOrFollower
	}
	if leo < s.leo {
		return fmt.Errorf("replica: leader log end offset went back from %d to %d", s.leo, leo)
	}
	s.leo = leo
	s.maybeAdvanceHW(nowMs)
	return nil
}

// CheckAppend is the check before an append: with acksAll, the committed ISR must have at
// least minISR members (ErrNotEnoughReplicas).
func (s *LeaderState) CheckAppend(acksAll bool, minISR int32) error {
	if s.resigned {
		return ErrNotLeaderOrFollower
	}
	if acksAll && int32(len(s.isr)) < minISR {
		return fmt.Errorf("%w: ISR %v, min.insync.replicas %d", ErrNotEnoughReplicas, s.isr, minISR)
	}
	return nil
}

// AddWaiter parks an acks=all append until the high watermark reaches w.RequiredOffset. It
// may complete at once (see Ready).
func (s *LeaderState) AddWaiter(w ProduceWaiter) {
	if s.resigned {
		s.completed = append(s.completed, ProduceCompletion{Token: w.Token, Err: ErrNotLeaderOrFollower})
		return
	}
	s.purgatory.Add(w)
	s.completed = s.purgatory.Complete(s.hw, s.maximalISRSize(), s.completed)
}

// FollowerFetched records a follower's fetch at fetchOffset (its log end offset) whose log
// start offset is logStartOffset, read while the leader's log end offset was the one last
// given to Appended. A fetch whose epochs diverge from the leader's (KIP-320) must not be
// reported: its offset is not on the leader's log.
func (s *LeaderState) FollowerFetched(id int32, fetchOffset, logStartOffset int64, nowMs int64) error {
	if s.resigned {
		return ErrNotLeaderOrFollower
	}
	f := s.follower(id)
	if f == nil {
		return fmt.Errorf("%w: broker %d is not a follower of this partition (replicas %v)", ErrNotLeaderOrFollower, id, s.replicas)
	}
	if fetchOffset < 0 || fetchOffset > s.leo {
		return fmt.Errorf("%w: follower %d fetches at %d, log end offset %d", storage.ErrOffsetOutOfRange, id, fetchOffset, s.leo)
	}
	switch {
	case fetchOffset >= s.leo:
		f.lastCaughtUpMs = max(f.lastCaughtUpMs, nowMs)
	case fetchOffset >= f.lastFetchLeaderLEO && f.lastFetchLeaderLEO >= 0:
		f.lastCaughtUpMs = max(f.lastCaughtUpMs, f.lastFetchMs)
	}
	f.logEndOffset, f.logStartOffset = fetchOffset, logStartOffset
	f.lastFetchLeaderLEO, f.lastFetchMs = s.leo, nowMs
	s.maybeExpand(f)
	s.maybeAdvanceHW(nowMs)
	s.completeDeletes()
	return nil
}

// Tick expires waiting produces and deletes whose deadline passed, re-checks the deletes
// against the low watermark (a follower's broker may have been fenced since) and proposes to
// shrink the ISR by the members that are not caught up. Call it at least every
// replica.lag.time.max.ms / 2 (Kafka's isr-expiration task) and at the purgatory's next
// deadline (NextDeadline).
func (s *LeaderState) Tick(nowMs int64) {
	if s.resigned {
		return
	}
	s.completed = s.purgatory.Expire(nowMs, s.completed)
	s.deleted = s.deletes.Expire(nowMs, s.deleted)
	s.completeDeletes()
	if s.pending == nil {
		var out []int32
		for _, id := range s.isr {
			if f := s.follower(id); f != nil && !s.caughtUp(f, nowMs) {
				out = append(out, id)
			}
		}
		if len(out) > 0 {
			newISR := slices.DeleteFunc(slices.Clone(s.isr), func(id int32) bool { return slices.Contains(out, id) })
			s.propose(newISR, false)
		}
	}
	s.maybeAdvanceHW(nowMs)
}

// NextDeadline is the earliest deadline of a waiting produce; ok is false when none waits.
func (s *LeaderState) NextDeadline() (int64, bool) { return s.purgatory.NextDeadline() }

// HandleAlterPartition applies the controller's answer to the proposal with id:
//   - success for this leader epoch and a partition epoch not older than ours: the new ISR is
//     committed (a shrink may let the high watermark advance);
//   - OPERATION_NOT_ATTEMPTED or INELIGIBLE_REPLICA: the proposal is dropped and may be made
//     again;
//   - FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, NOT_LEADER_OR_FOLLOWER,
//     UNKNOWN_TOPIC_(OR_PARTITION|ID), NEW_LEADER_ELECTED, INVALID_REQUEST, or a success for
//     another leader epoch: our view is stale; no proposal until metadata brings the state;
//   - anything else (NOT_CONTROLLER, a timeout, a network error): the same proposal is to be
//     sent again (it is in the next Ready).
//
// An answer to a proposal that is no longer pending is ignored.
func (s *LeaderState) HandleAlterPartition(id uint64, res AlterPartitionResult, nowMs int64) {
	if s.resigned || s.pending == nil || s.pending.ID != id || s.blocked {
		return
	}
	switch err := res.Err; {
	case err == nil:
		if res.LeaderEpoch != s.leaderEpoch || res.Leader != s.cfg.LocalID || res.PartitionEpoch < s.partitionEpoch {
			s.blocked = true
			return
		}
		s.isr = slices.Clone(res.ISR)
		s.partitionEpoch = res.PartitionEpoch
		s.pending = nil
		s.maybeAdvanceHW(nowMs)
	case errors.Is(err, kerr.OperationNotAttempted), errors.Is(err, kerr.IneligibleReplica):
		s.pending = nil
	case errors.Is(err, kerr.FencedLeaderEpoch), errors.Is(err, kerr.InvalidUpdateVersion),
		errors.Is(err, kerr.NotLeaderForPartition), errors.Is(err, kerr.UnknownTopicOrPartition),
		errors.Is(err, kerr.UnknownTopicID), errors.Is(err, kerr.NewLeaderElected),
		errors.Is(err, kerr.InvalidRequest):
		s.blocked = true
	default:
		s.proposal = s.pending
	}
}

// Ready returns and clears the outputs accumulated since the last call.
func (s *LeaderState) Ready() LeaderReady {
	rd := LeaderReady{HighWatermark: s.hw, HWAdvanced: s.hwAdvanced, Proposal: s.proposal, Completed: s.completed, Deleted: s.deleted}
	s.hwAdvanced, s.proposal, s.completed, s.deleted = false, nil, nil, nil
	return rd
}

// Accessors.

func (s *LeaderState) HighWatermark() int64          { return s.hw }
func (s *LeaderState) LogEndOffset() int64           { return s.leo }
func (s *LeaderState) LeaderEpoch() int32            { return s.leaderEpoch }
func (s *LeaderState) PartitionEpoch() int32         { return s.partitionEpoch }
func (s *LeaderState) LeaderEpochStartOffset() int64 { return s.epochStartOffset }
func (s *LeaderState) Resigned() bool                { return s.resigned }
func (s *LeaderState) WaitingProduces() int          { return s.purgatory.Len() }

// ISR is the committed ISR.
func (s *LeaderState) ISR() []int32 { return slices.Clone(s.isr) }

// MaximalISR is the committed ISR plus the replica a pending expansion adds.
func (s *LeaderState) MaximalISR() []int32 {
	m := slices.Clone(s.isr)
	if s.pending != nil {
		for _, id := range s.pending.NewISR {
			if !slices.Contains(m, id) {
				m = append(m, id)
			}
		}
	}
	return m
}

// Pending is the ISR change in flight, or nil.
func (s *LeaderState) Pending() *ISRChange { return s.pending }

// FollowerLogEndOffset is the follower's log end offset as last fetched (-1: unknown); ok is
// false when id is not a follower.
func (s *LeaderState) FollowerLogEndOffset(id int32) (int64, bool) {
	if f := s.follower(id); f != nil {
		return f.logEndOffset, true
	}
	return 0, false
}

// Internals.

func (s *LeaderState) follower(id int32) *followerState {
	for i := range s.followers {
		if s.followers[i].id == id {
			return &s.followers[i]
		}
	}
	return nil
}

func (s *LeaderState) eligible(id int32) bool { return s.cfg.Eligible == nil || s.cfg.Eligible(id) }

func (s *LeaderState) inMaximalISR(id int32) bool {
	return slices.Contains(s.isr, id) || (s.pending != nil && slices.Contains(s.pending.NewISR, id))
}

func (s *LeaderState) maximalISRSize() int {
	n := len(s.isr)
	if s.pending != nil {
		for _, id := range s.pending.NewISR {
			if !slices.Contains(s.isr, id) {
				n++
			}
		}
	}
	return n
}

// caughtUp is Kafka's ReplicaState.isCaughtUp.
func (s *LeaderState) caughtUp(f *followerState, nowMs int64) bool {
	return f.logEndOffset == s.leo || nowMs-f.lastCaughtUpMs <= s.cfg.ReplicaLagTimeMaxMs
}

// maybeExpand proposes adding f to the ISR when it has reached the high watermark and the
// start of this leader epoch.
func (s *LeaderState) maybeExpand(f *followerState) {
	if s.pending != nil || slices.Contains(s.isr, f.id) || !s.eligible(f.id) {
		return
	}
	if f.logEndOffset >= s.hw && f.logEndOffset >= s.epochStartOffset {
		s.propose(append(slices.Clone(s.isr), f.id), true)
	}
}

func (s *LeaderState) propose(newISR []int32, expand bool) {
	s.nextID++
	c := &ISRChange{ID: s.nextID, LeaderEpoch: s.leaderEpoch, PartitionEpoch: s.partitionEpoch, NewISR: newISR, Expand: expand}
	s.pending, s.blocked, s.proposal = c, false, c
}

// maybeAdvanceHW moves the high watermark up to the minimum log end offset over the leader,
// the maximal ISR and the caught-up eligible followers, and completes the produces it passes.
func (s *LeaderState) maybeAdvanceHW(nowMs int64) {
	hw := s.leo
	for i := range s.followers {
		f := &s.followers[i]
		if f.logEndOffset < hw && (s.inMaximalISR(f.id) || (s.caughtUp(f, nowMs) && s.eligible(f.id))) {
			hw = f.logEndOffset
		}
	}
	if hw > s.hw {
		s.hw = hw
		s.hwAdvanced = true
	}
	if s.purgatory.Len() > 0 {
		s.completed = s.purgatory.Complete(s.hw, s.maximalISRSize(), s.completed)
	}
}
