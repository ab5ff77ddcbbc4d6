package api

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetFetch v0-v9: committed offsets of the requested partitions (v2+: null topics means
// every committed partition), -1 where nothing was committed; v5+ with the leader epoch;
// v7+ require_stable answers UNSTABLE_OFFSET_COMMIT for partitions whose commit is still
// being written or that a transaction committed offsets of (TxnOffsetCommit) without having
// ended yet (without it, such a partition answers its last committed offset); v8+ asks for
// several groups at once. v9's member id and epoch matter only
// to KIP-848 consumer groups: for classic groups Kafka does not check them, nor do we.

func handleOffsetFetch(h *Handler, _ context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.OffsetFetchRequest)
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version >= 8 {
		for i := range req.Groups {
			resp.Groups = append(resp.Groups, h.fetchOffsets(c, &req.Groups[i], req.RequireStable))
		}
		return msg(resp)
	}
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = req.Group
	if req.Topics != nil || req.Version < 2 {
		g.Topics = []kmsg.OffsetFetchRequestGroupTopic{}
		for _, t := range req.Topics {
			g.Topics = append(g.Topics, kmsg.OffsetFetchRequestGroupTopic{Topic: t.Topic, Partitions: t.Partitions})
		}
	}
	got := h.fetchOffsets(c, &g, req.RequireStable)
	resp.ErrorCode = got.ErrorCode
	if got.ErrorCode != 0 && req.Version < 2 {
		// No top-level error before v2: every requested partition carries it.
		for _, t := range req.Topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.ErrorCode = p, -1, got.ErrorCode
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return msg(resp)
	}
	for _, t := range got.Topics {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return msg(resp)
}

// fetchOffsets answers one group's offsets for the connection (authorize.go): DESCRIBE on the
// group, or the group fails GROUP_AUTHORIZATION_FAILED; DESCRIBE on each topic, a named topic
// the principal may not describe failing each partition with TOPIC_AUTHORIZATION_FAILED,
// and such a topic left out when every committed offset is asked for.
func (h *Handler) fetchOffsets(c *Conn, g *kmsg.OffsetFetchRequestGroup, requireStable bool) kmsg.OffsetFetchResponseGroup {
	if !h.authorized(c, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, g.Group) {
		out := kmsg.NewOffsetFetchResponseGroup()
		out.Group, out.ErrorCode = g.Group, kerr.GroupAuthorizationFailed.Code
		return out
	}
	describable := h.authorizedNames(c, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic)
	if g.Topics == nil {
		out := h.Groups.FetchOffsets(g, requireStable)
		out.Topics = slices.DeleteFunc(out.Topics, func(t kmsg.OffsetFetchResponseGroupTopic) bool { return !describable.ok(t.Topic) })
		return out
	}
	allowed := *g
	allowed.Topics = []kmsg.OffsetFetchRequestGroupTopic{}
	var denied []kmsg.OffsetFetchResponseGroupTopic
	for _, t := range g.Topics {
		if describable.ok(t.Topic) {
			allowed.Topics = append(allowed.Topics, t)
			continue
		}
		dt := kmsg.NewOffsetFetchResponseGroupTopic()
		dt.Topic = t.Topic
		for _, p := range t.Partitions {
			dp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
			dp.Partition, dp.Offset, dp.ErrorCode = p, -1, kerr.TopicAuthorizationFailed.Code
			dt.Partitions = append(dt.Partitions, dp)
		}
		denied = append(denied, dt)
	}
	out := h.Groups.FetchOffsets(&allowed, requireStable)
	if out.ErrorCode == 0 {
		out.Topics = append(out.Topics, denied...)
	}
	return out
}
