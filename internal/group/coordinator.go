package group

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/config"
	"github.com/gregor-project/gregor/internal/replica"
	"github.com/gregor-project/gregor/internal/storage"
)

// Coordinator is the broker's group coordinator: one Shard per __consumer_offsets
// partition, each behind its own lock (so heartbeats of different groups do not contend,
// and nothing here touches the controller), with its records appended to that partition.
//
// Lock rule: mu guards the shard list; each shard's mu guards its core and timer. No lock
// is held while a reply is delivered or while waiting for one.
type Coordinator struct {
	cfg      Config
	replicas *replica.Manager
	log      *slog.Logger
	now      func() time.Time
	ensure   func(create bool) (int32, error)
	topics   func() Topics

	ctx    context.Context // cancelled by Close: stops loading
	cancel context.CancelFunc
	wg     sync.WaitGroup

	createMu sync.Mutex // serialises creating __consumer_offsets
	mu       struct {
		sync.Mutex
		shards []*shard // nil until __consumer_offsets exists
		closed bool
	}
}

// Options wire a Coordinator into its broker.
type Options struct {
	Config   Config
	Replicas *replica.Manager
	Log      *slog.Logger
	Now      func() time.Time // nil: time.Now
	// EnsureTopic returns the partition count of __consumer_offsets, whose partitions are
	// open in Replicas, or 0 if it does not exist. With create it first creates the topic
	// (internal, compacted, offsets.topic.num.partitions partitions) if it is missing.
	EnsureTopic func(create bool) (int32, error)
	// Topics returns the current view of the cluster's topics, which consumer groups
	// (KIP-848) assign from; nil: none exist.
	Topics func() Topics
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

		ConsumerSessionTimeoutMs:    b.GroupConsumerSessionTimeoutMs,
		ConsumerHeartbeatIntervalMs: b.GroupConsumerHeartbeatIntervalMs,
		ConsumerMaxSize:             b.GroupConsumerMaxSize,
		ConsumerAssignors:           b.GroupConsumerAssignors,
		ConsumerMigrationPolicy:     b.GroupConsumerMigrationPolicy,
	}
}

// shard is one __consumer_offsets partition's coordinator.
type shard struct {
	index  int32
	part   *replica.Partition
	failed atomic.Bool // loading failed: the partition's groups are unavailable
	mu     struct {
		sync.Mutex
		core   *Shard // nil while loading
		timer  *time.Timer
		armed  int64 // deadline the timer is set for; 0: none
		closed bool
	}
}

// NewCoordinator creates a coordinator; Start loads existing groups.
func NewCoordinator(o Options) *Coordinator {
	c := &Coordinator{cfg: o.Config, replicas: o.Replicas, log: o.Log, now: o.Now, ensure: o.EnsureTopic, topics: o.Topics}
	c.cfg.consumerDefaults()
	if c.now == nil {
		c.now = time.Now
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c
}

// Start loads the groups of an existing __consumer_offsets in the background; until a
// partition is loaded, its groups' requests answer COORDINATOR_LOAD_IN_PROGRESS.
func (c *Coordinator) Start() error {
	n, err := c.ensure(false)
	if err != nil || n == 0 {
		return err
	}
	shards, err := c.attach(n)
	if err != nil {
		return err
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.loadAll(shards)
	}()
	return nil
}

// attach creates the shards for n partitions (not yet loaded).
func (c *Coordinator) attach(n int32) ([]*shard, error) {
	shards := make([]*shard, n)
	for i := range shards {
		p := c.replicas.Get(TopicName, int32(i))
		if p == nil {
			return nil, fmt.Errorf("group coordinator: partition %s-%d is not open", TopicName, i)
		}
		shards[i] = &shard{index: int32(i), part: p}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return nil, errClosed
	}
	c.mu.shards = shards
	return shards, nil
}

var errClosed = errors.New("group coordinator: closed")

// Close answers every parked request with NOT_COORDINATOR and stops the timers and any
// loading. Call it before closing the listeners, whose connections wait for those requests.
func (c *Coordinator) Close() {
	c.cancel()
	c.mu.Lock()
	c.mu.closed = true
	shards := c.mu.shards
	c.mu.Unlock()
	for _, sh := range shards {
		sh.mu.Lock()
		sh.mu.closed = true
		if sh.mu.timer != nil {
			sh.mu.timer.Stop()
		}
		var r Ready
		if sh.mu.core != nil {
			r = sh.mu.core.Unload(c.nowMs())
			sh.mu.core = nil
		}
		sh.mu.Unlock()
		c.deliver(r)
	}
	c.wg.Wait()
}

func (c *Coordinator) nowMs() int64 { return c.now().UnixMilli() }

// shardFor returns the shard coordinating group, creating __consumer_offsets on first use.
func (c *Coordinator) shardFor(group string) (*shard, *kerr.Error) {
	c.mu.Lock()
	shards, closed := c.mu.shards, c.mu.closed
	c.mu.Unlock()
	if closed {
		return nil, kerr.CoordinatorNotAvailable
	}
	if shards == nil {
		var err error
		if shards, err = c.create(); err != nil {
			c.log.Error("creating the group coordinator's topic failed", "topic", TopicName, "err", err)
			return nil, kerr.CoordinatorNotAvailable
		}
	}
	return shards[PartitionFor(group, int32(len(shards)))], nil
}

// create makes __consumer_offsets (or finds it made) and loads its partitions.
func (c *Coordinator) create() ([]*shard, error) {
	c.createMu.Lock()
	defer c.createMu.Unlock()
	c.mu.Lock()
	shards := c.mu.shards
	c.mu.Unlock()
	if shards != nil {
		return shards, nil
	}
	n, err := c.ensure(true)
	if err != nil {
		return nil, err
	}
	if shards, err = c.attach(n); err != nil {
		return nil, err
	}
	c.loadAll(shards) // a new topic is empty, unless it was created through the admin API
	return shards, nil
}

// step runs one input of the core under the shard's lock: the core's writes are appended
// to the partition (and reported back) before its replies are delivered.
func (c *Coordinator) step(sh *shard, in func(s *Shard, now int64) Ready) *kerr.Error {
	sh.mu.Lock()
	switch {
	case sh.mu.closed:
		sh.mu.Unlock()
		return kerr.CoordinatorNotAvailable
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
	c.armLocked(sh)
	sh.mu.Unlock()
	c.deliver(r)
	return nil
}

// viewLocked hands the core the current topics view (consumer groups assign from it).
func (c *Coordinator) viewLocked(sh *shard) {
	if c.topics != nil {
		sh.mu.core.setTopics(c.topics())
	}
}

// persistLocked appends each Write of r (and of the Readys its outcomes produce) and returns
// the replies and warnings to deliver.
func (c *Coordinator) persistLocked(sh *shard, r Ready, now int64) Ready {
	out := Ready{Replies: r.Replies, Warnings: r.Warnings}
	pending := r.Writes
	for len(pending) > 0 {
		w := pending[0]
		pending = pending[1:]
		err := c.append(sh, w.Records, now)
		if err != nil {
			c.log.Warn("group coordinator append failed", "partition", sh.index, "err", err)
		}
		next := sh.mu.core.Written(now, w.ID, err)
		out.Replies = append(out.Replies, next.Replies...)
		out.Warnings = append(out.Warnings, next.Warnings...)
		pending = append(pending, next.Writes...)
	}
	return out
}

// append writes records to the shard's partition as one batch, as the leader with
// acks=all, and translates failures into the Kafka errors the core maps.
func (c *Coordinator) append(sh *shard, recs []Record, now int64) error {
	brs := make([]batch.Record, len(recs))
	for i, r := range recs {
		brs[i] = batch.Record{OffsetDelta: int32(i), Key: r.Key, Value: r.Value}
	}
	h := batch.Header{
		PartitionLeaderEpoch: -1, LastOffsetDelta: int32(len(recs) - 1), BaseTimestamp: now, MaxTimestamp: now,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
	}
	raw, err := batch.Build(h, brs, batch.CodecNone)
	if err != nil {
		return err
	}
	if s := sh.part.Settings(); int64(len(raw)) > int64(s.MaxMessageBytes) {
		return fmt.Errorf("%w: %d-byte batch, max.message.bytes %d", kerr.MessageTooLarge, len(raw), s.MaxMessageBytes)
	}
	hdr, err := batch.ParseHeader(raw)
	if err != nil {
		return err
	}
	_, err = sh.part.Append(raw, []batch.Header{hdr}, now, 0, true)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, replica.ErrNotEnoughReplicas):
		return fmt.Errorf("%w: %v", kerr.NotEnoughReplicas, err)
	case errors.Is(err, storage.ErrLogOffline):
		return fmt.Errorf("%w: %v", kerr.KafkaStorageError, err)
	}
	return err
}

// armLocked points the shard's timer at the core's next deadline.
func (c *Coordinator) armLocked(sh *shard) {
	next, ok := sh.mu.core.NextDeadline()
	if !ok {
		if sh.mu.timer != nil {
			sh.mu.timer.Stop()
		}
		sh.mu.armed = 0
		return
	}
	if next == sh.mu.armed {
		return
	}
	sh.mu.armed = next
	d := time.Until(time.UnixMilli(next))
	if sh.mu.timer == nil {
		sh.mu.timer = time.AfterFunc(d, func() { c.tick(sh) })
	} else {
		sh.mu.timer.Reset(d)
	}
}

// tick feeds the clock to the core: session timeouts, rebalance timeouts, offset expiry.
func (c *Coordinator) tick(sh *shard) {
	sh.mu.Lock()
	if sh.mu.closed || sh.mu.core == nil {
		sh.mu.Unlock()
		return
	}
	now := c.nowMs()
	c.viewLocked(sh)
	r := c.persistLocked(sh, sh.mu.core.Tick(now), now)
	sh.mu.armed = 0
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
	sh, err := c.shardFor(group)
	if err != nil {
		return nil, err
	}
	w := make(chan any, 1)
	if err := c.step(sh, func(s *Shard, now int64) Ready { return in(s, now, w) }); err != nil {
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
	return c.step(sh, func(s *Shard, _ int64) Ready { f(s); return Ready{} })
}

// FindCoordinator reports whether this broker coordinates group (creating
// __consumer_offsets on first use); a single node coordinates every group.
func (c *Coordinator) FindCoordinator(group string) *kerr.Error {
	_, err := c.shardFor(group)
	return err
}

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

// CommitOffsets commits offsets, answering once they are appended.
func (c *Coordinator) CommitOffsets(ctx context.Context, req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	msg, err := c.call(ctx, req.Group, func(s *Shard, now int64, w Waiter) Ready { return s.CommitOffsets(now, w, req) })
	if err != nil {
		r := commitResponse(req)
		setCommitErrors(r, err, nil)
		return r
	}
	return msg.(*kmsg.OffsetCommitResponse)
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

// ListGroups lists the groups of every loaded partition; err is
// COORDINATOR_LOAD_IN_PROGRESS if some partition is still loading (the list then holds
// the loaded ones, as Kafka answers).
func (c *Coordinator) ListGroups(states, types []string) ([]kmsg.ListGroupsResponseGroup, *kerr.Error) {
	c.mu.Lock()
	shards, closed := c.mu.shards, c.mu.closed
	c.mu.Unlock()
	if closed {
		return nil, kerr.CoordinatorNotAvailable
	}
	var out []kmsg.ListGroupsResponseGroup
	var firstErr *kerr.Error
	for _, sh := range shards {
		err := c.step(sh, func(s *Shard, _ int64) Ready {
			out = append(out, s.ListGroups(states, types)...)
			return Ready{}
		})
		if err != nil && firstErr == nil {
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
