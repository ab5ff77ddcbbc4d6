package api

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListGroups v0-v5: every group this broker coordinates; v4+ filters by state (Kafka's
// names, case-insensitive), v5+ by type ("classic"). While a coordinator partition is
// still loading the answer is COORDINATOR_LOAD_IN_PROGRESS with the groups loaded so far.

func handleListGroups(h *Handler, _ context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.ListGroupsRequest)
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	groups, err := h.Groups.ListGroups(req.StatesFilter, req.TypesFilter)
	if err != nil {
		resp.ErrorCode = err.Code
	}
	// Authorization (authorize.go): DESCRIBE on the cluster lists every group; otherwise
	// only the groups the principal may describe.
	if !h.authorizedCluster(c, kmsg.ACLOperationDescribe) {
		describable := h.authorizedNames(c, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup)
		groups = slices.DeleteFunc(groups, func(g kmsg.ListGroupsResponseGroup) bool { return !describable.ok(g.Group) })
	}
	resp.Groups = groups
	return msg(resp)
}
