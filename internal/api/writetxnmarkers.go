package api

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/group"
	"github.com/gregor-project/gregor/internal/replica"
)

// WriteTxnMarkers v0-v2, sent by transaction coordinators to partition leaders: each
// marker (a COMMIT or ABORT control batch for one producer) is written to each of its
// partitions as the leader (Partition.WriteTxnMarker, internal topics included), and a
// partition is answered once its marker is committed (the high watermark passed it: an
// acks=all wait, every partition's in parallel, bounded by markerTimeout). A marker written
// to a __consumer_offsets partition then completes the producer's transactional offset
// commits there (group.Coordinator.CompleteTxn: committed offsets become visible, aborted
// ones go). Errors per partition: NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
// INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED, NOT_ENOUGH_REPLICAS(_AFTER_APPEND),
// REQUEST_TIMED_OUT; the coordinator retries the ones that failed.
//
// v2's transaction_version (2 for a transaction of KIP-890 part 2) needs nothing else of
// the partition: such a marker carries the epoch bumped at EndTxn, newer than the one the
// transaction's batches were written in, and the partition's fencing (a marker older than
// the producer's epoch is INVALID_PRODUCER_EPOCH) takes it as it takes any newer epoch;
// the producer's writes in the old epoch are fenced from then on.

// markerTimeout bounds a marker's replication wait (Kafka uses request.timeout.ms, 30 s).
const markerTimeout = replica.DefaultAppendTimeoutMs

// markerWrite is one partition's marker waiting to be committed.
type markerWrite struct {
	marker, topic, part int // indexes into the response
	p                   *replica.Partition
	ch                  <-chan error
}

func handleWriteTxnMarkers(h *Handler, ctx context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.WriteTxnMarkersRequest)
	// Authorization (authorize.go): only brokers write markers: CLUSTER_ACTION on the
	// cluster, or every partition fails.
	if !h.authorizedCluster(c, kmsg.ACLOperationClusterAction) {
		resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
		for _, rm := range req.Markers {
			sm := kmsg.NewWriteTxnMarkersResponseMarker()
			sm.ProducerID = rm.ProducerID
			for _, rt := range rm.Topics {
				st := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
				st.Topic = rt.Topic
				for _, idx := range rt.Partitions {
					sp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
					sp.Partition, sp.ErrorCode = idx, kerr.ClusterAuthorizationFailed.Code
					st.Partitions = append(st.Partitions, sp)
				}
				sm.Topics = append(sm.Topics, st)
			}
			resp.Markers = append(resp.Markers, sm)
		}
		return msg(resp)
	}
	return msg(h.writeTxnMarkers(ctx, req, c.FreeRequest))
}

// WriteTxnMarkers answers a WriteTxnMarkers request for this broker's own partitions
// without a connection: the broker's marker sender calls it for markers whose partitions
// this broker leads.
func (h *Handler) WriteTxnMarkers(ctx context.Context, req *kmsg.WriteTxnMarkersRequest) *kmsg.WriteTxnMarkersResponse {
	return h.writeTxnMarkers(ctx, req, func() {})
}

// writeTxnMarkers writes req's markers; release is called once they are all appended
// (before the replication waits).
func (h *Handler) writeTxnMarkers(ctx context.Context, req *kmsg.WriteTxnMarkersRequest, release func()) *kmsg.WriteTxnMarkersResponse {
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	now := h.nowMs()
	var writes []markerWrite
	for mi, rm := range req.Markers {
		sm := kmsg.NewWriteTxnMarkersResponseMarker()
		sm.ProducerID = rm.ProducerID
		m := replica.TxnMarker{ProducerID: rm.ProducerID, ProducerEpoch: rm.ProducerEpoch, Commit: rm.Committed, CoordinatorEpoch: rm.CoordinatorEpoch, TransactionVersion: rm.TransactionVersion}
		for ti, rt := range rm.Topics {
			st := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			st.Topic = rt.Topic
			for _, idx := range rt.Partitions {
				sp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				sp.Partition = idx
				p, err := h.partition(rt.Topic, idx)
				var res replica.AppendResult
				if err == nil {
					res, err = p.WriteTxnMarker(m, now, markerTimeout)
				}
				switch {
				case err != nil:
					sp.ErrorCode = code(err)
					if sp.ErrorCode == unknownServerError {
						h.Log.Error("writing a transaction marker failed", "topic", rt.Topic, "partition", idx, "producer_id", rm.ProducerID, "err", err)
					}
				case res.Wait != nil:
					writes = append(writes, markerWrite{marker: mi, topic: ti, part: len(st.Partitions), p: p, ch: res.Wait})
				default:
					h.markerWritten(p, m)
				}
				st.Partitions = append(st.Partitions, sp)
			}
			sm.Topics = append(sm.Topics, st)
		}
		resp.Markers = append(resp.Markers, sm)
	}
	if len(writes) > 0 {
		release() // as produce: the request's bytes are not read again while followers catch up
		timer := time.NewTimer(markerTimeout * time.Millisecond)
		defer timer.Stop()
		expired := false
		for _, w := range writes {
			var err error
			select {
			case err = <-w.ch:
			default:
				if expired {
					err = replica.ErrRequestTimedOut
					break
				}
				select {
				case err = <-w.ch:
				case <-timer.C:
					expired, err = true, replica.ErrRequestTimedOut
				case <-ctx.Done():
					expired, err = true, replica.ErrRequestTimedOut
				}
			}
			if err != nil {
				sp := &resp.Markers[w.marker].Topics[w.topic].Partitions[w.part]
				sp.ErrorCode = code(err)
				continue
			}
			rm := req.Markers[w.marker]
			h.markerWritten(w.p, replica.TxnMarker{ProducerID: rm.ProducerID, ProducerEpoch: rm.ProducerEpoch, Commit: rm.Committed, CoordinatorEpoch: rm.CoordinatorEpoch})
		}
	}
	return resp
}

// markerWritten applies a committed marker beyond the log: on a __consumer_offsets
// partition the group coordinator completes the producer's transactional offsets.
func (h *Handler) markerWritten(p *replica.Partition, m replica.TxnMarker) {
	if p.Topic == group.TopicName && h.Groups != nil {
		h.Groups.CompleteTxn(p.Index, m.ProducerID, m.Commit)
	}
}
