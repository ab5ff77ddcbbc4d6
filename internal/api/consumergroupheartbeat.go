package api

import (
	"context"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/group"
)

// ConsumerGroupHeartbeat v0-v1 (KIP-848): joins, heartbeats in and leaves a consumer group
// whose partitions the coordinator assigns (server-side assignors uniform and range); the
// answer carries the member epoch, the heartbeat interval and, when it changed, the
// member's assignment. v1 adds SubscribedTopicRegex and has the client name its member id.
// See group.Shard.ConsumerGroupHeartbeat.

func handleConsumerGroupHeartbeat(h *Handler, ctx context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.ConsumerGroupHeartbeatRequest)
	// Authorization (authorize.go): READ on the group, DESCRIBE on every subscribed topic.
	var denied error
	if !h.groupReadable(c, req.Group) {
		denied = kerr.GroupAuthorizationFailed
	} else if len(req.SubscribedTopicNames) > 0 {
		describable := h.authorizedNames(c, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic)
		var hidden []string
		for _, t := range req.SubscribedTopicNames {
			if !describable.ok(t) {
				hidden = append(hidden, t)
			}
		}
		if len(hidden) > 0 {
			denied = fmt.Errorf("%w: topics %s", kerr.TopicAuthorizationFailed, strings.Join(hidden, ", "))
		}
	}
	if denied != nil {
		resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode, resp.ErrorMessage = code(denied), errMsg(denied)
		resp.HeartbeatIntervalMillis = h.Cfg.Current().GroupConsumerHeartbeatIntervalMs
		return msg(resp)
	}
	return msg(h.Groups.ConsumerGroupHeartbeat(ctx, req, group.Client{ID: c.ClientID, Host: clientHost(c)}))
}
