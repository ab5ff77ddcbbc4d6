package rpc

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/controller/state"
)

// CreatePartitions v0-v3 -> state.Controller.CreatePartitions, with manual assignments of
// the new partitions and ValidateOnly. A request that would write more than
// maxRecordsPerUserOp records fails whole with POLICY_VIOLATION.

func handleCreatePartitions(h *Handler, ctx context.Context, r kmsg.Request) kmsg.Response {
	req := r.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	sreq := state.CreatePartitionsRequest{ValidateOnly: req.ValidateOnly}
	for _, rt := range req.Topics {
		ct := state.CreatePartitionsTopic{Name: rt.Topic, Count: rt.Count}
		for _, a := range rt.Assignment {
			ct.Assignments = append(ct.Assignments, a.Replicas)
		}
		sreq.Topics = append(sreq.Topics, ct)
	}
	results, err := do(ctx, h, req.TimeoutMillis, func(c *state.Controller, _ int64) ([]state.Record, []state.CreatePartitionsResult) {
		recs, res := c.CreatePartitions(sreq)
		if len(recs) > maxRecordsPerUserOp {
			for i := range res {
				if res[i].Err == nil {
					res[i].Err = errExcessiveBatch
				}
			}
			return nil, res
		}
		return recs, res
	})
	for i, rt := range req.Topics {
		t := kmsg.NewCreatePartitionsResponseTopic()
		t.Topic = rt.Topic
		terr := err
		if terr == nil {
			terr = results[i].Err
		}
		t.ErrorCode, t.ErrorMessage = code(terr), errMsg(terr)
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
