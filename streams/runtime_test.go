package streams_test

import (
	"context"
	"errors"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/embed"
	"github.com/gregor-project/gregor/embed/embedtest"
	"github.com/gregor-project/gregor/streams"
)

// running is an App running in the background until the test stops it.
type running struct {
	app  *streams.App
	done chan error
}

func start(t *testing.T, addr, appID string, g streams.Guarantee) *running {
	t.Helper()
	b := streams.NewBuilder()
	wordCount(b)
	app, err := streams.New(b, streams.Config{ApplicationID: appID, Brokers: []string{addr}, Guarantee: g, CommitInterval: 50 * time.Millisecond,
		StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	r := &running{app: app, done: make(chan error, 1)}
	go func() { r.done <- app.Run(context.Background()) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *running) stop(t *testing.T) {
	t.Helper()
	if r.app == nil {
		return
	}
	if err := r.app.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if err := <-r.done; err != nil {
		t.Errorf("run: %v", err)
	}
	r.app = nil
}

// produceLines writes lines to topic, keyless, and waits for their acknowledgement.
func produceLines(t *testing.T, cl *kgo.Client, topic string, lines []string) {
	t.Helper()
	var rs []*kgo.Record
	for _, l := range lines {
		rs = append(rs, &kgo.Record{Topic: topic, Value: []byte(l)})
	}
	if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// countWords is the expectation, computed without the library.
func countWords(counts map[string]int64, lines []string) {
	for _, l := range lines {
		for _, w := range strings.Fields(strings.ToLower(l)) {
			counts[w]++
		}
	}
}

// latest consumes topic's committed records from the start and keeps the last decimal value
// per key until it equals want or the deadline passes. It returns every value read per key.
func latest(t *testing.T, addr, topic string, want map[string]int64) map[string][]int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got := map[string]int64{}
	all := map[string][]int64{}
	for !maps.Equal(got, want) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("output of %s: got %v, want %v", topic, got, want)
		}
		fs.EachRecord(func(r *kgo.Record) {
			n, err := strconv.ParseInt(string(r.Value), 10, 64)
			if err != nil {
				t.Errorf("value %q: %v", r.Value, err)
			}
			got[string(r.Key)] = n
			all[string(r.Key)] = append(all[string(r.Key)], n)
		})
	}
	return all
}

// Word count against a real node: two input partitions (two tasks per sub-topology), the
// repartition and compacted changelog topics created by the application, and a second run
// that restores its counts from the changelog and continues them.
func TestWordCountAgainstBroker(t *testing.T) {
	for _, g := range []streams.Guarantee{streams.AtLeastOnce, streams.ExactlyOnceV2} {
		t.Run(string(g), func(t *testing.T) { testWordCount(t, g) })
	}
}

func testWordCount(t *testing.T, g streams.Guarantee) {
	n := embedtest.Start(t, embed.Options{})
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	for _, topic := range []string{"text-lines", "word-counts"} {
		if _, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}

	want := map[string]int64{}
	first := []string{"the quick brown fox", "jumps over the lazy dog", "THE END"}
	produceLines(t, cl, "text-lines", first)
	countWords(want, first)
	app := start(t, n.Addr(), "wc", g)
	latest(t, n.Addr(), "word-counts", want)

	// The application created its internal topics; the changelog is compacted.
	cfgs, err := adm.DescribeTopicConfigs(ctx, "wc-counts-changelog")
	if err != nil {
		t.Fatal(err)
	}
	policy, err := cfgs.On("wc-counts-changelog", nil)
	if err != nil {
		t.Fatal(err)
	}
	var compact bool
	for _, c := range policy.Configs {
		compact = compact || (c.Key == "cleanup.policy" && c.MaybeValue() == "compact")
	}
	if !compact {
		t.Fatalf("changelog configs %+v: not compacted", policy.Configs)
	}
	td, err := adm.ListTopics(ctx, "wc-counts-repartition")
	if err != nil || td["wc-counts-repartition"].Err != nil || len(td["wc-counts-repartition"].Partitions) != 2 {
		t.Fatalf("repartition topic: %v %+v", err, td)
	}

	// Stop, write more, start again: the new instance restores the counts from the
	// changelog and continues from the committed offsets.
	app.stop(t)
	second := []string{"the fox again", "and the dog"}
	produceLines(t, cl, "text-lines", second)
	countWords(want, second)
	start(t, n.Addr(), "wc", g)
	all := latest(t, n.Addr(), "word-counts", want)
	if g != streams.ExactlyOnceV2 {
		return
	}
	// Exactly once: each word's committed counts are 1, 2, ... n, none repeated or skipped.
	for w, vs := range all {
		for i, v := range vs {
			if v != int64(i+1) {
				t.Fatalf("counts of %q: %v", w, vs)
			}
		}
	}
}

func TestMissingInputTopic(t *testing.T) {
	n := embedtest.Start(t, embed.Options{})
	b := streams.NewBuilder()
	wordCount(b)
	app, err := streams.New(b, streams.Config{ApplicationID: "x", Brokers: []string{n.Addr()}, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := app.Run(ctx); err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run without its input topic: %v", err)
	}
}

// Close before Run has started: Run returns nil at once instead of running on.
func TestCloseBeforeRun(t *testing.T) {
	b := streams.NewBuilder()
	wordCount(b)
	app, err := streams.New(b, streams.Config{ApplicationID: "closed-early", Brokers: []string{"127.0.0.1:1"}, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Close(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- app.Run(context.Background()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after Close: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run after Close still running a minute later")
	}
}
