package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterPartitionReassignments v0-v1: start or cancel (null replicas) partition
// reassignments, decided by the controller and answered as it answers (forward.go). With
// v1's allow_replication_factor_change false, the controller refuses a target of another
// size than the current replica set (INVALID_REPLICATION_FACTOR).

func handleAlterPartitionReassignments(h *Handler, ctx context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.AlterPartitionAssignmentsRequest)
	ctx, cancel := adminContext(ctx, req)
	defer cancel()
	resp, err := h.forwardIfAuthorized(ctx, c, kmsg.ACLOperationAlter, req) // authorize.go
	if err == nil {
		return msg(resp)
	}
	out := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	out.ErrorCode, out.ErrorMessage = code(err), errMsg(err)
	return msg(out)
}
