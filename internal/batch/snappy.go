package batch

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/klauspost/compress/s2"
)

// Snappy in Kafka comes in two shapes, told apart by the first 8 bytes:
//
//   - xerial framing, written by the Java client (snappy-java's SnappyOutputStream):
//     magic "\x82SNAPPY\x00", version int32 (1), compatible version int32 (1), then blocks of
//     [compressed length int32 big endian][raw snappy block], each block at most 32 KiB raw.
//   - one raw snappy block (varint uncompressed length, then the block), written by
//     librdkafka, franz-go and others.
//
// We write the xerial shape, since every Kafka client must already read what the Java
// producer writes, and read both.

var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const (
	xerialHeaderSize = 16
	xerialBlockSize  = 32 << 10

	// maxSnappyRatio bounds a block's declared decoded length by its size: snappy's densest
	// element, a 64-byte copy in 3 bytes, expands 21.3 times. A larger claim is corrupt and
	// is refused before the output is allocated.
	maxSnappyRatio = 22
)

// appendXerial appends raw snappy-compressed in xerial framing to dst.
func appendXerial(dst, raw []byte) []byte {
	dst = appendXerialHeader(dst)
	for len(raw) > 0 {
		chunk := raw[:min(len(raw), xerialBlockSize)]
		raw = raw[len(chunk):]
		dst = appendXerialBlock(dst, chunk)
	}
	return dst
}

// appendXerialHeader appends the xerial magic and versions.
func appendXerialHeader(dst []byte) []byte {
	dst = append(dst, xerialMagic...)
	dst = binary.BigEndian.AppendUint32(dst, 1)  // version
	return binary.BigEndian.AppendUint32(dst, 1) // minimum compatible version
}

// appendXerialBlock appends chunk (at most xerialBlockSize bytes) as one xerial block.
func appendXerialBlock(dst, chunk []byte) []byte {
	need := 4 + s2.MaxEncodedLen(len(chunk))
	if cap(dst)-len(dst) < need {
		// Doubling: a batch of many blocks is copied a bounded number of times.
		dst = slices.Grow(dst, max(cap(dst), need))
	}
	start := len(dst) + 4
	enc := s2.EncodeSnappy(dst[start:start+need-4], chunk)
	binary.BigEndian.PutUint32(dst[len(dst):start], uint32(len(enc)))
	return dst[:start+len(enc)]
}

// xerialWriter compresses what is written to it in xerial framing, a block of
// xerialBlockSize at a time, appending to out.
type xerialWriter struct {
	out     *appendWriter
	pending []byte
	started bool
}

func (w *xerialWriter) Write(p []byte) (int, error) {
	if !w.started {
		w.out.b, w.started = appendXerialHeader(w.out.b), true
	}
	n := len(p)
	for len(p) > 0 {
		take := min(len(p), xerialBlockSize-len(w.pending))
		w.pending = append(w.pending, p[:take]...)
		p = p[take:]
		if len(w.pending) == xerialBlockSize {
			w.out.b = appendXerialBlock(w.out.b, w.pending)
			w.pending = w.pending[:0]
		}
	}
	return n, nil
}

// Close writes the last, partial block.
func (w *xerialWriter) Close() error {
	if !w.started {
		w.out.b, w.started = appendXerialHeader(w.out.b), true
	}
	if len(w.pending) > 0 {
		w.out.b = appendXerialBlock(w.out.b, w.pending)
		w.pending = w.pending[:0]
	}
	return nil
}

// decodeSnappy decodes either snappy shape into dst[:0] (a new slice when dst is too small),
// failing past limit bytes of output before allocating them (each block states its decoded
// length up front).
func decodeSnappy(dst, data []byte, limit int) ([]byte, error) {
	if len(data) < len(xerialMagic) || !bytes.Equal(data[:len(xerialMagic)], xerialMagic) {
		n, err := snappyLen(data)
		if err != nil {
			return nil, err
		}
		if n > limit {
			return nil, errTooBig
		}
		if cap(dst) < n {
			dst = make([]byte, n)
		}
		return s2.Decode(dst[:n], data)
	}
	if len(data) < xerialHeaderSize {
		return nil, fmt.Errorf("xerial header of %d bytes", len(data))
	}
	// Size the output from the blocks' declared lengths first, so one allocation suffices.
	total := 0
	for p := xerialHeaderSize; p < len(data); {
		block, next, err := xerialBlock(data, p)
		if err != nil {
			return nil, err
		}
		n, err := snappyLen(block)
		if err != nil {
			return nil, err
		}
		if total += n; total > limit {
			return nil, errTooBig
		}
		p = next
	}
	out := dst[:0]
	if cap(out) < total {
		out = make([]byte, 0, total)
	}
	for p := xerialHeaderSize; p < len(data); {
		block, next, _ := xerialBlock(data, p) // checked above
		dec, err := s2.Decode(out[len(out):cap(out)], block)
		if err != nil {
			return nil, err
		}
		out = out[:len(out)+len(dec)]
		p = next
	}
	return out, nil
}

// xerialBlock returns the block whose length prefix is at data[p:] and the index after it.
func xerialBlock(data []byte, p int) (block []byte, next int, err error) {
	if len(data)-p < 4 {
		return nil, 0, fmt.Errorf("xerial block length cut short")
	}
	n := int64(binary.BigEndian.Uint32(data[p:]))
	p += 4
	if n > int64(len(data)-p) {
		return nil, 0, fmt.Errorf("xerial block of %d bytes with %d left", n, len(data)-p)
	}
	return data[p : p+int(n)], p + int(n), nil
}

// snappyLen is the decoded length a raw snappy block declares, refused when no snappy block
// of that size could produce it.
func snappyLen(block []byte) (int, error) {
	n, err := s2.DecodedLen(block)
	if err != nil {
		return 0, err
	}
	if n > maxSnappyRatio*len(block)+16 {
		return 0, fmt.Errorf("snappy block of %d bytes claims %d decoded bytes", len(block), n)
	}
	return n, nil
}

// decodeSnappyBlock decodes one raw snappy block into dst, whose length is the block's
// declared decoded length.
func decodeSnappyBlock(dst, block []byte) ([]byte, error) {
	return s2.Decode(dst, block)
}
