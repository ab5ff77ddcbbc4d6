package streams_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/embed"
	"github.com/gregor-project/gregor/embed/embedtest"
	"github.com/gregor-project/gregor/streams"
	"github.com/gregor-project/gregor/streams/serde"
)

// A value the producer cannot send (larger than its largest batch): with a production
// exception handler answering continue, the record is dropped and counted and the others
// reach the output; with none (Kafka's default: fail), Run stops with the send's error.
func TestProductionExceptionHandler(t *testing.T) {
	n := embedtest.Start(t, embed.Options{})
	cl := topics(t, n.Addr(), 1, "in", "out")
	produceLines(t, cl, "in", []string{"a", "big", "b"})
	build := func() *streams.Builder {
		b := streams.NewBuilder()
		s := streams.MapValues(streams.Stream(b, "in", serde.String, serde.String), func(v string) string {
			if v == "big" {
				return strings.Repeat("x", 2<<20)
			}
			return v
		})
		streams.To(s, "out", serde.String, serde.String)
		return b
	}

	var handled []error
	var mu sync.Mutex
	app, err := streams.New(build(), streams.Config{ApplicationID: "prod-continue", Brokers: []string{n.Addr()}, StateDir: t.TempDir(),
		CommitInterval: 20 * time.Millisecond,
		ProductionExceptionHandler: func(r streams.ProducedRecord, err error) streams.ProductionResponse {
			mu.Lock()
			defer mu.Unlock()
			if r.Topic == "out" && len(r.Value) == 2<<20 {
				handled = append(handled, err)
			}
			return streams.ProductionContinue
		}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- app.Run(context.Background()) }()
	out, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), kgo.ConsumeTopics("out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	var got []string
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for len(got) < 2 {
		fs := out.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("output %v", got)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	eventually(t, func() bool { return app.SkippedProductions() == 1 }, func() string { return "the record was not counted" })
	if err := app.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Run with a continuing handler: %v", err)
	}
	mu.Lock()
	if !slices.Equal(got, []string{"a", "b"}) || len(handled) != 1 || !errors.Is(handled[0], kerr.MessageTooLarge) {
		t.Fatalf("output %v, handled %v", got, handled)
	}
	mu.Unlock()

	app, err = streams.New(build(), streams.Config{ApplicationID: "prod-fail", Brokers: []string{n.Addr()}, StateDir: t.TempDir(), CommitInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(context.Background(), time.Minute)
	defer rcancel()
	if err := app.Run(rctx); !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("Run without a handler: %v", err)
	}
}

// failing is a processor that fails on the value "boom" (only the first time when once is
// set) and reports every other value it processes.
type failing struct {
	once   bool
	failed *atomic.Bool
	seen   chan<- string
}

func (*failing) Init(streams.ProcessorContext[string, string]) error { return nil }
func (*failing) Close() error                                        { return nil }

func (f *failing) Process(r streams.Record[string, string]) error {
	if r.Value == "boom" && (!f.once || f.failed.CompareAndSwap(false, true)) {
		return errors.New("boom")
	}
	f.seen <- r.Value
	return nil
}

func failingTopology(once bool, failed *atomic.Bool, seen chan<- string) *streams.Builder {
	b := streams.NewBuilder()
	streams.Process(streams.Stream(b, "in", serde.String, serde.String), func() streams.Processor[string, string, string, string] {
		return &failing{once: once, failed: failed, seen: seen}
	}, nil)
	return b
}

// REPLACE_THREAD: the thread that failed is replaced by a new one (a new group member),
// which processes the failed record again, uncommitted as it was, and goes on.
func TestUncaughtReplaceThread(t *testing.T) {
	for _, g := range []streams.Guarantee{streams.AtLeastOnce, streams.ExactlyOnceV2} {
		t.Run(string(g), func(t *testing.T) { testReplaceThread(t, g) })
	}
}

func testReplaceThread(t *testing.T, g streams.Guarantee) {
	n := embedtest.Start(t, embed.Options{})
	cl := topics(t, n.Addr(), 1, "in")
	produceLines(t, cl, "in", []string{"one", "boom", "two"})
	seen := make(chan string, 100)
	var calls atomic.Int32
	app, err := streams.New(failingTopology(true, new(atomic.Bool), seen), streams.Config{ApplicationID: "replace",
		Brokers: []string{n.Addr()}, StateDir: t.TempDir(), CommitInterval: 20 * time.Millisecond, Guarantee: g,
		UncaughtExceptionHandler: func(err error) streams.StreamThreadExceptionResponse {
			if strings.Contains(err.Error(), "boom") {
				calls.Add(1)
			}
			return streams.ReplaceThread
		}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- app.Run(context.Background()) }()
	got := map[string]bool{}
	timeout := time.After(time.Minute) // a deadline for the condition
	for !got["boom"] || !got["two"] {
		select {
		case v := <-seen:
			got[v] = true
		case err := <-done:
			t.Fatalf("Run returned %v", err)
		case <-timeout:
			t.Fatalf("processed %v", got)
		}
	}
	if calls.Load() != 1 || app.ThreadsReplaced() != 1 {
		t.Fatalf("handler called %d times for boom, %d threads replaced", calls.Load(), app.ThreadsReplaced())
	}
	if err := app.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// SHUTDOWN_APPLICATION (KIP-671): the instance whose thread failed asks through the group,
// and every instance stops: it with its error, the other with ErrApplicationShutdown. With
// SHUTDOWN_CLIENT (the default) only the failed instance stops.
func TestUncaughtShutdownApplication(t *testing.T) {
	n := embedtest.Start(t, embed.Options{})
	topics(t, n.Addr(), 2, "in")
	var apps []*streams.App
	dones := []chan error{}
	for range 2 {
		app, err := streams.New(failingTopology(false, new(atomic.Bool), make(chan string, 100)), streams.Config{ApplicationID: "shutdown",
			Brokers: []string{n.Addr()}, StateDir: t.TempDir(), ApplicationServer: "localhost:1", CommitInterval: 20 * time.Millisecond,
			UncaughtExceptionHandler: func(error) streams.StreamThreadExceptionResponse { return streams.ShutdownApplication }})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- app.Run(context.Background()) }()
		t.Cleanup(func() { _ = app.Close() })
		apps = append(apps, app)
		dones = append(dones, done)
	}
	eventually(t, func() bool { return len(apps[0].Tasks()) == 1 && len(apps[1].Tasks()) == 1 },
		func() string { return "the two instances did not share the two tasks" })

	p, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.ProduceSync(context.Background(), &kgo.Record{Topic: "in", Partition: 0, Value: []byte("boom")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var errs []error
	timeout := time.After(2 * time.Minute)
	for range 2 {
		select {
		case err := <-dones[0]:
			errs = append(errs, err)
		case err := <-dones[1]:
			errs = append(errs, err)
		case <-timeout:
			t.Fatalf("instances still running after %v", errs)
		}
	}
	var failed, told int
	for _, err := range errs {
		switch {
		case errors.Is(err, streams.ErrApplicationShutdown):
			told++
		case err != nil && strings.Contains(err.Error(), "boom"):
			failed++
		}
	}
	if failed != 1 || told != 1 {
		t.Fatalf("Run errors %v: want one boom and one application shutdown", errs)
	}
}

// SHUTDOWN_CLIENT, the default: the failed instance's Run returns the error and the other
// instance takes its task over.
func TestUncaughtShutdownClient(t *testing.T) {
	n := embedtest.Start(t, embed.Options{})
	cl := topics(t, n.Addr(), 1, "in")
	seen := make(chan string, 100)
	var failed atomic.Bool
	cfg := streams.Config{ApplicationID: "client", Brokers: []string{n.Addr()}, StateDir: t.TempDir(), CommitInterval: 20 * time.Millisecond}
	first, err := streams.New(failingTopology(true, &failed, seen), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- first.Run(ctx) }()
	eventually(t, func() bool { return len(first.Tasks()) == 1 }, func() string { return "the first instance has no task" })
	second := startAppWith(t, failingTopology(true, &failed, seen), cfg)
	produceLines(t, cl, "in", []string{"boom", "after"})
	if err := <-done; err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("the failed instance's Run: %v", err)
	}
	got := map[string]bool{}
	for !got["boom"] || !got["after"] {
		select {
		case v := <-seen:
			got[v] = true
		case <-ctx.Done():
			t.Fatalf("the other instance processed %v", got)
		}
	}
	if len(second.app.Tasks()) != 1 {
		t.Fatalf("the other instance runs %v", second.app.Tasks())
	}
}

func startAppWith(t *testing.T, b *streams.Builder, cfg streams.Config) *running {
	t.Helper()
	if cfg.StateDir == "" {
		cfg.StateDir = t.TempDir()
	}
	app, err := streams.New(b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := &running{app: app, done: make(chan error, 1)}
	go func() { r.done <- app.Run(context.Background()) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}
