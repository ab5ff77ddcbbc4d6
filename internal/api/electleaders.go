package api

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ElectLeaders v0-v2: preferred (and, v1+, unclean) leader elections, decided by the
// controller and answered as it answers (forward.go). A partition whose preferred replica
// leads already is ELECTION_NOT_NEEDED. The new leaders reach clients through the metadata
// image; the answer does not wait for them.

func handleElectLeaders(h *Handler, ctx context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.ElectLeadersRequest)
	ctx, cancel := adminContext(ctx, req)
	defer cancel()
	resp, err := h.forwardIfAuthorized(ctx, c, kmsg.ACLOperationAlter, req) // authorize.go
	if err == nil {
		return msg(resp)
	}
	// Every partition asked for gets the error; with none named (all partitions), v1+
	// carries it at the top level.
	out := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	if req.Topics == nil || errors.Is(err, kerr.ClusterAuthorizationFailed) {
		out.ErrorCode = code(err) // Kafka's error answer: the error at the top, and per partition
	}
	for _, rt := range req.Topics {
		st := kmsg.NewElectLeadersResponseTopic()
		st.Topic = rt.Topic
		for _, p := range rt.Partitions {
			sp := kmsg.NewElectLeadersResponseTopicPartition()
			sp.Partition, sp.ErrorCode, sp.ErrorMessage = p, code(err), errMsg(err)
			st.Partitions = append(st.Partitions, sp)
		}
		out.Topics = append(out.Topics, st)
	}
	return msg(out)
}
