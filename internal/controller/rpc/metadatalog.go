package rpc

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/gregor-project/gregor/internal/controller/quorum"
	"github.com/gregor-project/gregor/internal/controller/state"
)

// The metadata log as served to brokers.
//
// A broker follows the committed metadata log with Fetch of MetadataTopic partition 0 (by
// name at v12, by MetadataTopicID at v13+). FetchOffset is the next metadata offset it wants
// (a raft index; the first is 1). The partition's RecordBatches carry the committed entries
// with records from that offset on, as frames:
//
//	frame = offset:varint  length:uvarint  batch (state.EncodeBatch, length bytes)
//
// in offset order; offsets have gaps where entries carried no records (a new leader's empty
// entry). HighWatermark is the serving node's applied offset (inclusive: the last entry it
// applied). With nothing at or after FetchOffset the fetch waits up to MaxWaitMillis for an
// entry to apply. An answer holds at least one frame when there is one, then frames while
// they fit in the byte limit (MaxBytes and the partition's PartitionMaxBytes).
//
// When FetchOffset was folded into a snapshot the answer is OFFSET_OUT_OF_RANGE with
// SnapshotID.EndOffset = the offset of the node's latest snapshot; the broker then reads it
// with FetchSnapshot (same topic and partition, SnapshotID.EndOffset, Position) in chunks:
// Size is the snapshot's length, Bytes the chunk at Position (at most MaxBytes). The
// snapshot is a state.Image snapshot (state.Restore); the broker continues fetching at
// EndOffset+1. A snapshot replaced meanwhile is SNAPSHOT_NOT_FOUND: start over with Fetch.
const (
	MetadataTopic = "__cluster_metadata"
)

// MetadataTopicID is the metadata topic's id (Kafka's Uuid.METADATA_TOPIC_ID, 0..01).
var MetadataTopicID = [16]byte{15: 1}

// maxFrameBytes bounds one frame's batch when decoding (a raft entry is at most a message).
const maxFrameBytes = 256 << 20

// AppendFrame appends one metadata log entry as a frame.
func AppendFrame(b []byte, offset int64, recs []state.Record) []byte {
	batch := state.EncodeBatch(recs)
	b = binary.AppendVarint(b, offset)
	b = binary.AppendUvarint(b, uint64(len(batch)))
	return append(b, batch...)
}

var errBadFrame = errors.New("rpc: malformed metadata log frame")

// DecodeFrames decodes the frames of a Fetch answer, checking that offsets increase.
func DecodeFrames(b []byte) ([]quorum.Committed, error) {
	var out []quorum.Committed
	last := int64(0)
	for len(b) > 0 {
		off, n := binary.Varint(b)
		if n <= 0 || off <= last {
			return nil, fmt.Errorf("%w: offset", errBadFrame)
		}
		b = b[n:]
		size, n := binary.Uvarint(b)
		if n <= 0 || size > maxFrameBytes || size > uint64(len(b)-n) {
			return nil, fmt.Errorf("%w: length", errBadFrame)
		}
		b = b[n:]
		recs, err := state.DecodeBatch(b[:size])
		if err != nil {
			return nil, fmt.Errorf("%w at offset %d: %v", errBadFrame, off, err)
		}
		b = b[size:]
		out = append(out, quorum.Committed{Offset: off, Records: recs})
		last = off
	}
	return out, nil
}
