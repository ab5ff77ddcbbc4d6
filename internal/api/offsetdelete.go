package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetDelete v0: deletes committed offsets of a group, refused per partition with
// GROUP_SUBSCRIBED_TO_TOPIC while the group's consumers subscribe to the topic, and for the
// whole group with NON_EMPTY_GROUP for non-consumer groups with members or GROUP_ID_NOT_FOUND.
// Partitions of unknown topics answer UNKNOWN_TOPIC_OR_PARTITION.

func handleOffsetDelete(h *Handler, ctx context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.OffsetDeleteRequest)
	im := h.Meta.Image()
	// Authorization (authorize.go): DELETE on the group, or the whole request fails; READ
	// on each topic.
	if !h.authorized(c, kmsg.ACLOperationDelete, kmsg.ACLResourceTypeGroup, req.Group) {
		resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return msg(resp)
	}
	readable := h.authorizedNames(c, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic)
	known := *req
	known.Topics = nil
	for _, rt := range req.Topics {
		kt := rt
		kt.Partitions = nil
		for _, rp := range rt.Partitions {
			if readable.ok(rt.Topic) && knownPartition(im, rt.Topic, rp.Partition) {
				kt.Partitions = append(kt.Partitions, rp)
			}
		}
		known.Topics = append(known.Topics, kt)
	}
	got := h.Groups.DeleteOffsets(ctx, &known)
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	resp.ErrorCode = got.ErrorCode
	if got.ErrorCode != 0 {
		return msg(resp)
	}
	codes := map[string]map[int32]int16{}
	for _, t := range got.Topics {
		m := map[int32]int16{}
		for _, p := range t.Partitions {
			m[p.Partition] = p.ErrorCode
		}
		codes[t.Topic] = m
	}
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetDeleteResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetDeleteResponseTopicPartition()
			sp.Partition = rp.Partition
			if !readable.ok(rt.Topic) {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			} else if !knownPartition(im, rt.Topic, rp.Partition) {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else {
				sp.ErrorCode = codes[rt.Topic][rp.Partition]
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return msg(resp)
}
