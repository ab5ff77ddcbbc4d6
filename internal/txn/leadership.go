package txn

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Leadership: the coordinator of a transactional id is the leader of its __transaction_state
// partition (Kafka's TransactionCoordinator onElection/onResignation), and the leader epoch
// it leads in is its coordinator epoch, which its markers carry so that partitions fence an
// older coordinator. The broker reports each change of leadership:
//
//   - Elect(p, epoch): a new shard for p loads p's ids from the local log in the background
//     (COORDINATOR_LOAD_IN_PROGRESS meanwhile), then completes what was in flight: every
//     transaction in PrepareCommit or PrepareAbort gets its markers again and its Complete*
//     record; Ongoing ones are left to their timeout.
//   - Resign(p, epoch): the shard is unloaded: requests waiting for its appends are answered
//     NOT_COORDINATOR, its timer stops, its marker attempts are cancelled, and later requests
//     are answered NOT_COORDINATOR.
//
// Epochs order the reports as for groups (group/leadership.go): an Elect is ignored unless
// its epoch is newer than every epoch seen for the partition, a Resign older than the
// shard's is ignored, and an Elect in a newer epoch replaces a loaded shard. Fencing does
// not rest on the reports arriving in time: a shard appends in the epoch it was elected in,
// and the partition refuses an append in any other.

// singleNodeEpoch is the leader epoch of every partition on a single node.
const singleNodeEpoch = 0

// Elect makes this broker the coordinator of __transaction_state partition partition from
// leaderEpoch on, and starts loading it. The partition must be open in Replicas as the
// leader. Idempotent for the same or an older epoch.
func (c *Coordinator) Elect(partition, leaderEpoch int32) {
	c.mu.Lock()
	sh, old := c.electLocked(partition, leaderEpoch)
	if sh != nil {
		c.wg.Add(1)
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
		ids, records := c.load(sh)
		c.log.Info("transaction coordinator elected", "partition", partition, "leader_epoch", leaderEpoch, "transactional_ids", ids, "records", records, "duration", c.now().Sub(start))
	}()
}

// Resign ends this broker's coordination of __transaction_state partition partition:
// leaderEpoch is the epoch in which another broker leads it, or -1 when the partition is
// gone.
func (c *Coordinator) Resign(partition, leaderEpoch int32) {
	c.mu.Lock()
	sh := c.mu.shards[partition]
	switch {
	case leaderEpoch < 0:
		delete(c.mu.epochs, partition)
	case sh != nil && leaderEpoch < sh.epoch:
		c.mu.Unlock()
		c.log.Info("transaction coordinator ignored a stale resignation", "partition", partition, "leader_epoch", leaderEpoch, "current_epoch", sh.epoch)
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
		c.log.Info("transaction coordinator resigned", "partition", partition, "leader_epoch", leaderEpoch)
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
		c.log.Error("transaction coordinator elected for a partition that is not open", "topic", TopicName, "partition", partition, "leader_epoch", leaderEpoch)
		return nil, old
	}
	sh = &shard{index: partition, epoch: leaderEpoch, part: p}
	sh.ctx, sh.cancel = context.WithCancel(c.ctx)
	c.mu.shards[partition] = sh
	return sh, old
}

// attach records that __transaction_state has n partitions and, without Options.Manual,
// elects every one open locally; it returns the new shards, not yet loaded.
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
			olds = append(olds, old)
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

// unload retires sh: loading and marker attempts stop, its timer stops, requests waiting for
// its appends are answered why, later requests get why, and its committer has ended on
// return.
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
	sh.mu.pending = nil
	sh.mu.Unlock()
	for i := range r.Replies {
		r.Replies[i].Msg = failedReply(r.Replies[i].Msg, why)
	}
	c.deliver(Ready{Replies: r.Replies})
	sh.committer.Wait()
}

// failedReply turns a reply the core made with NOT_COORDINATOR while unloading into one
// with why (COORDINATOR_NOT_AVAILABLE when closing).
func failedReply(msg any, why *kerr.Error) any {
	if why == kerr.NotCoordinator {
		return msg
	}
	switch m := msg.(type) {
	case *kerr.Error:
		if m == kerr.NotCoordinator {
			return why
		}
	}
	return msg
}
