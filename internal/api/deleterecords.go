package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteRecords v0-v2: move each partition's log start offset forward to the given offset
// (-1: the high watermark); whole segments below it are deleted. An offset above the high
// watermark is OFFSET_OUT_OF_RANGE. Only the partition's leader does it (NOT_LEADER_OR_FOLLOWER
// elsewhere); followers adopt the new log start offset from their next fetch answers. (Kafka
// answers once every follower has moved its own log start, DelayedDeleteRecords; this answers
// once the leader has.)

func handleDeleteRecords(h *Handler, _ context.Context, _ *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LowWatermark = -1
			p, err := h.partition(rt.Topic, rp.Partition)
			if err == nil {
				sp.LowWatermark, err = p.SetLogStartOffset(rp.Offset)
			}
			if sp.ErrorCode = code(err); sp.ErrorCode == unknownServerError {
				h.Log.Error("delete records failed", "topic", rt.Topic, "partition", rp.Partition, "err", err)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return msg(resp)
}
