package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ElectLeaders v0-v2: preferred (and, v1+, unclean) leader elections, decided by the
// controller and answered as it answers (forward.go). A partition whose preferred replica
// leads already is ELECTION_NOT_NEEDED. The new leaders reach clients through the metadata
// image; the answer does not wait for them.

func handleElectLeaders(h *Handler, ctx context.Context, _ *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.ElectLeadersRequest)
	ctx, cancel := adminContext(ctx, req)
	defer cancel()
	resp, err := h.forward(ctx, req)
	if err == nil {
		return msg(resp)
	}
	// Every partition asked for gets the error; with none named (all partitions), v1+
	// carries it at the top level.
	out := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	if req.Topics == nil {
		out.ErrorCode = code(err)
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
