package txn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregor-project/gregor/internal/coordinator"
	"github.com/gregor-project/gregor/internal/replica"
	"github.com/gregor-project/gregor/internal/storage"
)

// Coordinator is the broker's transaction coordinator: one Shard per __transaction_state
// partition this broker leads, each behind its own lock, with its records appended to that
// partition in the leader epoch it was elected in (so the partition fences a coordinator
// that lost the leadership; that leader epoch is also the coordinator epoch its markers
// carry). Leadership arrives with Elect and leaves with Resign (leadership.go); a
// transactional id whose partition has no shard here is answered NOT_COORDINATOR.
//
// Lock rule: the runtime's lock (coordinator.Runtime) guards the partition count, the shard
// map and the epochs; each shard's mu guards its core, its timer and its pending appends. The
// two are never held together, and no lock is held while a reply is delivered, while waiting
// for one, while a producer id is fetched or while markers are sent. A shard's appends are
// made under its mu (so its log holds the core's writes in the order the core made them) and
// their replication is awaited without it by the shard's committer goroutine, which reports
// the outcomes to the core in append order; so an InitProducerId, AddPartitionsToTxn or EndTxn
// is answered only once its record is on the ISR, as Kafka's coordinator appends with acks=-1.
// Markers are sent by one goroutine per attempt, which reports to the core under mu.
type Coordinator struct {
	cfg       Config
	replicas  *replica.Manager
	log       *slog.Logger
	now       func() time.Time
	pids      func(ctx context.Context) (int64, error)
	markers   MarkerSender
	groupPart func(groupID string) (int32, error)
	exists    func(topic string, partition int32) bool
	// rt holds __transaction_state's partition count, the shards of the partitions this
	// broker leads, the epochs of Elect and Resign, and the loading and marker goroutines
	// (Close cancels them and waits).
	rt *coordinator.Runtime[*shard]
}

// Options wire a Coordinator into its broker.
type Options struct {
	Config   Config
	Replicas *replica.Manager
	Log      *slog.Logger
	Now      func() time.Time // nil: time.Now
	// Manual: the broker reports leadership of __transaction_state partitions with Elect and
	// Resign; false: a single node, which leads every partition open in Replicas (Start, or
	// the first request, elects them all), as group.Options.Manual.
	Manual bool
	// EnsureTopic returns the partition count of __transaction_state, or 0 if it does not
	// exist; with create it first creates the topic if it is missing.
	EnsureTopic func(create bool) (int32, error)
	// ProducerIDs returns a fresh producer id (an error wrapping a *kerr.Error is answered
	// with that code, any other with COORDINATOR_NOT_AVAILABLE).
	ProducerIDs func(ctx context.Context) (int64, error)
	Markers     MarkerSender
	// GroupPartition is the __consumer_offsets partition of a group (AddOffsetsToTxn adds it).
	GroupPartition func(groupID string) (int32, error)
	// PartitionExists reports whether a partition exists (AddPartitionsToTxn answers
	// UNKNOWN_TOPIC_OR_PARTITION for one that does not, as Kafka); nil: every one does.
	PartitionExists func(topic string, partition int32) bool
}

// shard is one __transaction_state partition's coordinator for one term of leadership: a
// new Elect makes a new shard, and an unloaded shard is never used again.
type shard struct {
	// term is the partition, the leader epoch it was elected in (its appends and markers
	// carry it) and the context cancelled when the shard is unloaded.
	term   *coordinator.Term
	failed atomic.Bool // loading failed: the partition's ids are unavailable
	mu     struct {
		sync.Mutex
		core  *Shard            // nil while loading and once unloaded
		timer coordinator.Timer // fires c.tick(sh); armed for the core's next deadline
		// gone is set when the shard is unloaded: what later requests get.
		gone *kerr.Error
		// pending are the appends not yet reported to the core, in append order; only the
		// head's outcome is awaited (by the committer).
		pending    []*pendingAppend
		committing bool // the committer goroutine runs
	}
	committer sync.WaitGroup
}

// pendingAppend is an append made for one Write of the core, awaiting its report.
type pendingAppend struct {
	id       uint64
	wait     <-chan error // the partition's answer for the acks=all wait; nil once decided
	err      error        // the outcome, once decided
	backstop time.Time    // give up on wait then, should the partition's deadline not fire
}

// NewCoordinator creates a coordinator; Start loads existing transactional ids.
func NewCoordinator(o Options) *Coordinator {
	c := &Coordinator{cfg: o.Config, replicas: o.Replicas, log: o.Log, now: o.Now,
		pids: o.ProducerIDs, markers: o.Markers, groupPart: o.GroupPartition, exists: o.PartitionExists}
	c.cfg.defaults()
	if c.now == nil {
		c.now = time.Now
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	c.rt = coordinator.New(coordinator.Config[*shard]{
		Topic: TopicName, Name: "transaction coordinator", Keys: "transactional_ids",
		Replicas: o.Replicas, Log: c.log, Now: c.now, Manual: o.Manual,
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
// existing __transaction_state open locally and loads them in the background (their ids
// answer COORDINATOR_LOAD_IN_PROGRESS meanwhile). With Options.Manual it does nothing.
func (c *Coordinator) Start() error { return c.rt.Start() }

// Close unloads every shard (waiting requests are answered COORDINATOR_NOT_AVAILABLE), stops
// the timers, loading and marker sends, and waits for their goroutines.
func (c *Coordinator) Close() { c.rt.Close() }

func (c *Coordinator) nowMs() int64 { return c.now().UnixMilli() }

// shardFor returns the shard coordinating transactional id: NOT_COORDINATOR if its partition
// is not led here, COORDINATOR_NOT_AVAILABLE if __transaction_state cannot be created or the
// coordinator is closed.
func (c *Coordinator) shardFor(id string) (*shard, *kerr.Error) { return c.rt.Shard(id) }

// FindCoordinator reports whether this broker coordinates transactional id (creating
// __transaction_state on first use): nil if it leads the id's partition (which may still be
// loading), NOT_COORDINATOR if not, COORDINATOR_NOT_AVAILABLE if the topic cannot be created.
func (c *Coordinator) FindCoordinator(id string) *kerr.Error {
	_, err := c.shardFor(id)
	return err
}

// PartitionFor is the __transaction_state partition coordinating id, or -1 while the topic
// does not exist.
func (c *Coordinator) PartitionFor(id string) int32 { return c.rt.PartitionFor(id) }

// step runs one input of the core under the shard's lock: the core's writes are appended,
// its marker attempts started, and its replies delivered after the lock is released.
func (c *Coordinator) step(sh *shard, in func(s *Shard, now int64) Ready) *kerr.Error {
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
	r := c.persistLocked(sh, in(sh.mu.core, now), now)
	c.armLocked(sh)
	sh.mu.Unlock()
	c.deliver(r)
	return nil
}

// persistLocked appends each Write of r, starts each marker attempt, reports the outcomes
// already decided, and returns the replies and warnings to deliver.
func (c *Coordinator) persistLocked(sh *shard, r Ready, now int64) Ready {
	out := Ready{Replies: r.Replies, Warnings: r.Warnings}
	for _, w := range r.Writes {
		c.appendLocked(sh, w, now)
	}
	for _, m := range r.Markers {
		c.sendLocked(sh, m)
	}
	c.reportLocked(sh, &out, now)
	return out
}

func (c *Coordinator) appendLocked(sh *shard, w Write, now int64) {
	wait, err := c.append(sh, w.Records, now)
	backstop := time.Now().Add(time.Duration(c.cfg.CommitTimeoutMs)*time.Millisecond + time.Second)
	sh.mu.pending = append(sh.mu.pending, &pendingAppend{id: w.ID, wait: wait, err: err, backstop: backstop})
}

// reportLocked reports the decided appends at the head of pending to the core in append
// order, handling what their callbacks return, and makes sure the committer awaits the rest.
func (c *Coordinator) reportLocked(sh *shard, out *Ready, now int64) {
	for len(sh.mu.pending) > 0 && sh.mu.pending[0].wait == nil {
		pa := sh.mu.pending[0]
		sh.mu.pending = sh.mu.pending[1:]
		if pa.err != nil {
			c.log.Warn("transaction coordinator append failed", "partition", sh.term.Index, "err", pa.err)
		}
		next := sh.mu.core.Written(now, pa.id, pa.err)
		out.Replies = append(out.Replies, next.Replies...)
		out.Warnings = append(out.Warnings, next.Warnings...)
		for _, w := range next.Writes {
			c.appendLocked(sh, w, now)
		}
		for _, m := range next.Markers {
			c.sendLocked(sh, m)
		}
	}
	if len(sh.mu.pending) > 0 && !sh.mu.committing {
		sh.mu.committing = true
		sh.committer.Add(1)
		go c.commit(sh)
	}
}

// commit is the shard's committer: it awaits the oldest pending append without the lock,
// then reports it (and the decided ones behind it), until nothing is pending or the shard is
// unloaded.
func (c *Coordinator) commit(sh *shard) {
	defer sh.committer.Done()
	for {
		sh.mu.Lock()
		if sh.mu.gone != nil || len(sh.mu.pending) == 0 {
			sh.mu.committing = false
			sh.mu.Unlock()
			return
		}
		head := sh.mu.pending[0]
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
		c.reportLocked(sh, &out, now)
		c.armLocked(sh)
		sh.mu.Unlock()
		c.deliver(out)
	}
}

// sendLocked starts one marker attempt; its outcome is reported to the core under the lock.
func (c *Coordinator) sendLocked(sh *shard, job MarkerJob) {
	c.rt.Go(func() { // under sh.mu while the shard is not gone: before Close waits
		var failed map[TopicPartition]error
		if c.markers == nil {
			failed = map[TopicPartition]error{}
			for _, p := range job.Partitions {
				failed[p] = errors.New("txn coordinator: no marker sender")
			}
		} else {
			failed = c.markers.WriteMarkers(sh.term.Ctx, job.Markers)
		}
		sh.mu.Lock()
		if sh.mu.gone != nil || sh.mu.core == nil {
			sh.mu.Unlock()
			return
		}
		now := c.nowMs()
		r := c.persistLocked(sh, sh.mu.core.MarkersWritten(now, job.ID, failed), now)
		c.armLocked(sh)
		sh.mu.Unlock()
		c.deliver(r)
	})
}

// append writes records to the shard's partition as one batch (coordinator.Append: as its
// leader in the shard's epoch, with acks=all), and returns the wait for the ISR to have them,
// or the failure named with the Kafka error the core maps. The wait is bounded by
// Config.CommitTimeoutMs (the partition's purgatory, and the committer's backstop a second
// later), by a change of leadership (the partition fails its waiting appends), and by the
// shard's unloading.
func (c *Coordinator) append(sh *shard, recs []Record, now int64) (<-chan error, error) {
	wait, err := coordinator.Append(sh.term, recs, nil, now, c.cfg.CommitTimeoutMs)
	return wait, appendError(err)
}

// appendError names an append failure with the Kafka error the core maps (writeError): a
// partition no longer led here, or led in another epoch, or whose log was closed, is
// NOT_LEADER_OR_FOLLOWER, which requests see as NOT_COORDINATOR.
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
	default:
		return err
	}
	return fmt.Errorf("%w: %v", code, err)
}

// armLocked points the shard's timer at the core's next deadline.
func (c *Coordinator) armLocked(sh *shard) { sh.mu.timer.Arm(sh.mu.core.NextDeadline()) }

// tick feeds the clock to the core: timed-out transactions, expired ids, marker retries.
func (c *Coordinator) tick(sh *shard) {
	sh.mu.Lock()
	if sh.mu.gone != nil || sh.mu.core == nil {
		sh.mu.Unlock()
		return
	}
	now := c.nowMs()
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
			c.log.Error("transaction coordinator answered a request twice", "msg", fmt.Sprintf("%T", rep.Msg))
		}
	}
	for _, w := range r.Warnings {
		c.log.Warn("transaction coordinator", "err", w)
	}
}

// call runs one request for transactional id and waits for its answer; err is set when the
// request never reached the core or the caller gave up. A request that needs a fresh
// producer id gets one (without any lock) and runs again.
func (c *Coordinator) call(ctx context.Context, id string, in func(s *Shard, now int64, w Waiter, fresh int64) Ready) (any, *kerr.Error) {
	fresh := int64(-1)
	for attempt := 0; ; attempt++ {
		sh, err := c.shardFor(id)
		if err != nil {
			return nil, err
		}
		w := make(chan any, 1)
		need := false
		if err := c.step(sh, func(s *Shard, now int64) Ready {
			r := in(s, now, w, fresh)
			need = r.NeedProducerID
			return r
		}); err != nil {
			return nil, err
		}
		if !need {
			select {
			case msg := <-w:
				return msg, nil
			case <-ctx.Done():
				return nil, kerr.CoordinatorNotAvailable
			}
		}
		if attempt >= 3 || c.pids == nil {
			return nil, kerr.CoordinatorNotAvailable
		}
		pid, perr := c.pids(ctx)
		if perr != nil {
			c.log.Warn("transaction coordinator could not get a producer id", "err", perr)
			var ke *kerr.Error
			if errors.As(perr, &ke) {
				return nil, ke
			}
			return nil, kerr.CoordinatorNotAvailable
		}
		fresh = pid
	}
}

// read runs f on id's shard under its lock, for requests that only read.
func (c *Coordinator) read(id string, f func(s *Shard, now int64)) *kerr.Error {
	sh, err := c.rt.Lookup(id) // reading never creates __transaction_state
	if err != nil {
		return err
	}
	return c.step(sh, func(s *Shard, now int64) Ready { f(s, now); return Ready{} })
}
