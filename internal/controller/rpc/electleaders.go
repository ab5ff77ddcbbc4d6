package rpc

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/controller/state"
)

// ElectLeaders v0-v2 -> state.Controller.ElectLeaders: preferred (v0, and election type 0)
// or unclean (1) elections for the listed partitions, or with Topics null for every
// partition (then only the elected ones are reported). The top-level error (v1+) is set
// only when the whole request failed (NOT_CONTROLLER, REQUEST_TIMED_OUT).

func handleElectLeaders(h *Handler, ctx context.Context, r kmsg.Request) kmsg.Response {
	req := r.(*kmsg.ElectLeadersRequest)
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	sreq := state.ElectLeadersRequest{Type: state.ElectionType(req.ElectionType)}
	if req.Version == 0 {
		sreq.Type = state.ElectPreferred
	}
	if req.Topics != nil {
		sreq.Partitions = []state.TopicPartition{}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				sreq.Partitions = append(sreq.Partitions, state.TopicPartition{Topic: t.Topic, Partition: p})
			}
		}
	}
	results, err := do(ctx, h, req.TimeoutMillis, func(c *state.Controller, _ int64) ([]state.Record, []state.ElectLeadersResult) {
		return c.ElectLeaders(sreq)
	})
	if err != nil {
		resp.ErrorCode = code(err)
		results = nil
		for _, tp := range sreq.Partitions {
			results = append(results, state.ElectLeadersResult{TopicPartition: tp, Err: err})
		}
	}
	byTopic := map[string]int{}
	for _, res := range results {
		i, ok := byTopic[res.Topic]
		if !ok {
			i = len(resp.Topics)
			byTopic[res.Topic] = i
			t := kmsg.NewElectLeadersResponseTopic()
			t.Topic = res.Topic
			resp.Topics = append(resp.Topics, t)
		}
		p := kmsg.NewElectLeadersResponseTopicPartition()
		p.Partition, p.ErrorCode, p.ErrorMessage = res.Partition, code(res.Err), errMsg(res.Err)
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, p)
	}
	return resp
}
