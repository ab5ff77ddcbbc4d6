package batch

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"
)

var allCodecs = []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd}

// sampleRecords returns n records exercising null and empty keys and values, headers with
// null values, negative and large timestamp deltas.
func sampleRecords(n int) []Record {
	recs := make([]Record, n)
	for i := range recs {
		r := Record{
			TimestampDelta: int64(i * 7),
			OffsetDelta:    int32(i),
			Value:          bytes.Repeat([]byte{byte('a' + i%26)}, 10+i%50),
		}
		switch i % 5 {
		case 0:
			r.Key = nil
		case 1:
			r.Key = []byte{}
		case 2:
			r.Key = []byte(fmt.Sprintf("key-%d", i))
			r.Headers = []RecordHeader{{Key: "h1", Value: []byte("v1")}, {Key: "", Value: nil}, {Key: "h3", Value: []byte{}}}
		case 3:
			r.Value = nil // tombstone
			r.Key = []byte("k")
			r.TimestampDelta = -1 << 40
		case 4:
			r.TimestampDelta = 1<<62 + int64(i)
			r.Headers = []RecordHeader{{Key: "only", Value: bytes.Repeat([]byte{0xff}, 300)}}
		}
		recs[i] = r
	}
	return recs
}

// freshHeader is a producer-style header for n records.
func freshHeader(n int) Header {
	return Header{
		BaseOffset:           0,
		PartitionLeaderEpoch: -1,
		LastOffsetDelta:      int32(n - 1),
		BaseTimestamp:        1_700_000_000_000,
		MaxTimestamp:         1_700_000_000_000 + int64(n),
		ProducerID:           1234,
		ProducerEpoch:        5,
		BaseSequence:         42,
	}
}

func mustBuild(t testing.TB, h Header, recs []Record, c Codec) []byte {
	t.Helper()
	b, err := Build(h, recs, c)
	if err != nil {
		t.Fatalf("Build(%v): %v", c, err)
	}
	return b
}

// recordsEqual compares records keeping nil (null) and empty apart.
func recordsEqual(t *testing.T, got, want []Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Attributes != w.Attributes || g.TimestampDelta != w.TimestampDelta || g.OffsetDelta != w.OffsetDelta {
			t.Fatalf("record %d: got %+v, want %+v", i, g, w)
		}
		sameBytes(t, fmt.Sprintf("record %d key", i), g.Key, w.Key)
		sameBytes(t, fmt.Sprintf("record %d value", i), g.Value, w.Value)
		if len(g.Headers) != len(w.Headers) {
			t.Fatalf("record %d: %d headers, want %d", i, len(g.Headers), len(w.Headers))
		}
		for j := range w.Headers {
			if g.Headers[j].Key != w.Headers[j].Key {
				t.Fatalf("record %d header %d key %q, want %q", i, j, g.Headers[j].Key, w.Headers[j].Key)
			}
			sameBytes(t, fmt.Sprintf("record %d header %d value", i, j), g.Headers[j].Value, w.Headers[j].Value)
		}
	}
}

func sameBytes(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if (got == nil) != (want == nil) || !bytes.Equal(got, want) {
		t.Fatalf("%s: got %q (nil %v), want %q (nil %v)", what, got, got == nil, want, want == nil)
	}
}

// rawBatch frames records bytes (not compressed) as a v2 batch with the given count and last
// offset delta, with a correct CRC, written independently of Build.
func rawBatch(records []byte, count, lastDelta int32) []byte {
	b := make([]byte, 61, 61+len(records))
	be := binary.BigEndian
	be.PutUint64(b[0:], 0)
	be.PutUint32(b[8:], uint32(49+len(records)))
	be.PutUint32(b[12:], 0xffffffff)
	b[16] = 2
	be.PutUint32(b[23:], uint32(lastDelta))
	be.PutUint64(b[43:], 0xffffffffffffffff)
	be.PutUint16(b[51:], 0xffff)
	be.PutUint32(b[53:], 0xffffffff)
	be.PutUint32(b[57:], uint32(count))
	b = append(b, records...)
	fixCRC(b)
	return b
}

// fixCRC rewrites the CRC-32C of a v2 batch, computed here without the package's helpers.
func fixCRC(b []byte) {
	if len(b) < 21 {
		return
	}
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
}

// zz appends a zig-zag varint.
func zz(dst []byte, v int64) []byte { return binary.AppendVarint(dst, v) }

// rawRecord encodes one record field by field; length is computed unless forced >= 0.
func rawRecord(offsetDelta int64, key, value []byte, headerCount int64, headers []byte) []byte {
	var body []byte
	body = append(body, 0)
	body = zz(body, 0)
	body = zz(body, offsetDelta)
	if key == nil {
		body = zz(body, -1)
	} else {
		body = append(zz(body, int64(len(key))), key...)
	}
	if value == nil {
		body = zz(body, -1)
	} else {
		body = append(zz(body, int64(len(value))), value...)
	}
	body = zz(body, headerCount)
	body = append(body, headers...)
	return append(zz(nil, int64(len(body))), body...)
}
