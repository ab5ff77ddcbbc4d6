package batch

import "encoding/binary"

// In-place rewrites of a v2 batch the broker owns. b must hold at least a whole header (it has
// passed Validate or ParseHeader); a shorter b is a programming error and panics.

// SetBaseOffset writes baseOffset (bytes 0..7). The CRC does not cover it.
func SetBaseOffset(b []byte, off int64) {
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(off))
}

// SetPartitionLeaderEpoch writes partitionLeaderEpoch (bytes 12..15). The CRC does not cover it.
func SetPartitionLeaderEpoch(b []byte, epoch int32) {
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(epoch))
}

// SetLogAppendTime stamps the batch with the broker's append time, as Kafka's LogValidator
// does for topics with message.timestamp.type=LogAppendTime: it sets the timestamp-type
// attribute bit and maxTimestamp = ts, then recomputes the CRC (both are covered). It leaves
// baseTimestamp and the records' timestamp deltas alone: readers of a LogAppendTime batch use
// maxTimestamp as every record's timestamp. When the batch already carries exactly this, the
// CRC is not recomputed. b must be the whole batch.
func SetLogAppendTime(b []byte, ts int64) {
	be := binary.BigEndian
	attrs := be.Uint16(b[offAttributes:])
	if attrs&AttrLogAppendTime != 0 && int64(be.Uint64(b[offMaxTimestamp:])) == ts {
		return
	}
	be.PutUint16(b[offAttributes:], attrs|AttrLogAppendTime)
	be.PutUint64(b[offMaxTimestamp:], uint64(ts))
	putCRC(b)
}
