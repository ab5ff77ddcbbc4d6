package api

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ShareGroupDescribe v1 (KIP-932): each named share group's state, epochs, assignor
// ("simple") and members with their subscriptions and assignments. A group this
// coordinator does not know is GROUP_ID_NOT_FOUND; authorized operations are not computed
// (left at Kafka's "not requested" value).

func handleShareGroupDescribe(h *Handler, _ context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.ShareGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	im := h.Meta.Image()
	for _, id := range req.GroupIDs {
		g := kmsg.NewShareGroupDescribeResponseGroup()
		g.GroupID = id
		resp.Groups = append(resp.Groups, g)
		rg := &resp.Groups[len(resp.Groups)-1]
		if !h.authorized(c, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, id) {
			rg.ErrorCode = kerr.GroupAuthorizationFailed.Code
			continue
		}
		if h.Groups != nil {
			if err := h.Groups.FindCoordinator(id); err != nil {
				rg.ErrorCode = err.Code
				continue
			}
		}
		if err := h.otherGroupType(id); err != nil {
			rg.ErrorCode, rg.ErrorMessage = code(err), errMsg(err)
			continue
		}
		v, ok := h.shareManager().Describe(id, h.nowMs())
		if !ok {
			err := fmt.Errorf("%w: Group %s not found.", kerr.GroupIDNotFound, id)
			rg.ErrorCode, rg.ErrorMessage = code(err), errMsg(err)
			continue
		}
		rg.GroupState, rg.GroupEpoch, rg.AssignmentEpoch, rg.Assignor = v.State, v.Epoch, v.Epoch, "simple"
		for _, m := range v.Members {
			rm := kmsg.NewShareGroupDescribeResponseGroupMember()
			rm.MemberID, rm.MemberEpoch, rm.ClientID, rm.ClientHost = m.ID, m.Epoch, m.ClientID, m.ClientHost
			if m.Rack != "" {
				rack := m.Rack
				rm.RackID = &rack
			}
			rm.SubscribedTopicNames = m.Topics
			for _, tp := range m.Assignment {
				name := tp.Name
				if t := im.TopicByID(tp.ID); t != nil {
					name = t.Name
				}
				rm.Assignment.TopicPartitions = append(rm.Assignment.TopicPartitions,
					kmsg.ShareGroupDescribeResponseGroupMemberAssignmentTopicPartition{TopicID: tp.ID, Topic: name, Partitions: tp.Partitions})
			}
			rg.Members = append(rg.Members, rm)
		}
	}
	return msg(resp)
}
