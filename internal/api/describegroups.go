package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeGroups v0-v5: each group's state, protocol type and name, and members (client id,
// host, and, when Stable, subscription and assignment). An unknown group is "Dead" with no
// error, as Kafka answers before v6. v3+ with include_authorized_operations gets the group
// operations (no authorizer: all of READ, DELETE, DESCRIBE).

// groupAuthorizedOps is the bit set of READ (3), DELETE (6) and DESCRIBE (8).
const groupAuthorizedOps = 1<<3 | 1<<6 | 1<<8

func handleDescribeGroups(h *Handler, _ context.Context, _ *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.DescribeGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, id := range req.Groups {
		d := h.Groups.DescribeGroup(id)
		if req.IncludeAuthorizedOperations && d.ErrorCode == 0 {
			d.AuthorizedOperations = groupAuthorizedOps
		}
		resp.Groups = append(resp.Groups, d)
	}
	return msg(resp)
}
