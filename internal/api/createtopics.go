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
	tooLarge := h.createTopicsRecords(req) > maxRecordsPerUserOp
	for _, rt := range req.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		st.NumPartitions, st.ReplicationFactor = -1, -1
		spec := topicSpec{name: rt.Topic, partitions: rt.NumPartitions, rf: rt.ReplicationFactor}
		var err error
		if seen[rt.Topic] > 1 {
			err = fmt.Errorf("%w: topic %q appears more than once", errInvalidRequest, rt.Topic)
		}
		if tooLarge {
			err = errExcessiveBatch
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

// createTopicsRecords counts the metadata records the request would create if every topic in
// it were valid: for each topic, one for the topic, one per partition (num.partitions when
// unset) and one per config.
func (h *Handler) createTopicsRecords(req *kmsg.CreateTopicsRequest) int64 {
	var n int64
	for _, rt := range req.Topics {
		parts := int64(rt.NumPartitions)
		switch {
		case len(rt.ReplicaAssignment) > 0:
			parts = int64(len(rt.ReplicaAssignment))
		case parts == -1:
			parts = int64(h.Cfg.Current().NumPartitions)
		case parts < 0:
			parts = 0
		}
		n += 1 + parts + int64(len(rt.Configs))
	}
	return n
}
