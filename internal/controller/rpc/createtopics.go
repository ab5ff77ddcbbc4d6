package rpc

import (
	"context"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/controller/state"
)

// CreateTopics v0-v7 -> state.Controller.CreateTopics, with configs, manual replica
// assignments and ValidateOnly. Checked here before the state machine sees a topic: a null
// config value (INVALID_CONFIG), an assignment whose partition ids are not 0..n-1 once each
// (INVALID_REPLICA_ASSIGNMENT), a name that collides with an existing topic's once '.' and
// '_' are treated alike (INVALID_TOPIC_EXCEPTION, as Kafka: their metric names would
// collide). The state machine checks the name, duplicates, counts, the replication factor
// against the active brokers (INVALID_REPLICATION_FACTOR) and the assignment's brokers. A
// request that would write more than maxRecordsPerUserOp partition and config records (the
// topic records themselves are not counted, so one topic of 10,000 partitions fits) fails
// whole with POLICY_VIOLATION.

func handleCreateTopics(h *Handler, ctx context.Context, r kmsg.Request) kmsg.Response {
	req := r.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	pre := make([]error, len(req.Topics))
	specs := make([]state.CreatableTopic, len(req.Topics))
	for i, rt := range req.Topics {
		specs[i], pre[i] = creatableTopic(rt)
	}
	results, err := do(ctx, h, req.TimeoutMillis, func(c *state.Controller, _ int64) ([]state.Record, []state.CreateTopicResult) {
		out := make([]state.CreateTopicResult, len(specs))
		var sreq state.CreateTopicsRequest
		sreq.ValidateOnly = req.ValidateOnly
		var index []int
		for i, s := range specs {
			e := pre[i]
			if e == nil {
				e = collides(c.Image(), s.Name)
			}
			if e != nil {
				out[i] = state.CreateTopicResult{Name: s.Name, Err: e}
				continue
			}
			sreq.Topics = append(sreq.Topics, s)
			index = append(index, i)
		}
		recs, res := c.CreateTopics(sreq)
		for j, r := range res {
			out[index[j]] = r
		}
		if userOpRecords(recs) > maxRecordsPerUserOp {
			for _, i := range index {
				out[i].Err = errExcessiveBatch
			}
			return nil, out
		}
		return recs, out
	})
	for i, rt := range req.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		st.NumPartitions, st.ReplicationFactor = -1, -1
		terr := err
		if terr == nil {
			terr = results[i].Err
		}
		st.ErrorCode, st.ErrorMessage = code(terr), errMsg(terr)
		if terr == nil {
			res := results[i]
			st.TopicID = res.TopicID
			st.NumPartitions, st.ReplicationFactor = res.NumPartitions, res.ReplicationFactor
			if req.Version >= 5 {
				st.Configs = h.cfg.TopicConfigs(res.Configs)
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// creatableTopic translates one requested topic.
func creatableTopic(rt kmsg.CreateTopicsRequestTopic) (state.CreatableTopic, error) {
	s := state.CreatableTopic{Name: rt.Topic, NumPartitions: rt.NumPartitions, ReplicationFactor: rt.ReplicationFactor}
	for _, c := range rt.Configs {
		if c.Value == nil {
			return s, fmt.Errorf("%w: null value for config %q", kerr.InvalidConfig, c.Name)
		}
		if s.Configs == nil {
			s.Configs = map[string]string{}
		}
		s.Configs[c.Name] = *c.Value
	}
	if len(rt.ReplicaAssignment) > 0 {
		s.Assignments = make([][]int32, len(rt.ReplicaAssignment))
		for _, a := range rt.ReplicaAssignment {
			if a.Partition < 0 || int(a.Partition) >= len(s.Assignments) || s.Assignments[a.Partition] != nil {
				return s, fmt.Errorf("%w: partition ids of the assignment must be 0..%d, each once (got %d)", kerr.InvalidReplicaAssignment, len(rt.ReplicaAssignment)-1, a.Partition)
			}
			s.Assignments[a.Partition] = a.Replicas
			if a.Replicas == nil {
				s.Assignments[a.Partition] = []int32{}
			}
		}
	}
	return s, nil
}

// collides reports a topic whose name equals name once '.' and '_' are treated alike.
func collides(im *state.Image, name string) error {
	if !strings.ContainsAny(name, "._") || im.Topic(name) != nil {
		return nil // an exact match is TOPIC_ALREADY_EXISTS, from the state machine
	}
	norm := strings.ReplaceAll(name, ".", "_")
	for _, n := range im.TopicNames() {
		if strings.ReplaceAll(n, ".", "_") == norm {
			return fmt.Errorf("%w: topic %q collides with existing topic %q", kerr.InvalidTopicException, name, n)
		}
	}
	return nil
}

// userOpRecords counts the records a request's limit applies to: all but topic records.
func userOpRecords(recs []state.Record) int {
	n := 0
	for _, r := range recs {
		if _, ok := r.(*state.TopicRecord); !ok {
			n++
		}
	}
	return n
}
