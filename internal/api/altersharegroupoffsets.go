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
// members (NON_EMPTY_GROUP). As Kafka's group coordinator does through its persister, each
// share-partition's persisted state is initialized on its share coordinator
// (InitializeShareGroupState) at the new start, in the next state epoch, wherever the
// partition is led; the leader, holding the old state in memory, sees the new state epoch
// when a member next opens a share session and reads the state back (shareStateMoved).

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
	im := h.Meta.Image()
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
				k := share.Key{Group: req.GroupID, Topic: mt.ID, Partition: rp.Partition}
				cur, ok, err := h.readShareStateSummary(k)
				if err != nil {
					return err
				}
				epoch := int32(0)
				if ok {
					epoch = cur.StateEpoch + 1
				}
				if err := h.initializeShareState(k, epoch, rp.StartOffset); err != nil {
					return err
				}
				// Led here: the new state in memory at once (its lag described); else the
				// leader reads it back when a member next opens a share session.
				if rep := h.Replicas.Get(rt.Topic, rp.Partition); rep != nil {
					if _, leaderEpoch, leads := rep.Role(); leads {
						h.shareManager().Reset(k, leaderEpoch, epoch, share.NewPartition(h.shareConfig(req.GroupID), rp.StartOffset))
						return nil
					}
				}
				h.shareManager().Drop(k, nil)
				return nil
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
