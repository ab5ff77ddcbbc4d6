package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// LeaveGroup v0-v5: members leave at once; v3+ takes a batch of members (by member id, or by
// group instance id alone), v5 a reason per member, which is logged as Kafka does.

func handleLeaveGroup(h *Handler, ctx context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.LeaveGroupRequest)
	if !h.groupReadable(c, req.Group) {
		resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return msg(resp)
	}
	resp := h.Groups.LeaveGroup(ctx, req)
	for i, m := range req.Members {
		if i < len(resp.Members) && resp.Members[i].ErrorCode == 0 {
			reason := ""
			if m.Reason != nil {
				reason = *m.Reason
			}
			h.Log.Info("member left group", "group", req.Group, "member", m.MemberID, "client_id", c.ClientID, "reason", reason)
		}
	}
	return msg(resp)
}
