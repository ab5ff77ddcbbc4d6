package api

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreateTopics v0-v7, with configs, manual replica assignments and validate_only, decided
// by the controller (forward.go). This broker answers what needs no cluster state itself: a
// name that appears twice in one request fails both entries with INVALID_REQUEST, as in
// Kafka; a request over maxRecordsPerUserOp fails whole with POLICY_VIOLATION; bad names,
// null or invalid config values and malformed assignments fail their entry. The rest go to
// the controller as one request, and the answers are merged back in request order. The
// answer's configs (v5+) are this broker's description of the created topic's overrides.

func handleCreateTopics(h *Handler, ctx context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	ctx, cancel := adminContext(ctx, req)
	defer cancel()
	seen := map[string]int{}
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	tooLarge := h.createTopicsRecords(req) > maxRecordsPerUserOp
	// Authorization (authorize.go): CREATE on the cluster, else on each topic; the answer's
	// configs need DESCRIBE_CONFIGS on the topic.
	var creatable *authorizedSet
	if !h.authorizedCluster(c, kmsg.ACLOperationCreate) {
		creatable = h.authorizedNames(c, kmsg.ACLOperationCreate, kmsg.ACLResourceTypeTopic)
	}
	errs := make([]error, len(req.Topics))
	specs := make([]topicSpec, len(req.Topics))
	var fwd []topicSpec
	var fwdIdx []int
	for i, rt := range req.Topics {
		s := topicSpec{name: rt.Topic, partitions: rt.NumPartitions, rf: rt.ReplicationFactor}
		var err error
		if len(rt.Configs) > 0 {
			s.configs = map[string]string{}
			for _, c := range rt.Configs {
				if c.Value == nil {
					err = fmt.Errorf("%w: null value for config %s", errInvalidRequest, c.Name)
					continue
				}
				s.configs[c.Name] = *c.Value
			}
		}
		if len(rt.ReplicaAssignment) > 0 {
			s.assignment = map[int32][]int32{}
			for _, a := range rt.ReplicaAssignment {
				if _, dup := s.assignment[a.Partition]; dup && err == nil {
					err = fmt.Errorf("%w: partition %d assigned twice", errInvalidAssignment, a.Partition)
				}
				s.assignment[a.Partition] = a.Replicas
			}
		}
		switch {
		case seen[rt.Topic] > 1:
			err = fmt.Errorf("%w: topic %q appears more than once", errInvalidRequest, rt.Topic)
		case creatable != nil && !creatable.ok(rt.Topic):
			err = kerr.TopicAuthorizationFailed
		case tooLarge:
			err = errExcessiveBatch
		case err == nil:
			err = h.checkTopic(&s)
		}
		errs[i], specs[i] = err, s
		if err == nil {
			fwd, fwdIdx = append(fwd, s), append(fwdIdx, i)
		}
	}
	created := make([]createdTopic, len(req.Topics))
	for j, res := range h.createTopics(ctx, fwd, req.ValidateOnly) {
		created[fwdIdx[j]] = res
		errs[fwdIdx[j]] = res.err
	}
	for i, rt := range req.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		st.NumPartitions, st.ReplicationFactor = -1, -1
		if err := errs[i]; err != nil {
			st.ErrorCode, st.ErrorMessage = code(err), errMsg(err)
			resp.Topics = append(resp.Topics, st)
			continue
		}
		ct := created[i]
		st.TopicID, st.NumPartitions, st.ReplicationFactor = ct.id, ct.partitions, ct.replicationFactor
		if req.Version >= 5 && !h.authorized(c, kmsg.ACLOperationDescribeConfigs, kmsg.ACLResourceTypeTopic, rt.Topic) {
			st.ConfigErrorCode = kerr.TopicAuthorizationFailed.Code
		} else if req.Version >= 5 {
			for _, e := range h.Cfg.DescribeTopic(specs[i].configs) {
				c := kmsg.NewCreateTopicsResponseTopicConfig()
				c.Name, c.ReadOnly, c.Source, c.IsSensitive = e.Name, e.ReadOnly, e.Source, e.Sensitive
				v := e.Value
				c.Value = &v
				st.Configs = append(st.Configs, c)
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	return msg(resp)
}

// createTopicsRecords counts the metadata records the request would create if every topic in
// it were valid, as the limit counts them: one per partition (num.partitions when unset) and
// one per config (the topic records are not counted).
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
		n += parts + int64(len(rt.Configs)) // topic records are not counted: 10,000 partitions fit
	}
	return n
}
