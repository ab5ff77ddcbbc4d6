package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListGroups v0-v5: every group this broker coordinates; v4+ filters by state (Kafka's
// names, case-insensitive), v5+ by type ("classic"). While a coordinator partition is
// still loading the answer is COORDINATOR_LOAD_IN_PROGRESS with the groups loaded so far.

func handleListGroups(h *Handler, _ context.Context, _ *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.ListGroupsRequest)
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	groups, err := h.Groups.ListGroups(req.StatesFilter, req.TypesFilter)
	if err != nil {
		resp.ErrorCode = err.Code
	}
	resp.Groups = groups
	return msg(resp)
}
