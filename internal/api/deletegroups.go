package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteGroups v0-v2: deletes groups with no members and their committed offsets (tombstones
// in __consumer_offsets); NON_EMPTY_GROUP while a group has members, GROUP_ID_NOT_FOUND for
// unknown groups.

func handleDeleteGroups(h *Handler, ctx context.Context, _ *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.DeleteGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	resp.Groups = h.Groups.DeleteGroups(ctx, req.Groups)
	return msg(resp)
}
