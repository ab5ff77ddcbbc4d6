package api

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ShareAcknowledge v1 (KIP-932), on the leader of each partition: a share group member
// acknowledges records it holds without fetching more: ACCEPT (1), RELEASE (2, delivered
// again at once), REJECT (3, archived) or GAP (0, no record at that offset), one type per
// batch or one per offset. An offset the member does not hold (never acquired, or its lock
// expired) fails the partition's batches with INVALID_RECORD_STATE. The request must carry
// its share session's next epoch (0 is refused: acknowledgements need an open session);
// -1 closes the session after the acknowledgements, releasing what the member still holds.

func handleShareAcknowledge(h *Handler, _ context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.ShareAcknowledgeRequest)
	resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	fail := func(err error) Reply {
		resp.ErrorCode, resp.ErrorMessage = code(err), errMsg(err)
		return msg(resp)
	}
	group, member := shareMember(req.GroupID), shareMember(req.MemberID)
	if group == "" || member == "" {
		return fail(fmt.Errorf("%w: a share acknowledgement names its group and member", kerr.InvalidRequest))
	}
	if !h.groupReadable(c, group) {
		return fail(kerr.GroupAuthorizationFailed)
	}
	mgr := h.shareManager()
	if err := mgr.CheckSession(group, member, req.ShareSessionEpoch); err != nil {
		return fail(err)
	}
	ans := newShareAnswer(h.Meta.Image(), h.authorizedNames(c, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic))
	now := h.nowMs()
	for _, t := range req.Topics {
		rt := kmsg.NewShareAcknowledgeResponseTopic()
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			batches := make([]shareAck, len(p.AcknowledgementBatches))
			for i, b := range p.AcknowledgementBatches {
				batches[i] = shareAck{b.FirstOffset, b.LastOffset, b.AcknowledgeTypes}
			}
			rp := kmsg.NewShareAcknowledgeResponseTopicPartition()
			rp.Partition = p.Partition
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
			if err := h.shareAcknowledge(ans, group, member, t.TopicID, p.Partition, batches, now); err != nil {
				rp.ErrorCode, rp.ErrorMessage = code(err), errMsg(err)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if req.ShareSessionEpoch == -1 {
		mgr.CloseSession(group, member)
	}
	return msg(resp)
}
