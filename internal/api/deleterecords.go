package api

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/metadata"
	"github.com/gregor-project/gregor/internal/replica"
)

// DeleteRecords v0-v2 (Kafka's handleDeleteRecordsRequest, ReplicaManager.deleteRecords): each
// partition's leader moves its log start offset up to the given offset (-1: the high
// watermark), deleting the whole segments below it, and the partition is answered once its
// low watermark (the smallest log start offset over its replicas on live brokers, which the
// followers report in their fetches: replica/lowwatermark.go) reaches that offset. Every
// partition waits in parallel up to timeout_ms; one not reached by then is answered
// REQUEST_TIMED_OUT with the low watermark it had when the request arrived (Kafka's
// DelayedDeleteRecords). low_watermark is the low watermark, -1 with an error.
//
// Errors, as Kafka: no DELETE on the topic TOPIC_AUTHORIZATION_FAILED (authorize.go); a topic or partition not in metadata UNKNOWN_TOPIC_OR_PARTITION; an
// internal topic INVALID_TOPIC_EXCEPTION; a partition this broker does not lead (or hold)
// NOT_LEADER_OR_FOLLOWER; a topic whose cleanup.policy lacks delete POLICY_VIOLATION; an
// offset below -1 or above the high watermark OFFSET_OUT_OF_RANGE.

func handleDeleteRecords(h *Handler, ctx context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	im := h.Meta.Image()
	now := h.nowMs()
	var waits []deleteWait
	deletable := h.authorizedNames(c, kmsg.ACLOperationDelete, kmsg.ACLResourceTypeTopic) // authorize.go
	for ti, rt := range req.Topics {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition = rp.Partition
			lw, wait, err := int64(-1), (<-chan replica.DeleteRecordsResult)(nil), error(kerr.TopicAuthorizationFailed)
			if deletable.ok(rt.Topic) {
				lw, wait, err = h.deleteRecords(im, rt.Topic, rp.Partition, rp.Offset, now, int64(req.TimeoutMillis))
			}
			sp.LowWatermark = -1
			if err == nil {
				sp.LowWatermark = lw
			}
			if wait != nil {
				waits = append(waits, deleteWait{topic: ti, part: len(st.Partitions), ch: wait})
			}
			if sp.ErrorCode = code(err); sp.ErrorCode == unknownServerError {
				h.Log.Error("delete records failed", "topic", rt.Topic, "partition", rp.Partition, "err", err)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if len(waits) > 0 {
		awaitDeletes(ctx, resp, waits, time.Duration(req.TimeoutMillis)*time.Millisecond)
	}
	return msg(resp)
}

// deleteRecords checks one partition against metadata and has its leader delete below offset.
func (h *Handler) deleteRecords(im *metadata.Image, topic string, part int32, offset, nowMs, timeoutMs int64) (int64, <-chan replica.DeleteRecordsResult, error) {
	t := im.Topic(topic)
	if t == nil || part < 0 || part >= t.Partitions {
		return -1, nil, fmt.Errorf("%w: %s-%d", errUnknownPartition, topic, part)
	}
	if t.Internal {
		return -1, nil, fmt.Errorf("%w: cannot delete records of internal topic %s", errInvalidTopic, topic)
	}
	p, err := h.partition(topic, part)
	if err != nil {
		return -1, nil, err
	}
	return p.DeleteRecords(offset, nowMs, timeoutMs)
}

// deleteWait is a partition answer waiting for its low watermark.
type deleteWait struct {
	topic, part int // index in the response
	ch          <-chan replica.DeleteRecordsResult
}

// awaitDeletes waits for every waiting partition of resp, at most timeout (the partitions'
// purgatories answer at the same deadline; this bound holds without them), and sets their
// answers: the low watermark reached, or the error (REQUEST_TIMED_OUT keeps the low watermark
// the partition had when the request arrived, as Kafka).
func awaitDeletes(ctx context.Context, resp *kmsg.DeleteRecordsResponse, waits []deleteWait, timeout time.Duration) {
	timer := time.NewTimer(max(timeout, 0))
	defer timer.Stop()
	expired := false
	for _, w := range waits {
		sp := &resp.Topics[w.topic].Partitions[w.part]
		res := replica.DeleteRecordsResult{LowWatermark: sp.LowWatermark, Err: replica.ErrRequestTimedOut}
		select {
		case res = <-w.ch:
		default:
			if !expired {
				select {
				case res = <-w.ch:
				case <-timer.C:
					expired = true
				case <-ctx.Done():
					expired = true
				}
			}
		}
		if errors.Is(res.Err, replica.ErrRequestTimedOut) {
			res.LowWatermark = sp.LowWatermark
		} else if res.Err != nil {
			res.LowWatermark = -1
		}
		sp.LowWatermark, sp.ErrorCode = res.LowWatermark, code(res.Err)
	}
}
