package streams_test

import (
	"cmp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gregor-project/gregor/streams"
	"github.com/gregor-project/gregor/streams/serde"
	"github.com/gregor-project/gregor/streams/streamstest"
)

// expectFinal is what UntilWindowCloses must emit per input record, from the updates the
// aggregation emits per record (updates[i], from a reference): a window is emitted once,
// at the first record that brings the stream time to its end plus closeAfter, with the
// value it has then, unless its latest update is a deletion.
func expectFinal(in []input, updates [][]win, closeAfter int64) [][]win {
	latest := map[win]win{} // window (no value) -> its latest update
	emitted := map[win]bool{}
	st := int64(-1)
	var out [][]win
	for i, r := range in {
		st = max(st, r.ts)
		for _, u := range updates[i] {
			latest[win{u.key, u.start, u.end, 0, false}] = u
		}
		var now []win
		for w, u := range latest {
			if !emitted[w] && w.end+closeAfter <= st {
				emitted[w] = true
				if !u.null {
					now = append(now, u)
				}
			}
		}
		out = append(out, sortWins(now))
	}
	return out
}

func TestSuppressUntilWindowCloses(t *testing.T) {
	type topo struct {
		table      func(streams.KGroupedStream[string, int64]) streams.KTable[streams.Windowed[string], int64]
		keySerde   serde.Serde[streams.Windowed[string]]
		updates    func() ([]input, [][]win)
		closeAfter int64
	}
	const size, grace, gap, diff = 10, 4, 6, 8
	sum := func(vs []int64) int64 {
		var s int64
		for _, v := range vs {
			s += v
		}
		return s
	}
	for _, tc := range []struct {
		name string
		topo
	}{
		{"tumbling", topo{
			table: func(g streams.KGroupedStream[string, int64]) streams.KTable[streams.Windowed[string], int64] {
				return streams.CountWindowed(streams.WindowedBy(g, streams.TumblingWindows(size*time.Millisecond, grace*time.Millisecond)))
			},
			keySerde: streams.WindowedSerde(serde.String, size*time.Millisecond),
			updates: func() ([]input, [][]win) {
				in := slidingInput(3, 300, size, grace)
				var perRecord [][]win
				counts := map[win]int64{}
				st := int64(-1)
				for _, r := range in {
					st = max(st, r.ts)
					start := r.ts - r.ts%size
					var u []win
					if start+size > st-grace {
						w := win{r.key, start, start + size, 0, false}
						counts[w]++
						w.value = counts[w]
						u = append(u, w)
					}
					perRecord = append(perRecord, u)
				}
				return in, perRecord
			},
			closeAfter: grace,
		}},
		{"session", topo{
			table: func(g streams.KGroupedStream[string, int64]) streams.KTable[streams.Windowed[string], int64] {
				return streams.CountSessionWindowed(streams.SessionWindowedBy(g, streams.SessionWindowsOf(gap*time.Millisecond, grace*time.Millisecond)))
			},
			keySerde: streams.SessionWindowedSerde(serde.String),
			updates: func() ([]input, [][]win) {
				in := sessionInput(4, 300, gap, grace, true)
				for i := range in {
					in[i].value = 1
				}
				u, _ := bruteSessions(gap, grace, in, func(a, v int64) int64 { return a + v })
				return in, u
			},
			closeAfter: gap + grace + 1,
		}},
		{"sliding", topo{
			table: func(g streams.KGroupedStream[string, int64]) streams.KTable[streams.Windowed[string], int64] {
				return streams.AggregateWindowed(streams.SlidingWindowedBy(g, streams.SlidingWindowsOf(diff*time.Millisecond, grace*time.Millisecond)),
					func() int64 { return 0 }, func(_ string, v, acc int64) int64 { return acc + v }, serde.Int64)
			},
			keySerde: streams.WindowedSerde(serde.String, diff*time.Millisecond),
			updates: func() ([]input, [][]win) {
				in := slidingInput(5, 300, diff, grace)
				u, _, _ := bruteSliding(diff, grace, in, sum)
				return in, u
			},
			closeAfter: grace + 1,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := streams.NewBuilder()
			s := streams.Stream(b, "in", serde.String, serde.Int64)
			table := tc.table(streams.GroupByKey(s))
			streams.To(streams.ToStream(table), "updates", tc.keySerde, serde.Int64)
			final := streams.Suppress(table, streams.UntilWindowCloses(streams.Unbounded()))
			streams.To(streams.ToStream(final), "final", tc.keySerde, serde.Int64)

			d := streamstest.New(t, b)
			in := streamstest.Input(d, "in", serde.String, serde.Int64)
			updates := streamstest.Output(d, "updates", tc.keySerde, serde.Int64)
			out := streamstest.Output(d, "final", tc.keySerde, serde.Int64)
			records, wantUpdates := tc.updates()
			want := expectFinal(records, wantUpdates, tc.closeAfter)
			emitted := 0
			for i, r := range records {
				in.Pipe(r.key, r.value, time.UnixMilli(r.ts))
				if got := sessionRecords(updates); !slices.Equal(got, wantUpdates[i]) {
					t.Fatalf("record %d %+v: updates\n got %v\nwant %v", i, r, got, wantUpdates[i])
				}
				got := sessionRecords(out)
				if !slices.Equal(got, want[i]) {
					t.Fatalf("record %d %+v: final results\n got %v\nwant %v", i, r, got, want[i])
				}
				emitted += len(got)
			}
			if emitted < 20 {
				t.Fatalf("only %d final results", emitted)
			}
		})
	}
}

// UntilTimeLimit holds each key's updates for the limit after its first held-back one, then
// emits the latest; a full buffer emits its oldest early.
func TestSuppressUntilTimeLimit(t *testing.T) {
	const limit = 15
	for _, maxRecords := range []int64{0, 2} {
		b := streams.NewBuilder()
		s := streams.Stream(b, "in", serde.String, serde.Int64)
		counts := streams.Count(streams.GroupByKey(s))
		held := streams.Suppress(counts, streams.UntilTimeLimit(limit*time.Millisecond, streams.BufferConfig{MaxRecords: maxRecords, EmitEarlyWhenFull: true}))
		streams.To(streams.ToStream(held), "out", serde.String, serde.Int64)
		d := streamstest.New(t, b)
		in := streamstest.Input(d, "in", serde.String, serde.Int64)
		out := streamstest.Output(d, "out", serde.String, serde.Int64)

		type entry struct {
			key         string
			first, seq  int64
			count, time int64
		}
		counted := map[string]int64{}
		buf := map[string]*entry{}
		st, seq := int64(-1), int64(0)
		latest := map[string]int64{} // a count's timestamp: its key's latest record's (timestamped stores)
		for i, r := range sessionInput(9, 300, 10, 5, true) {
			in.Pipe(r.key, r.value, time.UnixMilli(r.ts))
			st = max(st, r.ts)
			counted[r.key]++
			if _, ok := latest[r.key]; !ok {
				latest[r.key] = r.ts
			}
			latest[r.key] = max(latest[r.key], r.ts)
			ts := latest[r.key]
			if e, ok := buf[r.key]; ok {
				e.count, e.time = counted[r.key], ts
			} else {
				seq++
				buf[r.key] = &entry{r.key, ts, seq, counted[r.key], ts}
			}
			oldest := func() *entry {
				var o *entry
				for _, e := range buf {
					if o == nil || cmp.Or(cmp.Compare(e.first, o.first), cmp.Compare(e.seq, o.seq)) < 0 {
						o = e
					}
				}
				return o
			}
			var want []streamstest.Record[string, int64]
			for o := oldest(); o != nil && o.first <= st-limit; o = oldest() {
				want = append(want, streamstest.Record[string, int64]{Key: o.key, Value: o.count, Timestamp: time.UnixMilli(o.time), Partition: -1})
				delete(buf, o.key)
			}
			for maxRecords > 0 && int64(len(buf)) > maxRecords {
				o := oldest()
				want = append(want, streamstest.Record[string, int64]{Key: o.key, Value: o.count, Timestamp: time.UnixMilli(o.time), Partition: -1})
				delete(buf, o.key)
			}
			if got := out.ReadRecords(); !slices.Equal(got, want) {
				t.Fatalf("max records %d, record %d %+v:\n got %v\nwant %v", maxRecords, i, r, got, want)
			}
		}
	}
}

func TestSuppressShutDownWhenFull(t *testing.T) {
	b := streams.NewBuilder()
	s := streams.Stream(b, "in", serde.String, serde.String)
	counts := streams.CountWindowed(streams.WindowedBy(streams.GroupByKey(s), streams.TumblingWindows(time.Minute, 0)))
	final := streams.Suppress(counts, streams.UntilWindowCloses(streams.BufferConfig{MaxRecords: 2}))
	streams.To(streams.ToStream(final), "out", streams.WindowedSerde(serde.String, time.Minute), serde.Int64)
	d := streamstest.New(t, b)
	for i, k := range []string{"a", "b", "c"} {
		err := d.Raw().PipeRaw("in", []byte(k), []byte("x"), at(int64(i)), nil)
		if (err != nil) != (i == 2) || (err != nil && !strings.Contains(err.Error(), "max capacity")) {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	// Emitting early is not a final result: refused.
	b = streams.NewBuilder()
	s = streams.Stream(b, "in", serde.String, serde.String)
	counts = streams.CountWindowed(streams.WindowedBy(streams.GroupByKey(s), streams.TumblingWindows(time.Minute, 0)))
	streams.Suppress(counts, streams.UntilWindowCloses(streams.BufferConfig{MaxRecords: 2, EmitEarlyWhenFull: true}))
	if _, err := streams.NewTestDriver(b, "x", at(0)); err == nil {
		t.Fatal("UntilWindowCloses emitting early was accepted")
	}
	// A table that is not windowed has no window to close.
	b = streams.NewBuilder()
	streams.Suppress(streams.Count(streams.GroupByKey(streams.Stream(b, "in", serde.String, serde.String))), streams.UntilWindowCloses(streams.Unbounded()))
	if _, err := streams.NewTestDriver(b, "x", at(0)); err == nil {
		t.Fatal("UntilWindowCloses of a table that is not windowed was accepted")
	}
}

// Describe names the nodes and stores as Kafka Streams' TopologyDescription does.
func TestDescribeWindowedSuppress(t *testing.T) {
	b := streams.NewBuilder()
	s := streams.Stream(b, "input", serde.String, serde.String)
	counts := streams.CountSessionWindowed(streams.SessionWindowedBy(streams.GroupByKey(s), streams.SessionWindowsOf(time.Minute, 0)))
	final := streams.Suppress(counts, streams.UntilWindowCloses(streams.Unbounded()))
	streams.To(streams.ToStream(final), "output", streams.SessionWindowedSerde(serde.String), serde.Int64)
	want := `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [input])
      --> KSTREAM-AGGREGATE-0000000002
    Processor: KSTREAM-AGGREGATE-0000000002 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000001])
      --> KTABLE-SUPPRESS-0000000003
      <-- KSTREAM-SOURCE-0000000000
    Processor: KTABLE-SUPPRESS-0000000003 (stores: [KTABLE-SUPPRESS-STATE-STORE-0000000004])
      --> KTABLE-TOSTREAM-0000000005
      <-- KSTREAM-AGGREGATE-0000000002
    Processor: KTABLE-TOSTREAM-0000000005 (stores: [])
      --> KSTREAM-SINK-0000000006
      <-- KTABLE-SUPPRESS-0000000003
    Sink: KSTREAM-SINK-0000000006 (topic: output)
      <-- KTABLE-TOSTREAM-0000000005

`
	if got := b.Describe(); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	// Reduce is named as Kafka names it; Named names the suppression and its store.
	b = streams.NewBuilder()
	s = streams.Stream(b, "input", serde.String, serde.String)
	r := streams.ReduceSessionWindowed(streams.SessionWindowedBy(streams.GroupByKey(s), streams.SessionWindowsOf(time.Minute, 0)), func(a, v string) string { return a + v })
	streams.Suppress(r, streams.UntilWindowCloses(streams.Unbounded()), streams.Named("final"))
	join := func(a, v string) string { return a + v }
	streams.ReduceWindowed(streams.SlidingWindowedBy(streams.GroupByKey(s), streams.SlidingWindowsOf(time.Minute, 0)), join)
	streams.ReduceWindowed(streams.WindowedBy(streams.GroupByKey(s), streams.TumblingWindows(time.Minute, 0)), join)
	got := b.Describe()
	for _, line := range []string{
		"Processor: KSTREAM-REDUCE-0000000002 (stores: [KSTREAM-REDUCE-STATE-STORE-0000000001])",
		"Processor: final (stores: [final-store])",
		"Processor: KSTREAM-REDUCE-0000000004 (stores: [KSTREAM-REDUCE-STATE-STORE-0000000003])",
		"Processor: KSTREAM-REDUCE-0000000006 (stores: [KSTREAM-REDUCE-STATE-STORE-0000000005])",
	} {
		if !strings.Contains(got, line) {
			t.Fatalf("no %q in\n%s", line, got)
		}
	}
}
