package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListOffsets v0-v9. Special timestamps: -1 latest (the high watermark, which is also the last
// stable offset here), -2 earliest (log start), -3 the record with the largest timestamp
// (KIP-734), -4 earliest local (the log start: all data is local). A timestamp >= 0 finds the
// first record whose timestamp is at or after it, or offset -1 when none is.

const (
	tsLatest        = -1
	tsEarliest      = -2
	tsMaxTimestamp  = -3
	tsEarliestLocal = -4
)

func handleListOffsets(h *Handler, _ context.Context, _ *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			ts, off, err := h.listOffset(rt.Topic, rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch, req.Version)
			if err != nil {
				sp.ErrorCode = code(err)
			} else if sp.ErrorCode == 0 {
				sp.Timestamp, sp.Offset, sp.LeaderEpoch = ts, off, leaderEpoch
				if req.Version == 0 {
					sp.OldStyleOffsets = []int64{}
					if off >= 0 && rp.MaxNumOffsets > 0 {
						sp.OldStyleOffsets = []int64{off}
					}
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return msg(resp)
}

// errUnknownLeaderEpoch marks a request from a client that knows a newer leader epoch.
var errUnknownLeaderEpoch = kerr.UnknownLeaderEpoch

func (h *Handler) listOffset(topic string, part int32, ts int64, epoch int32, version int16) (int64, int64, error) {
	p, err := h.partition(topic, part)
	if err != nil {
		return -1, -1, err
	}
	if version >= 4 && epoch > leaderEpoch {
		return -1, -1, errUnknownLeaderEpoch
	}
	l := p.Log()
	switch ts {
	case tsLatest:
		return -1, p.HighWatermark(), nil
	case tsEarliest, tsEarliestLocal:
		return -1, l.LogStartOffset(), nil
	case tsMaxTimestamp:
		mts, off := l.MaxTimestamp()
		return mts, off, nil
	}
	if ts < 0 {
		return -1, -1, errInvalidRequest
	}
	off, recTs, ok, err := l.OffsetForTimestamp(ts)
	if err != nil {
		return -1, -1, err
	}
	if !ok || off >= p.HighWatermark() {
		return -1, -1, nil
	}
	return recTs, off, nil
}
