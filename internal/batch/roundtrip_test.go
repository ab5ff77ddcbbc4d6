package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy/xerial"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestBuildValidateRecordsRoundTrip(t *testing.T) {
	for _, n := range []int{1, 2, 37, 500} {
		for _, c := range allCodecs {
			recs := sampleRecords(n)
			h := freshHeader(n)
			h.Attributes = AttrTransactional | AttrCodecMask // codec bits must be replaced
			b := mustBuild(t, h, recs, c)

			got, err := Validate(b)
			if err != nil {
				t.Fatalf("n=%d %v: Validate: %v", n, c, err)
			}
			if _, err := ValidateRecords(b); err != nil {
				t.Fatalf("n=%d %v: ValidateRecords: %v", n, c, err)
			}
			if got.Codec() != c || !got.IsTransactional() || got.IsControl() {
				t.Fatalf("n=%d %v: attributes %#x", n, c, got.Attributes)
			}
			if got.Magic != 2 || got.RecordCount != int32(n) || got.LastOffsetDelta != int32(n-1) ||
				got.BaseTimestamp != h.BaseTimestamp || got.MaxTimestamp != h.MaxTimestamp ||
				got.ProducerID != h.ProducerID || got.ProducerEpoch != h.ProducerEpoch ||
				got.BaseSequence != h.BaseSequence || got.PartitionLeaderEpoch != h.PartitionLeaderEpoch ||
				got.Size() != len(b) {
				t.Fatalf("n=%d %v: header %+v from %+v", n, c, got, h)
			}
			out, err := Records(b)
			if err != nil {
				t.Fatalf("n=%d %v: Records: %v", n, c, err)
			}
			recordsEqual(t, out, recs)
		}
	}
}

func TestBuildRejects(t *testing.T) {
	if _, err := Build(freshHeader(1), sampleRecords(1), 5); !errors.Is(err, ErrUnknownCodec) {
		t.Fatalf("codec 5: %v", err)
	}
	recs := sampleRecords(3)
	if _, err := Build(freshHeader(2), recs, CodecNone); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("offset delta past lastOffsetDelta: %v", err)
	}
	recs[1].OffsetDelta = -1
	if _, err := Build(freshHeader(3), recs, CodecNone); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("negative offset delta: %v", err)
	}
}

// A compacted batch (gaps in offset deltas, fewer records than the offset range) is not a
// valid produce batch, but its CRC holds and its records decode.
func TestCompactedBatch(t *testing.T) {
	recs := sampleRecords(5)
	kept := []Record{recs[0], recs[3]}
	h := freshHeader(5)
	for _, c := range allCodecs {
		b := mustBuild(t, h, kept, c)
		if _, err := CheckCRC(b); err != nil {
			t.Fatalf("%v: CheckCRC: %v", c, err)
		}
		if _, err := Validate(b); !errors.Is(err, ErrInvalidRecord) {
			t.Fatalf("%v: Validate of compacted batch: %v", c, err)
		}
		got, err := Records(b)
		if err != nil {
			t.Fatal(err)
		}
		recordsEqual(t, got, kept)
	}
	empty := mustBuild(t, h, nil, CodecNone)
	if got, err := Records(empty); err != nil || len(got) != 0 {
		t.Fatalf("empty compacted batch: %v %v", got, err)
	}
}

// kmsgCompress compresses with the libraries directly, the way franz-go does (snappy as one
// raw block), so nothing of ours takes part.
func kmsgCompress(t *testing.T, c Codec, raw []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	switch c {
	case CodecNone:
		return raw
	case CodecGzip:
		w := gzip.NewWriter(&buf)
		w.Write(raw)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	case CodecSnappy:
		return s2.EncodeSnappy(nil, raw)
	case CodecLZ4:
		w := lz4.NewWriter(&buf)
		w.Write(raw)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	case CodecZstd:
		e, err := zstd.NewWriter(nil)
		if err != nil {
			t.Fatal(err)
		}
		return e.EncodeAll(raw, nil)
	}
	return buf.Bytes()
}

func kmsgDecompress(t *testing.T, c Codec, data []byte) []byte {
	t.Helper()
	var r io.Reader
	switch c {
	case CodecNone:
		return data
	case CodecGzip:
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	case CodecSnappy:
		out, err := xerial.Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		return out
	case CodecLZ4:
		r = lz4.NewReader(bytes.NewReader(data))
	case CodecZstd:
		d, err := zstd.NewReader(nil)
		if err != nil {
			t.Fatal(err)
		}
		out, err := d.DecodeAll(data, nil)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func toKmsg(recs []Record) []kmsg.Record {
	out := make([]kmsg.Record, len(recs))
	for i, r := range recs {
		k := kmsg.Record{Attributes: r.Attributes, TimestampDelta64: r.TimestampDelta, OffsetDelta: r.OffsetDelta, Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			k.Headers = append(k.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
		}
		out[i] = k
	}
	return out
}

// kmsgBatch builds a batch with franz-go's kmsg types only.
func kmsgBatch(t *testing.T, h Header, recs []Record, c Codec) []byte {
	var raw []byte
	for _, r := range toKmsg(recs) {
		body := r.AppendTo(nil)[1:] // kmsg writes Length as given (0, one byte); re-prefix it
		raw = append(binary.AppendVarint(raw, int64(len(body))), body...)
	}
	data := kmsgCompress(t, c, raw)
	rb := kmsg.RecordBatch{
		FirstOffset: h.BaseOffset, Length: int32(49 + len(data)), PartitionLeaderEpoch: h.PartitionLeaderEpoch,
		Magic: 2, Attributes: h.Attributes | int16(c), LastOffsetDelta: h.LastOffsetDelta,
		FirstTimestamp: h.BaseTimestamp, MaxTimestamp: h.MaxTimestamp, ProducerID: h.ProducerID,
		ProducerEpoch: h.ProducerEpoch, FirstSequence: h.BaseSequence, NumRecords: int32(len(recs)), Records: data,
	}
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

func TestKmsgBuiltBatchDecodes(t *testing.T) {
	for _, c := range allCodecs {
		recs := sampleRecords(60)
		b := kmsgBatch(t, freshHeader(60), recs, c)
		h, err := ValidateRecords(b)
		if err != nil {
			t.Fatalf("%v: %v", c, err)
		}
		if h.Codec() != c || h.RecordCount != 60 || h.ProducerID != 1234 {
			t.Fatalf("%v: header %+v", c, h)
		}
		got, err := Records(b)
		if err != nil {
			t.Fatalf("%v: Records: %v", c, err)
		}
		recordsEqual(t, got, recs)
	}
}

func TestOurBatchDecodesWithKmsg(t *testing.T) {
	for _, c := range allCodecs {
		recs := sampleRecords(60)
		h := freshHeader(60)
		h.BaseOffset = 1 << 40
		b := mustBuild(t, h, recs, c)
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b); err != nil {
			t.Fatalf("%v: kmsg ReadFrom: %v", c, err)
		}
		if rb.FirstOffset != 1<<40 || int(rb.Length) != len(b)-12 || rb.Magic != 2 || rb.NumRecords != 60 ||
			uint32(rb.CRC) != crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)) || Codec(rb.Attributes&7) != c {
			rb.Records = nil
			t.Fatalf("%v: kmsg sees %+v", c, rb)
		}
		raw := kmsgDecompress(t, c, rb.Records)
		var got []Record
		for len(raw) > 0 {
			var kr kmsg.Record
			if err := kr.ReadFrom(raw); err != nil {
				t.Fatalf("%v: kmsg record: %v", c, err)
			}
			_, n := binary.Varint(raw)
			raw = raw[n+int(kr.Length):]
			r := Record{Attributes: kr.Attributes, TimestampDelta: kr.TimestampDelta64, OffsetDelta: kr.OffsetDelta, Key: kr.Key, Value: kr.Value}
			for _, kh := range kr.Headers {
				r.Headers = append(r.Headers, RecordHeader{Key: kh.Key, Value: kh.Value})
			}
			got = append(got, r)
		}
		recordsEqual(t, got, recs)
	}
}

func TestRecompress(t *testing.T) {
	recs := sampleRecords(80)
	h := freshHeader(80)
	h.BaseOffset = 999
	h.PartitionLeaderEpoch = 7
	h.Attributes = AttrLogAppendTime
	for _, from := range allCodecs {
		src := mustBuild(t, h, recs, from)
		for _, to := range allCodecs {
			out, err := Recompress(src, to)
			if err != nil {
				t.Fatalf("%v->%v: %v", from, to, err)
			}
			got, err := Validate(out)
			if err != nil {
				t.Fatalf("%v->%v: Validate: %v", from, to, err)
			}
			want := h
			want.Attributes |= int16(to)
			want.Magic, want.RecordCount, want.BatchLength, want.CRC = 2, 80, got.BatchLength, got.CRC
			if got != want {
				t.Fatalf("%v->%v: header %+v, want %+v", from, to, got, want)
			}
			rs, err := Records(out)
			if err != nil {
				t.Fatal(err)
			}
			recordsEqual(t, rs, recs)
		}
	}
	bad := mustBuild(t, h, recs, CodecNone)
	bad[len(bad)-1] ^= 1
	if _, err := Recompress(bad, CodecZstd); !errors.Is(err, ErrBadCRC) {
		t.Fatalf("corrupt source: %v", err)
	}
	if _, err := Recompress(mustBuild(t, h, recs, CodecNone), 6); !errors.Is(err, ErrUnknownCodec) {
		t.Fatalf("codec 6: %v", err)
	}
}
