package group

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/config"
	"github.com/gregor-project/gregor/internal/coordinator"
	"github.com/gregor-project/gregor/internal/replica"
	"github.com/gregor-project/gregor/internal/storage"
)

// Coordinator is the broker's group coordinator: one Shard per __consumer_offsets
// partition this broker leads, each behind its own lock (so heartbeats of different groups
// do not contend, and nothing here touches the controller), with its records appended to
// that partition. Leadership arrives with Elect and leaves with Resign (leadership.go); a
// group whose partition has no shard here is answered NOT_COORDINATOR, so its clients find
// the coordinator again.
//
// Lock rule: the runtime's lock (coordinator.Runtime) guards the partition count, the shard
// map and the epochs; each shard's mu guards its core, its timer and its pending appends. The
// two are never held together, and no lock is held while a reply is delivered or while waiting
// for one. In particular a shard's appends are made under its mu (so its log holds the core's
// writes in the order the core made them), but their replication is awaited without it, by the
// shard's committer goroutine; the outcomes are reported to the core (Written) under mu, in
// append order. So one group's slow commit does not stall the shard's other groups, and a
// write's effects the core applies in its Written callback (a commit's offsets, a generation's
// assignment) and the replies made there wait until the ISR has the write, as Kafka's
// coordinator applies a commit to its cache only once the append succeeded. Replies that
// depend on no write are delivered at once, but for consumer group heartbeats (KIP-848), whose
// answer may carry what the shard's earlier writes did: they are held until those are decided
// (callHeld).
//
// A write the partition refuses outright (NOT_ENOUGH_REPLICAS, MESSAGE_TOO_LARGE, a storage
// error) is not in the log though the core applied it: the shard is then rolled back to
// what the log stores by replaying it into a new core (rollbackLocked), as Kafka's coordinator
// runtime reverts to its last written offset.
//
// Invariant: without Options.Manual, the runtime learns the partition count only together
// with electing every partition open locally, so a known count means the single node's
// shards exist.
type Coordinator struct {
	cfg      Config
	replicas *replica.Manager
	log      *slog.Logger
	now      func() time.Time
	topics   func() Topics
	// rt holds __consumer_offsets' partition count, the shards of the partitions this
	// broker leads, the epochs of Elect and Resign, and the loading goroutines.
	rt *coordinator.Runtime[*shard]
}

// Options wire a Coordinator into its broker.
type Options struct {
	Config   Config
	Replicas *replica.Manager
	Log      *slog.Logger
	Now      func() time.Time // nil: time.Now
	// EnsureTopic returns the partition count of __consumer_offsets, or 0 if it does not
	// exist. With create it first creates the topic (internal, compacted,
	// offsets.topic.num.partitions partitions) if it is missing.
	EnsureTopic func(create bool) (int32, error)
	// Topics returns the current view of the cluster's topics, which consumer groups
	// (KIP-848) assign from; nil: none exist.
	Topics func() Topics
	// Manual: the broker reports leadership of __consumer_offsets partitions with Elect and
	// Resign as its metadata changes, and no partition is coordinated before its Elect.
	// false: a single node, which leads every partition open in Replicas; Start (or the
	// first request, which creates the topic) elects them all.
	Manual bool
}

// ConfigFrom takes a shard Config from the broker's group.* and offsets.* settings.
func ConfigFrom(b *config.Broker) Config {
	b = b.Current()
	return Config{
		InitialRebalanceDelayMs: int64(b.GroupInitialRebalanceDelayMs),
		MinSessionTimeoutMs:     b.GroupMinSessionTimeoutMs,
		MaxSessionTimeoutMs:     b.GroupMaxSessionTimeoutMs,
		MaxSize:                 b.GroupMaxSize,
		OffsetsRetentionMs:      int64(b.OffsetsRetentionMinutes) * 60 * 1000,
		OffsetsRetentionCheckMs: b.OffsetsRetentionCheckIntervalMs,
		MaxMetadataBytes:        DefaultMaxMetadataBytes,
		CommitTimeoutMs:         int64(b.OffsetsCommitTimeoutMs),

		ConsumerSessionTimeoutMs:    b.GroupConsumerSessionTimeoutMs,
		ConsumerHeartbeatIntervalMs: b.GroupConsumerHeartbeatIntervalMs,
		ConsumerMaxSize:             b.GroupConsumerMaxSize,
		ConsumerAssignors:           b.GroupConsumerAssignors,
		ConsumerMigrationPolicy:     b.GroupConsumerMigrationPolicy,
	}
}

// shard is one __consumer_offsets partition's coordinator, for one term of leadership: a
// new Elect makes a new shard, and an unloaded shard is never used again.
type shard struct {
	// term is the partition, the leader epoch it was elected in (its appends carry it) and
	// the context cancelled when the shard is unloaded (stops its loading and waits).
	term   *coordinator.Term
	failed atomic.Bool // loading failed: the partition's groups are unavailable
	mu     struct {
		sync.Mutex
		core  *Shard            // nil while loading and once unloaded
		timer coordinator.Timer // fires c.tick(sh); armed for the core's next deadline
		// gone is set when the shard is unloaded: what later requests get
		// (NOT_COORDINATOR after Resign, COORDINATOR_NOT_AVAILABLE after Close).
		gone *kerr.Error
		// pending are the appends not yet reported to the core, in append order; only the
		// head's outcome is awaited (by the committer), as the high watermark passes them in
		// that order. Emptied when the shard is unloaded (Unload fails their callbacks).
		pending []*pendingAppend
		// markers are the CompleteTxn calls made while the shard loads, applied in order
		// once it is loaded: the marker may be past the end the replay read to. One the
		// replay did read is applied a second time, which changes nothing: no offsets of
		// the producer can be written between the two, as the shard serves no commits
		// while loading.
		markers []marker
		// committing: the committer goroutine runs; it is started (under mu, while gone is
		// nil) when an undecided append is queued, and ends once pending is empty or the
		// shard is gone. unload waits for it.
		committing bool
	}
	committer sync.WaitGroup // the committer goroutine; Add only under mu while gone is nil
}

// marker is a transaction marker reported by CompleteTxn.
type marker struct {
	producerID int64
	commit     bool
}

// pendingAppend is an append made for one Write of the core, awaiting its report.
type pendingAppend struct {
	id       uint64
	wait     <-chan error // the partition's answer for an acks=all wait; nil once decided
	err      error        // the outcome (appendError's), once decided
	refused  bool         // the partition refused the append: its records are not in the log
	backstop time.Time    // give up on wait then, should the partition's deadline not fire
	held     []heldReply  // delivered once this append is reported
}

// heldReply is a reply held back until the appends before it are decided; failed answers its
// request instead if the shard is unloaded first, or the append it waits for finds the
// partition lost or is refused (NOT_COORDINATOR: a refused append rolls the core back,
// rollbackLocked); after a failure of an append that is in the log (its wait timed out) it
// is delivered as made, as the core keeps what the log holds.
type heldReply struct {
	Reply
	failed func(*kerr.Error) any
}

// NewCoordinator creates a coordinator; Start loads existing groups.
func NewCoordinator(o Options) *Coordinator {
	c := &Coordinator{cfg: o.Config, replicas: o.Replicas, log: o.Log, now: o.Now, topics: o.Topics}
	c.cfg.consumerDefaults()
	if c.cfg.CommitTimeoutMs <= 0 {
		c.cfg.CommitTimeoutMs = DefaultCommitTimeoutMs
	}
	if c.now == nil {
		c.now = time.Now
	}
	c.rt = coordinator.New(coordinator.Config[*shard]{
		Topic: TopicName, Name: "group coordinator", Keys: "groups",
		Replicas: o.Replicas, Log: o.Log, Now: c.now, Manual: o.Manual,
		EnsureTopic: o.EnsureTopic, PartitionFor: PartitionFor,
		NewShard: c.newShard,
		Load:     c.load,
		Unload:   c.unload,
	})
	return c
}

// newShard makes the shard of a new term (the runtime's Config.NewShard).
func (c *Coordinator) newShard(t *coordinator.Term) *shard {
	sh := &shard{term: t}
	sh.mu.timer.Init(func() { c.tick(sh) })
	return sh
}

// Term is the shard's term of leadership (coordinator.Shard).
func (sh *shard) Term() *coordinator.Term { return sh.term }

// Start starts the coordinator. Without Options.Manual it elects every partition of an
// existing __consumer_offsets that is open locally and loads their groups in the
// background; until a partition is loaded, its groups' requests answer
// COORDINATOR_LOAD_IN_PROGRESS. A partition that is not open here is not coordinated here.
// With Options.Manual it does nothing: partitions are coordinated from their Elect on.
func (c *Coordinator) Start() error { return c.rt.Start() }

// Close answers every parked request with NOT_COORDINATOR and stops the timers and any
// loading. Call it before closing the listeners, whose connections wait for those requests.
func (c *Coordinator) Close() { c.rt.Close() }

func (c *Coordinator) nowMs() int64 { return c.now().UnixMilli() }

// shardFor returns the shard coordinating group: NOT_COORDINATOR if its partition is not led
// here, COORDINATOR_NOT_AVAILABLE if __consumer_offsets cannot be created or the coordinator
// is closed.
func (c *Coordinator) shardFor(group string) (*shard, *kerr.Error) { return c.rt.Shard(group) }

// step runs one input of the core under the shard's lock: the core's writes are appended to
// the partition, those already decided are reported back, and the replies are delivered
// after the lock is released; writes still waiting for the ISR are reported later by the
// committer. With hold, the reply to hold.To waits for every append made so far.
func (c *Coordinator) step(sh *shard, hold *heldReply, in func(s *Shard, now int64) Ready) *kerr.Error {
	sh.mu.Lock()
	switch {
	case sh.mu.gone != nil:
		err := sh.mu.gone
		sh.mu.Unlock()
		return err
	case sh.mu.core == nil && sh.failed.Load():
		sh.mu.Unlock()
		return kerr.CoordinatorNotAvailable
	case sh.mu.core == nil:
		sh.mu.Unlock()
		return kerr.CoordinatorLoadInProgress
	}
	now := c.nowMs()
	c.viewLocked(sh)
	r := c.persistLocked(sh, in(sh.mu.core, now), now)
	if n := len(sh.mu.pending); hold != nil && n > 0 {
		tail := sh.mu.pending[n-1]
		r.Replies = slices.DeleteFunc(r.Replies, func(rep Reply) bool {
			if rep.To != hold.To {
				return false
			}
			tail.held = append(tail.held, heldReply{Reply: rep, failed: hold.failed})
			return true
		})
	}
	c.armLocked(sh)
	sh.mu.Unlock()
	c.deliver(r)
	return nil
}

// viewLocked hands the core the current topics view (consumer groups assign from it).
func (c *Coordinator) viewLocked(sh *shard) {
	if c.topics != nil && sh.mu.core != nil {
		sh.mu.core.setTopics(c.topics())
	}
}

// persistLocked appends each Write of r, reports the outcomes already decided (reportLocked)
// and returns the replies and warnings to deliver.
func (c *Coordinator) persistLocked(sh *shard, r Ready, now int64) Ready {
	out := Ready{Replies: r.Replies, Warnings: r.Warnings}
	for _, w := range r.Writes {
		c.appendLocked(sh, w, now)
	}
	c.reportLocked(sh, &out, now)
	return out
}

// appendLocked appends w's records to the partition and queues w to be reported.
func (c *Coordinator) appendLocked(sh *shard, w Write, now int64) {
	wait, err := c.append(sh, w.Records, w.Txn, now)
	backstop := time.Now().Add(time.Duration(c.cfg.CommitTimeoutMs)*time.Millisecond + time.Second)
	sh.mu.pending = append(sh.mu.pending, &pendingAppend{id: w.ID, wait: wait, err: err, refused: err != nil, backstop: backstop})
}

// reportLocked reports the decided appends at the head of pending to the core, in append
// order, appending the writes their callbacks make, and adds the replies and warnings to out.
// If an undecided append remains, it makes sure the committer awaits it.
func (c *Coordinator) reportLocked(sh *shard, out *Ready, now int64) {
	for len(sh.mu.pending) > 0 && sh.mu.pending[0].wait == nil {
		pa := sh.mu.pending[0]
		sh.mu.pending = sh.mu.pending[1:]
		if pa.err != nil {
			c.log.Warn("group coordinator append failed", "partition", sh.term.Index, "err", pa.err)
		}
		next := sh.mu.core.Written(now, pa.id, pa.err)
		out.Replies = append(out.Replies, next.Replies...)
		out.Warnings = append(out.Warnings, next.Warnings...)
		lost := pa.err != nil && groupWriteError(pa.err) == kerr.NotCoordinator
		for _, h := range pa.held {
			if lost {
				// The partition is no longer led here (or its log failed): what the answer
				// carries may never be durable.
				h.Msg = h.failed(kerr.NotCoordinator)
			}
			out.Replies = append(out.Replies, h.Reply)
		}
		if pa.refused && !lost {
			c.rollbackLocked(sh, out, now)
			return
		}
		for _, w := range next.Writes {
			c.appendLocked(sh, w, now)
		}
	}
	if len(sh.mu.pending) > 0 && !sh.mu.committing {
		sh.mu.committing = true
		sh.committer.Add(1)
		go c.commit(sh)
	}
}

// rollbackLocked reverts the shard to what its partition stores, after an append the
// partition refused (NOT_ENOUGH_REPLICAS, MESSAGE_TOO_LARGE, a storage error): the core had
// already applied the write's records (a member joined, a group epoch moved on) though they
// are not in the log, so its state is dropped and replayed from the log, as Kafka's
// coordinator runtime reverts its state to the last written offset. The write's own request
// has its error answer already; requests still parked in the old core, and those waiting on
// appends made after the refused one, are answered NOT_COORDINATOR (as at a coordinator
// change: clients find the coordinator again and retry), and until the replay is done the
// partition's requests get COORDINATOR_LOAD_IN_PROGRESS. Holding sh.mu.
func (c *Coordinator) rollbackLocked(sh *shard, out *Ready, now int64) {
	c.log.Warn("group coordinator reverts its partition to what is stored after a refused append", "partition", sh.term.Index)
	old := sh.mu.core
	sh.mu.core = nil
	r := old.Unload(now)
	out.Replies = append(out.Replies, r.Replies...)
	out.Warnings = append(out.Warnings, r.Warnings...)
	for _, pa := range sh.mu.pending {
		for _, h := range pa.held {
			h.Msg = h.failed(kerr.NotCoordinator)
			out.Replies = append(out.Replies, h.Reply)
		}
	}
	sh.mu.pending = nil
	sh.mu.timer.Arm(0, false)
	c.rt.Go(func() { c.load(sh) })
}

// commit is the shard's committer: it awaits the outcome of the oldest pending append without
// the shard's lock, then reports it (and the decided ones behind it) under the lock, until
// nothing is pending or the shard is unloaded.
func (c *Coordinator) commit(sh *shard) {
	defer sh.committer.Done()
	for {
		sh.mu.Lock()
		if sh.mu.gone != nil || len(sh.mu.pending) == 0 {
			sh.mu.committing = false
			sh.mu.Unlock()
			return
		}
		head := sh.mu.pending[0] // its wait and backstop are only written when it is queued
		sh.mu.Unlock()
		err := appendError(coordinator.AwaitCommit(sh.term.Ctx, head.wait, time.Until(head.backstop)))
		sh.mu.Lock()
		if sh.mu.gone != nil {
			sh.mu.committing = false
			sh.mu.Unlock()
			return
		}
		head.wait, head.err = nil, err
		var out Ready
		now := c.nowMs()
		c.viewLocked(sh)
		c.reportLocked(sh, &out, now)
		c.armLocked(sh)
		sh.mu.Unlock()
		c.deliver(out)
	}
}

// append writes records to the shard's partition as one batch (coordinator.Append: as its
// leader in the shard's epoch, with acks=all; with txn transactional for that producer), and
// returns the partition's wait for the ISR to have them or the failure, translated into the
// Kafka errors the core maps. The committer awaits the wait (coordinator.AwaitCommit), so an
// offset commit or a group's new state is answered only once it survives the loss of this
// broker, as Kafka's coordinator appends with acks=-1.
//
// The wait is bounded: by offsets.commit.timeout.ms (Config.CommitTimeoutMs; REQUEST_TIMED_OUT
// after it, from the partition's purgatory or, should its deadline not fire, from the
// committer's backstop a second later), by a change of leadership (the partition fails its
// waiting appends at once: NOT_LEADER_OR_FOLLOWER), and by the shard being unloaded: Resign
// and Close cancel the shard's context, which ends the wait at once, and Unload answers the
// writes' requests NOT_COORDINATOR.
func (c *Coordinator) append(sh *shard, recs []Record, txn *Producer, now int64) (<-chan error, error) {
	wait, err := coordinator.Append(sh.term, recs, txn, now, c.cfg.CommitTimeoutMs)
	return wait, appendError(err)
}

// appendError names an append failure with the Kafka error the core maps (groupWriteError,
// offsetWriteError): a partition this broker no longer leads, or leads in another epoch than
// the shard was elected in, or whose log was closed under it (the partition moved or was
// deleted) is NOT_LEADER_OR_FOLLOWER, which requests see as NOT_COORDINATOR, as Kafka's
// coordinator answers a write to a partition it no longer leads.
func appendError(err error) error {
	var code *kerr.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &code):
		return err
	case errors.Is(err, replica.ErrNotLeaderOrFollower), errors.Is(err, replica.ErrFencedLeaderEpoch),
		errors.Is(err, replica.ErrUnknownLeaderEpoch), errors.Is(err, storage.ErrLogClosed):
		code = kerr.NotLeaderForPartition
	case errors.Is(err, replica.ErrNotEnoughReplicas):
		code = kerr.NotEnoughReplicas
	case errors.Is(err, replica.ErrNotEnoughReplicasAfterAppend):
		code = kerr.NotEnoughReplicasAfterAppend
	case errors.Is(err, replica.ErrRequestTimedOut):
		code = kerr.RequestTimedOut
	case errors.Is(err, storage.ErrLogOffline), errors.Is(err, storage.ErrCorruptLog),
		errors.Is(err, storage.ErrTooManyOpenFiles):
		code = kerr.KafkaStorageError
	case errors.Is(err, storage.ErrRecordBatchTooLarge):
		code = kerr.RecordListTooLarge
	case errors.Is(err, replica.ErrInvalidEpoch):
		code = kerr.InvalidProducerEpoch // a transactional commit of a fenced producer
	case errors.Is(err, replica.ErrOutOfOrderSequence):
		code = kerr.OutOfOrderSequenceNumber
	case errors.Is(err, replica.ErrInvalidTxnState):
		code = kerr.InvalidTxnState
	case errors.Is(err, replica.ErrTransactionCoordinatorFenced):
		code = kerr.TransactionCoordinatorFenced
	default:
		return err
	}
	return fmt.Errorf("%w: %v", code, err)
}

// armLocked points the shard's timer at the core's next deadline (none while it reloads).
func (c *Coordinator) armLocked(sh *shard) {
	if sh.mu.core == nil {
		sh.mu.timer.Arm(0, false)
		return
	}
	sh.mu.timer.Arm(sh.mu.core.NextDeadline())
}

// tick feeds the clock to the core: session timeouts, rebalance timeouts, offset expiry.
func (c *Coordinator) tick(sh *shard) {
	sh.mu.Lock()
	if sh.mu.gone != nil || sh.mu.core == nil {
		sh.mu.Unlock()
		return
	}
	now := c.nowMs()
	c.viewLocked(sh)
	r := c.persistLocked(sh, sh.mu.core.Tick(now), now)
	sh.mu.timer.Fired()
	c.armLocked(sh)
	sh.mu.Unlock()
	c.deliver(r)
}

// deliver hands each reply to its waiting request and logs the warnings.
func (c *Coordinator) deliver(r Ready) {
	for _, rep := range r.Replies {
		ch := rep.To.(chan any)
		select {
		case ch <- rep.Msg:
		default:
			c.log.Error("group coordinator answered a request twice", "msg", fmt.Sprintf("%T", rep.Msg))
		}
	}
	for _, w := range r.Warnings {
		c.log.Warn("group coordinator", "err", w)
	}
}

// call runs one request for group and waits for its answer; err is set when the request
// never reached the core (coordinator loading, closed) or the caller gave up.
func (c *Coordinator) call(ctx context.Context, group string, in func(s *Shard, now int64, w Waiter) Ready) (any, *kerr.Error) {
	return c.callHeld(ctx, group, nil, in)
}

// callHeld is call for a request whose answer must not overtake the shard's appends made
// before it (Kafka's coordinator runtime completes a write operation that wrote nothing only
// once the partition's pending writes are committed): with failed non-nil the answer waits
// until they are decided, and failed(err) answers instead if the shard is unloaded first.
func (c *Coordinator) callHeld(ctx context.Context, group string, failed func(*kerr.Error) any, in func(s *Shard, now int64, w Waiter) Ready) (any, *kerr.Error) {
	sh, err := c.shardFor(group)
	if err != nil {
		return nil, err
	}
	w := make(chan any, 1)
	var hold *heldReply
	if failed != nil {
		hold = &heldReply{Reply: Reply{To: w}, failed: failed}
	}
	if err := c.step(sh, hold, func(s *Shard, now int64) Ready { return in(s, now, w) }); err != nil {
		return nil, err
	}
	select {
	case msg := <-w:
		return msg, nil
	case <-ctx.Done():
		return nil, kerr.CoordinatorNotAvailable
	}
}

// read runs f on group's shard under its lock, for requests that only read.
func (c *Coordinator) read(group string, f func(s *Shard)) *kerr.Error {
	sh, err := c.shardFor(group)
	if err != nil {
		return err
	}
	return c.step(sh, nil, func(s *Shard, _ int64) Ready { f(s); return Ready{} })
}

// FindCoordinator reports whether this broker coordinates group (creating
// __consumer_offsets on first use): nil if it leads the group's partition (its groups may
// still be loading), NOT_COORDINATOR if it does not (PartitionFor names the partition whose
// leader does), COORDINATOR_NOT_AVAILABLE if the topic cannot be created.
func (c *Coordinator) FindCoordinator(group string) *kerr.Error {
	_, err := c.shardFor(group)
	return err
}

// PartitionFor is the __consumer_offsets partition coordinating group, or -1 while the topic
// does not exist (FindCoordinator creates it).
func (c *Coordinator) PartitionFor(group string) int32 { return c.rt.PartitionFor(group) }

// JoinGroup parks until the group's join phase ends (or ctx is done).
func (c *Coordinator) JoinGroup(ctx context.Context, req *kmsg.JoinGroupRequest, client Client) *kmsg.JoinGroupResponse {
	msg, err := c.call(ctx, req.Group, func(s *Shard, now int64, w Waiter) Ready { return s.JoinGroup(now, w, req, client) })
	if err != nil {
		return joinError(req.MemberID, err)
	}
	return msg.(*kmsg.JoinGroupResponse)
}

// SyncGroup parks a follower until the leader's assignment is stored (or ctx is done).
func (c *Coordinator) SyncGroup(ctx context.Context, req *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	msg, err := c.call(ctx, req.Group, func(s *Shard, now int64, w Waiter) Ready { return s.SyncGroup(now, w, req) })
	if err != nil {
		return syncError(err)
	}
	return msg.(*kmsg.SyncGroupResponse)
}

// Heartbeat answers at once; while the group's partition loads it answers NONE, as Kafka
// does, so members do not rejoin needlessly.
func (c *Coordinator) Heartbeat(ctx context.Context, req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	msg, err := c.call(ctx, req.Group, func(s *Shard, now int64, w Waiter) Ready { return s.Heartbeat(now, w, req) })
	switch {
	case err == kerr.CoordinatorLoadInProgress:
		return heartbeatResponse(nil)
	case err != nil:
		return heartbeatResponse(err)
	}
	return msg.(*kmsg.HeartbeatResponse)
}

// LeaveGroup removes members at once.
func (c *Coordinator) LeaveGroup(ctx context.Context, req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	msg, err := c.call(ctx, req.Group, func(s *Shard, now int64, w Waiter) Ready { return s.LeaveGroup(now, w, req) })
	if err != nil {
		r := kmsg.NewPtrLeaveGroupResponse()
		r.ErrorCode = err.Code
		return r
	}
	return msg.(*kmsg.LeaveGroupResponse)
}

// CommitOffsets commits offsets, answering once they are appended and replicated to the ISR.
func (c *Coordinator) CommitOffsets(ctx context.Context, req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	msg, err := c.call(ctx, req.Group, func(s *Shard, now int64, w Waiter) Ready { return s.CommitOffsets(now, w, req) })
	if err != nil {
		r := commitResponse(req)
		setCommitErrors(r, err, nil)
		return r
	}
	return msg.(*kmsg.OffsetCommitResponse)
}

// CommitTxnOffsets stores a transaction's offsets (TxnOffsetCommit), answering once their
// transactional batch is appended and replicated; they count once the transaction commits.
func (c *Coordinator) CommitTxnOffsets(ctx context.Context, req *kmsg.TxnOffsetCommitRequest) *kmsg.TxnOffsetCommitResponse {
	msg, err := c.call(ctx, req.Group, func(s *Shard, now int64, w Waiter) Ready { return s.CommitTxnOffsets(now, w, req) })
	if err != nil {
		r := txnCommitResponse(req)
		setTxnCommitErrors(r, err, nil)
		return r
	}
	return msg.(*kmsg.TxnOffsetCommitResponse)
}

// CompleteTxn applies a marker written to __consumer_offsets partition `partition`:
// commit makes the producer's pending offsets of that partition's groups committed, abort
// drops them (Kafka's GroupCoordinator.onTransactionCompleted). Call it once the marker is
// in the partition's log. A partition not coordinated here is left alone (its next
// coordinator replays the marker); one still loading applies it once loaded (see
// shard.mu.markers).
func (c *Coordinator) CompleteTxn(partition int32, producerID int64, commit bool) {
	sh, ok := c.rt.ShardAt(partition)
	if !ok {
		return
	}
	sh.mu.Lock()
	switch {
	case sh.mu.gone != nil:
		sh.mu.Unlock()
		return
	case sh.mu.core == nil:
		sh.mu.markers = append(sh.mu.markers, marker{producerID, commit})
		sh.mu.Unlock()
		return
	}
	now := c.nowMs()
	c.viewLocked(sh)
	r := c.persistLocked(sh, sh.mu.core.CompleteTxn(now, producerID, commit), now)
	c.armLocked(sh)
	sh.mu.Unlock()
	c.deliver(r)
}

// FetchOffsets reads one group's committed offsets.
func (c *Coordinator) FetchOffsets(req *kmsg.OffsetFetchRequestGroup, requireStable bool) kmsg.OffsetFetchResponseGroup {
	var resp kmsg.OffsetFetchResponseGroup
	if err := c.read(req.Group, func(s *Shard) { resp = s.FetchOffsets(req, requireStable) }); err != nil {
		resp = kmsg.NewOffsetFetchResponseGroup()
		resp.Group = req.Group
		resp.ErrorCode = err.Code
	}
	return resp
}

// DeleteOffsets deletes committed offsets of a group.
func (c *Coordinator) DeleteOffsets(ctx context.Context, req *kmsg.OffsetDeleteRequest) *kmsg.OffsetDeleteResponse {
	msg, err := c.call(ctx, req.Group, func(s *Shard, now int64, w Waiter) Ready { return s.DeleteOffsets(now, w, req) })
	if err != nil {
		r := kmsg.NewPtrOffsetDeleteResponse()
		r.ErrorCode = err.Code
		return r
	}
	return msg.(*kmsg.OffsetDeleteResponse)
}

// DescribeGroup describes one group.
func (c *Coordinator) DescribeGroup(id string) kmsg.DescribeGroupsResponseGroup {
	var d kmsg.DescribeGroupsResponseGroup
	if err := c.read(id, func(s *Shard) { d = s.DescribeGroup(id) }); err != nil {
		d = kmsg.NewDescribeGroupsResponseGroup()
		d.Group = id
		d.ErrorCode = err.Code
	}
	return d
}

// ListGroups lists the groups of every partition this broker leads and has loaded; err is
// COORDINATOR_LOAD_IN_PROGRESS if some partition is still loading (the list then holds
// the loaded ones, as Kafka answers). A partition resigned meanwhile is left out.
func (c *Coordinator) ListGroups(states, types []string) ([]kmsg.ListGroupsResponseGroup, *kerr.Error) {
	shards, err := c.rt.Shards()
	if err != nil {
		return nil, err
	}
	var out []kmsg.ListGroupsResponseGroup
	var firstErr *kerr.Error
	for _, sh := range shards {
		err := c.step(sh, nil, func(s *Shard, _ int64) Ready {
			out = append(out, s.ListGroups(states, types)...)
			return Ready{}
		})
		if err != nil && err != kerr.NotCoordinator && firstErr == nil {
			firstErr = err
		}
	}
	return out, firstErr
}

// DeleteGroups deletes empty groups and their offsets, each in its own partition.
func (c *Coordinator) DeleteGroups(ctx context.Context, ids []string) []kmsg.DeleteGroupsResponseGroup {
	out := make([]kmsg.DeleteGroupsResponseGroup, 0, len(ids))
	for _, id := range ids {
		msg, err := c.call(ctx, id, func(s *Shard, now int64, w Waiter) Ready { return s.DeleteGroups(now, w, []string{id}) })
		if err != nil {
			r := kmsg.NewDeleteGroupsResponseGroup()
			r.Group, r.ErrorCode = id, err.Code
			out = append(out, r)
			continue
		}
		out = append(out, msg.(*kmsg.DeleteGroupsResponse).Groups...)
	}
	return out
}
