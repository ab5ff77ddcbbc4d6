package api

import (
	"context"

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
	return msg(h.Groups.ConsumerGroupHeartbeat(ctx, req, group.Client{ID: c.ClientID, Host: clientHost(c)}))
}
