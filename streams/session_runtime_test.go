package streams_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/embed"
	"github.com/gregor-project/gregor/embed/embedtest"
	"github.com/gregor-project/gregor/streams"
	"github.com/gregor-project/gregor/streams/serde"
)

// sessionCount counts clicks per user in sessions of one second of inactivity, writing every
// update to sessions and only the final counts to sessions-final.
func sessionCount(b *streams.Builder) {
	clicks := streams.Stream(b, "clicks", serde.String, serde.String)
	counts := streams.CountSessionWindowed(streams.SessionWindowedBy(streams.GroupByKey(clicks),
		streams.SessionWindowsOf(time.Second, 10*time.Second)), streams.Named("click-sessions"))
	ks := streams.SessionWindowedSerde(serde.String)
	streams.To(streams.ToStream(counts), "sessions", ks, serde.Int64Text)
	final := streams.Suppress(counts, streams.UntilWindowCloses(streams.Unbounded()), streams.Named("final"))
	streams.To(streams.ToStream(final), "sessions-final", ks, serde.Int64Text)
}

// sessionTable reads topic from the start until the table its records make (a null value
// deletes) equals want, or the deadline passes; it returns how many records it read.
func sessionTable(t *testing.T, addr, topic string, base int64, want map[string]string) int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got := map[string]string{}
	n := 0
	for !maps.Equal(got, want) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s: got %v, want %v", topic, got, want)
		}
		fs.EachRecord(func(r *kgo.Record) {
			n++
			k := r.Key[:len(r.Key)-16]
			end := int64(binary.BigEndian.Uint64(r.Key[len(k):])) - base
			start := int64(binary.BigEndian.Uint64(r.Key[len(k)+8:])) - base
			id := fmt.Sprintf("%s@%d-%d", k, start, end)
			if r.Value == nil {
				delete(got, id)
			} else {
				got[id] = string(r.Value)
			}
		})
	}
	return n
}

// A session-window count against a real node: sessions merge (the merged-away ones deleted
// in the output), and the final counts held back by suppression survive a restart (the
// buffer and the session store restored from their changelogs) to be emitted once the
// stream time has passed the sessions' end, gap and grace.
func TestSessionWindowsAgainstBroker(t *testing.T) {
	for _, g := range []streams.Guarantee{streams.AtLeastOnce, streams.ExactlyOnceV2} {
		t.Run(string(g), func(t *testing.T) { testSessionWindows(t, g) })
	}
}

func testSessionWindows(t *testing.T, g streams.Guarantee) {
	n := embedtest.Start(t, embed.Options{})
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	for _, topic := range []string{"clicks", "sessions", "sessions-final"} {
		if _, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	base := time.Now().UnixMilli()
	produce := func(p int32, key string, rel int64) *kgo.Record {
		return &kgo.Record{Topic: "clicks", Partition: p, Key: []byte(key), Value: []byte("click"), Timestamp: time.UnixMilli(base + rel)}
	}
	// u1 on partition 0, u2 on partition 1: u2's click at 1000 bridges its sessions at 0 and
	// 2000 (one second apart each), u1's clicks are one session in any order.
	if err := cl.ProduceSync(ctx,
		produce(0, "u1", 0), produce(1, "u2", 0), produce(0, "u1", 600), produce(1, "u2", 2000),
		produce(0, "u1", 300), produce(1, "u2", 1000), produce(0, "u1", 5000),
	).FirstErr(); err != nil {
		t.Fatal(err)
	}
	app := startSessionApp(t, n.Addr(), "clicks-app", g, sessionCount)
	updates := sessionTable(t, n.Addr(), "sessions", base, map[string]string{
		"u1@0-600": "3", "u1@5000-5000": "1", "u2@0-2000": "3",
	})
	// u1: [0,0]; its deletion and [0,600]; [0,600] deleted and put again with 3; [5000,5000].
	// u2: [0,0]; [2000,2000]; both deleted, and [0,2000]. Each once, exactly once.
	if updates < 11 || (g == streams.ExactlyOnceV2 && updates != 11) {
		t.Fatalf("%d session updates, want 11", updates)
	}
	app.stop(t)

	// After a restart, a click at 20000 on each partition closes the first sessions
	// (2000 + 1000 + 10000 < 20000): their final counts come out, and only theirs.
	if err := cl.ProduceSync(ctx, produce(0, "tick", 20000), produce(1, "tick", 20000)).FirstErr(); err != nil {
		t.Fatal(err)
	}
	startSessionApp(t, n.Addr(), "clicks-app", g, sessionCount)
	if got := sessionTable(t, n.Addr(), "sessions-final", base, map[string]string{
		"u1@0-600": "3", "u1@5000-5000": "1", "u2@0-2000": "3",
	}); got != 3 {
		t.Fatalf("%d final records, want 3", got)
	}

	// The session store's changelog is compacted and deleted past its retention, the
	// buffer's compacted, as Kafka Streams makes them.
	cfgs, err := adm.DescribeTopicConfigs(ctx, "clicks-app-click-sessions-changelog", "clicks-app-final-store-changelog")
	if err != nil {
		t.Fatal(err)
	}
	for topic, want := range map[string]string{"clicks-app-click-sessions-changelog": "compact,delete", "clicks-app-final-store-changelog": "compact"} {
		rc, err := cfgs.On(topic, nil)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, c := range rc.Configs {
			found = found || (c.Key == "cleanup.policy" && c.MaybeValue() == want)
		}
		if !found {
			t.Fatalf("%s: configs %+v, want cleanup.policy %s", topic, rc.Configs, want)
		}
	}
}

// startApp runs the topology build makes as application appID until the test stops it.
func startSessionApp(t *testing.T, addr, appID string, g streams.Guarantee, build func(*streams.Builder)) *running {
	t.Helper()
	b := streams.NewBuilder()
	build(b)
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
