package rpc

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/controller/state"
)

// AlterPartitionReassignments v0-v1 -> state.Controller.AlterPartitionReassignments: null
// replicas cancel a partition's reassignment. With AllowReplicationFactorChange false (v1)
// a target of another size than the partition's current replica set is
// INVALID_REPLICATION_FACTOR, as in Kafka.
//
// ListPartitionReassignments v0 -> state.Controller.ListPartitionReassignments, answered by
// the active controller (it runs as a command that writes nothing).

func handleAlterPartitionAssignments(h *Handler, ctx context.Context, r kmsg.Request) kmsg.Response {
	req := r.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	resp.AllowReplicationFactorChange = req.AllowReplicationFactorChange
	var sreq []state.ReassignmentRequest
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			sreq = append(sreq, state.ReassignmentRequest{Topic: t.Topic, Partition: p.Partition, Replicas: p.Replicas})
		}
	}
	checkRF := req.Version >= 1 && !req.AllowReplicationFactorChange
	errs, err := do(ctx, h, req.TimeoutMillis, func(c *state.Controller, _ int64) ([]state.Record, []error) {
		out := make([]error, len(sreq))
		run := make([]state.ReassignmentRequest, 0, len(sreq))
		var index []int
		for i, rr := range sreq {
			if checkRF && rr.Replicas != nil {
				if t := c.Image().Topic(rr.Topic); t != nil {
					if p := c.Image().Partition(t.ID, rr.Partition); p != nil && len(p.Original()) != len(rr.Replicas) {
						out[i] = fmt.Errorf("%w: %s-%d has %d replicas; the target has %d and replication factor changes are not allowed",
							kerr.InvalidReplicationFactor, rr.Topic, rr.Partition, len(p.Original()), len(rr.Replicas))
						continue
					}
				}
			}
			run = append(run, rr)
			index = append(index, i)
		}
		recs, results := c.AlterPartitionReassignments(run)
		for j, res := range results {
			out[index[j]] = res.Err
		}
		return recs, out
	})
	resp.ErrorCode, resp.ErrorMessage = code(err), errMsg(err)
	i := 0
	for _, rt := range req.Topics {
		t := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			p.Partition = rp.Partition
			perr := err
			if perr == nil {
				perr = errs[i]
			}
			p.ErrorCode, p.ErrorMessage = code(perr), errMsg(perr)
			t.Partitions = append(t.Partitions, p)
			i++
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

func handleListPartitionReassignments(h *Handler, ctx context.Context, r kmsg.Request) kmsg.Response {
	req := r.(*kmsg.ListPartitionReassignmentsRequest)
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	var parts []state.TopicPartition
	if req.Topics != nil {
		parts = []state.TopicPartition{}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				parts = append(parts, state.TopicPartition{Topic: t.Topic, Partition: p})
			}
		}
	}
	ongoing, err := do(ctx, h, req.TimeoutMillis, func(c *state.Controller, _ int64) ([]state.Record, []state.OngoingReassignment) {
		return nil, c.ListPartitionReassignments(parts)
	})
	resp.ErrorCode, resp.ErrorMessage = code(err), errMsg(err)
	byTopic := map[string]int{}
	for _, o := range ongoing {
		i, ok := byTopic[o.Topic]
		if !ok {
			i = len(resp.Topics)
			byTopic[o.Topic] = i
			t := kmsg.NewListPartitionReassignmentsResponseTopic()
			t.Topic = o.Topic
			resp.Topics = append(resp.Topics, t)
		}
		p := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
		p.Partition, p.Replicas, p.AddingReplicas, p.RemovingReplicas = o.Partition, o.Replicas, o.Adding, o.Removing
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, p)
	}
	return resp
}
