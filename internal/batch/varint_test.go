package batch

import (
	"encoding/binary"
	"math"
	"testing"
)

func TestVarintAgainstStdlib(t *testing.T) {
	vals := []int64{0, 1, -1, 63, -64, 64, -65, 8191, 8192, math.MaxInt32, math.MinInt32, math.MaxInt64, math.MinInt64}
	for s := 0; s < 64; s++ {
		vals = append(vals, 1<<s, -(1 << s), 1<<s-1)
	}
	for _, v := range vals {
		enc := binary.AppendVarint([]byte{0xee}, v) // stdlib zig-zag, at index 1
		if got := appendVarint([]byte{0xee}, v); string(got) != string(enc) {
			t.Fatalf("appendVarint(%d) = % x, want % x", v, got, enc)
		}
		if sizeVarint(v) != len(enc)-1 {
			t.Fatalf("sizeVarint(%d) = %d, want %d", v, sizeVarint(v), len(enc)-1)
		}
		if got, next := varint64(enc, 1); got != v || next != len(enc) {
			t.Fatalf("varint64(% x) = %d, %d", enc, got, next)
		}
		got, next := varint32(enc, 1)
		if v >= math.MinInt32 && v <= math.MaxInt32 {
			if got != int32(v) || next != len(enc) {
				t.Fatalf("varint32(% x) = %d, %d", enc, got, next)
			}
		} else if next >= 0 {
			t.Fatalf("varint32 accepted %d (% x) as %d", v, enc, got)
		}
		for cut := 1; cut < len(enc); cut++ { // every truncation fails
			if _, next := varint64(enc[:cut], 1); next >= 0 {
				t.Fatalf("varint64 read a value from truncated % x", enc[:cut])
			}
		}
	}
	for _, bad := range [][]byte{
		{0x80, 0x80, 0x80, 0x80, 0x10},       // int32 past 32 bits
		{0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, // int32 over 5 bytes
	} {
		if _, next := varint32(bad, 0); next >= 0 {
			t.Fatalf("varint32 accepted % x", bad)
		}
	}
	if _, next := varint64([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02}, 0); next >= 0 {
		t.Fatal("varint64 accepted bits past 64")
	}
	if v, next := varint32([]byte{0x80, 0x00}, 0); v != 0 || next != 2 {
		t.Fatal("non-minimal encoding of 0 refused")
	}
}
