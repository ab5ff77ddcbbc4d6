package streams_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/embed"
	"github.com/gregor-project/gregor/embed/embedtest"
	"github.com/gregor-project/gregor/streams"
	"github.com/gregor-project/gregor/streams/serde"
	"github.com/gregor-project/gregor/streams/streamstest"
)

// BenchmarkWordCountDriver is the word count's processing cost alone: one five-word line
// per op through the test driver (both sub-topologies, the store and its changelog).
func BenchmarkWordCountDriver(b *testing.B) {
	bl := streams.NewBuilder()
	wordCount(bl)
	d := streamstest.New(b, bl)
	in := streamstest.Input(d, "text-lines", serde.String, serde.String)
	lines := make([]string, 64)
	for i := range lines {
		lines[i] = fmt.Sprintf("w%d w%d w%d w%d w%d", i%7, i%11, i%13, i%17, i%19)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		in.Pipe("", lines[i%len(lines)], at(int64(i)))
		if i%1024 == 0 {
			d.Raw().ReadOutput("word-counts")
			d.Raw().ReadOutput(d.Raw().TopicName("counts-changelog"))
			d.Raw().ReadOutput(d.Raw().TopicName("counts-repartition"))
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lines/s")
}

// BenchmarkWordCountBroker runs word count on one embedded node: b.N five-word lines are
// produced first, then the time from the application's start until every count is in the
// output is measured (group join and topic creation included).
func BenchmarkWordCountBroker(b *testing.B) {
	for _, g := range []streams.Guarantee{streams.AtLeastOnce, streams.ExactlyOnceV2} {
		b.Run(string(g), func(b *testing.B) { benchBroker(b, g, streams.Persistent) })
	}
}

// BenchmarkWordCountStores is BenchmarkWordCountBroker with the counts in persistent
// (pebble) and in in-memory stores, side by side.
func BenchmarkWordCountStores(b *testing.B) {
	for _, st := range []streams.StoreType{streams.Persistent, streams.InMemory} {
		for _, g := range []streams.Guarantee{streams.AtLeastOnce, streams.ExactlyOnceV2} {
			b.Run(string(st)+"/"+string(g), func(b *testing.B) { benchBroker(b, g, st) })
		}
	}
}

func benchBroker(b *testing.B, g streams.Guarantee, st streams.StoreType) {
	n := embedtest.Start(b, embed.Options{})
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), kgo.ProducerBatchMaxBytes(1<<20))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	for _, topic := range []string{"text-lines", "word-counts"} {
		if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, topic); err != nil {
			b.Fatal(err)
		}
	}
	want := map[string]int64{}
	var rs []*kgo.Record
	for i := range b.N {
		l := fmt.Sprintf("w%d w%d w%d w%d w%d", i%7, i%11, i%13, i%17, i%19)
		rs = append(rs, &kgo.Record{Topic: "text-lines", Value: []byte(l)})
	}
	for i := range b.N {
		for _, w := range []int{i % 7, i % 11, i % 13, i % 17, i % 19} {
			want["w"+strconv.Itoa(w)]++
		}
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		b.Fatal(err)
	}
	out, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), kgo.ConsumeTopics("word-counts"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		b.Fatal(err)
	}
	defer out.Close()
	bl := streams.NewBuilder()
	wordCount(bl)
	app, err := streams.New(bl, streams.Config{ApplicationID: "bench", Brokers: []string{n.Addr()}, Guarantee: g, StateDir: b.TempDir(), DefaultDSLStore: st,
		CommitInterval: 100 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	got := map[string]int64{}
	for left := len(want); left > 0; {
		fs := out.PollFetches(wctx)
		if wctx.Err() != nil {
			b.Fatalf("counts %v, want %v", got, want)
		}
		fs.EachRecord(func(r *kgo.Record) {
			c, err := strconv.ParseInt(string(r.Value), 10, 64)
			if err != nil {
				b.Errorf("value %q: %v", r.Value, err)
			}
			k := string(r.Key)
			if got[k] != want[k] && c == want[k] {
				left--
			}
			got[k] = c
		})
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lines/s")
	if err := app.Close(); err != nil {
		b.Fatal(err)
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}
