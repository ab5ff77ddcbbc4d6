package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/group"
)

// JoinGroup v0-v9 (classic protocol): parks until the group's join phase ends, then answers
// with the generation, the chosen protocol, the leader and, for the leader, every member's
// metadata. See group.Shard.JoinGroup for the semantics (MEMBER_ID_REQUIRED from v4, static
// membership from v5, SkipAssignment from v9). v8's reason is logged, as Kafka does.

func handleJoinGroup(h *Handler, ctx context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.JoinGroupRequest)
	if req.Reason != nil {
		h.Log.Debug("join group", "group", req.Group, "member", req.MemberID, "client_id", c.ClientID, "reason", *req.Reason)
	}
	if !h.groupReadable(c, req.Group) {
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.MemberID, resp.Generation = kerr.GroupAuthorizationFailed.Code, req.MemberID, -1
		return msg(resp)
	}
	return msg(h.Groups.JoinGroup(ctx, req, group.Client{ID: c.ClientID, Host: clientHost(c)}))
}
