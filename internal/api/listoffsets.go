package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/replica"
)

// ListOffsets v0-v9. Special timestamps: -1 latest (the high watermark; from v2 with
// isolation_level read_committed the last stable offset, below which no transaction is still
// open; a follower's request, replica_id >= 0, gets the log end offset), -2
// earliest (log start), -3 the record with the largest timestamp (KIP-734), -4 earliest local
// (the log start: all data is local). A timestamp >= 0 finds the first record whose timestamp
// is at or after it, or offset -1 when none is below the offset latest answers. Only the partition's leader answers
// (NOT_LEADER_OR_FOLLOWER elsewhere; the debug replica id -2 may ask any replica), after the
// current_leader_epoch check from v4; the answer carries the leader epoch.

const (
	tsLatest        = -1
	tsEarliest      = -2
	tsMaxTimestamp  = -3
	tsEarliestLocal = -4
)

func handleListOffsets(h *Handler, _ context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	committed := req.Version >= 2 && req.IsolationLevel == readCommitted
	describable := h.authorizedNames(c, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic)
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			ts, off, epoch, err := int64(-1), int64(-1), int32(-1), error(kerr.TopicAuthorizationFailed)
			if describable.ok(rt.Topic) {
				ts, off, epoch, err = h.listOffset(rt.Topic, rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch, req.Version, req.ReplicaID, committed)
			}
			if err != nil {
				sp.ErrorCode = code(err)
			} else if sp.ErrorCode == 0 {
				sp.Timestamp, sp.Offset, sp.LeaderEpoch = ts, off, epoch
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

// debugReplicaID is the replica id of a debugging consumer, which may read from any replica.
const debugReplicaID = -2

// readCommitted is isolation_level read_committed (Fetch v4+, ListOffsets v2+).
const readCommitted = 1

// listOffset answers one partition: the record's timestamp, its offset and the partition's
// leader epoch. committed reads up to the last stable offset instead of the high watermark.
func (h *Handler) listOffset(topic string, part int32, ts int64, currentEpoch int32, version int16, replicaID int32, committed bool) (int64, int64, int32, error) {
	p, err := h.partition(topic, part)
	if err != nil {
		return -1, -1, -1, err
	}
	if version < 4 {
		currentEpoch = -1
	}
	_, epoch, _ := p.Role()
	if replicaID == debugReplicaID {
		err = replica.CheckCurrentLeaderEpoch(epoch, currentEpoch)
	} else {
		err = p.CheckLeader(currentEpoch)
	}
	if err != nil {
		return -1, -1, -1, err
	}
	l := p.Log()
	fetchable := p.HighWatermark()
	if committed {
		fetchable = p.LastStableOffset()
	}
	switch ts {
	case tsLatest:
		if replicaID >= 0 {
			return -1, l.LogEndOffset(), epoch, nil
		}
		return -1, fetchable, epoch, nil
	case tsEarliest, tsEarliestLocal:
		return -1, l.LogStartOffset(), epoch, nil
	case tsMaxTimestamp:
		mts, off := l.MaxTimestamp()
		return mts, off, epoch, nil
	}
	if ts < 0 {
		return -1, -1, -1, errInvalidRequest
	}
	off, recTs, ok, err := l.OffsetForTimestamp(ts)
	if err != nil {
		return -1, -1, -1, err
	}
	if !ok || off >= fetchable {
		return -1, -1, epoch, nil
	}
	return recTs, off, epoch, nil
}
