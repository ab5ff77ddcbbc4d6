package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ErrCorruptRecord is returned when bytes do not decode as a record, a batch or a snapshot:
// a truncated field, a count larger than the bytes that follow, an unknown record type or a
// version newer than this code understands.
var ErrCorruptRecord = errors.New("state: corrupt metadata record")

// Primitive encodings used by every record (all integers are varints, so small values stay
// small):
//
//	uvarint      unsigned LEB128 (encoding/binary.AppendUvarint)
//	varint       zig-zag signed LEB128 (encoding/binary.AppendVarint); int16/int32/int64
//	bool         one byte, 0 or 1
//	string       uvarint length, then the bytes
//	bytes        uvarint length, then the bytes (a nil and an empty slice both read as nil)
//	int8         varint, -128..127
//	uuid         16 raw bytes
//	int32 array  uvarint count, then count varints
//
// A decoder never allocates more than the bytes remaining could hold: an array count or a
// string length larger than the remaining input is ErrCorruptRecord before any allocation.

type encoder struct{ b []byte }

func (e *encoder) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) varint(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *encoder) int32(v int32)    { e.varint(int64(v)) }
func (e *encoder) int16(v int16)    { e.varint(int64(v)) }
func (e *encoder) bool(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}
func (e *encoder) string(s string) {
	e.uvarint(uint64(len(s)))
	e.b = append(e.b, s...)
}
func (e *encoder) uuid(u UUID) { e.b = append(e.b, u[:]...) }
func (e *encoder) int8(v int8) { e.varint(int64(v)) }
func (e *encoder) bytes(b []byte) {
	e.uvarint(uint64(len(b)))
	e.b = append(e.b, b...)
}
func (e *encoder) int32s(v []int32) {
	e.uvarint(uint64(len(v)))
	for _, x := range v {
		e.int32(x)
	}
}

// decoder reads primitives; the first failure sticks in err and every later read returns
// zero values, so record decoders check err once at the end.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: bad %s", ErrCorruptRecord, what)
	}
	d.b = nil
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) int32() int32 {
	v := d.varint()
	if v < math.MinInt32 || v > math.MaxInt32 {
		d.fail("int32")
		return 0
	}
	return int32(v)
}

func (d *decoder) int16() int16 {
	v := d.varint()
	if v < math.MinInt16 || v > math.MaxInt16 {
		d.fail("int16")
		return 0
	}
	return int16(v)
}

func (d *decoder) int8() int8 {
	v := d.varint()
	if v < math.MinInt8 || v > math.MaxInt8 {
		d.fail("int8")
		return 0
	}
	return int8(v)
}

func (d *decoder) bool() bool {
	if d.err != nil {
		return false
	}
	if len(d.b) == 0 || d.b[0] > 1 {
		d.fail("bool")
		return false
	}
	v := d.b[0] == 1
	d.b = d.b[1:]
	return v
}

// count reads an element count and checks that at least min bytes per element remain.
func (d *decoder) count(min int) int {
	n := d.uvarint()
	if d.err != nil {
		return 0
	}
	if n > uint64(len(d.b)/min) {
		d.fail("count")
		return 0
	}
	return int(n)
}

func (d *decoder) string() string {
	n := d.count(1)
	if d.err != nil {
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) bytes() []byte {
	n := d.count(1)
	if d.err != nil || n == 0 {
		return nil
	}
	b := append([]byte(nil), d.b[:n]...) // the record outlives the buffer it was read from
	d.b = d.b[n:]
	return b
}

func (d *decoder) uuid() UUID {
	var u UUID
	if d.err != nil {
		return u
	}
	if len(d.b) < len(u) {
		d.fail("uuid")
		return u
	}
	copy(u[:], d.b)
	d.b = d.b[len(u):]
	return u
}

func (d *decoder) int32s() []int32 {
	n := d.count(1)
	if d.err != nil || n == 0 {
		return nil
	}
	v := make([]int32, n)
	for i := range v {
		v[i] = d.int32()
	}
	if d.err != nil {
		return nil
	}
	return v
}
