package batch

import "encoding/binary"

// Kafka's record fields use zig-zag encoded LEB128 varints (protobuf's sint32/sint64): an
// int32 takes at most 5 bytes and an int64 at most 10. Non-minimal encodings are accepted, as
// Kafka accepts them; bits that do not fit the declared width are corrupt.

// varint32 decodes a zig-zag varint of at most 5 bytes from b[i:]. It returns the value and the
// index just past it, or next < 0 when b ends first or the value does not fit in an int32.
func varint32(b []byte, i int) (v int32, next int) {
	if i < len(b) && b[i] < 0x80 { // one byte: the common case for deltas and small lengths
		u := uint32(b[i])
		return int32(u>>1) ^ -int32(u&1), i + 1
	}
	if i+1 < len(b) && b[i+1] < 0x80 && i >= 0 { // two bytes: lengths up to 8191
		u := uint32(b[i]&0x7f) | uint32(b[i+1])<<7
		return int32(u>>1) ^ -int32(u&1), i + 2
	}
	return varint32Slow(b, i)
}

func varint32Slow(b []byte, i int) (v int32, next int) {
	var u uint32
	for s := uint(0); s < 35; s += 7 {
		if i >= len(b) {
			return 0, -1
		}
		c := b[i]
		i++
		if s == 28 && c > 0x0f {
			return 0, -1 // continuation or bits beyond 32
		}
		u |= uint32(c&0x7f) << s
		if c < 0x80 {
			return int32(u>>1) ^ -int32(u&1), i
		}
	}
	return 0, -1
}

// varint64 decodes a zig-zag varint of at most 10 bytes from b[i:], like varint32.
func varint64(b []byte, i int) (v int64, next int) {
	if i < len(b) && b[i] < 0x80 {
		u := uint64(b[i])
		return int64(u>>1) ^ -int64(u&1), i + 1
	}
	var u uint64
	for s := uint(0); s < 70; s += 7 {
		if i >= len(b) {
			return 0, -1
		}
		c := b[i]
		i++
		if s == 63 && c > 0x01 {
			return 0, -1
		}
		u |= uint64(c&0x7f) << s
		if c < 0x80 {
			return int64(u>>1) ^ -int64(u&1), i
		}
	}
	return 0, -1
}

// appendVarint appends v zig-zag encoded.
func appendVarint(dst []byte, v int64) []byte {
	return binary.AppendUvarint(dst, uint64(v<<1)^uint64(v>>63))
}

// sizeVarint is the encoded length of v zig-zag encoded.
func sizeVarint(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}
