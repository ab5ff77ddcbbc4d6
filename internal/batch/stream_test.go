package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// compressedBatch frames a records section compressed with codec as a v2 batch of count
// records and last offset delta lastDelta.
func compressedBatch(t testing.TB, codec Codec, compressed []byte, count, lastDelta int32) []byte {
	t.Helper()
	b := rawBatch(compressed, count, lastDelta)
	binary.BigEndian.PutUint16(b[21:], uint16(codec))
	fixCRC(b)
	return b
}

// streamCompressed compresses what write writes with codec's streaming writer (snappy:
// materialised, then compressed whole).
func streamCompressed(t testing.TB, codec Codec, write func(w io.Writer) error) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w io.WriteCloser
	switch codec {
	case CodecGzip:
		w = gzip.NewWriter(&buf)
	case CodecLZ4:
		w = lz4.NewWriter(&buf)
	case CodecZstd:
		zw, err := zstd.NewWriter(&buf, zstd.WithEncoderConcurrency(1))
		if err != nil {
			t.Fatal(err)
		}
		w = zw
	case CodecSnappy:
		var raw bytes.Buffer
		if err := write(&raw); err != nil {
			t.Fatal(err)
		}
		z, err := Compress(CodecSnappy, raw.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		return z
	default:
		t.Fatalf("codec %v", codec)
	}
	if err := write(w); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// writeZeroRecords writes n records whose values are size zero bytes, with offset deltas
// 0..n-1, then extra.
func writeZeroRecords(n, size int, extra []byte) func(io.Writer) error {
	return func(w io.Writer) error {
		zeros := make([]byte, 1<<20)
		for i := 0; i < n; i++ {
			var body []byte
			body = append(body, 0)
			body = zz(body, 0)
			body = zz(body, int64(i))
			body = zz(body, -1)
			body = zz(body, int64(size))
			head := zz(nil, int64(len(body)+size+1)) // + the header count after the value
			if _, err := w.Write(append(head, body...)); err != nil {
				return err
			}
			for left := size; left > 0; {
				n, err := w.Write(zeros[:min(left, len(zeros))])
				if err != nil {
					return err
				}
				left -= n
			}
			if _, err := w.Write(zz(nil, 0)); err != nil {
				return err
			}
		}
		_, err := w.Write(extra)
		return err
	}
}

// heapDuring is how many bytes f allocates.
func heapDuring(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A legitimate batch decompressing to 80 MiB (Kafka has no cap on the decompressed size) is
// accepted, and checking it allocates a bounded amount whatever the output: the records past
// the in-memory limit are walked as a stream, never held whole.
func TestValidateRecordsLargeBatchStreams(t *testing.T) {
	for _, c := range []struct {
		codec Codec
		mib   int
	}{{CodecZstd, 80}, {CodecGzip, 48}, {CodecLZ4, 48}, {CodecSnappy, 48}} {
		z := streamCompressed(t, c.codec, writeZeroRecords(c.mib, 1<<20, nil))
		b := compressedBatch(t, c.codec, z, int32(c.mib), int32(c.mib-1))
		for try := range 2 {
			var err error
			alloc := heapDuring(func() { _, err = ValidateRecords(b) })
			if err != nil {
				t.Fatalf("%v: %d MiB batch refused: %v", c.codec, c.mib, err)
			}
			// The in-memory try (up to inMemoryLimit, grown by doubling), the codec's window or
			// block (zstd's 8 MiB at most, lz4's 4 MiB twice) and the stream's buffer.
			if limit := uint64(24 << 20); alloc > limit {
				t.Errorf("%v: check %d of a %d MiB batch allocated %d bytes", c.codec, try, c.mib, alloc)
			}
		}
	}
	// A batch within the in-memory limit is checked without allocating, once the pools are
	// warm (a zstd frame whose window is above the limit is streamed: two small allocations).
	for _, codec := range allCodecs[1:] {
		z := streamCompressed(t, codec, writeZeroRecords(3, 100<<10, nil))
		b := compressedBatch(t, codec, z, 3, 2)
		if _, err := ValidateRecords(b); err != nil {
			t.Fatalf("%v: %v", codec, err)
		}
		if allocs := testing.AllocsPerRun(20, func() {
			if _, err := ValidateRecords(b); err != nil {
				t.Fatal(err)
			}
		}); allocs > 2 {
			t.Errorf("%v: %v allocations checking a 300 KiB batch", codec, allocs)
		}
	}
}

// A decompression bomb, a small batch that decompresses to 512 MiB, is refused for what
// Kafka refuses it for (bytes after its declared records), with memory bounded by the codec's
// window, never by the output.
func TestValidateRecordsBombBoundedMemory(t *testing.T) {
	z := streamCompressed(t, CodecZstd, writeZeroRecords(1, 512<<20, []byte{0}))
	b := compressedBatch(t, CodecZstd, z, 1, 0)
	if len(b) > 1<<20 {
		t.Fatalf("the bomb is %d bytes", len(b))
	}
	var err error
	alloc := heapDuring(func() { _, err = ValidateRecords(b) })
	if !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("bomb: %v, want ErrInvalidRecord", err)
	}
	if alloc > 12<<20 {
		t.Fatalf("checking the bomb allocated %d bytes", alloc)
	}
	// Records that claim more than the stream holds end early: invalid, not a hang.
	z = streamCompressed(t, CodecZstd, writeZeroRecords(2, 1<<20, nil))
	if _, err := ValidateRecords(compressedBatch(t, CodecZstd, z, 3, 2)); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("fewer records than counted: %v", err)
	}
}

// A zstd frame may use a window above what the pooled decoders take, up to zstd's default
// limit of 128 MiB (what Kafka's zstd library accepts); a larger one is refused as corrupt.
func TestValidateRecordsZstdWindows(t *testing.T) {
	records := append(rawRecord(0, nil, []byte("a"), 0, nil), rawRecord(1, nil, []byte("b"), 0, nil)...)
	for _, c := range []struct {
		windowLog byte
		ok        bool
	}{{20, true}, {24, true}, {26, true}, {28, false}, {31, false}} {
		// A frame written by hand: magic, a descriptor without content size or checksum,
		// the window descriptor (exponent windowLog-10, no mantissa), one last raw block.
		frame := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, (c.windowLog - 10) << 3}
		bh := uint32(len(records))<<3 | 1
		frame = append(frame, byte(bh), byte(bh>>8), byte(bh>>16))
		frame = append(frame, records...)
		_, err := ValidateRecords(compressedBatch(t, CodecZstd, frame, 2, 1))
		if c.ok && err != nil {
			t.Errorf("window 2^%d: %v", c.windowLog, err)
		}
		if !c.ok && !errors.Is(err, ErrCorrupt) {
			t.Errorf("window 2^%d: %v, want ErrCorrupt", c.windowLog, err)
		}
	}
}

// The streaming walk applies the rules of the in-memory one: every malformed records section
// of TestValidateRejects, compressed with each codec, is ErrInvalidRecord, and the
// well-formed ones pass.
func TestValidateRecordsStreamingRules(t *testing.T) {
	good := rawRecord(0, []byte("k"), []byte("v"), 0, nil)
	two := append(rawRecord(0, nil, []byte("a"), 0, nil), rawRecord(1, nil, []byte("b"), 0, nil)...)
	header := func(key []byte, valueLen int64) []byte {
		h := zz(nil, int64(len(key)))
		h = append(h, key...)
		return zz(h, valueLen)
	}
	type section struct {
		name             string
		records          []byte
		count, lastDelta int32
	}
	bad := []section{
		{"fewer records than count", good, 2, 1},
		{"bytes after the records", append(bytes.Clone(good), 0), 1, 0},
		{"offset delta out of order", append(rawRecord(1, nil, nil, 0, nil), rawRecord(0, nil, nil, 0, nil)...), 2, 1},
		{"offset delta gap", append(rawRecord(0, nil, nil, 0, nil), rawRecord(2, nil, nil, 0, nil)...), 2, 1},
		{"record length past end", append(zz(nil, 100), good[1:]...), 1, 0},
		{"record length negative", append(zz(nil, -5), good[1:]...), 1, 0},
		{"record length zero", append(zz(nil, 0), good[1:]...), 1, 0},
		{"record length short", append(zz(nil, int64(len(good)-2)), good[1:]...), 1, 0},
		{"record length long", append(append(zz(nil, int64(len(good))), good[1:]...), 0), 1, 0},
		{"varint 6 bytes", append([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, good[1:]...), 1, 0},
		{"varint overflows int32", append([]byte{0x80, 0x80, 0x80, 0x80, 0x10}, good[1:]...), 1, 0},
		{"key length huge", rawRecordKeyLen(0x3fffffff), 1, 0},
		{"key length -2", rawRecordKeyLen(-2), 1, 0},
		{"header count negative", rawRecord(0, nil, nil, -1, nil), 1, 0},
		{"header count huge", rawRecord(0, nil, nil, 0x3fffffff, header([]byte("k"), 1)), 1, 0},
		{"header key null", rawRecord(0, nil, nil, 1, append(zz(nil, -1), zz(nil, -1)...)), 1, 0},
		{"header value past record", rawRecord(0, nil, nil, 1, header([]byte("k"), 9)), 1, 0},
	}
	good2 := []section{
		{"one record", good, 1, 0},
		{"two records", two, 2, 1},
		{"empty header value", rawRecord(0, nil, nil, 1, header([]byte("k"), 0)), 1, 0},
		{"null header value", rawRecord(0, nil, nil, 1, header([]byte(""), -1)), 1, 0},
		{"non-minimal varint", append([]byte{0x80 | byte(len(good)-1)<<1, 0x00}, good[1:]...), 1, 0},
	}
	for _, codec := range allCodecs[1:] {
		for _, s := range bad {
			z, err := Compress(codec, s.records)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ValidateRecords(compressedBatch(t, codec, z, s.count, s.lastDelta)); !errors.Is(err, ErrInvalidRecord) {
				t.Errorf("%v, %s: %v, want ErrInvalidRecord", codec, s.name, err)
			}
		}
		for _, s := range good2 {
			z, err := Compress(codec, s.records)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ValidateRecords(compressedBatch(t, codec, z, s.count, s.lastDelta)); err != nil {
				t.Errorf("%v, %s: %v", codec, s.name, err)
			}
		}
	}
}

// Recompressing a batch that decompresses to 80 MiB (a topic whose compression.type differs
// from the producer's) streams from one codec to the other: accepted, the same records, and
// memory for the codecs' state and the new batch only.
func TestRecompressLargeBatchStreams(t *testing.T) {
	const mib = 80
	z := streamCompressed(t, CodecZstd, writeZeroRecords(mib, 1<<20, nil))
	b := compressedBatch(t, CodecZstd, z, mib, mib-1)
	for _, to := range []Codec{CodecLZ4, CodecSnappy, CodecGzip} {
		var out []byte
		var err error
		alloc := heapDuring(func() { out, err = Recompress(b, to) })
		if err != nil {
			t.Fatalf("zstd -> %v: %v", to, err)
		}
		if limit := uint64(len(out)) + 24<<20; alloc > limit {
			t.Errorf("zstd -> %v: allocated %d bytes for a %d-byte batch", to, alloc, len(out))
		}
		h, err := ValidateRecords(out)
		if err != nil || h.Codec() != to || h.RecordCount != mib {
			t.Fatalf("zstd -> %v: %+v %v", to, h, err)
		}
		n := 0
		if err := EachRecord(out, func(_ int64, delta int32) bool {
			if delta != int32(n) {
				t.Fatalf("zstd -> %v: record %d has offset delta %d", to, n, delta)
			}
			n++
			return true
		}); err != nil || n != mib {
			t.Fatalf("zstd -> %v: %d records, %v", to, n, err)
		}
	}
}
