package rpc

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/controller/state"
)

// BrokerHeartbeat v0-v2 -> state.Controller.Heartbeat: renews the broker's session, unfences
// it once it has caught up with the metadata log, fences it on request, and runs a
// controlled shutdown (WantShutdown) until ShouldShutdown. OfflineLogDirs (v1+) is not needed
// here: a broker names the replicas of a failed log dir in AssignReplicasToDirs
// (assignreplicastodirs.go), which takes them offline.

func handleBrokerHeartbeat(h *Handler, ctx context.Context, r kmsg.Request) kmsg.Response {
	req := r.(*kmsg.BrokerHeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.BrokerHeartbeatResponse)
	sreq := state.HeartbeatRequest{
		NodeID: req.BrokerID, BrokerEpoch: req.BrokerEpoch, CurrentMetadataOffset: req.CurrentMetadataOffset,
		WantFence: req.WantFence, WantShutDown: req.WantShutdown,
	}
	res, err := do(ctx, h, 0, func(c *state.Controller, now int64) ([]state.Record, state.HeartbeatResponse) {
		return c.Heartbeat(now, sreq)
	})
	if err == nil {
		err = res.Err
	}
	resp.ErrorCode = code(err)
	if err != nil {
		resp.IsFenced = true // what a broker must assume without an answer
		return resp
	}
	logUnclean(h, req.BrokerID, res.UncleanElected)
	resp.IsCaughtUp, resp.IsFenced, resp.ShouldShutdown = res.IsCaughtUp, res.IsFenced, res.ShouldShutDown
	return resp
}

// logUnclean warns of the unclean leader elections a broker's heartbeat or registration
// caused, once their records are committed (as the session expiry's elections are).
func logUnclean(h *Handler, broker int32, tps []state.TopicPartition) {
	for _, tp := range tps {
		h.log.Warn("unclean leader election: records only on the old ISR are lost", "topic", tp.Topic, "partition", tp.Partition, "broker", broker)
	}
}
