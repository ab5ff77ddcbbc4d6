package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/share"
)

// ReadShareGroupState v0 (KIP-932), between brokers: a share-partition's leader reads the
// state the share coordinator (this broker, leading the share-partition's
// __share_group_state partition) holds for it. A share-partition with no state is answered
// with StartOffset -1, as Kafka. CLUSTER_ACTION is required, as for the other inter-broker
// APIs.
func handleReadShareGroupState(h *Handler, _ context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.ReadShareGroupStateRequest)
	resp := req.ResponseKind().(*kmsg.ReadShareGroupStateResponse)
	allowed := h.authorizedCluster(c, kmsg.ACLOperationClusterAction)
	for _, t := range req.Topics {
		rt := kmsg.NewReadShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewReadShareGroupStateResponseTopicPartition()
			rp.Partition, rp.StartOffset = p.Partition, -1
			switch {
			case !allowed:
				rp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			case h.ShareStates == nil:
				rp.ErrorCode = kerr.CoordinatorNotAvailable.Code
			default:
				k := share.Key{Group: req.GroupID, Topic: t.TopicID, Partition: p.Partition}
				s, ok, err := h.ShareStates.Read(k, p.LeaderEpoch)
				rp.ErrorCode = code(err)
				if err == nil && ok {
					rp.StateEpoch, rp.StartOffset = s.StateEpoch, s.Start
					for _, b := range s.Batches {
						rp.StateBatches = append(rp.StateBatches, kmsg.ReadShareGroupStateResponseTopicPartitionStateBatch{
							FirstOffset: b.First, LastOffset: b.Last, DeliveryState: share.WireState(b.State), DeliveryCount: b.Deliveries,
						})
					}
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return msg(resp)
}
