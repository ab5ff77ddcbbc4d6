package batch

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"
)

func seedBatches(t testing.TB) [][]byte {
	var seeds [][]byte
	for _, c := range allCodecs {
		for _, n := range []int{1, 3} {
			seeds = append(seeds, mustBuild(t, freshHeader(n), sampleRecords(n), c))
		}
	}
	seeds = append(seeds, rawBatch(rawRecord(0, []byte("k"), []byte("v"), 1, []byte{2, 'h', 0}), 1, 0))
	return seeds
}

func seedLegacy(t testing.TB) [][]byte {
	inner := append(v1Message(0, 0, 100, []byte("k1"), []byte("one")), v1Message(1, 0, 200, nil, []byte("two"))...)
	inner0 := append(v0Message(0, 0, []byte("a"), []byte("1")), v0Message(1, 0, nil, nil)...)
	return [][]byte{
		inner,
		inner0,
		v1Message(1, int8(CodecGzip), 200, nil, legacyCompress(t, CodecGzip, inner)),
		v1Message(1, int8(CodecSnappy)|AttrLogAppendTime, 200, nil, legacyCompress(t, CodecSnappy, inner)),
		v1Message(1, int8(CodecLZ4), 200, nil, legacyCompress(t, CodecLZ4, inner)),
		v0Message(1, int8(CodecGzip), nil, legacyCompress(t, CodecGzip, inner0)),
		v0Message(1, int8(CodecLZ4), nil, legacyCompress(t, CodecLZ4, inner0)),
	}
}

// FuzzValidate: no input panics; what Validate accepts, Records decodes into exactly
// recordCount records, and rebuilding those records gives a valid batch with equal records.
// Each input is also tried with its CRC fixed, so the fuzzer gets past the checksum.
func FuzzValidate(f *testing.F) {
	for _, b := range seedBatches(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkValidateInvariants(t, b)
		if len(b) >= HeaderSize {
			fixed := bytes.Clone(b)
			fixCRC(fixed)
			checkValidateInvariants(t, fixed)
		}
	})
}

func checkValidateInvariants(t *testing.T, b []byte) {
	_, _ = ParseHeader(b)
	_, _ = CheckCRC(b)
	recs, recErr := Records(b)
	h, err := Validate(b)
	if err != nil {
		return
	}
	if _, err := CheckCRC(b); err != nil {
		t.Fatalf("Validate ok but CheckCRC: %v", err)
	}
	_, vrErr := ValidateRecords(b)
	if h.Codec() != CodecNone {
		// The stream walk (batches past the in-memory limit) and the in-memory one agree.
		if streamErr := walkRecordsSection(h.Codec(), b[HeaderSize:], h.RecordCount, nil); (streamErr == nil) != (vrErr == nil) {
			t.Fatalf("ValidateRecords: %v, but the stream walk: %v", vrErr, streamErr)
		}
	}
	if vrErr != nil {
		if h.Codec() == CodecNone {
			t.Fatalf("uncompressed: Validate ok but ValidateRecords: %v", vrErr)
		}
		return // a compressed payload Validate does not open
	}
	n := 0
	if err := EachRecord(b, func(_ int64, delta int32) bool {
		if delta != int32(n) {
			t.Fatalf("EachRecord: record %d has offset delta %d", n, delta)
		}
		n++
		return true
	}); err != nil || n != int(h.RecordCount) {
		t.Fatalf("EachRecord: %d records, %v", n, err)
	}
	for _, c := range allCodecs {
		out, err := Recompress(b, c)
		if err != nil {
			t.Fatalf("Recompress to %v: %v", c, err)
		}
		if _, err := ValidateRecords(out); err != nil {
			t.Fatalf("Recompress to %v: %v", c, err)
		}
	}
	if recErr != nil {
		t.Fatalf("ValidateRecords ok but Records: %v", recErr)
	}
	if len(recs) != int(h.RecordCount) {
		t.Fatalf("%d records, header says %d", len(recs), h.RecordCount)
	}
	for _, c := range []Codec{CodecNone, CodecLZ4} {
		rebuilt, err := Build(h, recs, c)
		if err != nil {
			t.Fatalf("Build of decoded records: %v", err)
		}
		if _, err := Validate(rebuilt); err != nil {
			t.Fatalf("rebuilt batch invalid: %v", err)
		}
		again, err := Records(rebuilt)
		if err != nil {
			t.Fatal(err)
		}
		recordsEqual(t, again, recs)
	}
}

// FuzzSplit: no input panics, and accepted input is partitioned exactly.
func FuzzSplit(f *testing.F) {
	var all []byte
	for _, b := range seedBatches(f) {
		f.Add(b)
		all = append(all, b...)
	}
	f.Add(all)
	f.Add(append(v1Message(0, 0, 1, nil, []byte("x")), v1Message(1, 0, 2, []byte("k"), nil)...))
	f.Fuzz(func(t *testing.T, b []byte) {
		parts, err := Split(b)
		if err != nil {
			return
		}
		var joined []byte
		for _, p := range parts {
			m, err := Magic(p)
			if err != nil {
				t.Fatalf("part without a magic: %v", err)
			}
			if m == 2 {
				if h, err := ParseHeader(p); err != nil || h.Size() != len(p) {
					t.Fatalf("v2 part of %d bytes: %+v %v", len(p), h, err)
				}
			} else if len(parts) != 1 {
				t.Fatalf("legacy set split into %d parts", len(parts))
			}
			joined = append(joined, p...)
		}
		if !bytes.Equal(joined, b) {
			t.Fatalf("parts do not rebuild the input")
		}
	})
}

// FuzzUpConvert: no input panics, and what converts is a valid v2 batch. Outer CRCs are
// fixed up so the fuzzer reaches the message bodies.
func FuzzUpConvert(f *testing.F) {
	for _, b := range seedLegacy(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, in := range [][]byte{b, fixLegacyCRCs(bytes.Clone(b))} {
			out, err := UpConvert(in)
			if err != nil {
				continue
			}
			h, err := ValidateRecords(out)
			if err != nil {
				t.Fatalf("UpConvert produced an invalid batch: %v", err)
			}
			down, err := DownConvert(out, 1)
			if err != nil {
				t.Fatalf("DownConvert of an up-converted batch: %v", err)
			}
			if _, err := UpConvert(down); err != nil {
				t.Fatalf("UpConvert of DownConvert output (%d records): %v", h.RecordCount, err)
			}
		}
	})
}

// fixLegacyCRCs rewrites the CRC of every outer legacy entry whose framing holds.
func fixLegacyCRCs(b []byte) []byte {
	for p := b; len(p) >= 17; {
		n := int64(int32(binary.BigEndian.Uint32(p[8:]))) + 12
		if n < 17 || n > int64(len(p)) {
			break
		}
		binary.BigEndian.PutUint32(p[12:], crc32.ChecksumIEEE(p[16:n]))
		p = p[n:]
	}
	return b
}

// FuzzDecompress: no input panics and no output exceeds the cap.
func FuzzDecompress(f *testing.F) {
	for _, c := range allCodecs {
		z, _ := Compress(c, []byte("hello hello hello hello"))
		f.Add(uint8(c), z)
	}
	f.Add(uint8(CodecSnappy), []byte("\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x03\x02\x04x"))
	f.Fuzz(func(t *testing.T, c uint8, data []byte) {
		out, err := Decompress(Codec(c%8), data)
		if err == nil && len(out) > MaxDecompressedSize {
			t.Fatalf("%d bytes out", len(out))
		}
	})
}
