package streams_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/gregor-project/gregor/streams"
	"github.com/gregor-project/gregor/streams/serde"
	"github.com/gregor-project/gregor/streams/streamstest"
)

// out is one expected output record of a table: a value, or a deletion.
type out struct {
	K, V string
	Del  bool
}

func readTable(d *streamstest.Driver, topic string) []out {
	var rs []out
	for _, r := range streamstest.Output(d, topic, serde.String, serde.String).ReadRecords() {
		rs = append(rs, out{r.Key, r.Value, r.NullValue})
	}
	return rs
}

// Random updates and deletions on both tables, checked against the join's definition: after
// each update the result of its key is the join of both tables' current values (inner: in
// both; left: in the left; outer: in either); the join forwards that result (or its
// deletion) whenever the key is in the result before or after the update, and nothing when
// it is in neither. Deletions are only of keys present, so no deletion is ambiguous.
func TestTableTableJoinRandom(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 2))
		b := streams.NewBuilder()
		l := streams.Table(b, "lt", serde.String, serde.String, streams.Named("lt-store"))
		r := streams.Table(b, "rt", serde.String, serde.String, streams.Named("rt-store"))
		streams.To(streams.ToStream(streams.JoinTables(l, r, func(a, c string) string { return a + "+" + c })), "inner", serde.String, serde.String)
		streams.To(streams.ToStream(streams.LeftJoinTables(l, r, func(a, c string, found bool) string { return sideJoiner(a, c, true, found) })), "leftj", serde.String, serde.String)
		streams.To(streams.ToStream(streams.OuterJoinTables(l, r, sideJoiner, streams.MaterializedWith("outer-store", serde.String))), "outer", serde.String, serde.String)
		d := streamstest.New(t, b)
		lin := streamstest.Input(d, "lt", serde.String, serde.String)
		rin := streamstest.Input(d, "rt", serde.String, serde.String)

		lm, rm := map[string]string{}, map[string]string{}
		result := func(kind, k string) (string, bool) {
			lv, hasL := lm[k]
			rv, hasR := rm[k]
			switch {
			case kind == "inner" && hasL && hasR, kind == "leftj" && hasL, kind == "outer" && (hasL || hasR):
				return sideJoiner(lv, rv, hasL, hasR), true
			}
			return "", false
		}
		want := map[string][]out{}
		for i := range 200 {
			left := rng.IntN(2) == 0
			m, in := rm, rin
			if left {
				m, in = lm, lin
			}
			k := fmt.Sprint("k", rng.IntN(5))
			before := map[string]bool{}
			for _, kind := range []string{"inner", "leftj", "outer"} {
				_, before[kind] = result(kind, k)
			}
			if _, ok := m[k]; ok && rng.IntN(3) == 0 {
				delete(m, k)
				in.PipeBytes([]byte(k), nil, at(int64(i)))
			} else {
				m[k] = fmt.Sprint(i)
				in.Pipe(k, m[k], at(int64(i)))
			}
			for _, kind := range []string{"inner", "leftj", "outer"} {
				v, ok := result(kind, k)
				switch {
				case ok:
					want[kind] = append(want[kind], out{k, v, false})
				case before[kind]:
					want[kind] = append(want[kind], out{k, "", true})
				}
			}
		}
		for _, kind := range []string{"inner", "leftj", "outer"} {
			equal(t, fmt.Sprintf("seed %d %s", seed, kind), readTable(d, kind), want[kind])
		}
		// The materialized outer join holds the result of every key.
		got := map[string]string{}
		for k, v := range streamstest.KeyValueStore[string, string](d, "outer-store").All() {
			got[k] = v
		}
		wantStore := map[string]string{}
		for i := range 5 {
			k := fmt.Sprint("k", i)
			if v, ok := result("outer", k); ok {
				wantStore[k] = v
			}
		}
		if !maps.Equal(got, wantStore) {
			t.Fatalf("seed %d: outer store %v, want %v", seed, got, wantStore)
		}
	}
}

// Filter and MapValuesTable on a table: a rejected update deletes its key downstream; a
// stream joined with the filtered, mapped table (which has no store of its own) sees it
// through the source table's store; Materialized keeps a derived table in a store.
func TestTableFilterMapValues(t *testing.T) {
	b := streams.NewBuilder()
	users := streams.Table(b, "users", serde.String, serde.String, streams.Named("users"))
	active := users.Filter(func(_, v string) bool { return v != "banned" })
	upper := streams.MapValuesTable(active, func(v string) int { return len(v) })
	streams.To(streams.ToStream(active), "active", serde.String, serde.String)
	counted := streams.MapValuesTable(active, func(v string) string { return v + "!" }, streams.Materialized("loud"))
	streams.To(streams.ToStream(counted), "loud-out", serde.String, serde.String)
	events := streams.Stream(b, "events", serde.String, serde.String)
	streams.To(streams.Join(events, upper, func(e string, n int) string { return fmt.Sprint(e, ":", n) }), "joined", serde.String, serde.String)

	d := streamstest.New(t, b)
	u := streamstest.Input(d, "users", serde.String, serde.String)
	e := streamstest.Input(d, "events", serde.String, serde.String)
	u.Pipe("1", "ann", at(0))
	u.Pipe("2", "banned", at(1))
	e.Pipe("1", "x", at(2))
	e.Pipe("2", "y", at(3)) // filtered out: no join
	u.Pipe("1", "banned", at(4))
	e.Pipe("1", "z", at(5)) // 1 is banned now
	u.Pipe("2", "bobby", at(6))
	e.Pipe("2", "w", at(7))
	u.PipeBytes([]byte("2"), nil, at(8))
	equal(t, "active", readTable(d, "active"), []out{{"1", "ann", false}, {"2", "", true}, {"1", "", true}, {"2", "bobby", false}, {"2", "", true}})
	equal(t, "joined", readTable(d, "joined"), []out{{"1", "x:3", false}, {"2", "w:5", false}})
	equal(t, "loud", readTable(d, "loud-out"), []out{{"1", "ann!", false}, {"2", "", true}, {"1", "", true}, {"2", "bobby!", false}, {"2", "", true}})
	if n := streamstest.KeyValueStore[string, string](d, "loud").Len(); n != 0 {
		t.Fatalf("loud store has %d entries, want 0", n)
	}
}

func TestTableTableJoinDescribe(t *testing.T) {
	b := streams.NewBuilder()
	l := streams.Table(b, "lt", serde.String, serde.String, streams.Named("ls"))
	r := streams.Table(b, "rt", serde.String, serde.String, streams.Named("rs"))
	streams.ToStream(streams.LeftJoinTables(l, r, func(a, c string, _ bool) string { return a + c }))
	want := `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [lt])
      --> KTABLE-SOURCE-0000000001
    Source: KSTREAM-SOURCE-0000000002 (topics: [rt])
      --> KTABLE-SOURCE-0000000003
    Processor: KTABLE-SOURCE-0000000001 (stores: [ls])
      --> KTABLE-LEFTTHIS-0000000004
      <-- KSTREAM-SOURCE-0000000000
    Processor: KTABLE-SOURCE-0000000003 (stores: [rs])
      --> KTABLE-LEFTOTHER-0000000005
      <-- KSTREAM-SOURCE-0000000002
    Processor: KTABLE-LEFTTHIS-0000000004 (stores: [rs])
      --> KTABLE-MERGE-0000000006
      <-- KTABLE-SOURCE-0000000001
    Processor: KTABLE-LEFTOTHER-0000000005 (stores: [ls])
      --> KTABLE-MERGE-0000000006
      <-- KTABLE-SOURCE-0000000003
    Processor: KTABLE-MERGE-0000000006 (stores: [])
      --> KTABLE-TOSTREAM-0000000007
      <-- KTABLE-LEFTTHIS-0000000004, KTABLE-LEFTOTHER-0000000005
    Processor: KTABLE-TOSTREAM-0000000007 (stores: [])
      --> none
      <-- KTABLE-MERGE-0000000006

`
	if got := b.Describe(); got != want {
		t.Fatalf("Describe:\n%s\nwant:\n%s", got, want)
	}
}
