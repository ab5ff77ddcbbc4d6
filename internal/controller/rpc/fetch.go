package rpc

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/controller/quorum"
)

// Fetch v12-v17 of the metadata log (see metadatalog.go). Any other topic or partition is
// UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID at v13+). Only the first metadata partition
// of a request waits; fetch sessions are not kept (SessionID 0).

const (
	defaultFetchBytes = 1 << 20
	maxFetchWait      = time.Minute
	readChunk         = 256 // entries per ReadCommitted
)

func handleFetch(h *Handler, ctx context.Context, r kmsg.Request) kmsg.Response {
	req := r.(*kmsg.FetchRequest)
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	maxWait := min(max(time.Duration(req.MaxWaitMillis)*time.Millisecond, 0), maxFetchWait)
	for _, rt := range req.Topics {
		t := kmsg.NewFetchResponseTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		meta := rt.Topic == MetadataTopic
		if req.Version >= 13 {
			meta = rt.TopicID == MetadataTopicID
		}
		for _, rp := range rt.Partitions {
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition = rp.Partition
			switch {
			case !meta && req.Version >= 13:
				p.ErrorCode = kerr.UnknownTopicID.Code
			case !meta || rp.Partition != 0:
				p.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				limit := int(req.MaxBytes)
				if rp.PartitionMaxBytes > 0 && (limit <= 0 || int(rp.PartitionMaxBytes) < limit) {
					limit = int(rp.PartitionMaxBytes)
				}
				if limit <= 0 {
					limit = defaultFetchBytes
				}
				h.readLog(ctx, &p, rp.FetchOffset, limit, maxWait)
				maxWait = 0
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// readLog fills p with the frames of the entries from offset from on.
func (h *Handler) readLog(ctx context.Context, p *kmsg.FetchResponseTopicPartition, from int64, limit int, maxWait time.Duration) {
	from = max(from, 1)
	p.LogStartOffset = -1
	ents, err := h.node.WaitCommitted(ctx, from, readChunk, maxWait)
	var frames []byte
	for err == nil && len(ents) > 0 {
		for _, e := range ents {
			before := len(frames)
			frames = AppendFrame(frames, e.Offset, e.Records)
			if len(frames) > limit && before > 0 {
				frames = frames[:before]
				ents = nil
				break
			}
			from = e.Offset + 1
		}
		if len(ents) < readChunk || len(frames) >= limit {
			break
		}
		ents, err = h.node.ReadCommitted(from, readChunk)
	}
	if errors.Is(err, quorum.ErrCompacted) && len(frames) == 0 {
		snap, _, serr := h.node.LatestSnapshot()
		if serr != nil {
			err = serr
		} else {
			p.ErrorCode = kerr.OffsetOutOfRange.Code
			p.SnapshotID.EndOffset, p.SnapshotID.Epoch = snap, 0
			p.HighWatermark = h.node.Status().Applied
			return
		}
	}
	if err != nil && len(frames) == 0 {
		if !errors.Is(err, quorum.ErrStopped) && !errors.Is(err, context.Canceled) {
			h.log.Warn("reading the metadata log failed", "from", from, "err", err)
		}
		p.ErrorCode = code(err)
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			p.ErrorCode = kerr.RequestTimedOut.Code
		}
		return
	}
	p.HighWatermark = h.node.Status().Applied
	p.LastStableOffset = p.HighWatermark
	p.RecordBatches = frames
}
