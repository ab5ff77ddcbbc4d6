package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteGroups v0-v2: deletes groups with no members and their committed offsets (tombstones
// in __consumer_offsets); NON_EMPTY_GROUP while a group has members, GROUP_ID_NOT_FOUND for
// unknown groups. A share group (sharegroups.go) is deleted with its share-partitions' state.

func handleDeleteGroups(h *Handler, ctx context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.DeleteGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	// Authorization (authorize.go): DELETE on each group; the others are deleted.
	var allowed []string
	var shared []kmsg.DeleteGroupsResponseGroup
	denied := map[string]bool{}
	shares := h.shareManager()
	for _, id := range req.Groups {
		if h.authorized(c, kmsg.ACLOperationDelete, kmsg.ACLResourceTypeGroup, id) {
			if shares.Has(id) {
				g := kmsg.NewDeleteGroupsResponseGroup()
				gone, topics, err := shares.Delete(id, h.nowMs())
				if err == nil {
					err = h.deleteShareStates(append(gone, h.shareKeys(id, topics)...))
				}
				g.Group, g.ErrorCode = id, code(err)
				shared = append(shared, g)
				continue
			}
			allowed = append(allowed, id)
		} else {
			denied[id] = true
		}
	}
	var results []kmsg.DeleteGroupsResponseGroup
	if len(allowed) > 0 {
		results = h.Groups.DeleteGroups(ctx, allowed)
	}
	for _, id := range req.Groups {
		if denied[id] {
			g := kmsg.NewDeleteGroupsResponseGroup()
			g.Group, g.ErrorCode = id, kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, g)
			delete(denied, id) // a group named twice is answered once, as the coordinator does
		}
	}
	resp.Groups = append(resp.Groups, results...)
	resp.Groups = append(resp.Groups, shared...)
	return msg(resp)
}
