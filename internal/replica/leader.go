package replica

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/storage"
)

// The leader side of replication on a Partition (Kafka's Partition.fetchRecords for
// followers, lastOffsetForLeaderEpoch) and its edge on the Manager (RunReplication): the
// goroutine that ticks every LeaderState, sends the ISR changes they propose to the
// controller in AlterPartition requests and feeds the answers back.

// FollowerFetchState is a leader's answer to one partition of a follower's fetch, before the
// records are read: read from the fetch offset up to LogEndOffset, unless Diverging is set, in
// which case answer with it and no records (KIP-320).
type FollowerFetchState struct {
	HighWatermark  int64
	LogStartOffset int64
	LogEndOffset   int64
	Diverging      *EpochEndOffset
}

// FollowerFetch is the leader's side of a follower's fetch of this partition, Kafka's order:
// the request's current leader epoch (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH), leadership
// (ErrNotLeaderOrFollower), the diverging-epoch check of lastFetchedEpoch (-1: none), the
// fetch offset's range (storage.ErrOffsetOutOfRange), and then the follower's position,
// which may advance the high watermark, complete acks=all produces and wake parked fetches.
func (p *Partition) FollowerFetch(replicaID, currentLeaderEpoch int32, fetchOffset, logStartOffset int64, lastFetchedEpoch int32, nowMs int64) (FollowerFetchState, error) {
	if err := p.CheckLeader(currentLeaderEpoch); err != nil {
		return FollowerFetchState{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	ls := p.mu.leader
	if ls == nil || ls.Resigned() {
		return FollowerFetchState{}, fmt.Errorf("%w: broker %d is not a replica of %s-%d", ErrNotLeaderOrFollower, replicaID, p.Topic, p.Index)
	}
	lso, leo := p.Log().LogStartOffset(), p.Log().LogEndOffset()
	st := FollowerFetchState{HighWatermark: p.hw.Load(), LogStartOffset: lso, LogEndOffset: leo}
	div, err := DivergingEpoch(p.mu.epochs, lso, leo, fetchOffset, lastFetchedEpoch)
	if err != nil {
		return st, err
	}
	if div != nil {
		st.Diverging = div
		return st, nil
	}
	if fetchOffset < lso || fetchOffset > leo {
		return st, fmt.Errorf("%w: follower %d fetches %s-%d at %d, log %d..%d", storage.ErrOffsetOutOfRange, replicaID, p.Topic, p.Index, fetchOffset, lso, leo)
	}
	ls.SetLogStartOffset(lso) // retention may have moved it
	if err := ls.FollowerFetched(replicaID, fetchOffset, logStartOffset, nowMs); err != nil {
		return st, err
	}
	p.readyLocked()
	st.HighWatermark = p.hw.Load()
	return st, nil
}

// LastOffsetForLeaderEpoch answers OffsetForLeaderEpoch on the leader: after the current
// leader epoch and leadership checks (CheckLeader), the largest epoch <= leaderEpoch this log
// knows and where it ends (UndefinedEpoch / UndefinedEpochOffset when unknown).
func (p *Partition) LastOffsetForLeaderEpoch(currentLeaderEpoch, leaderEpoch int32) (EpochEndOffset, error) {
	if err := p.CheckLeader(currentLeaderEpoch); err != nil {
		return EpochEndOffset{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	epochs, err := p.epochsLocked()
	if err != nil {
		return EpochEndOffset{}, err
	}
	return LastOffsetForLeaderEpoch(epochs, p.Log().LogEndOffset(), leaderEpoch), nil
}

// LeaderISR is the leader's committed ISR (nil unless this broker leads with followers).
func (p *Partition) LeaderISR() []int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.leader == nil {
		return nil
	}
	return p.mu.leader.ISR()
}

// readyLocked acts on the LeaderState's outputs: publishes an advanced high watermark (and
// wakes parked fetches), answers completed acks=all produces and DeleteRecords waits, and
// queues a proposed ISR change for RunReplication. Holding mu.
func (p *Partition) readyLocked() {
	ls := p.mu.leader
	if ls == nil {
		return
	}
	rd := ls.Ready()
	if rd.HWAdvanced && rd.HighWatermark > p.hw.Load() {
		p.hw.Store(rd.HighWatermark)
		p.Log().SetHighWatermark(rd.HighWatermark)
		p.publishLSOLocked()
		p.notify()
	}
	for _, c := range rd.Completed {
		c.Token.(chan error) <- c.Err // buffered, and each completes once
	}
	for _, c := range rd.Deleted {
		c.Token.(chan DeleteRecordsResult) <- DeleteRecordsResult{LowWatermark: c.Watermark, Err: c.Err}
	}
	if rd.Proposal != nil {
		p.mu.proposal = rd.Proposal
		p.m.kick()
	}
}

// tickLeader ticks the partition's LeaderState (expiring acks=all and DeleteRecords waiters,
// shrinking a lagging ISR) and takes the ISR change waiting to be sent, if any.
func (p *Partition) tickLeader(nowMs int64) *ISRChange {
	p.mu.Lock()
	defer p.mu.Unlock()
	ls := p.mu.leader
	if ls == nil {
		return nil
	}
	ls.SetLogStartOffset(p.Log().LogStartOffset())
	ls.Tick(nowMs)
	p.readyLocked()
	c := p.mu.proposal
	p.mu.proposal = nil
	return c
}

// handleAlterPartition feeds the controller's answer to the ISR change id to the LeaderState.
func (p *Partition) handleAlterPartition(id uint64, res AlterPartitionResult, nowMs int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ls := p.mu.leader
	if ls == nil {
		return
	}
	change := ls.pending
	ls.HandleAlterPartition(id, res, nowMs)
	if o := p.m.replication(); o != nil && change != nil && change.ID == id && ls.pending == nil && res.Err == nil && !ls.blocked {
		// The controller accepted the change: Kafka marks IsrExpandsPerSec or
		// IsrShrinksPerSec by the kind of change proposed.
		o.ISRChanges.ISRChanged(change.Expand)
	}
	p.readyLocked()
	if v := p.role.Load(); v.kind == roleLeader && v.partitionEpoch != ls.PartitionEpoch() {
		p.role.Store(&roleView{kind: roleLeader, leader: v.leader, leaderEpoch: v.leaderEpoch, partitionEpoch: ls.PartitionEpoch()})
	}
}

// Replication loop timing.
const (
	replicationTick        = 100 * time.Millisecond // the shortest tick (see tickInterval)
	alterPartitionBackoff  = 100 * time.Millisecond // after a failed AlterPartition
	hwCheckpointInterval   = 5 * time.Second        // replica.high.watermark.checkpoint.interval.ms
	alterPartitionVersion  = 2                      // topic ids, NewIsr as broker ids
	alterPartitionVersionN = 1                      // topic names (no TopicID option)
)

// proposal is an ISR change on its way to the controller.
type proposal struct {
	p      *Partition
	change *ISRChange
}

// alterDone is a sent AlterPartition request's outcome, per proposal.
type alterDone struct {
	items   []proposal
	results []AlterPartitionResult
}

// RunReplication drives the leaders until ctx ends: every replicationTick (and when a leader
// proposes an ISR change) it ticks every LeaderState, sends the pending ISR changes batched in
// one AlterPartition request (one in flight at a time; alterPartitionBackoff after a failure)
// and feeds the answers back; every hwCheckpointInterval it writes the
// replication-offset-checkpoint. It returns once no request it sent is in flight.
func (m *Manager) RunReplication(ctx context.Context) {
	t := time.NewTimer(m.tickInterval())
	defer t.Stop()
	done := make(chan alterDone, 1)
	inflight := false
	var queued []proposal
	var backoffUntil time.Time
	lastCheckpoint := time.Now()
	for {
		select {
		case <-ctx.Done():
			if inflight {
				<-done
			}
			if err := m.checkpointHW(); err != nil {
				m.log.Warn("writing the high watermark checkpoint failed", "err", err)
			}
			return
		case <-t.C:
			t.Reset(m.tickInterval())
		case <-m.kickCh:
		case d := <-done:
			inflight = false
			if m.applyAlterPartition(d) {
				backoffUntil = time.Now().Add(alterPartitionBackoff)
			}
		}
		o := m.replication()
		if o == nil {
			continue
		}
		nowMs := o.nowMs()
		for _, p := range m.leaders() {
			if c := p.tickLeader(nowMs); c != nil {
				queued = append(queued, proposal{p, c})
			}
		}
		if o.AlterPartition == nil {
			queued = nil // nowhere to send them: the ISR stays as metadata has it
		}
		if !inflight && len(queued) > 0 && !time.Now().Before(backoffUntil) {
			inflight = true
			items := queued
			queued = nil
			go func() { done <- alterDone{items, m.sendAlterPartition(ctx, o, items)} }()
		}
		if time.Since(lastCheckpoint) >= hwCheckpointInterval {
			lastCheckpoint = time.Now()
			if err := m.checkpointHW(); err != nil {
				m.log.Warn("writing the high watermark checkpoint failed", "err", err)
			}
		}
	}
}

// tickInterval is how often RunReplication ticks every leader: a tenth of
// replica.lag.time.max.ms, between replicationTick and a second (Kafka checks ISR expiry every
// half of it). A tick costs a lock per leader, so a broker leading 10,000 partitions spent ~3%
// of a core idle at a fixed 100 ms; a lagging follower now leaves the ISR at most a tenth of
// the lag time late. Produce requests do not wait for a tick: they time out on their own
// timer (the purgatory's expiry is its cleanup).
func (m *Manager) tickInterval() time.Duration {
	if o := m.replication(); o != nil && o.LagTimeMaxMs != nil {
		return min(max(time.Duration(o.LagTimeMaxMs())*time.Millisecond/10, replicationTick), time.Second)
	}
	return replicationTick
}

// kick wakes RunReplication (a leader has an ISR change to send).
func (m *Manager) kick() {
	select {
	case m.kickCh <- struct{}{}:
	default:
	}
}

// leaders are the partitions this broker leads with a LeaderState.
func (m *Manager) leaders() []*Partition {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []*Partition
	for _, p := range m.mu.parts {
		if p.role.Load().kind == roleLeader {
			out = append(out, p)
		}
	}
	return out
}

// applyAlterPartition feeds a request's answers to their partitions; it reports whether any
// failed in a way that is retried (so the next send waits a backoff).
func (m *Manager) applyAlterPartition(d alterDone) (retry bool) {
	o := m.replication()
	nowMs := o.nowMs()
	for i, it := range d.items {
		res := d.results[i]
		if res.Err != nil {
			var ke *kerr.Error
			if !errors.As(res.Err, &ke) || ke.Retriable || ke == kerr.NotController {
				retry = true
			}
			m.log.Info("ISR change not applied", "topic", it.p.Topic, "partition", it.p.Index, "isr", it.change.NewISR, "err", res.Err)
		}
		it.p.handleAlterPartition(it.change.ID, res, nowMs)
	}
	return retry
}

// errNoAlterPartitionAnswer: the controller's answer left a proposed change out.
var errNoAlterPartitionAnswer = errors.New("replica: AlterPartition answer without the partition")

// sendAlterPartition sends items in one AlterPartition request and returns each one's result.
func (m *Manager) sendAlterPartition(ctx context.Context, o *ReplicationOptions, items []proposal) []AlterPartitionResult {
	req := kmsg.NewPtrAlterPartitionRequest()
	req.SetVersion(alterPartitionVersionN)
	if o.TopicID != nil {
		req.SetVersion(alterPartitionVersion)
	}
	req.BrokerID = o.LocalID
	req.BrokerEpoch = -1
	if o.BrokerEpoch != nil {
		req.BrokerEpoch = o.BrokerEpoch()
	}
	type key struct {
		topic string
		id    [16]byte
		part  int32
	}
	keyOf := func(it proposal) key {
		k := key{part: it.p.Index}
		if o.TopicID != nil {
			k.id = o.TopicID(it.p.Topic)
		} else {
			k.topic = it.p.Topic
		}
		return k
	}
	topicIdx := map[key]int{} // by topic (part 0)
	for _, it := range items {
		k := keyOf(it)
		tk := key{topic: k.topic, id: k.id}
		i, ok := topicIdx[tk]
		if !ok {
			rt := kmsg.NewAlterPartitionRequestTopic()
			rt.Topic, rt.TopicID = k.topic, k.id
			req.Topics = append(req.Topics, rt)
			i = len(req.Topics) - 1
			topicIdx[tk] = i
		}
		rp := kmsg.NewAlterPartitionRequestTopicPartition()
		rp.Partition = it.p.Index
		rp.LeaderEpoch = it.change.LeaderEpoch
		rp.PartitionEpoch = it.change.PartitionEpoch
		rp.NewISR = it.change.NewISR
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	results := make([]AlterPartitionResult, len(items))
	resp, err := o.AlterPartition(ctx, req)
	if err == nil && resp.ErrorCode != 0 {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		for i := range results {
			results[i].Err = err
		}
		return results
	}
	answers := map[key]AlterPartitionResult{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			k := key{part: rp.Partition}
			if o.TopicID != nil {
				k.id = rt.TopidID
			} else {
				k.topic = rt.Topic
			}
			answers[k] = AlterPartitionResult{Err: kerr.ErrorForCode(rp.ErrorCode), Leader: rp.LeaderID, LeaderEpoch: rp.LeaderEpoch, PartitionEpoch: rp.PartitionEpoch, ISR: rp.ISR}
		}
	}
	for i, it := range items {
		if a, ok := answers[keyOf(it)]; ok {
			results[i] = a
		} else {
			results[i].Err = errNoAlterPartitionAnswer
		}
	}
	return results
}
