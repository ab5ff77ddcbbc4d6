package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy/xerial"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// legacyMsg encodes one legacy entry by hand; ts is written only for magic 1.
func legacyMsg(magic int8, offset int64, attrs int8, ts int64, key, value []byte) []byte {
	var body []byte
	body = append(body, byte(magic), byte(attrs))
	if magic == 1 {
		body = binary.BigEndian.AppendUint64(body, uint64(ts))
	}
	for _, f := range [][]byte{key, value} {
		if f == nil {
			body = binary.BigEndian.AppendUint32(body, 0xffffffff)
		} else {
			body = append(binary.BigEndian.AppendUint32(body, uint32(len(f))), f...)
		}
	}
	b := binary.BigEndian.AppendUint64(nil, uint64(offset))
	b = binary.BigEndian.AppendUint32(b, uint32(4+len(body)))
	b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(body))
	return append(b, body...)
}

func v0Message(offset int64, attrs int8, key, value []byte) []byte {
	return legacyMsg(0, offset, attrs, 0, key, value)
}

func v1Message(offset int64, attrs int8, ts int64, key, value []byte) []byte {
	return legacyMsg(1, offset, attrs, ts, key, value)
}

// legacyCompress compresses an inner message set with the libraries directly, the way the
// Java client does (xerial-framed snappy, LZ4 frame).
func legacyCompress(t testing.TB, c Codec, raw []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	switch c {
	case CodecGzip:
		w := gzip.NewWriter(&buf)
		w.Write(raw)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	case CodecSnappy:
		return xerial.Encode(nil, raw)
	case CodecLZ4:
		w := lz4.NewWriter(&buf)
		w.Write(raw)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("codec %v", c)
	}
	return buf.Bytes()
}

type legacyWant struct {
	key, value []byte
	ts         int64
}

func checkUpConverted(t *testing.T, b []byte, codec Codec, lat bool, want []legacyWant) {
	t.Helper()
	h, err := ValidateRecords(b)
	if err != nil {
		t.Fatalf("ValidateRecords: %v", err)
	}
	if h.Codec() != codec || (h.Attributes&AttrLogAppendTime != 0) != lat {
		t.Fatalf("attributes %#x, want codec %v lat %v", h.Attributes, codec, lat)
	}
	if h.ProducerID != -1 || h.ProducerEpoch != -1 || h.BaseSequence != -1 || h.BaseOffset != 0 || h.PartitionLeaderEpoch != -1 {
		t.Fatalf("producer fields %+v", h)
	}
	recs, err := Records(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(want) {
		t.Fatalf("%d records, want %d", len(recs), len(want))
	}
	maxTs := want[0].ts
	for i, w := range want {
		r := recs[i]
		sameBytes(t, "key", r.Key, w.key)
		sameBytes(t, "value", r.Value, w.value)
		if ts := h.BaseTimestamp + r.TimestampDelta; ts != w.ts {
			t.Fatalf("record %d timestamp %d, want %d", i, ts, w.ts)
		}
		if r.OffsetDelta != int32(i) || r.Headers != nil {
			t.Fatalf("record %d: %+v", i, r)
		}
		maxTs = max(maxTs, w.ts)
	}
	if h.MaxTimestamp != maxTs {
		t.Fatalf("maxTimestamp %d, want %d", h.MaxTimestamp, maxTs)
	}
}

// noTimestamp is what an up-converted magic 0 message carries: -1, as Kafka's LogValidator
// leaves NO_TIMESTAMP (a v2 consumer of a v0 producer's records reads -1, not a broker time).
const noTimestamp = int64(-1)

func TestUpConvertUncompressed(t *testing.T) {
	v0 := append(v0Message(0, 0, []byte("k0"), []byte("v0")), v0Message(1, 0, nil, nil)...)
	b, err := UpConvert(v0)
	if err != nil {
		t.Fatal(err)
	}
	checkUpConverted(t, b, CodecNone, false, []legacyWant{{[]byte("k0"), []byte("v0"), noTimestamp}, {nil, nil, noTimestamp}})

	v1 := append(v1Message(0, 0, 2000, []byte("a"), []byte{}), v1Message(1, 0, 1000, nil, []byte("b"))...)
	v1 = append(v1, v1Message(2, 0, 3000, []byte{}, []byte("c"))...)
	b, err = UpConvert(v1)
	if err != nil {
		t.Fatal(err)
	}
	checkUpConverted(t, b, CodecNone, false, []legacyWant{{[]byte("a"), []byte{}, 2000}, {nil, []byte("b"), 1000}, {[]byte{}, []byte("c"), 3000}})

	lat := v1Message(0, AttrLogAppendTime, 4000, nil, []byte("x"))
	b, err = UpConvert(lat)
	if err != nil {
		t.Fatal(err)
	}
	checkUpConverted(t, b, CodecNone, true, []legacyWant{{nil, []byte("x"), 4000}})
}

func TestUpConvertCompressed(t *testing.T) {
	for _, c := range []Codec{CodecGzip, CodecSnappy, CodecLZ4} {
		// magic 1: inner offsets relative, wrapper offset is the last inner offset.
		inner := append(v1Message(0, 0, 100, []byte("k1"), []byte("one")), v1Message(1, 0, 200, nil, []byte("two"))...)
		inner = append(inner, v1Message(2, 0, 150, []byte("k3"), nil)...)
		set := v1Message(2, int8(c), 200, nil, legacyCompress(t, c, inner))
		set = append(set, v1Message(3, 0, 300, []byte("plain"), []byte("four"))...)
		b, err := UpConvert(set)
		if err != nil {
			t.Fatalf("%v: %v", c, err)
		}
		checkUpConverted(t, b, c, false, []legacyWant{
			{[]byte("k1"), []byte("one"), 100}, {nil, []byte("two"), 200}, {[]byte("k3"), nil, 150}, {[]byte("plain"), []byte("four"), 300},
		})

		// LogAppendTime wrapper: its timestamp is every inner message's.
		set = v1Message(2, int8(c)|AttrLogAppendTime, 9999, nil, legacyCompress(t, c, inner))
		b, err = UpConvert(set)
		if err != nil {
			t.Fatalf("%v lat: %v", c, err)
		}
		checkUpConverted(t, b, c, true, []legacyWant{{[]byte("k1"), []byte("one"), 9999}, {nil, []byte("two"), 9999}, {[]byte("k3"), nil, 9999}})
	}

	// magic 0 gzip wrapper: absolute inner offsets, no timestamps.
	inner := append(v0Message(10, 0, []byte("a"), []byte("1")), v0Message(11, 0, []byte("b"), []byte("2"))...)
	set := v0Message(11, int8(CodecGzip), nil, legacyCompress(t, CodecGzip, inner))
	b, err := UpConvert(set)
	if err != nil {
		t.Fatal(err)
	}
	checkUpConverted(t, b, CodecGzip, false, []legacyWant{{[]byte("a"), []byte("1"), noTimestamp}, {[]byte("b"), []byte("2"), noTimestamp}})
}

func TestUpConvertRejects(t *testing.T) {
	good := v1Message(0, 0, 1, []byte("k"), []byte("v"))
	badCRC := bytes.Clone(good)
	badCRC[len(badCRC)-1] ^= 1
	innerBad := bytes.Clone(good)
	innerBad[20] ^= 0x40 // in the timestamp
	nested := v1Message(0, int8(CodecGzip), 1, nil, legacyCompress(t, CodecGzip, good))
	cases := map[string]struct {
		b    []byte
		want error
	}{
		"empty":             {nil, ErrInvalidRecord},
		"bad crc":           {badCRC, ErrBadCRC},
		"bad inner crc":     {v1Message(0, int8(CodecGzip), 1, nil, legacyCompress(t, CodecGzip, innerBad)), ErrBadCRC},
		"nested":            {v1Message(0, int8(CodecGzip), 1, nil, legacyCompress(t, CodecGzip, nested)), ErrCorrupt},
		"inner magic":       {v1Message(0, int8(CodecGzip), 1, nil, legacyCompress(t, CodecGzip, v0Message(0, 0, nil, []byte("x")))), ErrCorrupt},
		"mixed magic":       {append(bytes.Clone(good), v0Message(1, 0, nil, []byte("x"))...), ErrCorrupt},
		"null wrapper":      {v1Message(0, int8(CodecGzip), 1, nil, nil), ErrCorrupt},
		"garbage wrapper":   {v1Message(0, int8(CodecGzip), 1, nil, []byte("not gzip")), ErrCorrupt},
		"empty wrapper":     {v1Message(0, int8(CodecGzip), 1, nil, legacyCompress(t, CodecGzip, nil)), ErrCorrupt},
		"zstd wrapper":      {v1Message(0, int8(CodecZstd), 1, nil, []byte("x")), ErrUnknownCodec},
		"cut short":         {good[:len(good)-1], ErrCorrupt},
		"trailing":          {append(bytes.Clone(good), 0, 0), ErrCorrupt},
		"v2 batch":          {mustBuild(t, freshHeader(1), sampleRecords(1), CodecNone), ErrCorrupt},
		"key past end":      {legacyFix(patch(bytes.Clone(good), 26, 1000)), ErrCorrupt},
		"size below header": {patch(bytes.Clone(good), 8, 10), ErrCorrupt},
		"slack in message":  {legacyFix(patch(append(bytes.Clone(good), 0), 8, int32(len(good)-12+1))), ErrCorrupt},
	}
	for name, tc := range cases {
		if _, err := UpConvert(tc.b); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
}

// legacyFix recomputes a legacy message's CRC after patching it.
func legacyFix(b []byte) []byte {
	binary.BigEndian.PutUint32(b[12:], crc32.ChecksumIEEE(b[16:]))
	return b
}

// Many small wrappers each inflating a lot must not together exceed the cap.
func TestUpConvertDecompressionBudget(t *testing.T) {
	big := bytes.Repeat([]byte{0}, 20<<20)
	inner := v1Message(0, 0, 1, nil, big)
	w := v1Message(0, int8(CodecGzip), 1, nil, legacyCompress(t, CodecGzip, inner))
	var set []byte
	for range 4 {
		set = append(set, w...)
	}
	if _, err := UpConvert(set[:len(w)*3]); err != nil {
		t.Fatalf("60 MiB total: %v", err)
	}
	if _, err := UpConvert(set); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("80 MiB total: %v", err)
	}
}

func TestDownConvert(t *testing.T) {
	recs := sampleRecords(7)
	var log []byte
	base := int64(100)
	var want []legacyWantOff
	two := 0 // bytes of the first two batches
	for i, c := range allCodecs {
		h := freshHeader(len(recs))
		b := mustBuild(t, h, recs, c)
		SetBaseOffset(b, base)
		if i == 2 {
			SetLogAppendTime(b, 5555)
		}
		for _, r := range recs {
			ts := h.BaseTimestamp + r.TimestampDelta
			if i == 2 {
				ts = 5555
			}
			want = append(want, legacyWantOff{base + int64(r.OffsetDelta), r.Key, r.Value, ts, i == 2})
		}
		log = append(log, b...)
		if i == 1 {
			two = len(log)
		}
		base += int64(len(recs))
		if i == 3 { // a control batch (transaction marker) is skipped
			ch := freshHeader(1)
			ch.Attributes = AttrControl | AttrTransactional
			cb := mustBuild(t, ch, []Record{{Key: []byte{0, 0, 0, 1}, Value: []byte{0, 0, 0, 0, 0, 0}}}, CodecNone)
			SetBaseOffset(cb, base)
			base++
			log = append(log, cb...)
		}
	}
	// A fetch read that stopped inside the last batch.
	tail := mustBuild(t, freshHeader(1), sampleRecords(1), CodecNone)
	log = append(log, tail[:len(tail)-5]...)

	for _, magic := range []int8{0, 1} {
		set, err := DownConvert(log, magic)
		if err != nil {
			t.Fatalf("magic %d: %v", magic, err)
		}
		// Read back with franz-go's message types.
		i := 0
		for p := set; len(p) > 0; i++ {
			if i >= len(want) {
				t.Fatalf("magic %d: more messages than records", magic)
			}
			w := want[i]
			var offset int64
			var size int32
			var crc int32
			var key, value []byte
			var attrs int8
			var ts int64
			if magic == 0 {
				var m kmsg.MessageV0
				if err := m.ReadFrom(p); err != nil {
					t.Fatal(err)
				}
				offset, size, crc, key, value, attrs = m.Offset, m.MessageSize, m.CRC, m.Key, m.Value, m.Attributes
				if m.Magic != 0 {
					t.Fatalf("magic %d", m.Magic)
				}
			} else {
				var m kmsg.MessageV1
				if err := m.ReadFrom(p); err != nil {
					t.Fatal(err)
				}
				offset, size, crc, key, value, attrs, ts = m.Offset, m.MessageSize, m.CRC, m.Key, m.Value, m.Attributes, m.Timestamp
				if m.Magic != 1 {
					t.Fatalf("magic %d", m.Magic)
				}
				if ts != w.ts {
					t.Fatalf("message %d timestamp %d, want %d", i, ts, w.ts)
				}
			}
			if uint32(crc) != crc32.ChecksumIEEE(p[16:12+size]) {
				t.Fatalf("message %d: bad crc", i)
			}
			wantAttrs := int8(0)
			if magic == 1 && w.lat {
				wantAttrs = AttrLogAppendTime
			}
			if offset != w.offset || attrs != wantAttrs {
				t.Fatalf("message %d: offset %d attrs %d, want %d %d", i, offset, attrs, w.offset, wantAttrs)
			}
			sameBytes(t, "key", key, w.key)
			sameBytes(t, "value", value, w.value)
			p = p[12+size:]
		}
		if i != len(want) {
			t.Fatalf("magic %d: %d messages, want %d", magic, i, len(want))
		}
	}

	// Up-converting again restores keys, values and (for magic 1) timestamps. The first two
	// batches are CreateTime, so every record keeps its own timestamp.
	for _, magic := range []int8{0, 1} {
		set, err := DownConvert(log[:two], magic)
		if err != nil {
			t.Fatal(err)
		}
		up, err := UpConvert(set)
		if err != nil {
			t.Fatalf("magic %d: UpConvert: %v", magic, err)
		}
		var lw []legacyWant
		for _, w := range want[:2*len(recs)] {
			ts := noTimestamp
			if magic == 1 {
				ts = w.ts
			}
			lw = append(lw, legacyWant{w.key, w.value, ts})
		}
		checkUpConverted(t, up, CodecNone, false, lw)
	}

	if _, err := DownConvert(log, 2); !errors.Is(err, ErrUnsupportedMagic) {
		t.Fatalf("magic 2: %v", err)
	}
	bad := bytes.Clone(log)
	bad[16] = 1
	if _, err := DownConvert(bad, 1); !errors.Is(err, ErrUnsupportedMagic) {
		t.Fatalf("legacy input: %v", err)
	}
}

type legacyWantOff struct {
	offset     int64
	key, value []byte
	ts         int64
	lat        bool
}

// Old clients wrote magic 0 LZ4 with a wrong frame header checksum; Kafka reads it anyway.
func TestUpConvertV0LZ4BrokenHeaderChecksum(t *testing.T) {
	inner := append(v0Message(0, 0, []byte("a"), []byte("1")), v0Message(1, 0, nil, []byte("2"))...)
	frame := legacyCompress(t, CodecLZ4, inner)
	// Our XXH32 agrees with the checksum the lz4 library wrote (descriptor FLG, BD here).
	if got := byte(xxh32Short(frame[4:6]) >> 8); got != frame[6] {
		t.Fatalf("header checksum %#x, library wrote %#x", got, frame[6])
	}
	broken := bytes.Clone(frame)
	broken[6] ^= 0x5a
	if _, err := Decompress(CodecLZ4, broken); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("the frame reader should refuse the broken checksum: %v", err)
	}
	b, err := UpConvert(v0Message(1, int8(CodecLZ4), nil, broken))
	if err != nil {
		t.Fatal(err)
	}
	checkUpConverted(t, b, CodecLZ4, false, []legacyWant{{[]byte("a"), []byte("1"), noTimestamp}, {nil, []byte("2"), noTimestamp}})
	// Magic 1 frames must be correct.
	if _, err := UpConvert(v1Message(1, int8(CodecLZ4), 5, nil, broken)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("magic 1 with a broken lz4 checksum: %v", err)
	}
}

func TestXXH32Short(t *testing.T) {
	// Reference values of XXH32 with seed 0 from the xxHash test vectors.
	for in, want := range map[string]uint32{"": 0x02cc5d05, "a": 0x550d7456, "abc": 0x32d153ff} {
		if got := xxh32Short([]byte(in)); got != want {
			t.Errorf("xxh32(%q) = %#08x, want %#08x", in, got, want)
		}
	}
	// A 10-byte descriptor (content size present) exercises the 4-byte rounds; the lz4
	// library's own header checksum is the reference.
	var buf bytes.Buffer
	w := lz4.NewWriter(&buf)
	if err := w.Apply(lz4.SizeOption(5)); err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("hello"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	frame := buf.Bytes()
	if frame[4]&0x08 == 0 {
		t.Fatalf("no content size in FLG %#x", frame[4])
	}
	if got := byte(xxh32Short(frame[4:14]) >> 8); got != frame[14] {
		t.Fatalf("header checksum %#x, library wrote %#x", got, frame[14])
	}
	broken := bytes.Clone(frame)
	broken[14] ^= 1
	if out, err := Decompress(CodecLZ4, fixLZ4HeaderChecksum(broken)); err != nil || string(out) != "hello" {
		t.Fatalf("repaired frame: %q %v", out, err)
	}
}
