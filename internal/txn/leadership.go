package txn

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
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
// Epochs order the reports, and fencing does not rest on their arriving in time (a shard
// appends in the epoch it was elected in, and the partition refuses an append in any
// other): see the epoch rules of coordinator.Runtime (internal/coordinator's package doc),
// which keeps the partition map and the epochs for this coordinator.

// Elect makes this broker the coordinator of __transaction_state partition partition from
// leaderEpoch on, and starts loading it. The partition must be open in Replicas as the
// leader. Idempotent for the same or an older epoch.
func (c *Coordinator) Elect(partition, leaderEpoch int32) { c.rt.Elect(partition, leaderEpoch) }

// Resign ends this broker's coordination of __transaction_state partition partition:
// leaderEpoch is the epoch in which another broker leads it, or -1 when the partition is
// gone.
func (c *Coordinator) Resign(partition, leaderEpoch int32) { c.rt.Resign(partition, leaderEpoch) }

// unload retires sh once the runtime has cancelled its term (so its loading and marker
// attempts stop): its timer stops, requests waiting for its appends are answered why, later
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
	case *kmsg.InitProducerIDResponse:
		if m.ErrorCode == kerr.NotCoordinator.Code {
			m.ErrorCode = why.Code
		}
	case *kmsg.EndTxnResponse:
		if m.ErrorCode == kerr.NotCoordinator.Code {
			m.ErrorCode = why.Code
		}
	}
	return msg
}
