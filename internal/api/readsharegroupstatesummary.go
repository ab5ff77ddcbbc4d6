package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/share"
)

// ReadShareGroupStateSummary v0 (KIP-932), between brokers: a share-partition's state on
// the share coordinator (this broker, leading its __share_group_state partition) without
// its batches: start offset, leader epoch and state epoch. A share-partition with no state
// is answered with StartOffset -1, as ReadShareGroupState; a reader of an older leader
// epoch than the state's is FENCED_LEADER_EPOCH (-1 reads regardless). CLUSTER_ACTION is
// required.
func handleReadShareGroupStateSummary(h *Handler, _ context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.ReadShareGroupStateSummaryRequest)
	resp := req.ResponseKind().(*kmsg.ReadShareGroupStateSummaryResponse)
	allowed := h.authorizedCluster(c, kmsg.ACLOperationClusterAction)
	for _, t := range req.Topics {
		rt := kmsg.NewReadShareGroupStateSummaryResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewReadShareGroupStateSummaryResponseTopicPartition()
			rp.Partition, rp.StartOffset, rp.LeaderEpoch = p.Partition, -1, -1
			switch {
			case !allowed:
				rp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			case h.ShareStates == nil:
				rp.ErrorCode = kerr.CoordinatorNotAvailable.Code
			case p.Partition < 0:
				rp.ErrorCode = kerr.InvalidRequest.Code
			default:
				k := share.Key{Group: req.GroupID, Topic: t.TopicID, Partition: p.Partition}
				s, ok, err := h.ShareStates.Read(k, p.LeaderEpoch)
				rp.ErrorCode = code(err)
				if err == nil && ok {
					rp.StateEpoch, rp.LeaderEpoch, rp.StartOffset = s.StateEpoch, s.LeaderEpoch, s.Start
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return msg(resp)
}
