package batch

import (
	"fmt"
	"slices"
)

// A v2 record, as laid out inside a batch's (decompressed) records section. Every integer
// except attributes is a zig-zag varint; lengths of -1 mean null:
//
//	length          varint   bytes after this field
//	attributes      int8     (unused, 0)
//	timestampDelta  varlong  from the batch's baseTimestamp
//	offsetDelta     varint   from the batch's baseOffset
//	keyLength       varint   -1 = null key
//	key             bytes
//	valueLength     varint   -1 = null value
//	value           bytes
//	headerCount     varint   >= 0
//	headers         [headerKeyLength varint (>= 0), headerKey, headerValueLength varint (-1 =
//	                 null), headerValue] * headerCount
//
// A record's fields must use exactly its declared length, and the records of a batch exactly
// fill the records section: Kafka rejects both short and leftover bytes.

// minRecordSize is the smallest encoded record: a 1-byte length and six 1-byte fields.
const minRecordSize = 7

// Record is one decoded v2 record. Key and Value are nil when their length is -1 (null) and
// alias the batch (or its decompressed copy).
type Record struct {
	Attributes     int8
	TimestampDelta int64
	OffsetDelta    int32
	Key, Value     []byte
	Headers        []RecordHeader
}

// RecordHeader is one record header. Value is nil when its length is -1.
type RecordHeader struct {
	Key   string
	Value []byte
}

// Records decodes (decompressing as needed) the records of one v2 batch b, len(b) == its
// Size(). It does not check the CRC (Validate or CheckCRC first) nor that offset deltas are
// 0..n-1, because compaction legitimately leaves gaps; it does check that exactly
// recordCount well-formed records fill the records section. Key and Value alias b for
// uncompressed batches.
func Records(b []byte) ([]Record, error) {
	recs, err := AppendRecords(nil, b)
	if recs == nil && err == nil {
		recs = []Record{} // an empty batch has an empty, non-nil slice of records
	}
	return recs, err
}

// AppendRecords is Records appending the records to dst, so that a caller decoding many
// batches (the log cleaner) reuses one array: AppendRecords(recs[:0], b). The records
// appended alias b as Records' do; on an error dst is returned unchanged in length.
func AppendRecords(dst []Record, b []byte) ([]Record, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return dst, err
	}
	if h.Size() != len(b) {
		return dst, fmt.Errorf("%w: batch length %d declares %d bytes, have %d", ErrCorrupt, h.BatchLength, h.Size(), len(b))
	}
	raw := b[HeaderSize:]
	if c := h.Codec(); c != CodecNone {
		if raw, err = Decompress(c, raw); err != nil {
			return dst, err
		}
	}
	return decodeRecords(dst, raw, h.RecordCount)
}

// decodeRecords appends exactly count records that fill raw to dst. It allocates in
// proportion to len(raw), never to count.
func decodeRecords(dst []Record, raw []byte, count int32) ([]Record, error) {
	if count < 0 || int64(count) > int64(len(raw)/minRecordSize) {
		return dst, fmt.Errorf("%w: %d records cannot fit in %d bytes", ErrInvalidRecord, count, len(raw))
	}
	n0 := len(dst)
	dst = slices.Grow(dst, int(count))[:n0+int(count)]
	recs := dst[n0:]
	i := 0
	for n := range recs {
		var err error
		if i, _, err = readRecord(raw, i, &recs[n]); err != nil {
			return dst[:n0], fmt.Errorf("record %d: %w", n, err)
		}
	}
	if i != len(raw) {
		return dst[:n0], fmt.Errorf("%w: %d bytes left after %d records", ErrInvalidRecord, len(raw)-i, count)
	}
	return dst, nil
}

// readRecord parses the record at b[i:] and returns the index just past it and its offset
// delta. When rec is nil it only checks the structure and allocates nothing; otherwise rec is
// filled in (Key and Value alias b, header keys are copied into strings).
func readRecord(b []byte, i int, rec *Record) (next int, offsetDelta int32, err error) {
	length, i := varint32(b, i)
	if i < 0 {
		return 0, 0, fmt.Errorf("%w: bad record length varint", ErrInvalidRecord)
	}
	if length < 0 || int(length) > len(b)-i {
		return 0, 0, fmt.Errorf("%w: record length %d with %d bytes left", ErrInvalidRecord, length, len(b)-i)
	}
	end := i + int(length)
	r := b[:end] // every field must lie within the declared length
	if i >= end {
		return 0, 0, fmt.Errorf("%w: empty record", ErrInvalidRecord)
	}
	attrs := int8(r[i])
	i++
	tsDelta, i := varint64(r, i)
	if i < 0 {
		return 0, 0, fmt.Errorf("%w: bad timestamp delta", ErrInvalidRecord)
	}
	offsetDelta, i = varint32(r, i)
	if i < 0 {
		return 0, 0, fmt.Errorf("%w: bad offset delta", ErrInvalidRecord)
	}
	key, i, ok := readBytes(r, i)
	if !ok {
		return 0, 0, fmt.Errorf("%w: bad key length", ErrInvalidRecord)
	}
	value, i, ok := readBytes(r, i)
	if !ok {
		return 0, 0, fmt.Errorf("%w: bad value length", ErrInvalidRecord)
	}
	nh, i := varint32(r, i)
	if i < 0 || nh < 0 {
		return 0, 0, fmt.Errorf("%w: bad header count", ErrInvalidRecord)
	}
	var headers []RecordHeader
	if rec != nil && nh > 0 {
		// Each header takes at least 2 bytes; never allocate past what the record can hold.
		headers = make([]RecordHeader, 0, min(int(nh), (end-i)/2))
	}
	for h := int32(0); h < nh; h++ {
		hk, j, ok := readBytes(r, i)
		if !ok || hk == nil {
			return 0, 0, fmt.Errorf("%w: bad header key length", ErrInvalidRecord)
		}
		hv, j, ok := readBytes(r, j)
		if !ok {
			return 0, 0, fmt.Errorf("%w: bad header value length", ErrInvalidRecord)
		}
		i = j
		if rec != nil {
			headers = append(headers, RecordHeader{Key: string(hk), Value: hv})
		}
	}
	if i != end {
		return 0, 0, fmt.Errorf("%w: record declares %d bytes, fields use %d", ErrInvalidRecord, length, int(length)-(end-i))
	}
	if rec != nil {
		*rec = Record{Attributes: attrs, TimestampDelta: tsDelta, OffsetDelta: offsetDelta, Key: key, Value: value, Headers: headers}
	}
	return end, offsetDelta, nil
}

// readBytes reads a varint length and that many bytes from b[i:]; length -1 yields nil. A
// zero length yields an empty, non-nil slice, so null and empty stay distinct.
func readBytes(b []byte, i int) (v []byte, next int, ok bool) {
	n, i := varint32(b, i)
	switch {
	case i < 0 || n < -1:
		return nil, 0, false
	case n == -1:
		return nil, i, true
	case int(n) > len(b)-i:
		return nil, 0, false
	}
	return b[i : i+int(n) : i+int(n)], i + int(n), true
}
