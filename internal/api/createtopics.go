package api

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreateTopics v0-v7, with configs, manual replica assignments and validate_only. A name that
// appears twice in one request fails both entries with INVALID_REQUEST, as in Kafka.

func handleCreateTopics(h *Handler, _ context.Context, _ *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	seen := map[string]int{}
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	for _, rt := range req.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		st.NumPartitions, st.ReplicationFactor = -1, -1
		spec := topicSpec{name: rt.Topic, partitions: rt.NumPartitions, rf: rt.ReplicationFactor}
		var err error
		if seen[rt.Topic] > 1 {
			err = fmt.Errorf("%w: topic %q appears more than once", errInvalidRequest, rt.Topic)
		}
		if len(rt.Configs) > 0 {
			spec.configs = map[string]string{}
			for _, c := range rt.Configs {
				if c.Value == nil {
					err = fmt.Errorf("%w: null value for config %s", errInvalidRequest, c.Name)
					continue
				}
				spec.configs[c.Name] = *c.Value
			}
		}
		if len(rt.ReplicaAssignment) > 0 {
			spec.assignment = map[int32][]int32{}
			for _, a := range rt.ReplicaAssignment {
				spec.assignment[a.Partition] = a.Replicas
			}
		}
		if err == nil {
			t, cerr := h.createTopic(spec, req.ValidateOnly)
			if err = cerr; err == nil {
				st.TopicID = t.ID
				st.NumPartitions = t.Partitions
				st.ReplicationFactor = t.ReplicationFactor
				if req.Version >= 5 {
					for _, e := range h.Cfg.DescribeTopic(t.Configs) {
						c := kmsg.NewCreateTopicsResponseTopicConfig()
						c.Name, c.ReadOnly, c.Source, c.IsSensitive = e.Name, e.ReadOnly, e.Source, e.Sensitive
						v := e.Value
						c.Value = &v
						st.Configs = append(st.Configs, c)
					}
				}
			}
		}
		st.ErrorCode = code(err)
		st.ErrorMessage = errMsg(err)
		resp.Topics = append(resp.Topics, st)
	}
	return msg(resp)
}
