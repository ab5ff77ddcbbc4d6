package streamsbench

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// BenchmarkLatency: lines produced at a fixed rate (GREGOR_BENCH_RATE lines/s, 500 by
// default, for GREGOR_BENCH_SECONDS, 10 by default), each carrying a word of its own
// ("m<i>") besides four common ones; a line's latency is from its produce call until its
// own word's count is read from the output (read_committed). Reported as p50 and p99 in
// milliseconds. The library is started and has counted a first line before the clock runs.
func BenchmarkLatency(b *testing.B) {
	addr := startBroker(b)
	cl := newClient(b, addr)
	rate := envInt("GREGOR_BENCH_RATE", 500)
	secs := envInt("GREGOR_BENCH_SECONDS", 10)
	for _, c := range counters {
		b.Run(c.name, func(b *testing.B) {
			var lat []time.Duration
			for b.Loop() {
				j := newJob(c.name)
				prepare(b, cl, j)
				stop := c.start(b, addr, j)
				lat = append(lat, measureLatency(b, addr, cl, j, rate, secs)...)
				stop()
			}
			slices.Sort(lat)
			pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))]) / float64(time.Millisecond) }
			b.ReportMetric(pct(0.50), "p50-ms")
			b.ReportMetric(pct(0.99), "p99-ms")
		})
	}
}

func measureLatency(b *testing.B, addr string, cl *kgo.Client, j job, rate, secs int) []time.Duration {
	out := newClient(b, addr, kgo.ConsumeTopics(j.out), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	produceLines(b, cl, j.lines, []string{"warm up"})
	awaitCounts(b, addr, j.out, map[string]int64{"warm": 1, "up": 1}, 2*time.Minute)

	n := rate * secs
	sent := make([]time.Time, n)
	var mu sync.Mutex // guards sent between the producing loop and the reader
	lat := make([]time.Duration, 0, n)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(secs)*time.Second+2*time.Minute)
	defer cancel()
	read := make(chan struct{})
	go func() {
		defer close(read)
		for len(lat) < n && ctx.Err() == nil {
			fs := out.PollFetches(ctx)
			now := time.Now()
			fs.EachRecord(func(r *kgo.Record) {
				k := string(r.Key)
				if !strings.HasPrefix(k, "m") {
					return
				}
				i, err := strconv.Atoi(k[1:])
				if err != nil || i >= n {
					return
				}
				mu.Lock()
				lat = append(lat, now.Sub(sent[i]))
				mu.Unlock()
			})
		}
	}()
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	for i := range n {
		<-tick.C
		line := "m" + strconv.Itoa(i) + " w" + strconv.Itoa(i%7) + " w" + strconv.Itoa(i%11) + " w" + strconv.Itoa(i%13) + " w" + strconv.Itoa(i%17)
		mu.Lock()
		sent[i] = time.Now()
		mu.Unlock()
		cl.Produce(ctx, &kgo.Record{Topic: j.lines, Value: []byte(line)}, func(_ *kgo.Record, err error) {
			if err != nil {
				b.Error(err)
			}
		})
	}
	<-read
	if len(lat) < n {
		b.Fatalf("%d of %d lines' words counted", len(lat), n)
	}
	return lat
}
