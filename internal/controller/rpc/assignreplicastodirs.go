package rpc

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/controller/state"
)

// AssignReplicasToDirs v0 -> state.Controller.OfflineReplicas. A Gregor broker sends it only
// when one of its log dirs fails, naming that dir and every replica it held (see
// state/offlinedirs.go for why the controller keeps no per-replica directory otherwise): the
// named replicas leave their ISRs and their leaderships move to other ISR members. Answers
// per partition: UNKNOWN_TOPIC_ID, NOT_LEADER_OR_FOLLOWER; for the whole request
// STALE_BROKER_EPOCH, BROKER_ID_NOT_REGISTERED or NOT_CONTROLLER.

func handleAssignReplicasToDirs(h *Handler, ctx context.Context, r kmsg.Request) kmsg.Response {
	req := r.(*kmsg.AssignReplicasToDirsRequest)
	resp := req.ResponseKind().(*kmsg.AssignReplicasToDirsResponse)
	// One state call per directory, in request order.
	sreqs := make([]state.OfflineReplicasRequest, len(req.Directories))
	for i, d := range req.Directories {
		sreqs[i] = state.OfflineReplicasRequest{NodeID: req.BrokerID, BrokerEpoch: req.BrokerEpoch, Dir: state.UUID(d.ID)}
		for _, t := range d.Topics {
			for _, p := range t.Partitions {
				sreqs[i].Partitions = append(sreqs[i].Partitions, state.TopicIDPartition{TopicID: state.UUID(t.TopicID), Partition: p.Partition})
			}
		}
	}
	res, err := do(ctx, h, 0, func(c *state.Controller, _ int64) ([]state.Record, []state.OfflineReplicasResponse) {
		var recs []state.Record
		out := make([]state.OfflineReplicasResponse, len(sreqs))
		for i, sr := range sreqs {
			rs, o := c.OfflineReplicas(sr)
			if o.Err != nil {
				return nil, []state.OfflineReplicasResponse{o}
			}
			recs, out[i] = append(recs, rs...), o
		}
		return recs, out
	})
	if err == nil && len(res) == 1 && res[0].Err != nil {
		err = res[0].Err
	}
	resp.ErrorCode = code(err)
	if err != nil {
		return resp
	}
	for i, d := range req.Directories {
		rd := kmsg.NewAssignReplicasToDirsResponseDirectory()
		rd.ID = d.ID
		k := 0
		for _, t := range d.Topics {
			rt := kmsg.NewAssignReplicasToDirsResponseDirectoryTopic()
			rt.TopicID = t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewAssignReplicasToDirsResponseDirectoryTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code(res[i].Errors[k])
				k++
				rt.Partitions = append(rt.Partitions, rp)
			}
			rd.Topics = append(rd.Topics, rt)
		}
		resp.Directories = append(resp.Directories, rd)
	}
	for i := range res {
		logUnclean(h, req.BrokerID, res[i].UncleanElected)
	}
	return resp
}
