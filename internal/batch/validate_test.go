package batch

import (
	"encoding/binary"
	"errors"
	"testing"
)

// Flipping any bit the CRC covers, or the CRC itself, must be caught as ErrBadCRC.
func TestValidateCRCFlip(t *testing.T) {
	for _, c := range allCodecs {
		b := mustBuild(t, freshHeader(20), sampleRecords(20), c)
		for i := 17; i < len(b); i++ {
			for _, bit := range []byte{0x01, 0x80} {
				b[i] ^= bit
				_, err := Validate(b)
				b[i] ^= bit
				if !errors.Is(err, ErrBadCRC) {
					t.Fatalf("%v: flip %#x at byte %d: %v", c, bit, i, err)
				}
			}
		}
		if _, err := Validate(b); err != nil {
			t.Fatalf("%v: restored batch: %v", c, err)
		}
	}
}

func TestValidateRejects(t *testing.T) {
	good := rawRecord(0, []byte("k"), []byte("v"), 0, nil)
	two := append(rawRecord(0, nil, []byte("a"), 0, nil), rawRecord(1, nil, []byte("b"), 0, nil)...)
	header := func(key []byte, valueLen int64) []byte {
		h := zz(nil, int64(len(key)))
		h = append(h, key...)
		return zz(h, valueLen)
	}
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrCorrupt},
		{"short header", rawBatch(good, 1, 0)[:60], ErrCorrupt},
		{"truncated", rawBatch(good, 1, 0)[:61+len(good)-1], ErrCorrupt},
		{"trailing byte", append(rawBatch(good, 1, 0), 0), ErrCorrupt},
		{"batch length below header", patch(rawBatch(good, 1, 0), 8, 48), ErrCorrupt},
		{"negative batch length", patch(rawBatch(good, 1, 0), 8, -1), ErrCorrupt},
		{"huge batch length", patch(rawBatch(good, 1, 0), 8, 0x7fffffff), ErrCorrupt},
		{"magic 1", patchByte(rawBatch(good, 1, 0), 16, 1), ErrUnsupportedMagic},
		{"magic 3", patchByte(rawBatch(good, 1, 0), 16, 3), ErrUnsupportedMagic},
		{"codec 5", fixed(patchByte(rawBatch(good, 1, 0), 22, 5)), ErrUnknownCodec},
		{"codec 7", fixed(patchByte(rawBatch(good, 1, 0), 22, 7)), ErrUnknownCodec},
		{"zero records", rawBatch(nil, 0, -1), ErrInvalidRecord},
		{"negative count", rawBatch(good, -1, -2), ErrInvalidRecord},
		{"count above offset range", rawBatch(two, 2, 0), ErrInvalidRecord},
		{"count below offset range", rawBatch(good, 1, 1), ErrInvalidRecord},
		{"huge count", rawBatch(good, 0x7fffffff, 0x7ffffffe), ErrInvalidRecord},
		{"fewer records than count", rawBatch(good, 2, 1), ErrInvalidRecord},
		{"bytes after the records", rawBatch(append(good, 0), 1, 0), ErrInvalidRecord},
		{"offset delta out of order", rawBatch(append(rawRecord(1, nil, nil, 0, nil), rawRecord(0, nil, nil, 0, nil)...), 2, 1), ErrInvalidRecord},
		{"offset delta gap", rawBatch(append(rawRecord(0, nil, nil, 0, nil), rawRecord(2, nil, nil, 0, nil)...), 2, 1), ErrInvalidRecord},
		{"record length past end", rawBatch(append(zz(nil, 100), good[1:]...), 1, 0), ErrInvalidRecord},
		{"record length negative", rawBatch(append(zz(nil, -5), good[1:]...), 1, 0), ErrInvalidRecord},
		{"record length short", rawBatch(append(zz(nil, int64(len(good)-2)), good[1:]...), 1, 0), ErrInvalidRecord},
		{"record length long", rawBatch(append(append(zz(nil, int64(len(good))), good[1:]...), 0), 1, 0), ErrInvalidRecord},
		{"varint 6 bytes", rawBatch(append([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, good[1:]...), 1, 0), ErrInvalidRecord},
		{"varint overflows int32", rawBatch(append([]byte{0x80, 0x80, 0x80, 0x80, 0x10}, good[1:]...), 1, 0), ErrInvalidRecord},
		{"key length huge", rawBatch(rawRecordKeyLen(0x3fffffff), 1, 0), ErrInvalidRecord},
		{"key length -2", rawBatch(rawRecordKeyLen(-2), 1, 0), ErrInvalidRecord},
		{"header count negative", rawBatch(rawRecord(0, nil, nil, -1, nil), 1, 0), ErrInvalidRecord},
		{"header count huge", rawBatch(rawRecord(0, nil, nil, 0x3fffffff, header([]byte("k"), 1)), 1, 0), ErrInvalidRecord},
		{"header key null", rawBatch(rawRecord(0, nil, nil, 1, append(zz(nil, -1), zz(nil, -1)...)), 1, 0), ErrInvalidRecord},
		{"header value past record", rawBatch(rawRecord(0, nil, nil, 1, header([]byte("k"), 9)), 1, 0), ErrInvalidRecord},
	}
	for _, tc := range cases {
		if _, err := Validate(tc.b); !errors.Is(err, tc.want) {
			t.Errorf("%s: Validate = %v, want %v", tc.name, err, tc.want)
		}
		if _, err := Records(tc.b); err == nil && tc.want != ErrInvalidRecord {
			t.Errorf("%s: Records accepted a batch Validate rejects for framing", tc.name)
		}
	}

	// The same shapes, well formed, pass: the cases above fail for the reason named.
	for _, b := range [][]byte{
		rawBatch(good, 1, 0),
		rawBatch(two, 2, 1),
		rawBatch(rawRecord(0, nil, nil, 1, header([]byte("k"), 0)), 1, 0),
		rawBatch(rawRecord(0, nil, nil, 1, header([]byte(""), -1)), 1, 0),
		rawBatch(append([]byte{0x80 | byte(len(good)-1)<<1, 0x00}, good[1:]...), 1, 0), // non-minimal varint
	} {
		if _, err := Validate(b); err != nil {
			t.Errorf("well-formed batch rejected: %v", err)
		}
	}
}

// rawRecordKeyLen is a record whose key length field says n but holds one byte.
func rawRecordKeyLen(n int64) []byte {
	body := []byte{0}
	body = zz(body, 0)
	body = zz(body, 0)
	body = zz(body, n)
	body = append(body, 'k')
	body = zz(body, -1)
	body = zz(body, 0)
	return append(zz(nil, int64(len(body))), body...)
}

func patch(b []byte, off int, v int32) []byte {
	binary.BigEndian.PutUint32(b[off:], uint32(v))
	return b
}

func patchByte(b []byte, off int, v byte) []byte {
	b[off] = v
	return b
}

func fixed(b []byte) []byte { fixCRC(b); return b }

func TestValidateDoesNotAllocate(t *testing.T) {
	b := mustBuild(t, freshHeader(100), sampleRecords(100), CodecNone)
	z := mustBuild(t, freshHeader(100), sampleRecords(100), CodecZstd)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := Validate(b); err != nil {
			t.Fatal(err)
		}
		if _, err := Validate(z); err != nil {
			t.Fatal(err)
		}
		if _, err := ParseHeader(b); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Validate allocates %v times per run", allocs)
	}
}

// A compressed batch whose payload does not decompress passes Validate (which does not
// decompress) but not ValidateRecords.
func TestValidateRecordsDecompresses(t *testing.T) {
	for _, c := range allCodecs[1:] {
		b := mustBuild(t, freshHeader(3), sampleRecords(3), c)
		for i := HeaderSize; i < len(b); i++ {
			b[i] = 0xAA
		}
		fixCRC(b)
		if _, err := Validate(b); err != nil {
			t.Fatalf("%v: Validate: %v", c, err)
		}
		if _, err := ValidateRecords(b); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%v: ValidateRecords of garbage: %v", c, err)
		}
		// Well-compressed but with records out of order.
		recs := sampleRecords(3)
		recs[0].OffsetDelta, recs[1].OffsetDelta = 1, 0
		b = mustBuild(t, freshHeader(3), recs, c)
		if _, err := ValidateRecords(b); !errors.Is(err, ErrInvalidRecord) {
			t.Fatalf("%v: ValidateRecords with swapped offset deltas: %v", c, err)
		}
	}
}

func TestParseHeader(t *testing.T) {
	b := mustBuild(t, freshHeader(3), sampleRecords(3), CodecNone)
	h, err := ParseHeader(b[:HeaderSize]) // a prefix parses
	if err != nil || h.RecordCount != 3 || h.Size() != len(b) || h.LastOffset() != 2 || h.LastSequence() != 44 {
		t.Fatalf("%+v %v", h, err)
	}
}
