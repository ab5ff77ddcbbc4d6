package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/group"
)

// OffsetCommit v0-v9: commits are checked against the group's members and generation by
// the coordinator and acknowledged once their records are appended to __consumer_offsets.
// Partitions of unknown topics answer UNKNOWN_TOPIC_OR_PARTITION without reaching it. v1's
// commit timestamp and v2-v4's retention time are honoured (they set the commit time and an
// explicit expiry); v6+ carries the leader epoch; v7+ the group instance id.

func handleOffsetCommit(h *Handler, ctx context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.OffsetCommitRequest)
	im := h.Meta.Image()
	// Authorization (authorize.go): READ on the group, or every partition fails; READ on
	// each topic, checked before its existence.
	groupDenied := !h.groupReadable(c, req.Group)
	readable := h.authorizedNames(c, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic)
	known := *req
	known.Topics = nil
	for _, rt := range req.Topics {
		kt := rt
		kt.Partitions = nil
		for _, rp := range rt.Partitions {
			if !groupDenied && readable.ok(rt.Topic) && knownPartition(im, rt.Topic, rp.Partition) {
				kt.Partitions = append(kt.Partitions, rp)
			}
		}
		if len(kt.Partitions) > 0 {
			known.Topics = append(known.Topics, kt)
		}
	}
	codes := map[group.TopicPartition]int16{}
	if len(known.Topics) > 0 {
		got := h.Groups.CommitOffsets(ctx, &known)
		for _, t := range got.Topics {
			for _, p := range t.Partitions {
				codes[group.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = p.ErrorCode
			}
		}
	}
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition = rp.Partition
			if ec, ok := codes[group.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}]; ok {
				sp.ErrorCode = ec
			} else if groupDenied {
				sp.ErrorCode = kerr.GroupAuthorizationFailed.Code
			} else if !readable.ok(rt.Topic) {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			} else {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return msg(resp)
}
