package streams_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gregor-project/gregor/streams"
	"github.com/gregor-project/gregor/streams/serde"
	"github.com/gregor-project/gregor/streams/streamstest"
)

func at(ms int64) time.Time { return time.UnixMilli(1_700_000_000_000 + ms) }

type kv = streams.KeyValue[string, string]

func equal[T comparable](t *testing.T, what string, got, want []T) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s:\n got %v\nwant %v", what, got, want)
	}
}

func wordCount(b *streams.Builder) {
	lines := streams.Stream(b, "text-lines", serde.String, serde.String)
	words := streams.FlatMapValues(lines, func(l string) []string { return strings.Fields(strings.ToLower(l)) })
	counts := streams.Count(streams.GroupBy(words, func(_, w string) string { return w }, serde.String), streams.Named("counts"))
	streams.To(streams.ToStream(counts), "word-counts", serde.String, serde.Int64Text)
}

func TestWordCount(t *testing.T) {
	b := streams.NewBuilder()
	wordCount(b)
	d := streamstest.New(t, b)
	in := streamstest.Input(d, "text-lines", serde.String, serde.String)
	out := streamstest.Output(d, "word-counts", serde.String, serde.Int64Text)

	lines := []string{"The quick fox", "the lazy dog", "", "Fox  THE end"}
	var want []streams.KeyValue[string, int64]
	counts := map[string]int64{}
	for i, l := range lines {
		in.Pipe("", l, at(int64(i)))
		for _, w := range strings.Fields(strings.ToLower(l)) {
			counts[w]++
			want = append(want, streams.KV(w, counts[w]))
		}
	}
	equal(t, "counts", out.ReadKeyValues(), want)

	store := streamstest.KeyValueStore[string, int64](d, "counts")
	got := map[string]int64{}
	for k, v := range store.All() {
		got[k] = v
	}
	if !maps.Equal(got, counts) || store.Len() != len(counts) {
		t.Fatalf("store %v, want %v", got, counts)
	}
	// The store's changelog carries every update, 8-byte counts as Kafka's LongSerde.
	changes := streamstest.Output(d, "counts-changelog", serde.String, serde.Int64).ReadKeyValues()
	equal(t, "changelog", changes, want)
	// The grouping went through the repartition topic.
	if n := len(streamstest.Output(d, "counts-repartition", serde.String, serde.String).ReadRecords()); n != len(want) {
		t.Fatalf("%d records through the repartition topic, want %d", n, len(want))
	}
}

func TestDescribe(t *testing.T) {
	b := streams.NewBuilder()
	wordCount(b)
	want := `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [text-lines])
      --> KSTREAM-FLATMAPVALUES-0000000001
    Processor: KSTREAM-FLATMAPVALUES-0000000001 (stores: [])
      --> KSTREAM-KEY-SELECT-0000000002
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-KEY-SELECT-0000000002 (stores: [])
      --> counts-repartition-filter
      <-- KSTREAM-FLATMAPVALUES-0000000001
    Processor: counts-repartition-filter (stores: [])
      --> counts-repartition-sink
      <-- KSTREAM-KEY-SELECT-0000000002
    Sink: counts-repartition-sink (topic: counts-repartition)
      <-- counts-repartition-filter

   Sub-topology: 1
    Source: counts-repartition-source (topics: [counts-repartition])
      --> counts
    Processor: counts (stores: [counts])
      --> KTABLE-TOSTREAM-0000000003
      <-- counts-repartition-source
    Processor: KTABLE-TOSTREAM-0000000003 (stores: [])
      --> KSTREAM-SINK-0000000004
      <-- counts
    Sink: KSTREAM-SINK-0000000004 (topic: word-counts)
      <-- KTABLE-TOSTREAM-0000000003

`
	if got := b.Describe(); got != want {
		t.Fatalf("Describe:\n%q\nwant:\n%q", got, want)
	}
}

func TestStatelessOperators(t *testing.T) {
	b := streams.NewBuilder()
	s := streams.Stream(b, "in", serde.String, serde.String)
	long := func(_ string, v string) bool { return len(v) > 2 }
	streams.To(s.Filter(long), "filter", serde.String, serde.String)
	streams.To(s.FilterNot(long), "filternot", serde.String, serde.String)
	streams.To(streams.Map(s, func(k, v string) (string, int32) { return v, int32(len(k)) }), "map", serde.String, serde.Int32)
	streams.To(streams.MapValues(s, strings.ToUpper), "mapvalues", serde.String, serde.String)
	streams.To(streams.FlatMap(s, func(k, v string) []kv {
		var out []kv
		for _, c := range v {
			out = append(out, streams.KV(string(c), k))
		}
		return out
	}), "flatmap", serde.String, serde.String)
	streams.To(streams.FlatMapValues(s, func(v string) []string { return []string{v, v + v} }), "flatmapvalues", serde.String, serde.String)
	streams.To(streams.SelectKey(s, func(k, v string) string { return k + "/" + v }), "selectkey", serde.String, serde.String)
	var peeked, each []kv
	streams.To(s.Peek(func(k, v string) { peeked = append(peeked, streams.KV(k, v)) }), "peek", serde.String, serde.String)
	s.Foreach(func(k, v string) { each = append(each, streams.KV(k, v)) })
	other := streams.Stream(b, "in2", serde.String, serde.String)
	streams.To(s.Merge(other), "merge", serde.String, serde.String)

	d := streamstest.New(t, b)
	in := streamstest.Input(d, "in", serde.String, serde.String)
	in2 := streamstest.Input(d, "in2", serde.String, serde.String)
	input := []kv{{"a", "xy"}, {"bb", "xyz"}, {"c", "q"}}
	for i, r := range input {
		in.Pipe(r.Key, r.Value, at(int64(i)))
	}
	in2.Pipe("m", "merged", at(10))

	// Expectations computed from the input independently of the operators.
	var filter, filterNot, mapValues, flatMap, flatMapValues, selectKey []kv
	var mapped []streams.KeyValue[string, int32]
	for _, r := range input {
		if len(r.Value) > 2 {
			filter = append(filter, r)
		} else {
			filterNot = append(filterNot, r)
		}
		mapped = append(mapped, streams.KV(r.Value, int32(len(r.Key))))
		mapValues = append(mapValues, streams.KV(r.Key, strings.ToUpper(r.Value)))
		for _, c := range strings.Split(r.Value, "") {
			flatMap = append(flatMap, streams.KV(c, r.Key))
		}
		flatMapValues = append(flatMapValues, r, streams.KV(r.Key, r.Value+r.Value))
		selectKey = append(selectKey, streams.KV(r.Key+"/"+r.Value, r.Value))
	}
	out := func(topic string) []kv {
		return streamstest.Output(d, topic, serde.String, serde.String).ReadKeyValues()
	}
	equal(t, "filter", out("filter"), filter)
	equal(t, "filterNot", out("filternot"), filterNot)
	equal(t, "map", streamstest.Output(d, "map", serde.String, serde.Int32).ReadKeyValues(), mapped)
	equal(t, "mapValues", out("mapvalues"), mapValues)
	equal(t, "flatMap", out("flatmap"), flatMap)
	equal(t, "flatMapValues", out("flatmapvalues"), flatMapValues)
	equal(t, "selectKey", out("selectkey"), selectKey)
	equal(t, "peek output", out("peek"), input)
	equal(t, "peeked", peeked, input)
	equal(t, "foreach", each, input)
	equal(t, "merge", out("merge"), append(slices.Clone(input), streams.KV("m", "merged")))
}

func TestSplit(t *testing.T) {
	b := streams.NewBuilder()
	s := streams.Stream(b, "in", serde.String, serde.Int64)
	br := s.Split(streams.Named("n-")).
		Branch(func(_ string, v int64) bool { return v < 0 }, "neg").
		Branch(func(_ string, v int64) bool { return v%2 == 0 }, "even").
		DefaultBranch("odd")
	if len(br) != 3 {
		t.Fatalf("branches %v", slices.Collect(maps.Keys(br)))
	}
	for name, st := range br {
		streams.To(st, name, serde.String, serde.Int64)
	}
	only := s.Split().Branch(func(_ string, v int64) bool { return v == 0 }, "").NoDefaultBranch()
	streams.To(only["1"], "zero", serde.String, serde.Int64)

	d := streamstest.New(t, b)
	in := streamstest.Input(d, "in", serde.String, serde.Int64)
	want := map[string][]int64{}
	for i, v := range []int64{-2, 0, 1, 4, -3, 7} {
		in.Pipe(fmt.Sprint(i), v, at(int64(i)))
		switch {
		case v < 0:
			want["n-neg"] = append(want["n-neg"], v)
		case v%2 == 0:
			want["n-even"] = append(want["n-even"], v)
		default:
			want["n-odd"] = append(want["n-odd"], v)
		}
		if v == 0 {
			want["zero"] = append(want["zero"], v)
		}
	}
	for _, topic := range []string{"n-neg", "n-even", "n-odd", "zero"} {
		var got []int64
		for _, r := range streamstest.Output(d, topic, serde.String, serde.Int64).ReadRecords() {
			got = append(got, r.Value)
		}
		equal(t, topic, got, want[topic])
	}
}

func TestToWithPartitioner(t *testing.T) {
	b := streams.NewBuilder()
	s := streams.Stream(b, "in", serde.String, serde.Int32)
	streams.ToWith(s, "out", streams.Produced[string, int32]{Key: serde.String, Value: serde.Int32,
		Partitioner: func(_ string, _ string, v int32, n int) int { return int(v) % n }})
	d := streamstest.New(t, b)
	streamstest.Input(d, "in", serde.String, serde.Int32).Pipe("k", 5, at(0))
	rs := streamstest.Output(d, "out", serde.String, serde.Int32).ReadRecords()
	// The driver's topics have one partition: 5 % 1.
	if len(rs) != 1 || rs[0].Partition != 0 || rs[0].Value != 5 || !rs[0].Timestamp.Equal(at(0)) {
		t.Fatalf("records %+v", rs)
	}
}

func TestReduceAggregateAndRepartition(t *testing.T) {
	b := streams.NewBuilder()
	s := streams.Stream(b, "sales", serde.String, serde.Int64)
	// Reduce by key: no key change, so no repartition.
	max := streams.Reduce(streams.GroupByKey(s), func(acc, v int64) int64 { return acc + v }, streams.Named("sum"))
	streams.To(streams.ToStream(max), "sums", serde.String, serde.Int64)
	// Aggregate by a new key (the key's first letter) into JSON.
	type stat struct{ N, Total int64 }
	byLetter := streams.SelectKey(s, func(k string, _ int64) string { return k[:1] })
	agg := streams.Aggregate(streams.GroupByKey(byLetter, streams.Named("letters")),
		func() stat { return stat{} },
		func(_ string, v int64, a stat) stat { return stat{a.N + 1, a.Total + v} },
		serde.JSON[stat]())
	streams.To(streams.ToStream(agg), "stats", serde.String, serde.JSON[stat]())
	// An explicit repartition passes records through unchanged.
	streams.To(streams.Repartition(byLetter, streams.Named("again")), "again", serde.String, serde.Int64)

	d := streamstest.New(t, b)
	in := streamstest.Input(d, "sales", serde.String, serde.Int64)
	input := []streams.KeyValue[string, int64]{{"ab", 1}, {"ac", 2}, {"ab", 3}, {"b", 4}}
	var sums, again []streams.KeyValue[string, int64]
	var stats []streams.KeyValue[string, stat]
	sum, st := map[string]int64{}, map[string]stat{}
	for i, r := range input {
		in.Pipe(r.Key, r.Value, at(int64(i)))
		sum[r.Key] += r.Value
		sums = append(sums, streams.KV(r.Key, sum[r.Key]))
		l := r.Key[:1]
		st[l] = stat{st[l].N + 1, st[l].Total + r.Value}
		stats = append(stats, streams.KV(l, st[l]))
		again = append(again, streams.KV(l, r.Value))
	}
	equal(t, "sums", streamstest.Output(d, "sums", serde.String, serde.Int64).ReadKeyValues(), sums)
	equal(t, "stats", streamstest.Output(d, "stats", serde.String, serde.JSON[stat]()).ReadKeyValues(), stats)
	equal(t, "again", streamstest.Output(d, "again", serde.String, serde.Int64).ReadKeyValues(), again)
	if n := len(streamstest.Output(d, "letters-repartition", serde.String, serde.Int64).ReadRecords()); n != len(input) {
		t.Fatalf("%d records through letters-repartition", n)
	}
	if n := len(streamstest.Output(d, "sum-repartition", serde.String, serde.Int64).ReadRecords()); n != 0 {
		t.Fatalf("GroupByKey without a key change repartitioned %d records", n)
	}
}

func TestTableAndNullKeys(t *testing.T) {
	b := streams.NewBuilder()
	users := streams.Table(b, "users", serde.String, serde.String, streams.Named("users"))
	streams.To(streams.ToStream(users), "user-updates", serde.String, serde.String)
	s := streams.Stream(b, "clicks", serde.String, serde.String)
	streams.To(streams.ToStream(streams.Count(streams.GroupByKey(s), streams.Named("clicks"))), "click-counts", serde.String, serde.Int64)

	d := streamstest.New(t, b)
	u := streamstest.Input(d, "users", serde.String, serde.String)
	u.Pipe("1", "ann", at(0))
	u.Pipe("2", "bob", at(1))
	u.PipeBytes([]byte("1"), nil, at(2)) // tombstone
	u.Pipe("2", "bo", at(3))
	store := streamstest.KeyValueStore[string, string](d, "users")
	if _, ok, err := store.Get("1"); ok || err != nil {
		t.Fatalf("deleted key 1 still there (%v)", err)
	}
	if v, ok, err := store.Get("2"); !ok || v != "bo" || err != nil {
		t.Fatalf("key 2 = %q %v %v", v, ok, err)
	}
	rs := streamstest.Output(d, "user-updates", serde.String, serde.String).ReadRecords()
	if len(rs) != 4 || !rs[2].NullValue || rs[2].Key != "1" || rs[3].Value != "bo" {
		t.Fatalf("updates %+v", rs)
	}
	// Aggregations skip null keys and null values, as Kafka Streams does.
	c := streamstest.Input(d, "clicks", serde.String, serde.String)
	c.PipeBytes(nil, []byte("x"), at(4))
	c.PipeBytes([]byte("k"), nil, at(5))
	c.Pipe("k", "x", at(6))
	equal(t, "click counts", streamstest.Output(d, "click-counts", serde.String, serde.Int64).ReadKeyValues(),
		[]streams.KeyValue[string, int64]{{"k", 1}})
}
