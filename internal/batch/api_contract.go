package batch

// This file lists the functions the rest of the broker calls. Bodies are filled in by the
// files named beside each one.

// ParseHeader decodes the fixed header of the v2 batch starting at b[0]. It checks only that
// len(b) >= HeaderSize, magic == 2 and batchLength is sane (>= HeaderSize-LogOverhead); it does
// not check the CRC. (header.go)
//   func ParseHeader(b []byte) (Header, error)

// Validate checks one whole v2 batch b (len(b) must equal its Size()): magic, CRC-32C, that
// recordCount == lastOffsetDelta+1 and recordCount > 0, a known codec. For uncompressed
// batches it also walks the records (varint lengths within bounds, offset deltas 0..n-1).
// Never panics, never allocates more than len(b). (validate.go)
//   func Validate(b []byte) (Header, error)

// Split walks a produce request's records field (one or more concatenated batches, any
// magic) and returns each batch's bytes. Legacy (magic 0/1) message sets are returned as
// one element with magic reported < 2. (split.go)
//   func Split(b []byte) ([][]byte, error)
//   func Magic(b []byte) (int8, error)   // magic byte of the batch/message at b[0] (offset 16)

// SetBaseOffset writes baseOffset in place (CRC unaffected). SetPartitionLeaderEpoch likewise.
// SetLogAppendTime sets the timestamp-type bit and maxTimestamp = ts and recomputes the CRC.
// (rewrite.go)
//   func SetBaseOffset(b []byte, off int64)
//   func SetPartitionLeaderEpoch(b []byte, epoch int32)
//   func SetLogAppendTime(b []byte, ts int64)

// Records decodes (decompressing as needed) the records of one validated v2 batch.
// Recompress returns a new batch with the same records, header fields and offsets, compressed
// with codec (CodecNone = uncompressed), and a valid CRC. (records.go, compress.go)
//   type Record struct { Attributes int8; TimestampDelta int64; OffsetDelta int32; Key, Value []byte; Headers []RecordHeader }
//   type RecordHeader struct { Key string; Value []byte }
//   func Records(b []byte) ([]Record, error)
//   func Recompress(b []byte, codec Codec) ([]byte, error)
//   func Compress(codec Codec, raw []byte) ([]byte, error)
//   func Decompress(codec Codec, data []byte) ([]byte, error)

// UpConvert turns a legacy message set (magic 0 or 1, possibly with wrapped compressed
// messages) into one v2 batch with the same keys, values and timestamps (magic 0 has none:
// use nowMs; timestamp type taken from the v1 attribute), codec kept. (legacy.go)
//   func UpConvert(messageSet []byte, nowMs int64) ([]byte, error)
// DownConvert turns v2 batches (as read from the log, offsets assigned) into a message set of
// the given magic (0 or 1), uncompressed, keeping absolute offsets, for old Fetch versions.
//   func DownConvert(batches []byte, magic int8) ([]byte, error)
