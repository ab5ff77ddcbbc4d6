package batch

import (
	"bytes"
	"encoding/binary"
	"math/bits"
)

// Magic 0 LZ4 messages carry a broken LZ4 frame: Kafka's first LZ4 writer computed the frame
// descriptor's header checksum over the 4-byte frame magic as well as the descriptor
// (KAFKA-3160), and librdkafka copies that for magic 0. Kafka's reader ignores the checksum for
// magic 0; our frame reader verifies it, so UpConvert rewrites it before decoding.
//
// LZ4 frame start: magic 04 22 4D 18, FLG, BD, [content size, 8 bytes, if FLG bit 3],
// [dictionary id, 4 bytes, if FLG bit 0], HC = (xxh32(descriptor, seed 0) >> 8) & 0xff where
// the descriptor is FLG through the optional fields.

var lz4FrameMagic = []byte{0x04, 0x22, 0x4d, 0x18}

// fixLZ4HeaderChecksum returns a copy of frame with a correct header checksum, or frame
// itself when it does not start like an LZ4 frame (the decoder then reports it).
func fixLZ4HeaderChecksum(frame []byte) []byte {
	if len(frame) < 7 || !bytes.Equal(frame[:4], lz4FrameMagic) {
		return frame
	}
	flg := frame[4]
	end := 6
	if flg&0x08 != 0 {
		end += 8
	}
	if flg&0x01 != 0 {
		end += 4
	}
	if len(frame) <= end {
		return frame
	}
	out := bytes.Clone(frame)
	out[end] = byte(xxh32Short(out[4:end]) >> 8)
	return out
}

// xxh32Short is XXH32 with seed 0 for inputs shorter than 16 bytes (the only case a frame
// descriptor needs), following the published XXH32 specification.
func xxh32Short(b []byte) uint32 {
	const (
		p1 = 2654435761
		p2 = 2246822519
		p3 = 3266489917
		p4 = 668265263
		p5 = 374761393
	)
	h := uint32(p5) + uint32(len(b))
	for ; len(b) >= 4; b = b[4:] {
		h += binary.LittleEndian.Uint32(b) * p3
		h = bits.RotateLeft32(h, 17) * p4
	}
	for _, c := range b {
		h += uint32(c) * p5
		h = bits.RotateLeft32(h, 11) * p1
	}
	h ^= h >> 15
	h *= p2
	h ^= h >> 13
	h *= p3
	h ^= h >> 16
	return h
}
