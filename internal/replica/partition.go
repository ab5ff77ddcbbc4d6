// Package replica holds a broker's partitions: the log, the idempotent producer state, the
// high watermark, the waiters parked by long-polling fetches, and replication: partition
// roles (roles.go), the leader side (isr.go, purgatory.go, leader.go) and the follower side
// (follower.go, the fetchers).
package replica

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/storage"
)

// Settings are the topic configs a partition acts on, resolved by the api layer.
type Settings struct {
	LogAppendTime     bool        // message.timestamp.type=LogAppendTime
	Compression       batch.Codec // target codec when Recompress is true
	Recompress        bool        // compression.type names a codec (not "producer")
	MaxMessageBytes   int32       // max.message.bytes: largest batch accepted
	MinInsyncReplicas int32       // min.insync.replicas
	CompactOnly       bool        // cleanup.policy without delete: DeleteRecords is refused
	TxnVerification   bool        // transaction.partition.verification.enable (the api sets it; false for internal topics)
	Log               storage.Config
}

// ErrNotEnoughReplicas: acks=all with an ISR smaller than min.insync.replicas.
var ErrNotEnoughReplicas = errors.New("replica: not enough in-sync replicas")

// Partition is one partition this broker holds, in one of the roles of roles.go.
//
// Invariants: lso <= hw <= log end offset; every batch below hw is readable; producer state reflects
// exactly the batches in the log; only a leader (or the sole replica) appends with offsets
// assigned here, stamping its leader epoch, which the epoch cache (when open) has at or below
// the log end offset before the append.
//
// Lock rule: mu serialises appends (offset assignment and producer checks must be atomic
// together) and role changes, and guards the fields in it, the LeaderState among them (so the
// leader's follower fetches, ticks and controller answers take it too). watch guards the
// parked fetches' channels on its own, so parking and unparking never wait behind an append's
// write (lock order: mu, then watch). Reads take no partition lock: the log is safe for
// concurrent readers, hw is atomic and role is an immutable view replaced under mu.
type Partition struct {
	Topic string
	Index int32

	m        *Manager
	fs       storage.FS
	logp     atomic.Pointer[storage.Log] // replaced only holding mu, by a log dir move (movedir.go)
	settings atomic.Pointer[Settings]
	hw       atomic.Int64
	lso      atomic.Int64 // last stable offset (txn.go), recomputed holding mu next to hw
	role     atomic.Pointer[roleView]

	mu struct {
		sync.Mutex
		producers *ProducerState
		// snapshotAt is the log end offset the newest snapshot on disk was taken at, when
		// producers is exactly that snapshot's state (nothing appended or truncated since);
		// -1 otherwise. A close then has nothing new to write.
		snapshotAt int64
		// txnIndexBehind: an ABORT in the log has no transaction index entry (writing it
		// failed, the append stood). Only a replay from an older snapshot adds it again, so
		// no snapshot is written until a rebuild has (snapshotProducers).
		txnIndexBehind bool
		epochs         *storage.LeaderEpochCache // nil until first needed (see epochsLocked)
		leader         *LeaderState              // roleLeader only
		reg            LeaderAndISR              // as last given to MakeLeader / MakeFollower
		proposal       *ISRChange                // an ISR change for RunReplication to send
	}

	// watch holds the channels of fetches parked on this partition (long poll). A slice, not
	// a map: a partition has few parked fetches, and registering on each of a thousand
	// partitions is on every waiting fetch's path.
	watch struct {
		sync.Mutex
		chans []chan struct{}
	}
}

// Settings returns the partition's current settings.
func (p *Partition) Settings() *Settings { return p.settings.Load() }

// Reconfigure applies new topic configs.
func (p *Partition) Reconfigure(s Settings) {
	p.settings.Store(&s)
	p.Log().Reconfigure(s.Log)
}

// Log is the partition's log. A move to another log dir replaces it (holding mu); a reader
// without mu that still holds the old one finds it closed (storage.ErrLogClosed).
func (p *Partition) Log() *storage.Log { return p.logp.Load() }

// HighWatermark is the offset below which records are committed and visible to consumers.
func (p *Partition) HighWatermark() int64 { return p.hw.Load() }

// AppendResult is what a produce answer needs.
type AppendResult struct {
	BaseOffset     int64
	LogAppendTime  int64 // -1 for CreateTime
	LogStartOffset int64
	Duplicate      bool // a retry of batches already in the log: nothing was appended
	// Wait, for an acks=all append a leader with followers made, receives one value once the
	// records are committed: nil when the high watermark passed them,
	// ErrNotEnoughReplicasAfterAppend, ErrRequestTimedOut or ErrNotLeaderOrFollower. nil
	// when the append was committed at once (the sole replica) or acks is not all.
	Wait <-chan error
}

// DefaultAppendTimeoutMs bounds an acks=all wait of Append (produce requests give their own).
const DefaultAppendTimeoutMs = 30_000

// Append is AppendWait with DefaultAppendTimeoutMs.
func (p *Partition) Append(raw []byte, hdrs []batch.Header, nowMs int64, leaderEpoch int32, acksAll bool) (AppendResult, error) {
	return p.AppendWait(raw, hdrs, nowMs, leaderEpoch, acksAll, DefaultAppendTimeoutMs)
}

// AppendWait appends validated v2 batches (raw, concatenated; hdrs their headers in order) as
// the leader, assigning offsets and stamping the partition's leader epoch. nowMs stamps
// LogAppendTime topics. leaderEpoch is the epoch the caller believes current (-1: any); another
// is refused (ErrFencedLeaderEpoch / ErrUnknownLeaderEpoch). A partition this broker does not
// lead refuses with ErrNotLeaderOrFollower. acksAll requires the committed ISR to be at least
// min.insync.replicas (ErrNotEnoughReplicas, before appending) and, on a leader with
// followers, returns Wait, answered when the records are committed or at nowMs+timeoutMs.
// AppendWait is AppendVerified with guard 0.
func (p *Partition) AppendWait(raw []byte, hdrs []batch.Header, nowMs int64, leaderEpoch int32, acksAll bool, timeoutMs int64) (AppendResult, error) {
	return p.AppendVerified(raw, hdrs, nowMs, leaderEpoch, acksAll, timeoutMs, 0)
}

// AppendVerified is AppendWait with a guard: with Settings.TxnVerification set, a
// transactional batch that would start a transaction is refused (ErrInvalidTxnState) unless
// guard is the one StartVerification stored for its producer and no marker cleared it since.
// A control batch is refused (batch.ErrInvalidRecord): only WriteTxnMarker writes them.
func (p *Partition) AppendVerified(raw []byte, hdrs []batch.Header, nowMs int64, leaderEpoch int32, acksAll bool, timeoutMs int64, guard VerificationGuard) (AppendResult, error) {
	s := p.Settings()
	p.mu.Lock()
	defer p.mu.Unlock()
	v := p.role.Load()
	// A sole partition (no replication configured) has no leader epochs to fence by.
	if err := CheckCurrentLeaderEpoch(v.leaderEpoch, leaderEpoch); err != nil && v.kind != roleNone && v.kind != roleSole {
		return AppendResult{}, err
	}
	ls := p.mu.leader
	if err := p.checkAppendLocked(v, ls, s, acksAll); err != nil {
		return AppendResult{}, err
	}
	for i := range hdrs {
		if hdrs[i].IsControl() {
			return AppendResult{}, fmt.Errorf("%w: a control batch from a producer", batch.ErrInvalidRecord)
		}
		dup, err := p.mu.producers.Check(&hdrs[i])
		if err != nil {
			return AppendResult{}, err
		}
		if dup != nil {
			if len(hdrs) == 1 {
				// A retry: answered as the first append was, once that is committed.
				res := AppendResult{BaseOffset: dup.FirstOffset, LogAppendTime: -1, LogStartOffset: p.Log().LogStartOffset(), Duplicate: true}
				if acksAll && v.kind == roleLeader && ls.HighWatermark() <= dup.LastOffset {
					res.Wait = p.addWaiterLocked(ls, dup.LastOffset+1, s.MinInsyncReplicas, nowMs+timeoutMs, nowMs)
				}
				return res, nil
			}
			return AppendResult{}, ErrOutOfOrderSequence
		}
		if s.TxnVerification {
			if err := p.mu.producers.CheckVerification(&hdrs[i], guard); err != nil {
				return AppendResult{}, fmt.Errorf("%w: producer %d starts a transaction on %s-%d without a verification", err, hdrs[i].ProducerID, p.Topic, p.Index)
			}
		}
	}
	return p.appendLocked(raw, hdrs, nowMs, v, ls, s, acksAll, timeoutMs)
}

// checkAppendLocked refuses an append this broker may not make as the partition's role
// stands: not the leader (ErrNotLeaderOrFollower), or acks=all with too small an ISR.
// Holding mu.
func (p *Partition) checkAppendLocked(v *roleView, ls *LeaderState, s *Settings, acksAll bool) error {
	switch v.kind {
	case roleSole:
		if acksAll && 1 < s.MinInsyncReplicas {
			return ErrNotEnoughReplicas
		}
	case roleLeader:
		return ls.CheckAppend(acksAll, s.MinInsyncReplicas)
	default:
		return fmt.Errorf("%w: %s-%d is led by broker %d", ErrNotLeaderOrFollower, p.Topic, p.Index, v.leader)
	}
	return nil
}

// appendLocked appends checked batches as the leader in v's epoch and applies them to the
// producer state; the rest as AppendWait says. Holding mu.
func (p *Partition) appendLocked(raw []byte, hdrs []batch.Header, nowMs int64, v *roleView, ls *LeaderState, s *Settings, acksAll bool, timeoutMs int64) (AppendResult, error) {
	if c := p.mu.epochs; c != nil && c.LatestEpoch() != v.leaderEpoch {
		// The sole replica's cache, opened after appends of epoch 0 without it.
		if err := c.Assign(v.leaderEpoch, p.Log().LogEndOffset()); err != nil {
			return AppendResult{}, err
		}
	}
	opt := storage.AppendOptions{AssignOffsets: true, LogAppendTimeMs: -1, LeaderEpoch: v.leaderEpoch}
	if s.LogAppendTime {
		opt.LogAppendTimeMs = nowMs
	}
	info, err := p.Log().Append(raw, opt)
	if err != nil {
		return AppendResult{}, err
	}
	off, pos := info.FirstOffset, 0
	var indexErr error
	for i := range hdrs {
		hdrs[i].BaseOffset = off
		off += int64(hdrs[i].LastOffsetDelta) + 1
		size := hdrs[i].Size()
		if err := p.applyBatch(p.mu.producers, &hdrs[i], raw[pos:min(pos+size, len(raw))]); err != nil {
			indexErr = errors.Join(indexErr, err)
		}
		pos += size
	}
	if indexErr != nil {
		// The batches are in the log; only an aborted transaction's index entry is missing
		// (the next rebuild adds it): the append stands, the error is logged.
		p.m.log.Error("recording an aborted transaction failed", "topic", p.Topic, "partition", p.Index, "err", indexErr)
	}
	res := AppendResult{BaseOffset: info.FirstOffset, LogAppendTime: info.LogAppendTime, LogStartOffset: p.Log().LogStartOffset()}
	leo := p.Log().LogEndOffset()
	if v.kind == roleSole {
		// The ISR is this broker alone: everything appended is committed.
		p.hw.Store(leo)
		p.publishLSOLocked()
		p.notify()
		return res, nil
	}
	if err := ls.Appended(leo, nowMs); err != nil {
		return res, err
	}
	if acksAll {
		res.Wait = p.addWaiterLocked(ls, leo, s.MinInsyncReplicas, nowMs+timeoutMs, nowMs)
	}
	p.readyLocked()
	p.notify() // followers parked at the old end fetch the new records
	return res, nil
}

// addWaiterLocked parks an acks=all append in the leader's purgatory until the high
// watermark reaches required. Holding mu.
func (p *Partition) addWaiterLocked(ls *LeaderState, required int64, minISR int32, deadlineMs, nowMs int64) <-chan error {
	ch := make(chan error, 1)
	ls.AddWaiter(ProduceWaiter{RequiredOffset: required, MinISR: minISR, DeadlineMs: deadlineMs, Token: ch})
	p.readyLocked()
	return ch
}

// Watch registers ch to receive a (non-blocking) signal whenever records are appended.
func (p *Partition) Watch(ch chan struct{}) {
	p.watch.Lock()
	p.watch.chans = append(p.watch.chans, ch)
	p.watch.Unlock()
}

// Unwatch removes ch (one registration of it).
func (p *Partition) Unwatch(ch chan struct{}) {
	p.watch.Lock()
	defer p.watch.Unlock()
	cs := p.watch.chans
	for i := len(cs) - 1; i >= 0; i-- {
		if cs[i] == ch {
			last := len(cs) - 1
			cs[i] = cs[last]
			cs[last] = nil
			p.watch.chans = cs[:last]
			return
		}
	}
}

// notify signals every parked fetch, without blocking.
func (p *Partition) notify() {
	p.watch.Lock()
	for _, ch := range p.watch.chans {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	p.watch.Unlock()
}

// snapshotProducers writes the producer state as of the log end offset, unless the newest
// snapshot already holds it, or the log is empty with no producers (a restart has nothing to
// replay): a broker of 100,000 idle partitions does not fsync 100,000 files at every stop.
func (p *Partition) snapshotProducers() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.snapshotProducersLocked()
}

// snapshotProducersLocked is snapshotProducers holding mu.
func (p *Partition) snapshotProducersLocked() error {
	leo := p.Log().LogEndOffset()
	if p.mu.snapshotAt == leo || (leo == p.Log().LogStartOffset() && p.mu.producers.Len() == 0) {
		return nil
	}
	if p.mu.txnIndexBehind {
		// A snapshot at leo would spare the next start the replay that re-adds the missing
		// entry: the older one stays the newest.
		p.m.log.Warn("producer snapshot not written: an aborted transaction is missing from the transaction index; the next start replays the log to add it", "topic", p.Topic, "partition", p.Index)
		return nil
	}
	if err := writeSnapshot(p.fs, p.Log().Dir(), leo, p.mu.producers); err != nil {
		return err
	}
	p.mu.snapshotAt = leo
	return nil
}

// ProducerLastOffsets is ProducerState.LastOffsets of the partition's producers.
func (p *Partition) ProducerLastOffsets() map[int64]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.producers == nil {
		return nil
	}
	return p.mu.producers.LastOffsets()
}
