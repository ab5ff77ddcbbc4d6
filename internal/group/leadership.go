package group

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Leadership: the coordinator of a group is the leader of its __consumer_offsets partition
// (Kafka's GroupCoordinator onElection/onResignation). The broker reports each change of
// leadership it applies from the metadata log:
//
//   - Elect(p, epoch): this broker leads partition p in leader epoch epoch. The coordinator
//     makes a new shard for p and loads p's groups from the local log in the background;
//     meanwhile p's groups answer COORDINATOR_LOAD_IN_PROGRESS.
//   - Resign(p, epoch): another broker leads p from epoch on (or p is gone: epoch -1). The
//     shard is unloaded: its parked JoinGroup and SyncGroup requests and any offset commit
//     waiting for its append are answered NOT_COORDINATOR, its timers stop, and every later
//     request of its groups is answered NOT_COORDINATOR.
//
// Epochs order the reports (they may come late from a slow metadata loop): an Elect is
// ignored unless its epoch is newer than every epoch Elect and Resign saw for the partition,
// so a repeated Elect is harmless and an Elect that follows a Resign of a newer epoch does
// nothing. A Resign is ignored when its epoch is older than the shard's, a stale report of
// an earlier term. An Elect in a newer epoch while a shard is loaded replaces it (the log may
// have changed while another broker led the partition, so the groups are loaded again).
//
// Fencing does not rest on the reports arriving in time: a shard appends in the leader epoch
// it was elected in, and the partition refuses an append in an epoch other than its own
// (replica.ErrFencedLeaderEpoch). A shard whose partition has moved on to a newer term, its
// Resign still on the way, writes nothing; its requests are answered NOT_COORDINATOR. On a
// single node the partitions have no epochs to fence by (singleNodeEpoch is never refused).

// singleNodeEpoch is the leader epoch of every partition on a single node, as the produce
// path appends with.
const singleNodeEpoch = 0

// Elect makes this broker the coordinator of the groups of __consumer_offsets partition
// partition from leaderEpoch on, and starts loading them. The partition must be open in
// Replicas as the leader. Idempotent for the same or an older epoch.
func (c *Coordinator) Elect(partition, leaderEpoch int32) {
	c.mu.Lock()
	sh, old := c.electLocked(partition, leaderEpoch)
	if sh != nil {
		c.wg.Add(1) // under mu, which Close takes before it waits: never after Wait began
	}
	c.mu.Unlock()
	if old != nil {
		c.unload(old, kerr.NotCoordinator)
	}
	if sh == nil {
		return
	}
	go func() {
		defer c.wg.Done()
		start := c.now()
		groups, records := c.load(sh)
		c.log.Info("group coordinator elected", "partition", partition, "leader_epoch", leaderEpoch, "groups", groups, "records", records, "duration", c.now().Sub(start))
	}()
}

// Resign ends this broker's coordination of the groups of __consumer_offsets partition
// partition: leaderEpoch is the epoch in which another broker leads it, or -1 when the
// partition is gone (its epochs are then forgotten, as a recreated topic starts over).
func (c *Coordinator) Resign(partition, leaderEpoch int32) {
	c.mu.Lock()
	sh := c.mu.shards[partition]
	switch {
	case leaderEpoch < 0:
		delete(c.mu.epochs, partition)
	case sh != nil && leaderEpoch < sh.epoch:
		c.mu.Unlock()
		c.log.Info("group coordinator ignored a stale resignation", "partition", partition, "leader_epoch", leaderEpoch, "current_epoch", sh.epoch)
		return
	default:
		if last, ok := c.mu.epochs[partition]; !ok || leaderEpoch > last {
			c.mu.epochs[partition] = leaderEpoch
		}
	}
	delete(c.mu.shards, partition)
	c.mu.Unlock()
	if sh != nil {
		c.unload(sh, kerr.NotCoordinator)
		c.log.Info("group coordinator resigned", "partition", partition, "leader_epoch", leaderEpoch)
	}
}

// electLocked registers a new shard for partition in leaderEpoch; it returns the shard to
// load (nil if the election is ignored or the partition is not open here) and the shard it
// replaces, which the caller unloads.
func (c *Coordinator) electLocked(partition, leaderEpoch int32) (sh, old *shard) {
	if c.mu.closed {
		return nil, nil
	}
	if last, ok := c.mu.epochs[partition]; ok && leaderEpoch <= last {
		return nil, nil
	}
	c.mu.epochs[partition] = leaderEpoch
	old = c.mu.shards[partition]
	delete(c.mu.shards, partition)
	p := c.replicas.Get(TopicName, partition)
	if p == nil {
		c.log.Error("group coordinator elected for a partition that is not open", "topic", TopicName, "partition", partition, "leader_epoch", leaderEpoch)
		return nil, old
	}
	sh = &shard{index: partition, epoch: leaderEpoch, part: p}
	sh.ctx, sh.cancel = context.WithCancel(c.ctx)
	c.mu.shards[partition] = sh
	return sh, old
}

// attach records that __consumer_offsets has n partitions and, without Options.Manual,
// elects every one open locally (a single node leads them all); it returns the new shards,
// not yet loaded.
func (c *Coordinator) attach(n int32) ([]*shard, error) {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return nil, errClosed
	}
	c.mu.partitions = n
	var shards, olds []*shard
	for i := range n {
		if c.manual {
			break
		}
		sh, old := c.electLocked(i, singleNodeEpoch)
		if old != nil {
			olds = append(olds, old) // elected earlier in a newer term: its state is stale
		}
		if sh != nil {
			shards = append(shards, sh)
		}
	}
	c.mu.Unlock()
	for _, old := range olds {
		c.unload(old, kerr.NotCoordinator)
	}
	return shards, nil
}

// unload retires sh: loading stops, its timer stops, parked requests and pending writes are
// answered NOT_COORDINATOR, later requests get why, and its committer has ended on return.
func (c *Coordinator) unload(sh *shard, why *kerr.Error) {
	sh.cancel()
	sh.mu.Lock()
	sh.mu.gone = why
	if sh.mu.timer != nil {
		sh.mu.timer.Stop()
	}
	sh.mu.armed = 0
	var r Ready
	if sh.mu.core != nil {
		r = sh.mu.core.Unload(c.nowMs())
		sh.mu.core = nil
	}
	for _, pa := range sh.mu.pending { // Unload failed their callbacks
		for _, h := range pa.held {
			r.Replies = append(r.Replies, Reply{To: h.To, Msg: h.failed(why)})
		}
	}
	sh.mu.pending = nil
	sh.mu.Unlock()
	c.deliver(r)
	sh.committer.Wait() // it sees gone once its wait ends, at once as sh.ctx is cancelled
}
