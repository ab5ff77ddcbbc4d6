package api

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/share"
)

// AlterShareGroupOffsets v0 (KIP-932): starts a share group's share-partitions over at the
// offsets given (kafka-share-groups.sh --reset-offsets): every record below is treated as
// delivered, none above has been. The group must exist (GROUP_ID_NOT_FOUND) and have no
// members (NON_EMPTY_GROUP). A share-partition's state is kept by its partition leader, so
// the partitions must be led by this broker (NOT_LEADER_OR_FOLLOWER otherwise) until the
// share coordinator exists (internal/share's doc).

func handleAlterShareGroupOffsets(h *Handler, _ context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.AlterShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	// Authorization (authorize.go): READ on the group, READ on each topic (as Kafka).
	if !h.groupReadable(c, req.GroupID) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return msg(resp)
	}
	if h.Groups != nil {
		if err := h.Groups.FindCoordinator(req.GroupID); err != nil {
			resp.ErrorCode = err.Code
			return msg(resp)
		}
	}
	if err := h.otherGroupType(req.GroupID); err != nil {
		resp.ErrorCode, resp.ErrorMessage = code(err), errMsg(err)
		return msg(resp)
	}
	if err := h.shareManager().CheckEmpty(req.GroupID, h.nowMs()); err != nil {
		resp.ErrorCode, resp.ErrorMessage = code(err), errMsg(err)
		return msg(resp)
	}
	readable := h.authorizedNames(c, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic)
	im, cfg, now := h.Meta.Image(), h.shareConfig(req.GroupID), h.nowMs()
	for _, rt := range req.Topics {
		t := kmsg.AlterShareGroupOffsetsResponseTopic{Topic: rt.Topic}
		mt := im.Topic(rt.Topic)
		if mt != nil {
			t.TopicID = mt.ID
		}
		for _, rp := range rt.Partitions {
			p := kmsg.AlterShareGroupOffsetsResponseTopicPartition{Partition: rp.Partition}
			err := func() error {
				switch {
				case !readable.ok(rt.Topic):
					return kerr.TopicAuthorizationFailed
				case mt == nil || rp.Partition < 0 || rp.Partition >= mt.Partitions:
					return kerr.UnknownTopicOrPartition
				case rp.StartOffset < 0:
					return fmt.Errorf("%w: start offset %d", kerr.InvalidRequest, rp.StartOffset)
				}
				rep := h.Replicas.Get(rt.Topic, rp.Partition)
				if rep == nil {
					return kerr.NotLeaderForPartition
				}
				_, epoch, leads := rep.Role()
				if !leads {
					return kerr.NotLeaderForPartition
				}
				k := share.Key{Group: req.GroupID, Topic: mt.ID, Partition: rp.Partition}
				if err := h.shareManager().SetStart(k, epoch, cfg, rp.StartOffset, now); err != nil {
					return err
				}
				// The new start is persisted too, or the next leader would read the old
				// state back.
				return h.writeShareState(k, share.PartitionState{LeaderEpoch: epoch, Start: rp.StartOffset})
			}()
			if err != nil {
				p.ErrorCode, p.ErrorMessage = code(err), errMsg(err)
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return msg(resp)
}
