package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/share"
)

// DeleteShareGroupState v0 (KIP-932), between brokers: the broker that dropped a
// share-partition (a deleted share group, DeleteShareGroupOffsets) has the share
// coordinator (this broker) delete its persisted state. CLUSTER_ACTION is required.
func handleDeleteShareGroupState(h *Handler, _ context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.DeleteShareGroupStateRequest)
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupStateResponse)
	allowed := h.authorizedCluster(c, kmsg.ACLOperationClusterAction)
	for _, t := range req.Topics {
		rt := kmsg.NewDeleteShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewDeleteShareGroupStateResponseTopicPartition()
			rp.Partition = p.Partition
			switch {
			case !allowed:
				rp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			case h.ShareStates == nil:
				rp.ErrorCode = kerr.CoordinatorNotAvailable.Code
			default:
				rp.ErrorCode = code(h.ShareStates.Delete(share.Key{Group: req.GroupID, Topic: t.TopicID, Partition: p.Partition}))
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return msg(resp)
}
