package rpc

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FetchSnapshot v0-v1 of the metadata log's latest snapshot, in chunks of at most MaxBytes
// (and maxSnapshotChunk); see metadatalog.go. A snapshot other than the node's latest is
// SNAPSHOT_NOT_FOUND, a position outside it POSITION_OUT_OF_RANGE.

const maxSnapshotChunk = 8 << 20

func handleFetchSnapshot(h *Handler, _ context.Context, r kmsg.Request) kmsg.Response {
	req := r.(*kmsg.FetchSnapshotRequest)
	resp := req.ResponseKind().(*kmsg.FetchSnapshotResponse)
	chunk := maxSnapshotChunk
	if req.MaxBytes > 0 && int(req.MaxBytes) < chunk {
		chunk = int(req.MaxBytes)
	}
	for _, rt := range req.Topics {
		t := kmsg.NewFetchSnapshotResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewFetchSnapshotResponseTopicPartition()
			p.Partition, p.SnapshotID.EndOffset, p.SnapshotID.Epoch, p.Position = rp.Partition, rp.SnapshotID.EndOffset, rp.SnapshotID.Epoch, rp.Position
			if rt.Topic != MetadataTopic || rp.Partition != 0 {
				p.ErrorCode = kerr.UnknownTopicOrPartition.Code
				t.Partitions = append(t.Partitions, p)
				continue
			}
			off, data, err := h.node.LatestSnapshot()
			switch {
			case err != nil:
				h.log.Warn("reading the metadata snapshot failed", "err", err)
				p.ErrorCode = kerr.UnknownServerError.Code
			case off == 0 || off != rp.SnapshotID.EndOffset:
				p.ErrorCode = kerr.SnapshotNotFound.Code
			case rp.Position < 0 || rp.Position > int64(len(data)):
				p.ErrorCode = kerr.PositionOutOfRange.Code
			default:
				end := min(int64(len(data)), rp.Position+int64(chunk))
				p.Size, p.Bytes = int64(len(data)), data[rp.Position:end]
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
