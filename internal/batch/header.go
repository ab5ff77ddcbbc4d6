package batch

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Byte offsets of the v2 header fields; the layout is drawn in the package comment.
const (
	offBaseOffset      = 0
	offBatchLength     = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21 // first byte covered by the CRC
	offLastOffsetDelta = 23
	offBaseTimestamp   = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offRecordCount     = 57
)

// minBatchLength is the smallest legal batchLength: a header with no record bytes.
const minBatchLength = HeaderSize - LogOverhead

// castagnoli is the CRC-32C table; hash/crc32 uses the CPU's CRC32 instruction for it.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ParseHeader decodes the fixed header of the v2 batch starting at b[0]. It checks only that
// len(b) >= HeaderSize, magic == 2 and batchLength is sane (>= HeaderSize-LogOverhead); it does
// not check the CRC, and b may be shorter or longer than the batch (a header read from a file
// prefix parses). Errors wrap ErrCorrupt or ErrUnsupportedMagic.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("%w: %d bytes is shorter than a batch header", ErrCorrupt, len(b))
	}
	be := binary.BigEndian
	h := Header{
		BaseOffset:           int64(be.Uint64(b[offBaseOffset:])),
		BatchLength:          int32(be.Uint32(b[offBatchLength:])),
		PartitionLeaderEpoch: int32(be.Uint32(b[offLeaderEpoch:])),
		Magic:                int8(b[offMagic]),
		CRC:                  be.Uint32(b[offCRC:]),
		Attributes:           int16(be.Uint16(b[offAttributes:])),
		LastOffsetDelta:      int32(be.Uint32(b[offLastOffsetDelta:])),
		BaseTimestamp:        int64(be.Uint64(b[offBaseTimestamp:])),
		MaxTimestamp:         int64(be.Uint64(b[offMaxTimestamp:])),
		ProducerID:           int64(be.Uint64(b[offProducerID:])),
		ProducerEpoch:        int16(be.Uint16(b[offProducerEpoch:])),
		BaseSequence:         int32(be.Uint32(b[offBaseSequence:])),
		RecordCount:          int32(be.Uint32(b[offRecordCount:])),
	}
	if h.Magic != 2 {
		return h, fmt.Errorf("%w: magic %d in a v2 batch header", ErrUnsupportedMagic, h.Magic)
	}
	if h.BatchLength < minBatchLength {
		return h, fmt.Errorf("%w: batch length %d is less than the header's %d", ErrCorrupt, h.BatchLength, minBatchLength)
	}
	return h, nil
}

// CheckCRC checks what every stored batch must satisfy whatever its history: the header
// parses, len(b) equals its Size(), and the CRC-32C of b[21:] matches. Unlike Validate it does
// not require offset deltas 0..n-1, so batches thinned by log compaction (recordCount <
// lastOffsetDelta+1, even 0) pass: it is the check for log recovery and replication.
func CheckCRC(b []byte) (Header, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, err
	}
	if h.Size() != len(b) {
		return h, fmt.Errorf("%w: batch length %d declares %d bytes, have %d", ErrCorrupt, h.BatchLength, h.Size(), len(b))
	}
	if got := crc32.Checksum(b[offAttributes:], castagnoli); got != h.CRC {
		return h, fmt.Errorf("%w: batch at offset %d has crc %08x, computed %08x", ErrBadCRC, h.BaseOffset, h.CRC, got)
	}
	return h, nil
}

// putCRC recomputes and stores the CRC of the whole batch b.
func putCRC(b []byte) {
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
}
