package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeQuorum v0-v2: forwarded to the active controller, which answers for the metadata
// log (__cluster_metadata partition 0), as a KRaft broker forwards it, so that
// Admin.describeMetadataQuorum and kafka-metadata-quorum.sh --bootstrap-server work against
// any broker. It needs DESCRIBE on the cluster (CLUSTER_AUTHORIZATION_FAILED otherwise, as the
// controller answers it); a controller that does not answer in time is REQUEST_TIMED_OUT
// (forward.go), as the response's top-level error.

func handleDescribeQuorum(h *Handler, ctx context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.DescribeQuorumRequest)
	ctx, cancel := adminContext(ctx, req)
	defer cancel()
	resp, err := h.forwardIfAuthorized(ctx, c, kmsg.ACLOperationDescribe, req) // authorize.go
	if err == nil {
		return msg(resp)
	}
	out := req.ResponseKind().(*kmsg.DescribeQuorumResponse)
	out.ErrorCode, out.ErrorMessage = code(err), errMsg(err)
	return msg(out)
}
