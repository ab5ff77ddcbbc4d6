package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/share"
)

// DeleteShareGroupOffsets v0 (KIP-932): forgets a share group's share-partitions of the
// topics named, so the group's next fetch of them starts over from share.auto.offset.reset.
// The group must exist (GROUP_ID_NOT_FOUND) and have no members (NON_EMPTY_GROUP). As
// Kafka's group coordinator does through its persister, the persisted state of every
// partition of each topic is deleted on its share coordinator (DeleteShareGroupState),
// wherever the partition is led; a leader holding the state in memory sees it gone when a
// member next opens a share session (shareStateMoved).

func handleDeleteShareGroupOffsets(h *Handler, _ context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.DeleteShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	// Authorization (authorize.go): DELETE on the group, READ on each topic (as Kafka).
	if !h.authorized(c, kmsg.ACLOperationDelete, kmsg.ACLResourceTypeGroup, req.GroupID) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return msg(resp)
	}
	if h.Groups != nil {
		if err := h.Groups.FindCoordinator(req.GroupID); err != nil {
			resp.ErrorCode = err.Code
			return msg(resp)
		}
	}
	if err := h.otherGroupType(req.GroupID); err != nil {
		resp.ErrorCode, resp.ErrorMessage = code(err), errMsg(err)
		return msg(resp)
	}
	if err := h.shareManager().CheckEmpty(req.GroupID, h.nowMs()); err != nil {
		resp.ErrorCode, resp.ErrorMessage = code(err), errMsg(err)
		return msg(resp)
	}
	readable := h.authorizedNames(c, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic)
	im := h.Meta.Image()
	for _, rt := range req.Topics {
		t := kmsg.DeleteShareGroupOffsetsResponseTopic{Topic: rt.Topic}
		mt := im.Topic(rt.Topic)
		var err error
		switch {
		case !readable.ok(rt.Topic):
			err = kerr.TopicAuthorizationFailed
		case mt == nil:
			err = kerr.UnknownTopicOrPartition
		default:
			t.TopicID = mt.ID
			for p := range mt.Partitions {
				k := share.Key{Group: req.GroupID, Topic: mt.ID, Partition: p}
				if err = h.deleteShareState(k); err != nil {
					break
				}
				h.shareManager().Drop(k, nil)
			}
		}
		if err != nil {
			t.ErrorCode, t.ErrorMessage = code(err), errMsg(err)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return msg(resp)
}
