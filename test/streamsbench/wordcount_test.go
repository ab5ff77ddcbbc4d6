package streamsbench

import (
	"context"
	"fmt"
	"io"
	"log"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/lovoo/goka"
	"github.com/lovoo/goka/codec"
	"github.com/lovoo/goka/storage"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/internal/testutil"
	"github.com/gregor-project/gregor/streams"
	"github.com/gregor-project/gregor/streams/serde"
)

// partitions of every topic of a run: the input, goka's words topic and the output.
const partitions = 4

// A counter is one library running the word count of lines into out; start returns once
// it runs, and stop ends it.
type counter struct {
	name  string
	start func(tb testing.TB, addr string, run job) (stop func())
}

// job names one run's topics and application ids, fresh for every run.
type job struct{ id, lines, words, out string }

var runs atomic.Int64

func newJob(name string) job {
	id := fmt.Sprintf("%s-%d", name, runs.Add(1))
	return job{id: id, lines: "lines-" + id, words: "words-" + id, out: "counts-" + id}
}

var counters = []counter{
	{"streams-alos", streamsCounter(streams.AtLeastOnce, streams.Persistent)},
	{"streams-eos", streamsCounter(streams.ExactlyOnceV2, streams.Persistent)},
	{"streams-alos-memory", streamsCounter(streams.AtLeastOnce, streams.InMemory)},
	{"goka", gokaCounter(false)},
	{"goka-memory", gokaCounter(true)},
}

// streamsCounter is the word count on Gregor Streams with guarantee g, its counts in stores
// of type st (pebble, the default, or in memory), and otherwise the library's defaults
// (commit.interval.ms 30 s at-least-once, 100 ms exactly-once).
func streamsCounter(g streams.Guarantee, st streams.StoreType) func(testing.TB, string, job) func() {
	return func(tb testing.TB, addr string, j job) func() {
		b := streams.NewBuilder()
		lines := streams.Stream(b, j.lines, serde.String, serde.String)
		words := streams.FlatMapValues(lines, func(l string) []string { return strings.Fields(strings.ToLower(l)) })
		counts := streams.Count(streams.GroupBy(words, func(_, w string) string { return w }, serde.String), streams.Named("counts"))
		streams.To(streams.ToStream(counts), j.out, serde.String, serde.Int64Text)
		app, err := streams.New(b, streams.Config{ApplicationID: j.id, Brokers: []string{addr}, Guarantee: g,
			StateDir: tb.TempDir(), DefaultDSLStore: st})
		if err != nil {
			tb.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- app.Run(context.Background()) }()
		return func() {
			if err := app.Close(); err != nil {
				tb.Error(err)
			}
			if err := <-done; err != nil {
				tb.Error(err)
			}
		}
	}
}

// gokaQuiet keeps goka's per-rebalance logging out of the benchmark's output.
var gokaQuiet = log.New(io.Discard, "", 0)

func init() {
	cfg := goka.DefaultConfig()
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest // the preloaded lines, as the streams app reads them
	goka.ReplaceGlobalConfig(cfg)
}

// gokaCounter is the word count as goka writes it: a stateless group splits lines and emits
// each word keyed by itself, a second group counts per word in its persisted group table
// (a compacted topic in the cluster, and locally LevelDB, goka's default, or goka's
// in-memory storage when memory is set) and emits the running count.
func gokaCounter(memory bool) func(testing.TB, string, job) func() {
	return func(tb testing.TB, addr string, j job) func() {
		sb := storage.DefaultBuilder(tb.TempDir())
		if memory {
			sb = storage.MemoryBuilder()
		}
		return runGoka(tb, addr, j, sb)
	}
}

func runGoka(tb testing.TB, addr string, j job, sb storage.Builder) func() {
	words, out := goka.Stream(j.words), goka.Stream(j.out)
	split := goka.DefineGroup(goka.Group(j.id+"-split"),
		goka.Input(goka.Stream(j.lines), new(codec.String), func(ctx goka.Context, msg any) {
			for _, w := range strings.Fields(strings.ToLower(msg.(string))) {
				ctx.Emit(words, w, "")
			}
		}),
		goka.Output(words, new(codec.String)))
	count := goka.DefineGroup(goka.Group(j.id+"-count"),
		goka.Input(words, new(codec.String), func(ctx goka.Context, _ any) {
			var n int64
			if v := ctx.Value(); v != nil {
				n = v.(int64)
			}
			n++
			ctx.SetValue(n)
			ctx.Emit(out, ctx.Key(), strconv.FormatInt(n, 10))
		}),
		goka.Persist(new(codec.Int64)),
		goka.Output(out, new(codec.String)))
	tmc := goka.NewTopicManagerConfig()
	tmc.Table.Replication, tmc.Stream.Replication = 1, 1
	ctx, cancel := context.WithCancel(context.Background())
	var dones []chan error
	for _, g := range []*goka.GroupGraph{split, count} {
		p, err := goka.NewProcessor([]string{addr}, g,
			goka.WithTopicManagerBuilder(goka.TopicManagerBuilderWithTopicManagerConfig(tmc)),
			goka.WithStorageBuilder(sb),
			goka.WithLogger(gokaQuiet))
		if err != nil {
			cancel()
			tb.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		dones = append(dones, done)
	}
	return func() {
		cancel()
		for _, d := range dones {
			if err := <-d; err != nil {
				tb.Error(err)
			}
		}
	}
}

// startBroker starts one `gregor server` process and returns its client address.
func startBroker(tb testing.TB) string {
	c := testutil.StartCluster(tb, testutil.ClusterOptions{Nodes: 1})
	return c.Node(1).ClientAddr()
}

func newClient(tb testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(cl.Close)
	return cl
}

// prepare creates the job's topics (goka's words topic too: its count group checks that
// it is co-partitioned with the table before it starts).
func prepare(tb testing.TB, cl *kgo.Client, j job) {
	resp, err := kadm.NewClient(cl).CreateTopics(context.Background(), partitions, 1, nil, j.lines, j.words, j.out)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		tb.Fatal(err)
	}
}

// makeLines returns n five-word lines over a vocabulary of 1,000 words, and each word's
// count in them.
func makeLines(n int) ([]string, map[string]int64) {
	want := map[string]int64{}
	lines := make([]string, n)
	for i := range lines {
		ws := make([]string, 5)
		for k := range ws {
			ws[k] = "w" + strconv.Itoa((i*7+k*131+i*k)%1000)
			want[ws[k]]++
		}
		lines[i] = strings.Join(ws, " ")
	}
	return lines, want
}

func produceLines(tb testing.TB, cl *kgo.Client, topic string, lines []string) {
	rs := make([]*kgo.Record, len(lines))
	for i, l := range lines {
		rs[i] = &kgo.Record{Topic: topic, Value: []byte(l)}
	}
	if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		tb.Fatal(err)
	}
}

// awaitCounts reads out from its start (read_committed) until every word's latest count is
// the one in want, failing after timeout. A count above want fails at once.
func awaitCounts(tb testing.TB, addr, out string, want map[string]int64, timeout time.Duration) {
	cl := newClient(tb, addr, kgo.ConsumeTopics(out), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	got := map[string]int64{}
	for left := len(want); left > 0; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			tb.Fatalf("%d of %d words not at their final count after %v", left, len(want), timeout)
		}
		fs.EachRecord(func(r *kgo.Record) {
			c, err := strconv.ParseInt(string(r.Value), 10, 64)
			if err != nil {
				tb.Fatalf("value %q of %q: %v", r.Value, r.Key, err)
			}
			k := string(r.Key)
			if c > want[k] {
				tb.Fatalf("word %q counted %d, want at most %d", k, c, want[k])
			}
			if got[k] != want[k] && c == want[k] {
				left--
			}
			got[k] = c
		})
	}
}

// cpu is the CPU time (user and system) the test process has spent.
func cpu() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestSameCounts: each library's word count of the same input ends with exactly the
// expected count for every word.
func TestSameCounts(t *testing.T) {
	addr := startBroker(t)
	cl := newClient(t, addr)
	lines, want := makeLines(2000)
	for _, c := range counters {
		t.Run(c.name, func(t *testing.T) {
			j := newJob(c.name)
			prepare(t, cl, j)
			produceLines(t, cl, j.lines, lines)
			stop := c.start(t, addr, j)
			defer stop()
			awaitCounts(t, addr, j.out, want, 2*time.Minute)
		})
	}
}

// BenchmarkWordCount: the time and test-process CPU from a library's start until the
// count of every word of the preloaded lines is in the output. One op is one whole run
// (use -benchtime 1x); GREGOR_BENCH_LINES sets the lines (200,000 by default).
func BenchmarkWordCount(b *testing.B) {
	addr := startBroker(b)
	cl := newClient(b, addr, kgo.ProducerBatchMaxBytes(1<<20))
	n := envInt("GREGOR_BENCH_LINES", 200_000)
	lines, want := makeLines(n)
	for _, c := range counters {
		b.Run(c.name, func(b *testing.B) {
			var elapsed, spent time.Duration
			for b.Loop() {
				b.StopTimer()
				j := newJob(c.name)
				prepare(b, cl, j)
				produceLines(b, cl, j.lines, lines)
				b.StartTimer()
				t0, c0 := time.Now(), cpu()
				stop := c.start(b, addr, j)
				awaitCounts(b, addr, j.out, want, 10*time.Minute)
				elapsed += time.Since(t0)
				spent += cpu() - c0
				b.StopTimer()
				stop()
				b.StartTimer()
			}
			b.ReportMetric(float64(n*b.N)/elapsed.Seconds(), "lines/s")
			b.ReportMetric(float64(n*b.N)/spent.Seconds(), "lines/cpu-s")
		})
	}
}
