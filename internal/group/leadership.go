package group

import (
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregor-project/gregor/internal/coordinator"
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
// Epochs order the reports, and fencing does not rest on their arriving in time: see the
// epoch rules of coordinator.Runtime (internal/coordinator's package doc), which keeps the
// partition map and the epochs for this coordinator. On a single node the partitions have no
// epochs to fence by (singleNodeEpoch is never refused).

// singleNodeEpoch is the leader epoch of every partition on a single node.
const singleNodeEpoch = coordinator.SingleNodeEpoch

// Elect makes this broker the coordinator of the groups of __consumer_offsets partition
// partition from leaderEpoch on, and starts loading them. The partition must be open in
// Replicas as the leader. Idempotent for the same or an older epoch.
func (c *Coordinator) Elect(partition, leaderEpoch int32) { c.rt.Elect(partition, leaderEpoch) }

// Resign ends this broker's coordination of the groups of __consumer_offsets partition
// partition: leaderEpoch is the epoch in which another broker leads it, or -1 when the
// partition is gone (its epochs are then forgotten, as a recreated topic starts over).
func (c *Coordinator) Resign(partition, leaderEpoch int32) { c.rt.Resign(partition, leaderEpoch) }

// unload retires sh once the runtime has cancelled its term (so its loading stops): its
// timer stops, parked requests and pending writes are answered NOT_COORDINATOR, later
// requests get why, and its committer has ended on return.
func (c *Coordinator) unload(sh *shard, why *kerr.Error) {
	sh.mu.Lock()
	sh.mu.gone = why
	sh.mu.timer.Stop()
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
	sh.committer.Wait() // it sees gone once its wait ends, at once as sh.term.Ctx is cancelled
}
