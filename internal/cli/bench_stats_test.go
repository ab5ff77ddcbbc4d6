package cli

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

func TestHistBucketMapping(t *testing.T) {
	// Every value lies inside its bucket's range, buckets are monotonic,
	// and ranges tile the number line without gaps.
	prev := -1
	for _, v := range []int64{0, 1, 127, 128, 129, 255, 256, 257, 1000, 1 << 20, 123456789, math.MaxInt64 / 3, math.MaxInt64} {
		b := histBucket(v)
		if b < prev || b >= histBuckets {
			t.Fatalf("value %d: bucket %d (prev %d)", v, b, prev)
		}
		prev = b
		lo, hi := histBucketRange(b)
		if v < lo || v > hi {
			t.Fatalf("value %d outside bucket %d range [%d,%d]", v, b, lo, hi)
		}
		if hi > 255 && float64(hi-lo+1)/float64(lo) > 1.0/histSub+1e-9 {
			t.Fatalf("bucket %d too wide: [%d,%d]", b, lo, hi)
		}
	}
	for b := 1; b < histBuckets; b++ {
		_, prevHi := histBucketRange(b - 1)
		lo, _ := histBucketRange(b)
		if lo != prevHi+1 {
			t.Fatalf("gap between bucket %d and %d: %d, %d", b-1, b, prevHi, lo)
		}
	}
	if histBucket(-5) != 0 {
		t.Fatal("negative value not clamped")
	}
}

func exactQuantile(sorted []int64, q float64) int64 {
	rank := int(math.Ceil(q * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

func TestHistogramQuantiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h latencyHistogram
	var vals []int64
	var sum int64
	for i := 0; i < 200_000; i++ {
		// Log-normal-ish latencies between ~50µs and ~1s.
		v := int64(math.Exp(rng.NormFloat64()*1.5 + 13))
		vals = append(vals, v)
		sum += v
		h.record(time.Duration(v))
	}
	slices.Sort(vals)
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999, 1} {
		want := exactQuantile(vals, q)
		got := int64(h.quantile(q))
		if rel := math.Abs(float64(got-want)) / float64(want); rel > 0.01 {
			t.Errorf("q%.3f: got %d want %d (rel err %.4f)", q, got, want, rel)
		}
	}
	st := h.stats()
	if st.Max != ms(time.Duration(vals[len(vals)-1])) {
		t.Errorf("max %v want %v", st.Max, ms(time.Duration(vals[len(vals)-1])))
	}
	if math.Abs(st.Avg-ms(time.Duration(sum/int64(len(vals))))) > 1e-6 {
		t.Errorf("avg %v", st.Avg)
	}
	if !(st.P50 <= st.P99 && st.P99 <= st.P999 && st.P999 <= st.Max) {
		t.Errorf("not monotonic: %+v", st)
	}
}

func TestHistogramSmallAndEmpty(t *testing.T) {
	var h latencyHistogram
	if st := h.stats(); st != (LatencyStats{}) {
		t.Fatalf("empty: %+v", st)
	}
	h.record(3 * time.Millisecond)
	st := h.stats()
	if math.Abs(st.P50-3) > 0.03 || st.Max != 3 || st.Avg != 3 || st.P999 > st.Max {
		t.Fatalf("one value: %+v", st)
	}
	n, avg, mx := h.takeWindow()
	if n != 1 || avg != 3*time.Millisecond || mx != 3*time.Millisecond {
		t.Fatalf("window: %d %v %v", n, avg, mx)
	}
	if n, _, _ := h.takeWindow(); n != 0 {
		t.Fatalf("window not reset: %d", n)
	}
}

func TestHistogramConcurrent(t *testing.T) {
	var h latencyHistogram
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10_000; i++ {
				h.record(time.Duration(i) * time.Microsecond)
			}
		}()
	}
	wg.Wait()
	if h.count.Load() != 80_000 || time.Duration(h.max.Load()) != 9999*time.Microsecond {
		t.Fatalf("count %d max %d", h.count.Load(), h.max.Load())
	}
}

func TestThrottleDelay(t *testing.T) {
	tests := []struct {
		rate    float64
		sent    int64
		elapsed time.Duration
		want    time.Duration
	}{
		{-1, 1000, 0, 0},
		{0, 1000, 0, 0},
		{1000, 0, 0, 0},
		{1000, 500, 0, 500 * time.Millisecond},
		{1000, 500, 200 * time.Millisecond, 300 * time.Millisecond},
		{1000, 500, time.Second, 0},
		{10, 1, 0, 100 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := throttleDelay(tt.rate, tt.sent, tt.elapsed); got != tt.want {
			t.Errorf("%+v: got %v", tt, got)
		}
	}
}

func TestBenchResultRates(t *testing.T) {
	r := BenchResult{Records: 1000, Bytes: 2 * mib}
	r.rates(2 * time.Second)
	if r.RecordsPerSec != 500 || r.MBPerSec != 1 || r.ElapsedSec != 2 {
		t.Fatalf("%+v", r)
	}
	var z BenchResult
	z.rates(0)
	if z.RecordsPerSec != 0 || math.IsNaN(z.MBPerSec) {
		t.Fatalf("%+v", z)
	}
}

func TestDefaultMaxBuffered(t *testing.T) {
	if got := defaultMaxBuffered(100); got != 1<<18 {
		t.Errorf("100B: %d", got)
	}
	if got := defaultMaxBuffered(1 << 20); got != 10_000 {
		t.Errorf("1MiB: %d", got)
	}
	if got := defaultMaxBuffered(0); got != 1<<18 {
		t.Errorf("0B: %d", got)
	}
}
