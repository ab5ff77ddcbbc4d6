package cli

import (
	"fmt"
	"io"
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// mib is the "MB" of kafka-producer-perf-test and kafka-consumer-perf-test
// (1024*1024 bytes), used so numbers compare directly with Kafka's tools.
const mib = 1024 * 1024

// LatencyStats summarises latencies, in milliseconds.
type LatencyStats struct {
	Avg  float64 `json:"avg"`
	P50  float64 `json:"p50"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
}

// BenchResult is the outcome of a produce or consume benchmark. For produce,
// Latency is the time from the Produce call to its acknowledgement; for
// consume it is the record's age when received (now minus its timestamp),
// which is end-to-end latency when consuming while a producer runs and
// meaningless when reading old data.
type BenchResult struct {
	Records       int64        `json:"records"`
	Failed        int64        `json:"failed"`
	Bytes         int64        `json:"bytes"`
	ElapsedSec    float64      `json:"elapsed_sec"`
	RecordsPerSec float64      `json:"records_per_sec"`
	MBPerSec      float64      `json:"mb_per_sec"`
	Latency       LatencyStats `json:"latency_ms"`
	// Transactions is how many transactions a transactional producer committed.
	Transactions int64 `json:"transactions,omitempty"`
}

// BenchProgress is one periodic report: totals so far and rates over the
// window since the previous report.
type BenchProgress struct {
	Elapsed       time.Duration
	Records       int64   // total so far
	WindowRecords int64   // in this window
	RecordsPerSec float64 // over this window
	MBPerSec      float64 // over this window
	AvgLatencyMs  float64 // over this window
	MaxLatencyMs  float64 // over this window
}

// rates fills the rate fields of a result from its counts and elapsed time.
func (r *BenchResult) rates(elapsed time.Duration) {
	r.ElapsedSec = elapsed.Seconds()
	if r.ElapsedSec > 0 {
		r.RecordsPerSec = float64(r.Records) / r.ElapsedSec
		r.MBPerSec = float64(r.Bytes) / mib / r.ElapsedSec
	}
}

// writeBenchResult prints the final line in the style of Kafka's perf tools
// (table) or the result as JSON.
func writeBenchResult(w io.Writer, format, verb string, r BenchResult) error {
	if format == outputJSON {
		return writeJSON(w, r)
	}
	_, err := fmt.Fprintf(w, "%d records %s, %.1f records/sec (%.2f MB/sec), %.2f ms avg latency, %.2f ms p50, %.2f ms p99, %.2f ms p99.9, %.2f ms max latency",
		r.Records, verb, r.RecordsPerSec, r.MBPerSec, r.Latency.Avg, r.Latency.P50, r.Latency.P99, r.Latency.P999, r.Latency.Max)
	if err == nil && r.Failed > 0 {
		_, err = fmt.Fprintf(w, ", %d records failed", r.Failed)
	}
	if err == nil && r.Transactions > 0 {
		_, err = fmt.Fprintf(w, ", %d transactions committed", r.Transactions)
	}
	if err == nil {
		_, err = fmt.Fprintln(w, ".")
	}
	return err
}

func writeBenchProgress(w io.Writer, verb string, p BenchProgress) {
	fmt.Fprintf(w, "%d records %s, %.1f records/sec (%.2f MB/sec), %.1f ms avg latency, %.1f ms max latency.\n",
		p.WindowRecords, verb, p.RecordsPerSec, p.MBPerSec, p.AvgLatencyMs, p.MaxLatencyMs)
}

// Latency histogram.
//
// Values (nanoseconds) below histSub are counted exactly; above, each power
// of two is split into histSub equal buckets, so a bucket's width is under
// 1/histSub (0.8%) of its values. Buckets are atomic counters: recording is
// wait-free and safe from any goroutine, which matters because produce
// promises may run concurrently.
const (
	histSubBits = 7
	histSub     = 1 << histSubBits
	histBuckets = (64 - histSubBits) * histSub
)

type latencyHistogram struct {
	counts [histBuckets]atomic.Int64
	count  atomic.Int64
	sum    atomic.Int64
	max    atomic.Int64

	// The window fields are reset by each progress report.
	winCount atomic.Int64
	winSum   atomic.Int64
	winMax   atomic.Int64
}

// histBucket maps a value to its bucket index.
func histBucket(v int64) int {
	if v < histSub {
		return int(max(v, 0))
	}
	e := bits.Len64(uint64(v)) - histSubBits - 1 // v>>e is in [histSub, 2*histSub)
	return (e+1)*histSub + int(v>>e) - histSub
}

// histBucketRange returns the smallest and largest value in bucket i.
func histBucketRange(i int) (lo, hi int64) {
	if i < histSub {
		return int64(i), int64(i)
	}
	e := i/histSub - 1
	sub := int64(i%histSub + histSub)
	return sub << e, (sub+1)<<e - 1
}

func storeMax(m *atomic.Int64, v int64) {
	for {
		cur := m.Load()
		if v <= cur || m.CompareAndSwap(cur, v) {
			return
		}
	}
}

// record adds one latency.
func (h *latencyHistogram) record(d time.Duration) {
	v := max(int64(d), 0)
	h.counts[histBucket(v)].Add(1)
	h.count.Add(1)
	h.sum.Add(v)
	storeMax(&h.max, v)
	h.winCount.Add(1)
	h.winSum.Add(v)
	storeMax(&h.winMax, v)
}

// quantile returns the latency at quantile q (0..1]: the midpoint of the
// bucket holding the ceil(q*count)-th smallest value, capped at the maximum.
func (h *latencyHistogram) quantile(q float64) time.Duration {
	total := h.count.Load()
	if total == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(total)))
	rank = min(max(rank, 1), total)
	var cum int64
	for i := range h.counts {
		cum += h.counts[i].Load()
		if cum >= rank {
			lo, hi := histBucketRange(i)
			return time.Duration(min(lo+(hi-lo)/2, h.max.Load()))
		}
	}
	return time.Duration(h.max.Load())
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// stats summarises everything recorded so far.
func (h *latencyHistogram) stats() LatencyStats {
	n := h.count.Load()
	if n == 0 {
		return LatencyStats{}
	}
	return LatencyStats{
		Avg:  ms(time.Duration(h.sum.Load() / n)),
		P50:  ms(h.quantile(0.50)),
		P99:  ms(h.quantile(0.99)),
		P999: ms(h.quantile(0.999)),
		Max:  ms(time.Duration(h.max.Load())),
	}
}

// takeWindow returns and resets the window's count, average and maximum.
func (h *latencyHistogram) takeWindow() (n int64, avg, maxLat time.Duration) {
	n = h.winCount.Swap(0)
	sum := h.winSum.Swap(0)
	maxLat = time.Duration(h.winMax.Swap(0))
	if n > 0 {
		avg = time.Duration(sum / n)
	}
	return n, avg, maxLat
}

// throttleDelay returns how long to wait before sending record number sent
// (0-based) so that the rate stays at most rate records/s, given elapsed
// time since the start. rate <= 0 means unlimited.
func throttleDelay(rate float64, sent int64, elapsed time.Duration) time.Duration {
	if rate <= 0 {
		return 0
	}
	due := time.Duration(float64(sent) / rate * float64(time.Second))
	if due > elapsed {
		return due - elapsed
	}
	return 0
}

// progressReporter calls report every interval until stop is called; it
// owns one goroutine that ends with stop.
type progressReporter struct {
	stopc chan struct{}
	done  chan struct{}
}

func startProgress(interval time.Duration, report func(window time.Duration)) *progressReporter {
	p := &progressReporter{stopc: make(chan struct{}), done: make(chan struct{})}
	if interval <= 0 || report == nil {
		close(p.done)
		return p
	}
	go func() {
		defer close(p.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case <-p.stopc:
				return
			case now := <-t.C:
				report(now.Sub(last))
				last = now
			}
		}
	}()
	return p
}

func (p *progressReporter) stop() {
	select {
	case <-p.stopc:
	default:
		close(p.stopc)
	}
	<-p.done
}
