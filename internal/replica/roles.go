package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/observe"
	"github.com/gregor-project/gregor/internal/storage"
)

// Partition roles (Kafka's Partition.makeLeader / makeFollower). A partition on this broker
// is in one of four roles:
//
//   - sole: no replication options were set on the Manager when it was opened (the single-node
//     broker). It is the only replica and leads leader epoch 0: every append is committed at
//     once (the high watermark is the log end offset), and no follower may fetch.
//   - none: replication is configured but metadata has not given the partition a role yet. It
//     refuses produces and fetches (NOT_LEADER_OR_FOLLOWER) until MakeLeader or MakeFollower.
//   - leader: MakeLeader. A LeaderState (isr.go) keeps the ISR and the high watermark over
//     the followers' fetch positions; acks=all produces wait in its purgatory.
//   - follower: MakeFollower. Only the fetcher writes the log (ApplyFollower), with the
//     leader's bytes; the high watermark is what the leader's fetch answers say.
//
// Leader epochs. MakeLeader assigns the new epoch in the leader epoch cache at the log end
// offset before anything is appended in it (storage.LeaderEpochCache's rule), and every batch
// the leader appends is stamped with it. A follower's cache follows the batches it copies.
//
// Fencing. A role change for a leader epoch older than the one the partition holds is refused
// (ErrFencedLeaderEpoch): metadata arrives in order, so that is a stale caller. The same epoch
// again updates the registration (a new ISR or partition epoch). ApplyFollower refuses
// actions for any epoch but the one followed, so an answer to a request made before a role
// change never reaches the log.

// LeaderAndISR is a partition's registration as metadata publishes it.
type LeaderAndISR struct {
	Leader, LeaderEpoch, PartitionEpoch int32
	Replicas, ISR, Adding, Removing     []int32
}

func (r LeaderAndISR) registration() Registration {
	return Registration{Leader: r.Leader, LeaderEpoch: r.LeaderEpoch, PartitionEpoch: r.PartitionEpoch, Replicas: r.Replicas, ISR: r.ISR}
}

// ReplicationOptions are the broker-wide replication settings, set once on the Manager.
type ReplicationOptions struct {
	LocalID      int32
	LagTimeMaxMs func() int64 // replica.lag.time.max.ms (live value, read when a partition becomes leader)
	BrokerEpoch  func() int64 // this broker's registration epoch (AlterPartition needs it)
	// AlterPartition sends the request to the active controller (retrying inside) and returns
	// its answer. The request is built at version 2 (topic ids) when TopicID is set, else 1.
	AlterPartition func(ctx context.Context, req *kmsg.AlterPartitionRequest) (*kmsg.AlterPartitionResponse, error)
	Eligible       func(id int32) bool         // broker may join an ISR (registered, unfenced); nil = all
	TopicID        func(topic string) [16]byte // for AlterPartition v2+; nil: by name (v1)
	Now            func() time.Time            // nil: time.Now
	// ISRChanges counts the ISR shrinks and expansions the controller accepted; nil: none.
	ISRChanges *observe.ReplicaCounters
}

func (o *ReplicationOptions) nowMs() int64 {
	if o.Now == nil {
		return time.Now().UnixMilli()
	}
	return o.Now().UnixMilli()
}

// roleKind is a partition's role on this broker.
type roleKind int8

const (
	roleSole roleKind = iota
	roleNone
	roleLeader
	roleFollower
)

// roleView is the published role: immutable, read without locks by the data path.
type roleView struct {
	kind           roleKind
	leader         int32 // -1: unknown
	leaderEpoch    int32 // -1 in roleNone
	partitionEpoch int32
}

func (v *roleView) leads() bool { return v.kind == roleSole || v.kind == roleLeader }

// Role reports the partition's leader, its leader epoch and whether this broker leads it.
// A partition opened without replication options leads epoch 0 (leader is the local id, -1
// when unknown); one waiting for its first role has leader -1, epoch -1.
func (p *Partition) Role() (leader int32, leaderEpoch int32, isLeader bool) {
	v := p.role.Load()
	return v.leader, v.leaderEpoch, v.leads()
}

// CheckLeader is the check of a client request the leader serves (consumer fetches,
// ListOffsets, DeleteRecords): first the request's current leader epoch (-1: none,
// ErrFencedLeaderEpoch / ErrUnknownLeaderEpoch), then leadership (ErrNotLeaderOrFollower), as
// Kafka's localLogWithEpochOrThrow. It takes no lock.
func (p *Partition) CheckLeader(currentLeaderEpoch int32) error {
	v := p.role.Load()
	if v.leads() && (currentLeaderEpoch < 0 || currentLeaderEpoch == v.leaderEpoch) {
		return nil // the data path's case
	}
	if v.kind != roleNone {
		if err := CheckCurrentLeaderEpoch(v.leaderEpoch, currentLeaderEpoch); err != nil {
			return err
		}
	}
	if !v.leads() {
		return fmt.Errorf("%w: %s-%d is led by broker %d", ErrNotLeaderOrFollower, p.Topic, p.Index, v.leader)
	}
	return nil
}

// Epochs is the partition's leader epoch cache, opened on first use (nil if it cannot be
// opened; the error is logged).
func (p *Partition) Epochs() *storage.LeaderEpochCache {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, err := p.epochsLocked()
	if err != nil {
		p.m.log.Error("opening the leader epoch cache failed", "topic", p.Topic, "partition", p.Index, "err", err)
		return nil
	}
	return c
}

// epochsLocked returns the leader epoch cache, opening it if needed. Holding mu.
func (p *Partition) epochsLocked() (*storage.LeaderEpochCache, error) {
	if p.mu.epochs == nil {
		c, err := storage.OpenLeaderEpochCache(p.fs, p.Log(), p.m.log)
		if err != nil {
			return nil, err
		}
		p.mu.epochs = c
	}
	return p.mu.epochs, nil
}

// checkNewEpochLocked refuses a registration for an epoch older than the one held, or for the
// same epoch with another role (a leader epoch has one leader). Holding mu.
func (p *Partition) checkNewEpochLocked(reg LeaderAndISR, kind roleKind) error {
	v := p.role.Load()
	if v.kind == roleSole || v.kind == roleNone {
		return nil
	}
	if reg.LeaderEpoch < v.leaderEpoch || (reg.LeaderEpoch == v.leaderEpoch && kind != v.kind) {
		return fmt.Errorf("%w: %s-%d is at leader epoch %d, not %d", ErrFencedLeaderEpoch, p.Topic, p.Index, v.leaderEpoch, reg.LeaderEpoch)
	}
	return nil
}

// MakeLeader makes this broker the partition's leader for reg (or applies a newer
// registration of the leadership it holds). A new leader epoch is assigned in the epoch cache
// at the log end offset and a LeaderState is built from reg; the same leader epoch with a
// newer partition epoch updates the ISR the leader holds as committed.
func (p *Partition) MakeLeader(reg LeaderAndISR, nowMs int64) error {
	o := p.m.replication()
	if o == nil {
		return fmt.Errorf("replica: MakeLeader %s-%d: no replication options set", p.Topic, p.Index)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.checkNewEpochLocked(reg, roleLeader); err != nil {
		return err
	}
	if reg.Leader != o.LocalID {
		return fmt.Errorf("%w: MakeLeader with leader %d on broker %d", ErrNotLeaderOrFollower, reg.Leader, o.LocalID)
	}
	epochs, err := p.epochsLocked()
	if err != nil {
		return err
	}
	leo := p.Log().LogEndOffset()
	if ls := p.mu.leader; ls != nil && !ls.Resigned() {
		if reg.LeaderEpoch > ls.LeaderEpoch() {
			if err := epochs.Assign(reg.LeaderEpoch, leo); err != nil {
				return err
			}
		}
		change := ls.pending
		applied, err := ls.UpdateRegistration(reg.registration(), nowMs)
		if err != nil {
			p.readyLocked()
			return err
		}
		if applied && change != nil && reg.LeaderEpoch == change.LeaderEpoch && sameMembers(reg.ISR, change.NewISR) {
			// The metadata brought the change this leader proposed before the controller's
			// answer did (which then finds nothing pending): it was accepted.
			o.ISRChanges.ISRChanged(change.Expand)
		}
	} else {
		if err := epochs.Assign(reg.LeaderEpoch, leo); err != nil {
			return err
		}
		cfg := ReplicationConfig{LocalID: o.LocalID, ReplicaLagTimeMaxMs: 30_000, Eligible: o.Eligible}
		if o.LagTimeMaxMs != nil {
			cfg.ReplicaLagTimeMaxMs = o.LagTimeMaxMs()
		}
		ls, err := NewLeaderState(cfg, reg.registration(), leo, p.hw.Load(), nowMs)
		if err != nil {
			return err
		}
		p.mu.leader = ls
		p.Log().SetHighWatermark(p.hw.Load())
	}
	ls := p.mu.leader
	ls.SetLogStartOffset(p.Log().LogStartOffset())
	p.mu.reg = reg
	p.role.Store(&roleView{kind: roleLeader, leader: o.LocalID, leaderEpoch: ls.LeaderEpoch(), partitionEpoch: ls.PartitionEpoch()})
	p.publishLSOLocked()
	p.readyLocked()
	p.notify() // parked fetches re-check the role
	return nil
}

// MakeFollower stops leading (if it did) and follows reg.Leader in reg.LeaderEpoch: waiting
// acks=all produces fail with ErrNotLeaderOrFollower; the high watermark stays (a follower
// learns it from its fetches). The log is not truncated here: the fetcher finds where it
// parts from the leader's by epochs (KIP-101).
func (p *Partition) MakeFollower(reg LeaderAndISR) error {
	o := p.m.replication()
	if o == nil {
		return fmt.Errorf("replica: MakeFollower %s-%d: no replication options set", p.Topic, p.Index)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.checkNewEpochLocked(reg, roleFollower); err != nil {
		return err
	}
	if reg.Leader == o.LocalID {
		return fmt.Errorf("replica: MakeFollower %s-%d: broker %d is the leader of epoch %d", p.Topic, p.Index, reg.Leader, reg.LeaderEpoch)
	}
	if _, err := p.epochsLocked(); err != nil {
		return err
	}
	if ls := p.mu.leader; ls != nil {
		ls.Resign(ErrNotLeaderOrFollower)
		p.readyLocked()
		p.mu.leader = nil
	}
	hw := min(p.hw.Load(), p.Log().LogEndOffset())
	p.hw.Store(hw)
	p.Log().SetHighWatermark(hw)
	p.publishLSOLocked()
	p.mu.reg = reg
	p.mu.proposal = nil
	p.role.Store(&roleView{kind: roleFollower, leader: reg.Leader, leaderEpoch: reg.LeaderEpoch, partitionEpoch: reg.PartitionEpoch})
	p.notify() // parked fetches re-check the role
	return nil
}

// ApplyFollower does act (from the follower core) to the log, under the partition's lock:
// refused with ErrNotLeaderOrFollower unless the partition follows in leaderEpoch (the answer
// is stale). The epoch cache is kept in step (ApplyFollowerAction), the producer state
// advances over appended batches (markers included: an ABORT goes to this replica's
// transaction index) and is rebuilt after a truncation, the high watermark follows
// act.HighWatermark, the last stable offset follows both, and parked fetches are woken. It
// returns the log end offset.
func (p *Partition) ApplyFollower(leaderEpoch int32, act FollowerAction) (leo int64, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v := p.role.Load()
	if v.kind != roleFollower || v.leaderEpoch != leaderEpoch {
		return p.Log().LogEndOffset(), fmt.Errorf("%w: %s-%d is not following in leader epoch %d (role %d, epoch %d)", ErrNotLeaderOrFollower, p.Topic, p.Index, leaderEpoch, v.kind, v.leaderEpoch)
	}
	if act.Empty() {
		return p.Log().LogEndOffset(), nil
	}
	epochs, err := p.epochsLocked()
	if err != nil {
		return p.Log().LogEndOffset(), err
	}
	before := p.Log().LogEndOffset()
	leo, err = ApplyFollowerAction(p.Log(), epochs, act)
	truncated := act.TruncateFullyAt >= 0 || (act.TruncateTo >= 0 && act.TruncateTo < before)
	switch {
	case truncated || err != nil:
		// Rebuild from the newest snapshot below the new end (later ones are deleted).
		if rerr := p.rebuildProducersLocked(); rerr != nil {
			err = errors.Join(err, rerr)
		}
	case len(act.Append) > 0:
		for off := 0; off < len(act.Append); {
			h, herr := batch.ParseHeader(act.Append[off:])
			if herr != nil {
				break // ApplyFollowerAction appended them: they parse
			}
			if aerr := p.applyBatch(p.mu.producers, &h, act.Append[off:min(off+h.Size(), len(act.Append))]); aerr != nil {
				err = errors.Join(err, aerr)
			}
			off += h.Size()
		}
	}
	hw := p.hw.Load()
	switch {
	case truncated || act.TruncateTo >= 0:
		hw = min(hw, leo)
		if act.HighWatermark >= 0 {
			hw = min(act.HighWatermark, leo)
		}
	case act.HighWatermark >= 0:
		hw = max(hw, min(act.HighWatermark, leo))
	}
	if hw != p.hw.Load() {
		p.hw.Store(hw)
		p.Log().SetHighWatermark(hw)
	}
	lsoMoved := p.publishLSOLocked()
	if leo != before || len(act.Append) > 0 || act.HighWatermark >= 0 || lsoMoved {
		p.notify()
	}
	return leo, err
}

// SetFollowerHighWatermark takes the high watermark from a leader's fetch answer: capped at
// the log end offset, and never moved backwards (only a truncation lowers it). Only a
// follower's changes; otherwise it does nothing.
func (p *Partition) SetFollowerHighWatermark(hw int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.role.Load().kind != roleFollower {
		return
	}
	hw = min(hw, p.Log().LogEndOffset())
	if hw > p.hw.Load() {
		p.hw.Store(hw)
		p.Log().SetHighWatermark(hw)
		p.publishLSOLocked()
		p.notify()
	}
}

// LocalLog describes the partition's log for the follower core.
func (p *Partition) LocalLog() LocalLog {
	p.mu.Lock()
	defer p.mu.Unlock()
	epochs, err := p.epochsLocked()
	if err != nil {
		p.m.log.Error("opening the leader epoch cache failed", "topic", p.Topic, "partition", p.Index, "err", err)
		return LocalLog{LogStartOffset: p.Log().LogStartOffset(), LogEndOffset: p.Log().LogEndOffset(), HighWatermark: p.hw.Load(), Epochs: emptyEpochs{}}
	}
	return LocalLogOf(p.Log(), epochs, p.hw.Load())
}

// emptyEpochs is an EpochLookup that knows no epoch.
type emptyEpochs struct{}

func (emptyEpochs) EndOffsetFor(int32, int64) (int32, int64) {
	return storage.UndefinedEpoch, storage.UndefinedEpochOffset
}
func (emptyEpochs) LatestEpoch() int32 { return storage.UndefinedEpoch }

// Registration is the registration last given to MakeLeader or MakeFollower (zero before).
func (p *Partition) Registration() LeaderAndISR {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.mu.reg
	r.Replicas, r.ISR = slices.Clone(r.Replicas), slices.Clone(r.ISR)
	r.Adding, r.Removing = slices.Clone(r.Adding), slices.Clone(r.Removing)
	return r
}

// sameMembers reports whether a and b hold the same broker ids.
func sameMembers(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for _, id := range a {
		if !slices.Contains(b, id) {
			return false
		}
	}
	return true
}
