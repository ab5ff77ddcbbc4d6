package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// LeaveGroup v0-v5: members leave at once; v3+ takes a batch of members (by member id, or by
// group instance id alone), v5 a reason per member (logged by nobody: Kafka only logs it).

func handleLeaveGroup(h *Handler, ctx context.Context, _ *Conn, r kmsg.Request) Reply {
	return msg(h.Groups.LeaveGroup(ctx, r.(*kmsg.LeaveGroupRequest)))
}
