package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/share"
)

// WriteShareGroupState v0 (KIP-932), between brokers: a share-partition's leader makes its
// state (state epoch, leader epoch, start offset, state batches) durable on the share
// coordinator (this broker, leading the share-partition's __share_group_state partition),
// which answers once the record holding it is on the ISR. A writer of an older leader epoch
// is FENCED_LEADER_EPOCH. CLUSTER_ACTION is required.
func handleWriteShareGroupState(h *Handler, _ context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.WriteShareGroupStateRequest)
	resp := req.ResponseKind().(*kmsg.WriteShareGroupStateResponse)
	allowed := h.authorizedCluster(c, kmsg.ACLOperationClusterAction)
	for _, t := range req.Topics {
		rt := kmsg.NewWriteShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewWriteShareGroupStateResponseTopicPartition()
			rp.Partition = p.Partition
			switch {
			case !allowed:
				rp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			case h.ShareStates == nil:
				rp.ErrorCode = kerr.CoordinatorNotAvailable.Code
			default:
				s := share.PartitionState{StateEpoch: p.StateEpoch, LeaderEpoch: p.LeaderEpoch, Start: p.StartOffset}
				bad := false
				for _, b := range p.StateBatches {
					st, ok := share.StateOfWire(b.DeliveryState)
					bad = bad || !ok
					s.Batches = append(s.Batches, share.StateBatch{First: b.FirstOffset, Last: b.LastOffset, State: st, Deliveries: b.DeliveryCount})
				}
				if bad {
					rp.ErrorCode = code(errInvalidRequest)
					break
				}
				k := share.Key{Group: req.GroupID, Topic: t.TopicID, Partition: p.Partition}
				rp.ErrorCode = code(h.ShareStates.Write(k, s))
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return msg(resp)
}
