package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/share"
)

// InitializeShareGroupState v0 (KIP-932), between brokers: the share coordinator (this
// broker, leading the share-partition's __share_group_state partition) sets a
// share-partition's state to a start offset in a state epoch, with no batches, as Kafka's
// ShareCoordinatorShard.initializeState: a negative partition is INVALID_REQUEST, a topic
// partition the cluster does not have UNKNOWN_TOPIC_OR_PARTITION, a state epoch older than
// the stored one FENCED_STATE_EPOCH. CLUSTER_ACTION is required.
func handleInitializeShareGroupState(h *Handler, _ context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.InitializeShareGroupStateRequest)
	resp := req.ResponseKind().(*kmsg.InitializeShareGroupStateResponse)
	allowed := h.authorizedCluster(c, kmsg.ACLOperationClusterAction)
	im := h.Meta.Image()
	for _, t := range req.Topics {
		rt := kmsg.NewInitializeShareGroupStateResponseTopic()
		rt.TopicID = t.TopicID
		topic := im.TopicByID(t.TopicID)
		for _, p := range t.Partitions {
			rp := kmsg.NewInitializeShareGroupStateResponseTopicPartition()
			rp.Partition = p.Partition
			switch {
			case !allowed:
				rp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			case h.ShareStates == nil:
				rp.ErrorCode = kerr.CoordinatorNotAvailable.Code
			case p.Partition < 0:
				rp.ErrorCode = kerr.InvalidRequest.Code
			case topic == nil || p.Partition >= topic.Partitions:
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				k := share.Key{Group: req.GroupID, Topic: t.TopicID, Partition: p.Partition}
				rp.ErrorCode = code(h.ShareStates.Initialize(k, p.StateEpoch, p.StartOffset))
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return msg(resp)
}
