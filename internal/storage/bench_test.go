package storage

import (
	"math"
	"math/rand/v2"
	"testing"
)

func benchLog(b *testing.B) *Log {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 128 << 20
	cfg.FileDeleteDelayMs = 0
	l, err := Open(OS, b.TempDir()+"/bench-0", cfg, OpenOptions{Clean: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	return l
}

// BenchmarkAppend appends 16 KiB batches (16 records of 1 KiB) with offset assignment.
func BenchmarkAppend(b *testing.B) {
	l := benchLog(b)
	bt := simpleBatch(b, 16, 1, 1000)
	b.SetBytes(int64(len(bt)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := l.Append(bt, AppendOptions{AssignOffsets: true}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRead locates up to 1 MiB of whole batches at random offsets (Read + Release; the
// bytes themselves go by sendfile and are not copied here).
func BenchmarkRead(b *testing.B) {
	l := benchLog(b)
	bt := simpleBatch(b, 16, 1, 1000)
	for range 16 << 10 { // 256 MiB: two segments
		if _, err := l.Append(bt, AppendOptions{AssignOffsets: true}); err != nil {
			b.Fatal(err)
		}
	}
	leo := l.LogEndOffset()
	rng := rand.New(rand.NewPCG(1, 1))
	var total int64
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		s, err := l.Read(rng.Int64N(leo), 1<<20, math.MaxInt64, true)
		if err != nil {
			b.Fatal(err)
		}
		total += int64(s.Size)
		s.Release()
	}
	b.SetBytes(total / int64(b.N))
}

// BenchmarkReadCopy is BenchmarkRead plus a pread of the bytes (what a non-sendfile path costs).
func BenchmarkReadCopy(b *testing.B) {
	l := benchLog(b)
	bt := simpleBatch(b, 16, 1, 1000)
	for range 4 << 10 {
		if _, err := l.Append(bt, AppendOptions{AssignOffsets: true}); err != nil {
			b.Fatal(err)
		}
	}
	leo := l.LogEndOffset()
	rng := rand.New(rand.NewPCG(1, 1))
	buf := make([]byte, 2<<20)
	var total int64
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		s, err := l.Read(rng.Int64N(leo), 1<<20, math.MaxInt64, true)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.File.ReadAt(buf[:s.Size], s.Pos); err != nil {
			b.Fatal(err)
		}
		total += int64(s.Size)
		s.Release()
	}
	b.SetBytes(total / int64(b.N))
}
