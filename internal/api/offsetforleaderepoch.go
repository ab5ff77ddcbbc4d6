package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/replica"
	"github.com/gregor-project/gregor/internal/storage"
)

// OffsetForLeaderEpoch v0-v4 (KIP-101, KIP-279, KIP-320): for each partition, the largest
// leader epoch <= the requested one that the leader's log knows and the offset where it ends
// (the start of the next epoch, or the log end offset for the latest): a follower truncates to
// it, a consumer detects lost records with it. Only the partition's leader answers
// (NOT_LEADER_OR_FOLLOWER elsewhere, whatever the replica id, as Kafka), after the
// current_leader_epoch check from v2 (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH). An epoch
// the log cannot place is answered -1/-1 without an error.

func handleOffsetForLeaderEpoch(h *Handler, _ context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	// Authorization (authorize.go): CLUSTER_ACTION on the cluster (a follower) covers every
	// topic; otherwise (a consumer, KIP-320) DESCRIBE on each.
	var describable *authorizedSet
	if !h.authorizedCluster(c, kmsg.ACLOperationClusterAction) {
		describable = h.authorizedNames(c, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic)
	}
	resp.Topics = make([]kmsg.OffsetForLeaderEpochResponseTopic, 0, len(req.Topics))
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.OffsetForLeaderEpochResponseTopicPartition, 0, len(rt.Partitions))
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			current := rp.CurrentLeaderEpoch
			if req.Version < 2 {
				current = -1
			}
			var p *replica.Partition
			err := error(kerr.TopicAuthorizationFailed)
			if describable == nil || describable.ok(rt.Topic) {
				p, err = h.partition(rt.Topic, rp.Partition)
			}
			if err == nil {
				var ans replica.EpochEndOffset
				if ans, err = p.LastOffsetForLeaderEpoch(current, rp.LeaderEpoch); err == nil {
					sp.LeaderEpoch, sp.EndOffset = ans.Epoch, ans.EndOffset
				}
			}
			if err != nil {
				sp.LeaderEpoch, sp.EndOffset = storage.UndefinedEpoch, storage.UndefinedEpochOffset
				if sp.ErrorCode = code(err); sp.ErrorCode == unknownServerError {
					h.Log.Error("offset for leader epoch failed", "topic", rt.Topic, "partition", rp.Partition, "err", err)
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return msg(resp)
}
