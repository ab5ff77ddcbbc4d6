package batch

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// The legacy message format (magic 0 and 1). A message set is a sequence of entries:
//
//	offset       int64
//	messageSize  int32   bytes after this field
//	crc          uint32  CRC-32 (IEEE) of magic..end
//	magic        int8    0 or 1
//	attributes   int8    bits 0-2 codec (0 none, 1 gzip, 2 snappy, 3 lz4), bit 3 LogAppendTime (v1)
//	timestamp    int64   magic 1 only
//	keyLength    int32   -1 = null
//	key
//	valueLength  int32   -1 = null
//	value
//
// A compressed message (a "wrapper") carries in its value a compressed message set of inner
// messages with the wrapper's magic and no compression of their own. In magic 1 the inner
// offsets are relative (0..n-1) and the wrapper's offset is the absolute offset of the last
// inner message; when the wrapper has LogAppendTime its timestamp is every inner message's.

const (
	legacyOverheadV0 = 4 + 1 + 1 + 4 + 4 // crc, magic, attributes, key length, value length
	legacyOverheadV1 = legacyOverheadV0 + 8
	legacyCRCStart   = LogOverhead + 4 // the IEEE CRC covers magic..end
)

// legacyOverhead is the smallest messageSize for magic.
func legacyOverhead(magic int8) int {
	if magic == 0 {
		return legacyOverheadV0
	}
	return legacyOverheadV1
}

// legacyMessage is one decoded legacy entry; key and value alias the input and are nil when
// null. timestamp is -1 for magic 0.
type legacyMessage struct {
	offset     int64
	magic      int8
	attrs      int8
	timestamp  int64
	key, value []byte
}

// readLegacy decodes and CRC-checks the legacy entry at b[0:] and returns its size.
func readLegacy(b []byte) (legacyMessage, int, error) {
	var m legacyMessage
	magic, err := Magic(b)
	if err != nil {
		return m, 0, err
	}
	if magic > 1 {
		return m, 0, fmt.Errorf("%w: magic 2 batch in a legacy message set", ErrCorrupt)
	}
	be := binary.BigEndian
	size := int64(int32(be.Uint32(b[offBatchLength:])))
	if size < int64(legacyOverhead(magic)) || size > int64(len(b)-LogOverhead) {
		return m, 0, fmt.Errorf("%w: message size %d with %d bytes left", ErrCorrupt, size, len(b)-LogOverhead)
	}
	end := LogOverhead + int(size)
	msg := b[:end]
	if want, got := be.Uint32(msg[LogOverhead:]), crc32.ChecksumIEEE(msg[legacyCRCStart:]); want != got {
		return m, 0, fmt.Errorf("%w: message crc %08x, computed %08x", ErrBadCRC, want, got)
	}
	m.offset = int64(be.Uint64(msg))
	m.magic = magic
	m.attrs = int8(msg[magicOffset+1])
	m.timestamp = -1
	p := magicOffset + 2
	if magic == 1 {
		m.timestamp = int64(be.Uint64(msg[p:]))
		p += 8
	}
	var ok bool
	if m.key, p, ok = readLegacyBytes(msg, p); !ok {
		return m, 0, fmt.Errorf("%w: bad message key length", ErrCorrupt)
	}
	if m.value, p, ok = readLegacyBytes(msg, p); !ok {
		return m, 0, fmt.Errorf("%w: bad message value length", ErrCorrupt)
	}
	if p != end {
		return m, 0, fmt.Errorf("%w: message size %d but fields use %d", ErrCorrupt, size, p-LogOverhead)
	}
	return m, end, nil
}

// readLegacyBytes reads an int32-length-prefixed nullable byte field at b[p:].
func readLegacyBytes(b []byte, p int) ([]byte, int, bool) {
	if len(b)-p < 4 {
		return nil, 0, false
	}
	n := int32(binary.BigEndian.Uint32(b[p:]))
	p += 4
	switch {
	case n == -1:
		return nil, p, true
	case n < -1 || int(n) > len(b)-p:
		return nil, 0, false
	}
	return b[p : p+int(n) : p+int(n)], p + int(n), true
}

// UpConvert turns a legacy message set (magic 0 or 1, possibly holding compressed wrapper
// messages) into one v2 batch: record i has offsetDelta i, keys and values kept (null stays
// null), producerId/producerEpoch/baseSequence -1, partitionLeaderEpoch -1, baseOffset 0 (the
// leader assigns offsets). Timestamps: magic 1 keeps each message's (a LogAppendTime wrapper's
// timestamp for all its inner messages) and sets the batch's LogAppendTime bit when a message
// has it; magic 0 has none, so every record gets -1 (NO_TIMESTAMP), as Kafka's LogValidator
// converts them: consumers read -1, and only a LogAppendTime topic stamps them (on append).
// baseTimestamp is the first record's, maxTimestamp the largest. The batch is compressed with the set's first codec other than
// none (lz4 and zstd as v2 writes them).
//
// Every CRC-32 (outer and inner) is checked (ErrBadCRC). Magic 0 LZ4 wrappers may carry the
// broken frame header checksum old clients wrote (see lz4v0.go); it is ignored, as Kafka does. Mixed magics, nested compression, a
// compressed message without a value, framing errors -> ErrCorrupt; codecs above lz4 ->
// ErrUnknownCodec; an empty set -> ErrInvalidRecord. All decompression together is capped at
// MaxDecompressedSize.
func UpConvert(messageSet []byte) ([]byte, error) {
	var (
		recs   []Record // TimestampDelta holds the absolute timestamp until the end
		codec  = CodecNone
		lat    bool
		magic  int8 = -1
		budget      = MaxDecompressedSize
	)
	for b := messageSet; len(b) > 0; {
		m, n, err := readLegacy(b)
		if err != nil {
			return nil, err
		}
		b = b[n:]
		if magic < 0 {
			magic = m.magic
		} else if m.magic != magic {
			return nil, fmt.Errorf("%w: magic %d message in a magic %d message set", ErrCorrupt, m.magic, magic)
		}
		mlat := m.magic == 1 && m.attrs&AttrLogAppendTime != 0
		lat = lat || mlat
		ts := m.timestamp // -1 for magic 0
		c := Codec(m.attrs & AttrCodecMask)
		if c == CodecNone {
			recs = append(recs, Record{TimestampDelta: ts, Key: m.key, Value: m.value})
			continue
		}
		if c > CodecLZ4 {
			return nil, fmt.Errorf("%w: codec %d in a magic %d message", ErrUnknownCodec, c, m.magic)
		}
		if m.value == nil {
			return nil, fmt.Errorf("%w: compressed message without a value", ErrCorrupt)
		}
		if codec == CodecNone {
			codec = c
		}
		data := m.value
		if c == CodecLZ4 && m.magic == 0 {
			data = fixLZ4HeaderChecksum(data)
		}
		inner, err := decompress(c, data, budget)
		if err != nil {
			return nil, err
		}
		budget -= len(inner)
		if len(inner) == 0 {
			return nil, fmt.Errorf("%w: compressed message holds no messages", ErrCorrupt)
		}
		for len(inner) > 0 {
			im, n, err := readLegacy(inner)
			if err != nil {
				return nil, fmt.Errorf("inner message: %w", err)
			}
			inner = inner[n:]
			if im.magic != m.magic {
				return nil, fmt.Errorf("%w: inner magic %d in a magic %d wrapper", ErrCorrupt, im.magic, m.magic)
			}
			if im.attrs&AttrCodecMask != 0 {
				return nil, fmt.Errorf("%w: nested compression (codec %d inside a codec %d wrapper)", ErrCorrupt, im.attrs&AttrCodecMask, c)
			}
			its := im.timestamp // -1 for magic 0
			if mlat {
				its = m.timestamp
			}
			recs = append(recs, Record{TimestampDelta: its, Key: im.key, Value: im.value})
		}
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("%w: empty message set", ErrInvalidRecord)
	}
	h := Header{
		PartitionLeaderEpoch: -1,
		LastOffsetDelta:      int32(len(recs) - 1),
		BaseTimestamp:        recs[0].TimestampDelta,
		MaxTimestamp:         recs[0].TimestampDelta,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		BaseSequence:         -1,
	}
	if lat {
		h.Attributes = AttrLogAppendTime
	}
	for i := range recs {
		ts := recs[i].TimestampDelta
		h.MaxTimestamp = max(h.MaxTimestamp, ts)
		recs[i].TimestampDelta = ts - h.BaseTimestamp
		recs[i].OffsetDelta = int32(i)
	}
	return Build(h, recs, codec)
}

// DownConvert turns v2 batches as read from the log (offsets assigned) into an uncompressed
// message set of magic 0 or 1 for old Fetch and consumer versions. Each record becomes one
// message at its absolute offset (baseOffset + offsetDelta) with its key and value; magic 1
// messages carry the record's timestamp (baseTimestamp + delta, or maxTimestamp with the
// LogAppendTime bit for LogAppendTime batches), magic 0 messages none. Control batches are
// skipped and record headers dropped, since the old formats cannot express them. A batch cut
// short at the end of batches (a fetch read that stopped mid-batch) is left out, as Kafka's
// readers do; any other malformed batch fails. CRCs are not rechecked (the log holds validated
// batches); each message gets a fresh CRC-32.
func DownConvert(batches []byte, magic int8) ([]byte, error) {
	if magic != 0 && magic != 1 {
		return nil, fmt.Errorf("%w: cannot down-convert to magic %d", ErrUnsupportedMagic, magic)
	}
	var out []byte
	for b := batches; len(b) >= HeaderSize; {
		h, err := ParseHeader(b)
		if err != nil {
			return nil, err
		}
		if h.Size() > len(b) {
			break
		}
		batch := b[:h.Size()]
		b = b[h.Size():]
		if h.IsControl() {
			continue
		}
		recs, err := Records(batch)
		if err != nil {
			return nil, err
		}
		lat := h.Attributes&AttrLogAppendTime != 0
		for i := range recs {
			r := &recs[i]
			ts, attrs := h.BaseTimestamp+r.TimestampDelta, int8(0)
			if lat {
				ts, attrs = h.MaxTimestamp, AttrLogAppendTime
			}
			out = appendLegacy(out, h.BaseOffset+int64(r.OffsetDelta), magic, attrs, ts, r.Key, r.Value)
		}
	}
	return out, nil
}

// appendLegacy appends one uncompressed legacy message. For magic 0, attrs and ts are not
// written (magic 0 has no timestamp and no timestamp type).
func appendLegacy(dst []byte, offset int64, magic, attrs int8, ts int64, key, value []byte) []byte {
	be := binary.BigEndian
	start := len(dst)
	dst = be.AppendUint64(dst, uint64(offset))
	dst = be.AppendUint32(dst, 0) // messageSize, filled below
	dst = be.AppendUint32(dst, 0) // crc, filled below
	if magic == 0 {
		attrs = 0
	}
	dst = append(dst, byte(magic), byte(attrs))
	if magic == 1 {
		dst = be.AppendUint64(dst, uint64(ts))
	}
	dst = appendLegacyBytes(dst, key)
	dst = appendLegacyBytes(dst, value)
	be.PutUint32(dst[start+offBatchLength:], uint32(len(dst)-start-LogOverhead))
	be.PutUint32(dst[start+LogOverhead:], crc32.ChecksumIEEE(dst[start+legacyCRCStart:]))
	return dst
}

// appendLegacyBytes appends an int32-length-prefixed nullable byte field.
func appendLegacyBytes(dst, b []byte) []byte {
	if b == nil {
		return binary.BigEndian.AppendUint32(dst, 0xffffffff)
	}
	return append(binary.BigEndian.AppendUint32(dst, uint32(len(b))), b...)
}
