package batch

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Build encodes a v2 batch from h and records, compressed with codec. It takes BaseOffset,
// PartitionLeaderEpoch, LastOffsetDelta, BaseTimestamp, MaxTimestamp, ProducerID,
// ProducerEpoch, BaseSequence and the non-codec Attributes bits from h as given, and computes
// the rest: magic 2, the codec bits from codec, recordCount = len(records), batchLength and
// the CRC. The caller owns the offset and timestamp fields: for a fresh batch LastOffsetDelta
// is len(records)-1 and each record's OffsetDelta its index (Validate checks that); a batch
// rebuilt from a compacted one keeps its gaps. Records' OffsetDelta must lie in
// 0..LastOffsetDelta (ErrInvalidRecord).
func Build(h Header, records []Record, codec Codec) ([]byte, error) {
	if codec < CodecNone || codec > CodecZstd {
		return nil, fmt.Errorf("%w: codec %d", ErrUnknownCodec, codec)
	}
	if len(records) > math.MaxInt32 {
		return nil, fmt.Errorf("%w: %d records", ErrInvalidRecord, len(records))
	}
	rawSize := 0
	for i := range records {
		r := &records[i]
		if r.OffsetDelta < 0 || r.OffsetDelta > h.LastOffsetDelta {
			return nil, fmt.Errorf("%w: record %d has offset delta %d, last offset delta is %d", ErrInvalidRecord, i, r.OffsetDelta, h.LastOffsetDelta)
		}
		body := recordBodySize(r)
		if body > math.MaxInt32 {
			return nil, fmt.Errorf("%w: record %d is %d bytes", ErrInvalidRecord, i, body)
		}
		rawSize += sizeVarint(int64(body)) + body
	}
	if rawSize > math.MaxInt32-HeaderSize {
		return nil, fmt.Errorf("%w: %d bytes of records", ErrInvalidRecord, rawSize)
	}

	var out []byte
	if codec == CodecNone {
		out = make([]byte, HeaderSize, HeaderSize+rawSize)
		out = appendRecords(out, records)
	} else {
		raw := getScratch(rawSize)
		raw.b = appendRecords(raw.b[:0], records)
		var err error
		out, err = appendCompressed(make([]byte, HeaderSize, HeaderSize+rawSize/2+64), codec, raw.b)
		putScratch(raw)
		if err != nil {
			return nil, err
		}
	}
	if len(out)-LogOverhead > math.MaxInt32 {
		return nil, fmt.Errorf("%w: batch of %d bytes", ErrInvalidRecord, len(out))
	}

	be := binary.BigEndian
	be.PutUint64(out[offBaseOffset:], uint64(h.BaseOffset))
	be.PutUint32(out[offBatchLength:], uint32(len(out)-LogOverhead))
	be.PutUint32(out[offLeaderEpoch:], uint32(h.PartitionLeaderEpoch))
	out[offMagic] = 2
	be.PutUint16(out[offAttributes:], uint16(h.Attributes&^AttrCodecMask|int16(codec)))
	be.PutUint32(out[offLastOffsetDelta:], uint32(h.LastOffsetDelta))
	be.PutUint64(out[offBaseTimestamp:], uint64(h.BaseTimestamp))
	be.PutUint64(out[offMaxTimestamp:], uint64(h.MaxTimestamp))
	be.PutUint64(out[offProducerID:], uint64(h.ProducerID))
	be.PutUint16(out[offProducerEpoch:], uint16(h.ProducerEpoch))
	be.PutUint32(out[offBaseSequence:], uint32(h.BaseSequence))
	be.PutUint32(out[offRecordCount:], uint32(len(records)))
	putCRC(out)
	return out, nil
}

// recordBodySize is the encoded size of r after its length varint.
func recordBodySize(r *Record) int {
	n := 1 + sizeVarint(r.TimestampDelta) + sizeVarint(int64(r.OffsetDelta)) +
		bytesSize(r.Key) + bytesSize(r.Value) + sizeVarint(int64(len(r.Headers)))
	for i := range r.Headers {
		n += sizeVarint(int64(len(r.Headers[i].Key))) + len(r.Headers[i].Key) + bytesSize(r.Headers[i].Value)
	}
	return n
}

// bytesSize is the encoded size of a nullable byte field.
func bytesSize(b []byte) int {
	if b == nil {
		return 1
	}
	return sizeVarint(int64(len(b))) + len(b)
}

// appendRecords appends the records in the layout described in records.go.
func appendRecords(dst []byte, records []Record) []byte {
	for i := range records {
		r := &records[i]
		dst = appendVarint(dst, int64(recordBodySize(r)))
		dst = append(dst, byte(r.Attributes))
		dst = appendVarint(dst, r.TimestampDelta)
		dst = appendVarint(dst, int64(r.OffsetDelta))
		dst = appendBytes(dst, r.Key)
		dst = appendBytes(dst, r.Value)
		dst = appendVarint(dst, int64(len(r.Headers)))
		for j := range r.Headers {
			dst = appendVarint(dst, int64(len(r.Headers[j].Key)))
			dst = append(dst, r.Headers[j].Key...)
			dst = appendBytes(dst, r.Headers[j].Value)
		}
	}
	return dst
}

// appendBytes appends a nullable byte field: nil is written as length -1.
func appendBytes(dst, b []byte) []byte {
	if b == nil {
		return appendVarint(dst, -1)
	}
	return append(appendVarint(dst, int64(len(b))), b...)
}
