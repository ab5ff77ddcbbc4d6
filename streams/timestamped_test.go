package streams_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/embed"
	"github.com/gregor-project/gregor/embed/embedtest"
	"github.com/gregor-project/gregor/streams"
	"github.com/gregor-project/gregor/streams/serde"
	"github.com/gregor-project/gregor/streams/streamstest"
)

// stampedIn is records of two keys, a later one before an earlier one in places, all within
// the grace period.
var stampedIn = []input{
	{"a", 7_000, 1}, {"a", 3_000, 2}, {"b", 12_000, 3}, {"a", 15_000, 4}, {"b", 4_000, 5},
	{"a", 11_000, 6}, {"b", 19_000, 7}, {"b", 13_000, 8}, {"a", 2_000, 9},
}

// An aggregation's result carries the latest timestamp of the records it holds (Kafka's
// timestamped stores), not the current record's: the running maximum per key, and per key
// and window for a windowed one, computed here from the input. The changelog records carry
// the same timestamps with the value bytes alone.
func TestAggregationTimestamps(t *testing.T) {
	base := at(0).UnixMilli()
	const size = 10_000
	b := streams.NewBuilder()
	g := streams.GroupByKey(streams.Stream(b, "in", serde.String, serde.Int64))
	counts := streams.Count(g, streams.Named("counts"))
	streams.To(streams.ToStream(counts), "counts-out", serde.String, serde.Int64)
	sums := streams.Reduce(g, func(a, v int64) int64 { return a + v }, streams.Named("sums"))
	streams.To(streams.ToStream(sums), "sums-out", serde.String, serde.Int64)
	wcounts := streams.CountWindowed(streams.WindowedBy(g, streams.TumblingWindows(size*time.Millisecond, time.Hour)), streams.Named("wcounts"))
	ws := streams.WindowedSerde(serde.String, size*time.Millisecond)
	streams.To(streams.ToStream(wcounts), "wcounts-out", ws, serde.Int64)

	d := streamstest.New(t, b)
	in := streamstest.Input(d, "in", serde.String, serde.Int64)
	var wantTS, wantWinTS []int64
	var wantWin []int64 // window starts
	latest, latestWin := map[string]int64{}, map[[2]any]int64{}
	for _, r := range stampedIn {
		in.Pipe(r.key, r.value, time.UnixMilli(base+r.ts))
		latest[r.key] = max(latest[r.key], base+r.ts)
		wantTS = append(wantTS, latest[r.key])
		start := (base + r.ts) / size * size
		w := [2]any{r.key, start}
		latestWin[w] = max(latestWin[w], base+r.ts)
		wantWinTS = append(wantWinTS, latestWin[w])
		wantWin = append(wantWin, start)
	}
	for _, topic := range []string{"counts-out", "sums-out"} {
		var got []int64
		for _, r := range streamstest.Output(d, topic, serde.String, serde.Int64).ReadRecords() {
			got = append(got, r.Timestamp.UnixMilli())
		}
		if !slices.Equal(got, wantTS) {
			t.Fatalf("%s: timestamps %v, want %v", topic, got, wantTS)
		}
	}
	var got, starts []int64
	for _, r := range streamstest.Output(d, "wcounts-out", ws, serde.Int64).ReadRecords() {
		got = append(got, r.Timestamp.UnixMilli())
		starts = append(starts, r.Key.Window.Start.UnixMilli())
	}
	if !slices.Equal(got, wantWinTS) || !slices.Equal(starts, wantWin) {
		t.Fatalf("windowed: timestamps %v of windows %v, want %v of %v", got, starts, wantWinTS, wantWin)
	}

	// The changelogs: the value's bytes as the serde writes them, the result's timestamp.
	for store, want := range map[string][]int64{"counts": wantTS, "wcounts": wantWinTS} {
		recs := d.Raw().ReadOutput(streamstest.AppID + "-" + store + "-changelog")
		if len(recs) != len(want) {
			t.Fatalf("%s changelog: %d records, want %d", store, len(recs), len(want))
		}
		for i, r := range recs {
			if r.Timestamp.UnixMilli() != want[i] || len(r.Value) != 8 || binary.BigEndian.Uint64(r.Value) == 0 {
				t.Fatalf("%s changelog record %d: timestamp %d, value %x; want timestamp %d and a count of 8 bytes",
					store, i, r.Timestamp.UnixMilli(), r.Value, want[i])
			}
		}
	}
}

// readN reads topic from the start until it has n records (or fails after a minute).
func readN(t *testing.T, addr, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s: %d records, want %d", topic, len(out), n)
		}
		out = append(out, fs.Records()...)
	}
	return out
}

// A restored aggregation keeps its results' timestamps: after a restart (an in-memory
// store restored from the whole changelog, a persistent one from its files), an earlier
// record's result still carries the later timestamp the restored result had.
func TestAggregationTimestampsSurviveRestore(t *testing.T) {
	n := embedtest.Start(t, embed.Options{})
	for _, st := range []streams.StoreType{streams.InMemory, streams.Persistent} {
		t.Run(string(st), func(t *testing.T) {
			in, out := "ts-in-"+string(st), "ts-out-"+string(st)
			cl := topics(t, n.Addr(), 1, in, out)
			build := func(b *streams.Builder) {
				c := streams.Count(streams.GroupByKey(streams.Stream(b, in, serde.String, serde.String)),
					streams.Named("counts"), streams.WithStoreType(st))
				streams.To(streams.ToStream(c), out, serde.String, serde.Int64Text)
			}
			base := time.Now().UnixMilli()
			produce := func(rel int64) {
				t.Helper()
				r := &kgo.Record{Topic: in, Key: []byte("a"), Value: []byte("x"), Timestamp: time.UnixMilli(base + rel)}
				if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			dir := t.TempDir()
			start := func() *running {
				b := streams.NewBuilder()
				build(b)
				app, err := streams.New(b, streams.Config{ApplicationID: "ts-" + string(st), Brokers: []string{n.Addr()},
					CommitInterval: 50 * time.Millisecond, StateDir: dir})
				if err != nil {
					t.Fatal(err)
				}
				r := &running{app: app, done: make(chan error, 1)}
				go func() { r.done <- app.Run(context.Background()) }()
				t.Cleanup(func() { r.stop(t) })
				return r
			}
			produce(10_000)
			a := start()
			readN(t, n.Addr(), out, 1)
			a.stop(t)
			produce(5_000)
			start()
			recs := readN(t, n.Addr(), out, 2)
			if len(recs) != 2 || string(recs[1].Value) != "2" || recs[1].Timestamp.UnixMilli() != base+10_000 {
				t.Fatalf("after the restart: %q at %d, want 2 at %d", recs[len(recs)-1].Value, recs[len(recs)-1].Timestamp.UnixMilli()-base, 10_000)
			}
		})
	}
}

// A table-table join's result carries the later of both sides' timestamps: the update's
// and the other table's current value's (kept with it in the table's store), computed here
// from the updates piped in.
func TestTableJoinTimestamps(t *testing.T) {
	b := streams.NewBuilder()
	left := streams.Table(b, "left", serde.String, serde.String)
	right := streams.Table(b, "right", serde.String, serde.String)
	j := streams.LeftJoinTables(left, right, func(l, r string, found bool) string { return l + "/" + r })
	streams.To(streams.ToStream(j), "joined", serde.String, serde.String)
	d := streamstest.New(t, b)
	lin := streamstest.Input(d, "left", serde.String, serde.String)
	rin := streamstest.Input(d, "right", serde.String, serde.String)
	type update struct {
		left  bool
		key   string
		value string
		ts    int64
	}
	ups := []update{
		{true, "a", "x", 5_000}, {false, "a", "y", 9_000}, {true, "a", "z", 3_000}, {false, "a", "w", 2_000},
		{true, "b", "p", 4_000}, {false, "b", "q", 1_000}, {true, "b", "r", 6_000},
	}
	base := at(0).UnixMilli()
	latest := map[[2]any]int64{} // (side, key): the timestamp of its current value
	var want []int64
	for _, u := range ups {
		if u.left {
			lin.Pipe(u.key, u.value, time.UnixMilli(base+u.ts))
		} else {
			rin.Pipe(u.key, u.value, time.UnixMilli(base+u.ts))
		}
		latest[[2]any{u.left, u.key}] = base + u.ts
		other, found := latest[[2]any{!u.left, u.key}]
		switch {
		case found:
			want = append(want, max(base+u.ts, other))
		case u.left: // a left update without a right value joins alone
			want = append(want, base+u.ts)
		}
	}
	var got []int64
	for _, r := range streamstest.Output(d, "joined", serde.String, serde.String).ReadRecords() {
		got = append(got, r.Timestamp.UnixMilli())
	}
	if !slices.Equal(got, want) {
		t.Fatalf("join result timestamps %v, want %v", got, want)
	}
}

// A persistent store whose files lack the timestamped marker (written before its values
// carried timestamps) is restored from its changelog's start, not from the checkpoint, and
// gets the marker; the counts stay right.
func TestUnmarkedStoreRestoresFromStart(t *testing.T) {
	n, cl, adm := setupWordCount(t)
	dir := t.TempDir()
	want := map[string]int64{}
	l1 := manyLines("a", 200)
	produceLines(t, cl, "text-lines", l1)
	countWords(want, l1)
	a := startIn(t, n.Addr(), "wcm", streams.AtLeastOnce, dir, nil)
	latest(t, n.Addr(), "word-counts", want)
	a.stop(t)
	ends := changelogEnds(t, adm, "wcm-counts-changelog")
	for _, task := range []string{"1_0", "1_1"} {
		if err := os.Remove(filepath.Join(dir, "wcm", task, "counts.timestamped")); err != nil {
			t.Fatal(err)
		}
	}
	full := newProgressLog()
	l2 := manyLines("b", 50)
	produceLines(t, cl, "text-lines", l2)
	countWords(want, l2)
	startIn(t, n.Addr(), "wcm", streams.AtLeastOnce, dir, full)
	latest(t, n.Addr(), "word-counts", want)
	ev := full.events()
	for p := range int32(2) {
		if e := ev[p]; !e.ended || e.start != 0 || e.end != ends[p] || e.total != ends[p] || ends[p] == 0 {
			t.Fatalf("partition %d: restore %+v, want all %d records", p, e, ends[p])
		}
		if _, err := os.Stat(filepath.Join(dir, "wcm", fmt.Sprintf("1_%d", p), "counts.timestamped")); err != nil {
			t.Fatalf("no marker after the restore: %v", err)
		}
	}
}
