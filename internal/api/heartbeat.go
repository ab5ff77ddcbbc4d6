package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Heartbeat v0-v4: keeps a member's session alive; REBALANCE_IN_PROGRESS tells it to
// rejoin. Answered by the group's coordinator partition alone (no controller involved).

func handleHeartbeat(h *Handler, ctx context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.HeartbeatRequest)
	if !h.groupReadable(c, req.Group) {
		resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return msg(resp)
	}
	return msg(h.Groups.Heartbeat(ctx, req))
}
