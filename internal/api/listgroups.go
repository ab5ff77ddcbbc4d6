package api

import (
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListGroups v0-v5: every group this broker coordinates; v4+ filters by state (Kafka's
// names, case-insensitive), v5+ by type ("classic", "consumer", "share"). Share groups
// (sharegroups.go) are listed with type and protocol type "share". While a coordinator partition is
// still loading the answer is COORDINATOR_LOAD_IN_PROGRESS with the groups loaded so far.

func handleListGroups(h *Handler, _ context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.ListGroupsRequest)
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	groups, err := h.Groups.ListGroups(req.StatesFilter, req.TypesFilter)
	if err != nil {
		resp.ErrorCode = err.Code
	}
	for _, g := range h.shareManager().Groups() {
		if matchFilter(req.StatesFilter, g.State) && matchFilter(req.TypesFilter, "share") {
			l := kmsg.NewListGroupsResponseGroup()
			l.Group, l.ProtocolType, l.GroupState, l.GroupType = g.ID, "share", g.State, "share"
			groups = append(groups, l)
		}
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

// matchFilter reports whether v is in filter (case-insensitive); an empty filter matches all.
func matchFilter(filter []string, v string) bool {
	return len(filter) == 0 || slices.ContainsFunc(filter, func(f string) bool { return strings.EqualFold(f, v) })
}
