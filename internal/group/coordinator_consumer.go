package group

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ConsumerGroupHeartbeat answers once the heartbeat's records, and the partition's records
// appended before them, are replicated: its answer (epochs, assignments) may carry what
// earlier writes of the group did.
func (c *Coordinator) ConsumerGroupHeartbeat(ctx context.Context, req *kmsg.ConsumerGroupHeartbeatRequest, client Client) *kmsg.ConsumerGroupHeartbeatResponse {
	failed := func(err *kerr.Error) any {
		r := kmsg.NewPtrConsumerGroupHeartbeatResponse()
		r.ErrorCode = err.Code
		_, r.HeartbeatIntervalMillis = c.cfg.consumerTimes(req.Group)
		return r
	}
	msg, err := c.callHeld(ctx, req.Group, failed, func(s *Shard, now int64, w Waiter) Ready {
		return s.ConsumerGroupHeartbeat(now, w, req, client, nil)
	})
	if err != nil {
		return failed(err).(*kmsg.ConsumerGroupHeartbeatResponse)
	}
	return msg.(*kmsg.ConsumerGroupHeartbeatResponse)
}

// DescribeConsumerGroup describes one consumer group (ConsumerGroupDescribe).
func (c *Coordinator) DescribeConsumerGroup(id string, version int16) kmsg.ConsumerGroupDescribeResponseGroup {
	var d kmsg.ConsumerGroupDescribeResponseGroup
	if err := c.read(id, func(s *Shard) { d = s.DescribeConsumerGroup(id, version, nil) }); err != nil {
		d = kmsg.NewConsumerGroupDescribeResponseGroup()
		d.Group = id
		d.ErrorCode = err.Code
	}
	return d
}
