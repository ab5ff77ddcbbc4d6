package batch

import "fmt"

// Validate checks one whole v2 batch b as a leader must before appending a client's batch
// (Kafka's DefaultRecordBatch.ensureValid plus LogValidator's batch checks):
//
//   - the header parses (magic 2, batchLength >= 49) and len(b) == Size()  -> ErrCorrupt
//   - CRC-32C of b[21:] equals the stored crc                              -> ErrBadCRC
//   - the codec is none, gzip, snappy, lz4 or zstd                         -> ErrUnknownCodec
//   - recordCount > 0 and recordCount == lastOffsetDelta+1                 -> ErrInvalidRecord
//   - uncompressed: exactly recordCount well-formed records fill the rest
//     of the batch and record i has offsetDelta i                          -> ErrInvalidRecord
//
// Compressed batches are not decompressed here (see ValidateRecords). What depends on the
// request or the topic (control batches from clients, sequence numbers, timestamps against
// message.timestamp.*, the produce version allowing zstd) is the caller's to check.
//
// Validate never panics and allocates nothing unless it returns an error.
func Validate(b []byte) (Header, error) {
	h, err := CheckCRC(b)
	if err != nil {
		return h, err
	}
	if err := checkCounts(&h); err != nil {
		return h, err
	}
	if h.Codec() == CodecNone {
		if err := walkRecords(b[HeaderSize:], h.RecordCount); err != nil {
			return h, fmt.Errorf("batch at offset %d: %w", h.BaseOffset, err)
		}
	}
	return h, nil
}

// ValidateRecords is Validate plus, for compressed batches, walking the decompressed records
// with the same rules, as Kafka's leader does for every compressed batch it appends. The
// records are decompressed as a stream and never held whole (stream.go): memory stays bounded
// whatever the batch decompresses to, and no decompressed size is refused.
func ValidateRecords(b []byte) (Header, error) {
	h, err := Validate(b)
	if err != nil || h.Codec() == CodecNone {
		return h, err
	}
	if err := walkCompressed(h.Codec(), b[HeaderSize:], h.RecordCount); err != nil {
		return h, fmt.Errorf("batch at offset %d: %w", h.BaseOffset, err)
	}
	return h, nil
}

// checkCounts checks the codec and that the record count agrees with the offset range.
func checkCounts(h *Header) error {
	if h.Codec() > CodecZstd {
		return fmt.Errorf("%w: codec %d", ErrUnknownCodec, h.Codec())
	}
	if h.RecordCount <= 0 {
		return fmt.Errorf("%w: record count %d", ErrInvalidRecord, h.RecordCount)
	}
	if int64(h.LastOffsetDelta)+1 != int64(h.RecordCount) {
		return fmt.Errorf("%w: record count %d but last offset delta %d", ErrInvalidRecord, h.RecordCount, h.LastOffsetDelta)
	}
	return nil
}

// walkRecords checks that raw holds exactly count well-formed records with offset deltas
// 0..count-1, without allocating.
func walkRecords(raw []byte, count int32) error {
	if int64(count) > int64(len(raw)/minRecordSize) {
		return fmt.Errorf("%w: %d records cannot fit in %d bytes", ErrInvalidRecord, count, len(raw))
	}
	i := 0
	for n := int32(0); n < count; n++ {
		next, delta, err := readRecord(raw, i, nil)
		if err != nil {
			return fmt.Errorf("record %d: %w", n, err)
		}
		if delta != n {
			return fmt.Errorf("%w: record %d has offset delta %d", ErrInvalidRecord, n, delta)
		}
		i = next
	}
	if i != len(raw) {
		return fmt.Errorf("%w: %d bytes left after %d records", ErrInvalidRecord, len(raw)-i, count)
	}
	return nil
}
