package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SyncGroup v0-v5: the leader hands in the assignment; every member (the leader included)
// parks until it is stored and gets its own part. v5 checks the protocol type and name.

func handleSyncGroup(h *Handler, ctx context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.SyncGroupRequest)
	if !h.groupReadable(c, req.Group) {
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return msg(resp)
	}
	return msg(h.Groups.SyncGroup(ctx, req))
}
