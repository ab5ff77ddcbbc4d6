package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Heartbeat v0-v4: keeps a member's session alive; REBALANCE_IN_PROGRESS tells it to
// rejoin. Answered by the group's coordinator partition alone (no controller involved).

func handleHeartbeat(h *Handler, ctx context.Context, _ *Conn, r kmsg.Request) Reply {
	return msg(h.Groups.Heartbeat(ctx, r.(*kmsg.HeartbeatRequest)))
}
