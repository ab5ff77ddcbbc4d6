// Package batch reads, validates and rewrites Kafka record batches (magic v2) and the legacy
// message sets (magic v0/v1), and holds the compression codecs.
//
// A v2 record batch on the wire and on disk (big endian):
//
//	off len field
//	  0   8 baseOffset
//	  8   4 batchLength          (bytes after this field: total size = 12 + batchLength)
//	 12   4 partitionLeaderEpoch
//	 16   1 magic                (2)
//	 17   4 crc                  (CRC-32C of bytes 21..end)
//	 21   2 attributes           (bits 0-2 codec, 3 timestamp type, 4 transactional, 5 control,
//	                              6 delete horizon: baseTimestamp is the delete horizon, KIP-534)
//	 23   4 lastOffsetDelta
//	 27   8 baseTimestamp
//	 35   8 maxTimestamp
//	 43   8 producerId
//	 51   2 producerEpoch
//	 53   4 baseSequence
//	 57   4 recordCount
//	 61     records (compressed as a whole when the codec is not none)
//
// The CRC does not cover baseOffset, batchLength, partitionLeaderEpoch or magic, so the broker
// patches offsets and leader epochs in place without touching it; LogAppendTime rewrites the
// attributes and maxTimestamp and so recomputes it.
//
// Where things are:
//
//	header.go    ParseHeader, CheckCRC, field offsets
//	validate.go  Validate, ValidateRecords: what a leader checks before appending
//	stream.go    the streaming walk of a compressed batch's records (bounded memory, no cap)
//	split.go     Split, Magic: a produce request's records field into batches
//	rewrite.go   SetBaseOffset, SetPartitionLeaderEpoch, SetLogAppendTime (in place)
//	records.go   the v2 record layout, Record, Records
//	build.go     Build: header fields + records -> batch
//	compress.go  Compress, Decompress, Recompress, pooled codecs; snappy.go the xerial framing
//	legacy.go    the magic 0/1 message format, UpConvert, DownConvert; lz4v0.go its LZ4 quirk
//	varint.go    zig-zag varints
//
// Nothing here panics on malformed input or allocates in proportion to a declared count
// rather than to the bytes actually present. Validating, recompressing and searching a
// compressed batch stream its records and accept any decompressed size, as Kafka does; what
// decompresses records into memory (Records, Decompress, UpConvert: legacy up- and
// down-conversion, the coordinators' loads, the cleaner) is capped at MaxDecompressedSize.
package batch

import "errors"

// HeaderSize is the fixed size of a v2 batch header; LengthOffset/LogOverhead as in Kafka.
const (
	HeaderSize  = 61
	LogOverhead = 12 // baseOffset + batchLength: the bytes not counted in batchLength
)

// Codecs as stored in attribute bits 0-2.
type Codec int8

const (
	CodecNone   Codec = 0
	CodecGzip   Codec = 1
	CodecSnappy Codec = 2
	CodecLZ4    Codec = 3
	CodecZstd   Codec = 4
)

// Attribute bits.
const (
	AttrCodecMask     = 0x07
	AttrLogAppendTime = 0x08
	AttrTransactional = 0x10
	AttrControl       = 0x20
	// AttrDeleteHorizon marks a batch the log cleaner rewrote while it held tombstones (or a
	// transaction marker): its baseTimestamp is then the delete horizon, the time after which
	// the cleaner may remove them (KIP-534), and record timestamps are still baseTimestamp +
	// timestampDelta.
	AttrDeleteHorizon = 0x40
)

// Sentinel errors; the api layer maps them to Kafka codes.
var (
	ErrCorrupt          = errors.New("batch: corrupt record batch")      // CORRUPT_MESSAGE
	ErrBadCRC           = errors.New("batch: crc mismatch")              // CORRUPT_MESSAGE
	ErrUnsupportedMagic = errors.New("batch: unsupported magic")         // UNSUPPORTED_FOR_MESSAGE_FORMAT / CORRUPT_MESSAGE
	ErrUnknownCodec     = errors.New("batch: unknown compression codec") // UNSUPPORTED_COMPRESSION_TYPE
	ErrInvalidRecord    = errors.New("batch: invalid record")            // INVALID_RECORD
)

// Header is the decoded fixed part of a v2 batch.
type Header struct {
	BaseOffset           int64
	BatchLength          int32
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	BaseTimestamp        int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	RecordCount          int32
}

// Size is the whole batch size in bytes (LogOverhead + BatchLength).
func (h *Header) Size() int { return LogOverhead + int(h.BatchLength) }

// LastOffset is BaseOffset + LastOffsetDelta.
func (h *Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// Codec returns the compression codec.
func (h *Header) Codec() Codec { return Codec(h.Attributes & AttrCodecMask) }

// IsTransactional, IsControl report the attribute bits.
func (h *Header) IsTransactional() bool { return h.Attributes&AttrTransactional != 0 }
func (h *Header) IsControl() bool       { return h.Attributes&AttrControl != 0 }

// DeleteHorizonMs is the batch's delete horizon (see AttrDeleteHorizon); ok is false when
// the cleaner has not set one.
func (h *Header) DeleteHorizonMs() (ms int64, ok bool) {
	if h.Attributes&AttrDeleteHorizon == 0 {
		return -1, false
	}
	return h.BaseTimestamp, true
}

// LastSequence is the sequence of the last record (with Kafka's wrap at MaxInt32).
func (h *Header) LastSequence() int32 {
	if h.BaseSequence < 0 {
		return -1
	}
	s := int64(h.BaseSequence) + int64(h.LastOffsetDelta)
	if s > 0x7fffffff {
		s -= 0x80000000
	}
	return int32(s)
}
