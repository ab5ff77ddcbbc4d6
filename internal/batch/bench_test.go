package batch

import (
	"bytes"
	"testing"
)

// benchBatch is a ~16 KiB uncompressed batch of records with 100-byte values.
func benchBatch(b *testing.B, codec Codec) []byte {
	var recs []Record
	size := HeaderSize
	for size < 16<<10-110 {
		r := Record{OffsetDelta: int32(len(recs)), TimestampDelta: int64(len(recs)), Value: bytes.Repeat([]byte{byte(len(recs))}, 100)}
		size += 1 + recordBodySize(&r)
		recs = append(recs, r)
	}
	return mustBuild(b, freshHeader(len(recs)), recs, codec)
}

func BenchmarkValidate(b *testing.B) {
	batch := benchBatch(b, CodecNone)
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Validate(batch); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseHeader(b *testing.B) {
	batch := benchBatch(b, CodecNone)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseHeader(batch); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRecords(b *testing.B) {
	for _, c := range allCodecs {
		batch := benchBatch(b, c)
		raw := benchBatch(b, CodecNone)
		b.Run(codecName(c), func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Records(batch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkRecompress(b *testing.B) {
	raw := benchBatch(b, CodecNone)
	for _, c := range allCodecs[1:] {
		b.Run(codecName(c), func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Recompress(raw, c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkValidateRecords is what a leader spends checking a produced ~16 KiB batch of each
// codec (compressed ones walked as a stream).
func BenchmarkValidateRecords(b *testing.B) {
	for _, c := range allCodecs {
		batch := benchBatch(b, c)
		raw := benchBatch(b, CodecNone)
		b.Run(codecName(c), func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ValidateRecords(batch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
