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
// earliest (log start), -3 the record with the largest timestamp (KIP-734, v7+), -4 earliest
// local (KIP-405, v8+: the log start, all data is local), -5 latest tiered (KIP-1005, v9+:
// offset -1, nothing is tiered). As Kafka's ReplicaManager.fetchOffset, from v1 a special
// timestamp below the version that introduced it, or any other negative timestamp, is
// UNSUPPORTED_VERSION, and a partition named twice is answered once, INVALID_REQUEST; v0 (the
// legacy offsets-before lookup) answers a negative timestamp other than -1 and -2 with no
// offsets. A timestamp >= 0 finds the first record whose timestamp is at or after it, or
// offset -1 when none is below the offset latest answers. Only the partition's leader answers
// (NOT_LEADER_OR_FOLLOWER elsewhere; the debug replica id -2 may ask any replica), after the
// current_leader_epoch check from v4; the answer carries the leader epoch.

const (
	tsLatest        = -1
	tsEarliest      = -2
	tsMaxTimestamp  = -3
	tsEarliestLocal = -4
	tsLatestTiered  = -5
)

// timestampSince is the first ListOffsets version that accepts each special timestamp
// (Kafka's ReplicaManager.timestampMinSupportedVersion).
var timestampSince = map[int64]int16{
	tsLatest:        1,
	tsEarliest:      1,
	tsMaxTimestamp:  7,
	tsEarliestLocal: 8,
	tsLatestTiered:  9,
}

// timestampUnsupported reports whether a v1+ request may not ask for ts.
func timestampUnsupported(ts int64, version int16) bool {
	if ts >= 0 {
		return false
	}
	since, ok := timestampSince[ts]
	return !ok || version < since
}

func handleListOffsets(h *Handler, _ context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	committed := req.Version >= 2 && req.IsolationLevel == readCommitted
	describable := h.authorizedNames(c, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic)
	dups := duplicateListOffsetsPartitions(req)
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			k := topicPartitionKey{rt.Topic, rp.Partition}
			dup := false
			switch dups[k] {
			case answered:
				continue // a duplicate is answered once
			case duplicated:
				dups[k], dup = answered, true
			}
			ts, off, epoch, err := int64(-1), int64(-1), int32(-1), error(kerr.TopicAuthorizationFailed)
			switch {
			case !describable.ok(rt.Topic):
			case dup:
				err = kerr.InvalidRequest
			case req.Version >= 1 && timestampUnsupported(rp.Timestamp, req.Version):
				err = kerr.UnsupportedVersion
			default:
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

type topicPartitionKey struct {
	topic string
	part  int32
}

// The state of a partition named more than once in a ListOffsets request.
const (
	duplicated = 1 // not answered yet
	answered   = 2 // INVALID_REQUEST sent; later copies are skipped
)

// duplicateListOffsetsPartitions marks the partitions a v1+ request names more than once
// (Kafka's ListOffsetsRequest.duplicatePartitions); nil when there are none.
func duplicateListOffsetsPartitions(req *kmsg.ListOffsetsRequest) map[topicPartitionKey]int {
	if req.Version < 1 {
		return nil
	}
	var seen, dups map[topicPartitionKey]int
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			k := topicPartitionKey{rt.Topic, rp.Partition}
			if seen == nil {
				seen = map[topicPartitionKey]int{}
			}
			if seen[k] > 0 {
				if dups == nil {
					dups = map[topicPartitionKey]int{}
				}
				dups[k] = duplicated
			}
			seen[k]++
		}
	}
	return dups
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
	if version == 0 && ts < tsEarliest {
		// Kafka's legacy lookup of offsets before a time finds none before a negative one.
		return -1, -1, epoch, nil
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
	case tsLatestTiered:
		return -1, -1, -1, nil // no tiered storage: nothing is tiered (Kafka: offset -1, epoch -1)
	}
	if ts < 0 {
		return -1, -1, -1, errInvalidRequest // refused by the handler before
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
