package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListPartitionReassignments v0: the ongoing reassignments of the named partitions (null
// topics: all of them), as the controller knows them (forward.go).

func handleListPartitionReassignments(h *Handler, ctx context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.ListPartitionReassignmentsRequest)
	ctx, cancel := adminContext(ctx, req)
	defer cancel()
	resp, err := h.forwardIfAuthorized(ctx, c, kmsg.ACLOperationDescribe, req) // authorize.go
	if err == nil {
		return msg(resp)
	}
	out := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	out.ErrorCode, out.ErrorMessage = code(err), errMsg(err)
	return msg(out)
}
