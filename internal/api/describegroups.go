package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeGroups v0-v6: each group's state, protocol type and name, and members (client id,
// host, and, when Stable, subscription and assignment). An unknown group is "Dead": with no
// error before v6, GROUP_ID_NOT_FOUND from v6, as Kafka answers. A share group is not a
// classic group, and Kafka describes it as it describes an unknown one ("Group X is not a
// classic group." from v6); ShareGroupDescribe describes it. v3+ with
// include_authorized_operations gets the group operations the principal has on the group.
// A group the principal may not describe is GROUP_AUTHORIZATION_FAILED (authorize.go).

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
		var d kmsg.DescribeGroupsResponseGroup
		if h.shareManager().Has(id) {
			d = kmsg.NewDescribeGroupsResponseGroup()
			d.Group, d.State = id, "Dead"
			if req.Version >= 6 {
				m := "Group " + id + " is not a classic group."
				d.ErrorCode, d.ErrorMessage = kerr.GroupIDNotFound.Code, &m
			}
		} else {
			d = h.Groups.DescribeGroup(id)
			if req.Version >= 6 && d.ErrorCode == 0 && d.State == "Dead" {
				m := "Group " + id + " not found."
				d.ErrorCode, d.ErrorMessage = kerr.GroupIDNotFound.Code, &m
			}
		}
		if req.IncludeAuthorizedOperations && d.ErrorCode == 0 {
			d.AuthorizedOperations = h.authorizedOps(c, kmsg.ACLResourceTypeGroup, id)
		}
		resp.Groups = append(resp.Groups, d)
	}
	return msg(resp)
}
