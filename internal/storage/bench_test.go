package storage

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gregor-project/gregor/internal/batch"
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

// BenchmarkClean measures one cleaner thread: each iteration cleans a fresh log of batches
// of 100 records of small keys (16-byte keys, 100-byte values), so that almost every record
// is an older version, with a 16 MiB map. The sub-benchmarks vary segment.bytes (seg) and
// the number of distinct keys (keys); the log is 64 sealed segments of 1 MiB, or 4 of 16 or
// 64 MiB, plus the active one. MB/s is of log read; MB/cpu-s is of log read per second of
// the process's CPU time (user and system) while it cleans, which a busy shared machine
// moves less than the wall clock.
func BenchmarkClean(b *testing.B) {
	for _, c := range []struct {
		seg  int64
		n    int // sealed segments
		keys int
	}{
		{1 << 20, 64, 1000},
		{16 << 20, 4, 1000},
		{16 << 20, 4, 100_000},
		{64 << 20, 4, 1000},
		{64 << 20, 4, 100_000},
	} {
		b.Run(fmt.Sprintf("seg=%dMiB/keys=%d", c.seg>>20, c.keys), func(b *testing.B) {
			benchClean(b, c.seg, c.n, c.keys)
		})
	}
}

func benchClean(b *testing.B, segBytes int64, segments, keys int) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = segBytes
	value := []byte(strings.Repeat("v", 100))
	var total int64
	var cpu, user time.Duration
	for range b.N {
		b.StopTimer()
		e := newEnv(b, cfg)
		l := e.open(true, 0, 0)
		i := 0
		for l.NumSegments() <= segments {
			recs := make([]kv, 100)
			for j := range recs {
				recs[j] = kv{fmt.Sprintf("key-%012d", i%keys), value}
				i++
			}
			mustAppend(b, l, kvBatch(b, e.clock.NowMs(), batch.CodecNone, -1, recs...))
		}
		m, err := NewOffsetMap(16<<20, 0.9)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		cpu0, user0 := processCPU(b)
		res, err := l.Clean(m, CleanOptions{NowMs: e.clock.NowMs(), DeleteRetentionMs: 86_400_000})
		if err != nil {
			b.Fatal(err)
		}
		cpu1, user1 := processCPU(b)
		cpu, user = cpu+cpu1-cpu0, user+user1-user0
		total += res.BytesRead
		b.StopTimer()
		if res.MapFull || res.SegmentsCleaned != segments {
			b.Fatalf("the pass cleaned %d segments (map full: %v), want all %d", res.SegmentsCleaned, res.MapFull, segments)
		}
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(total)/(1<<20)/b.Elapsed().Seconds(), "MB/s")
	b.ReportMetric(float64(total)/(1<<20)/cpu.Seconds(), "MB/cpu-s")
	b.ReportMetric(float64(total)/(1<<20)/user.Seconds(), "MB/user-s")
}

// processCPU is the CPU time (user and system) and the user CPU time the process has used.
func processCPU(b *testing.B) (cpu, user time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), time.Duration(ru.Utime.Nano())
}

// BenchmarkMoveLogDir copies a 256 MiB log (16 KiB batches) into a future log in another
// directory with CopyBatches in 1 MiB rounds, as an unthrottled AlterReplicaLogDirs does, and
// swaps it in: bytes/s is the copy rate of a move between log dirs (here both on one disk).
func BenchmarkMoveLogDir(b *testing.B) {
	bt := simpleBatch(b, 16, 1, 1000)
	for range b.N {
		b.StopTimer()
		dirs := []string{b.TempDir(), b.TempDir()}
		m, err := OpenDirs(OS, dirs, (&testLogger{}).Logger())
		if err != nil {
			b.Fatal(err)
		}
		cfg := DefaultConfig()
		cfg.FileDeleteDelayMs = 0
		cur, err := m.GetOrCreate("bench", 0, cfg)
		if err != nil {
			b.Fatal(err)
		}
		for range 16 << 10 {
			if _, err := cur.Append(bt, AppendOptions{AssignOffsets: true}); err != nil {
				b.Fatal(err)
			}
		}
		if err := cur.Flush(); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(cur.Size())
		b.StartTimer()
		fl, _, err := m.CreateFuture("bench", 0, dirs[1])
		if err != nil {
			b.Fatal(err)
		}
		for {
			n, err := CopyBatches(fl, cur, 1<<20, cur.Truncations())
			if err != nil {
				b.Fatal(err)
			}
			if n == 0 {
				break
			}
		}
		if _, err := m.SwapFuture("bench", 0, nil); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := m.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
