package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeGroups v0-v5: each group's state, protocol type and name, and members (client id,
// host, and, when Stable, subscription and assignment). An unknown group is "Dead" with no
// error, as Kafka answers before v6. v3+ with include_authorized_operations gets the group
// operations the principal has on the group. A group the principal may not describe is
// GROUP_AUTHORIZATION_FAILED (authorize.go).

func handleDescribeGroups(h *Handler, _ context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.DescribeGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, id := range req.Groups {
		if !h.authorized(c, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, id) {
			d := kmsg.NewDescribeGroupsResponseGroup()
			d.Group, d.ErrorCode = id, kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, d)
			continue
		}
		d := h.Groups.DescribeGroup(id)
		if req.IncludeAuthorizedOperations && d.ErrorCode == 0 {
			d.AuthorizedOperations = h.authorizedOps(c, kmsg.ACLResourceTypeGroup, id)
		}
		resp.Groups = append(resp.Groups, d)
	}
	return msg(resp)
}
