package api

import (
	"context"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/config"
	"github.com/gregor-project/gregor/internal/share"
)

// ShareGroupHeartbeat v1 (KIP-932): joins (member epoch 0, the client names its member id),
// heartbeats in and leaves (epoch -1) a share group on its coordinator (the broker leading
// the group's __consumer_offsets partition, as for other groups). Every member is assigned
// every partition of the topics it subscribes to; the answer carries the assignment when it
// changed, the member epoch and the heartbeat interval (the group's
// share.heartbeat.interval.ms, else group.share.heartbeat.interval.ms). A member that does
// not heartbeat within the session timeout (share.session.timeout.ms, else
// group.share.session.timeout.ms) is removed. See share.Group.

func handleShareGroupHeartbeat(h *Handler, _ context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.ShareGroupHeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	// The group's share.heartbeat.interval.ms and share.session.timeout.ms, else the
	// broker's group.share.* values.
	gc := h.groupConfigs(req.GroupID)
	resp.HeartbeatIntervalMillis = h.Cfg.GroupInt(gc, config.GroupShareHeartbeatIntervalMs)
	sessionMs := h.Cfg.GroupInt(gc, config.GroupShareSessionTimeoutMs)
	fail := func(err error) Reply {
		resp.ErrorCode, resp.ErrorMessage = code(err), errMsg(err)
		return msg(resp)
	}
	// Authorization (authorize.go): READ on the group, DESCRIBE on every subscribed topic.
	if !h.groupReadable(c, req.GroupID) {
		return fail(kerr.GroupAuthorizationFailed)
	}
	describable := h.authorizedNames(c, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic)
	var hidden []string
	for _, t := range req.SubscribedTopicNames {
		if !describable.ok(t) {
			hidden = append(hidden, t)
		}
	}
	if len(hidden) > 0 {
		return fail(fmt.Errorf("%w: topics %s", kerr.TopicAuthorizationFailed, strings.Join(hidden, ", ")))
	}
	if req.GroupID == "" {
		return fail(fmt.Errorf("%w: empty group id", kerr.InvalidGroupID))
	}
	if req.MemberEpoch == 0 && len(req.SubscribedTopicNames) == 0 {
		return fail(fmt.Errorf("%w: a joining member must subscribe to topics", kerr.InvalidRequest))
	}
	if h.Groups != nil {
		if err := h.Groups.FindCoordinator(req.GroupID); err != nil {
			return fail(err)
		}
	}
	if err := h.otherGroupType(req.GroupID); err != nil {
		return fail(err)
	}
	rack := ""
	if req.RackID != nil {
		rack = *req.RackID
	}
	m, changed, err := h.shareManager().Heartbeat(req.GroupID, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames,
		c.ClientID, clientHost(c), rack, shareTopics{h.Meta.Image()}, h.nowMs(), int64(sessionMs))
	if err != nil {
		return fail(err)
	}
	id := req.MemberID
	resp.MemberID = &id
	if req.MemberEpoch == -1 {
		resp.MemberEpoch = -1
		return msg(resp)
	}
	resp.MemberEpoch = m.Epoch
	if changed {
		a := &kmsg.ShareGroupHeartbeatResponseAssignment{}
		for _, tp := range m.Assignment {
			a.TopicPartitions = append(a.TopicPartitions, kmsg.ShareGroupHeartbeatResponseAssignmentTopicPartition{
				TopicID: tp.ID, Partitions: tp.Partitions,
			})
		}
		resp.Assignment = a
	}
	return msg(resp)
}

// shareMember is the member id of a share request, or "" when it names none.
func shareMember(id *string) string {
	if id == nil {
		return ""
	}
	return *id
}

var _ share.Topics = shareTopics{}
