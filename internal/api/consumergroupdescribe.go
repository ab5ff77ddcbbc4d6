package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ConsumerGroupDescribe v0-v1 (KIP-848): each consumer group's state, group and assignment
// epochs, assignor, and members with their subscriptions, current and target assignments
// (v1: and whether each speaks the classic or the consumer protocol). Classic and unknown
// groups answer GROUP_ID_NOT_FOUND, as Kafka does.

func handleConsumerGroupDescribe(h *Handler, _ context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.ConsumerGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	for _, id := range req.Groups {
		// Authorization (authorize.go): DESCRIBE on the group.
		if !h.authorized(c, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, id) {
			d := kmsg.NewConsumerGroupDescribeResponseGroup()
			d.Group, d.ErrorCode = id, kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, d)
			continue
		}
		d := h.Groups.DescribeConsumerGroup(id, req.Version)
		if req.IncludeAuthorizedOperations && d.ErrorCode == 0 {
			d.AuthorizedOperations = h.authorizedOps(c, kmsg.ACLResourceTypeGroup, id)
		}
		resp.Groups = append(resp.Groups, d)
	}
	return msg(resp)
}
