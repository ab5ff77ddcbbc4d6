package streams_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gregor-project/gregor/streams"
	"github.com/gregor-project/gregor/streams/serde"
	"github.com/gregor-project/gregor/streams/streamstest"
)

// kvt is an output record: key, value and timestamp (ms after at(0)).
type kvt struct {
	K, V string
	T    int64
}

func readKVT(d *streamstest.Driver, topic string) []kvt {
	var out []kvt
	for _, r := range streamstest.Output(d, topic, serde.String, serde.String).ReadRecords() {
		out = append(out, kvt{r.Key, r.Value, r.Timestamp.UnixMilli() - at(0).UnixMilli()})
	}
	return out
}

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

func sideJoiner(l, r string, hasL, hasR bool) string {
	if !hasL {
		l = "null"
	}
	if !hasR {
		r = "null"
	}
	return l + "+" + r
}

func buildStreamJoins(b *streams.Builder, w streams.JoinWindows) {
	l := streams.Stream(b, "left", serde.String, serde.String)
	r := streams.Stream(b, "right", serde.String, serde.String)
	streams.To(streams.JoinStreams(l, r, func(a, c string) string { return a + "+" + c }, w), "inner", serde.String, serde.String)
	streams.To(streams.LeftJoinStreams(l, r, func(a, c string, found bool) string { return sideJoiner(a, c, true, found) }, w), "leftj", serde.String, serde.String)
	streams.To(streams.OuterJoinStreams(l, r, sideJoiner, w), "outer", serde.String, serde.String)
}

// The semantics, checked against a brute force over random input: every left and right
// record of a key within the window joins exactly once, timed at the later of the two; in
// the left join every left record that joins nothing gives one null result, in the outer
// join every record of either side does. Records arrive out of order by less than the
// grace period and the window, so none is late and every result is exact.
func TestStreamStreamJoinRandom(t *testing.T) {
	const d, grace, jitter = 10, 6, 5
	w := streams.JoinTimeDifferenceAndGrace(ms(d), ms(grace))
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		b := streams.NewBuilder()
		buildStreamJoins(b, w)
		dr := streamstest.New(t, b)
		type in struct {
			left bool
			k, v string
			ts   int64
		}
		var ins []in
		for i := range 60 {
			base := int64(i * 3)
			ins = append(ins, in{rng.IntN(2) == 0, string(rune('a' + rng.IntN(3))), fmt.Sprint(i), base + int64(rng.IntN(jitter))})
		}
		lt := streamstest.Input(dr, "left", serde.String, serde.String)
		rt := streamstest.Input(dr, "right", serde.String, serde.String)
		for _, x := range ins {
			if x.left {
				lt.Pipe(x.k, x.v, at(x.ts))
			} else {
				rt.Pipe(x.k, x.v, at(x.ts))
			}
		}
		// Close every window: a record far later on each side, of a key that joins nothing.
		lt.Pipe("flush", "L", at(10_000))
		rt.Pipe("flush", "R", at(10_000))

		var inner, left, outer []kvt
		joined := make([]bool, len(ins))
		for i, x := range ins {
			for j, y := range ins {
				if !x.left || y.left || x.k != y.k || y.ts < x.ts-d || y.ts > x.ts+d {
					continue
				}
				r := kvt{x.k, x.v + "+" + y.v, max(x.ts, y.ts)}
				inner = append(inner, r)
				joined[i], joined[j] = true, true
			}
		}
		left = slices.Clone(inner)
		outer = slices.Clone(inner)
		for i, x := range ins {
			if joined[i] {
				continue
			}
			if x.left {
				left = append(left, kvt{x.k, x.v + "+null", x.ts})
				outer = append(outer, kvt{x.k, x.v + "+null", x.ts})
			} else {
				outer = append(outer, kvt{x.k, "null+" + x.v, x.ts})
			}
		}
		drop := func(rs []kvt) []kvt {
			return slices.DeleteFunc(rs, func(r kvt) bool { return r.K == "flush" })
		}
		sortKVT := func(rs []kvt) []kvt {
			slices.SortFunc(rs, func(a, b kvt) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
			return rs
		}
		for _, c := range []struct {
			topic string
			want  []kvt
		}{{"inner", inner}, {"leftj", left}, {"outer", outer}} {
			got := sortKVT(drop(readKVT(dr, c.topic)))
			equal(t, fmt.Sprintf("seed %d %s", seed, c.topic), got, sortKVT(c.want))
		}
		if n := dr.DroppedRecords(); n != 0 {
			t.Fatalf("seed %d: %d records dropped", seed, n)
		}
	}
}

// The left join step by step: a left record that joins nothing waits until its window has
// closed (stream time past its time + After + Grace) before its null result; a right record
// arriving out of order but within the grace period still joins it instead; a left record
// already past its window on arrival gets its null result at once; a record older than the
// store's retention (window size plus grace) is dropped from the store and counted.
func TestStreamStreamLeftJoinWaitsForWindowClose(t *testing.T) {
	b := streams.NewBuilder()
	buildStreamJoins(b, streams.JoinTimeDifferenceAndGrace(ms(10), ms(5)))
	d := streamstest.New(t, b)
	l := streamstest.Input(d, "left", serde.String, serde.String)
	r := streamstest.Input(d, "right", serde.String, serde.String)
	step := func(what string, pipe func(), want []kvt) {
		t.Helper()
		pipe()
		equal(t, what, readKVT(d, "leftj"), want)
	}
	step("A1 waits", func() { l.Pipe("a", "A1", at(100)) }, nil)
	step("right b: not an outer side", func() { r.Pipe("b", "B1", at(105)) }, nil)
	step("C1 waits", func() { l.Pipe("c", "C1", at(112)) }, nil)
	step("late right a joins A1", func() { r.Pipe("a", "ra", at(95)) }, []kvt{{"a", "A1+ra", 100}})
	step("A2 waits; A1 joined, so no null result", func() { l.Pipe("a", "A2", at(116)) }, nil)
	step("stream time 130 closes C1 (112+10+5 < 130), not A2", func() { r.Pipe("z", "Z", at(130)) }, []kvt{{"c", "C1+null", 112}})
	step("D1 past its window: at once", func() { l.Pipe("d", "D1", at(105)) }, []kvt{{"d", "D1+null", 105}})
	step("stream time 200 closes A2", func() { l.Pipe("x", "X", at(200)) }, []kvt{{"a", "A2+null", 116}})
	if n := d.DroppedRecords(); n != 0 {
		t.Fatalf("dropped %d", n)
	}
	// 170 <= 200 - 25: older than the left store's retention.
	step("E1 expired", func() { l.Pipe("e", "E1", at(170)) }, []kvt{{"e", "E1+null", 170}})
	// Dropped once by each of the three joins' left stores.
	if n := d.DroppedRecords(); n != 3 {
		t.Fatalf("dropped %d, want 3", n)
	}
	// The inner join saw the pairs only.
	equal(t, "inner", readKVT(d, "inner"), []kvt{{"a", "A1+ra", 100}})
	// The outer join also emitted the right records that joined nothing once closed: B1
	// (105+10+5 < 130) when stream time reached 130, Z (130+10+5 < 200) at 200.
	got := readKVT(d, "outer")
	want := []kvt{{"a", "A1+ra", 100}, {"b", "null+B1", 105}, {"c", "C1+null", 112}, {"d", "D1+null", 105},
		{"a", "A2+null", 116}, {"z", "null+Z", 130}, {"e", "E1+null", 170}}
	equal(t, "outer", got, want)
}

// Before and After differ: a left record at t joins right records in [t-Before, t+After],
// a right record at t joins left records in [t-After, t+Before].
func TestStreamStreamJoinAsymmetricWindow(t *testing.T) {
	b := streams.NewBuilder()
	w := streams.JoinTimeDifferenceWithNoGrace(0).WithBefore(0).WithAfter(ms(20))
	l := streams.Stream(b, "left", serde.String, serde.String)
	r := streams.Stream(b, "right", serde.String, serde.String)
	streams.To(streams.JoinStreams(l, r, func(a, c string) string { return a + "+" + c }, w), "inner", serde.String, serde.String)
	d := streamstest.New(t, b)
	lt := streamstest.Input(d, "left", serde.String, serde.String)
	rt := streamstest.Input(d, "right", serde.String, serde.String)
	rt.Pipe("k", "r0", at(0))   // before L1 at 10: outside [10, 30]
	lt.Pipe("k", "L1", at(10))  // joins right records in [10, 30]
	rt.Pipe("k", "r25", at(25)) // joins left records in [5, 25]: L1
	rt.Pipe("k", "r31", at(31)) // [11, 31]: not L1
	lt.Pipe("k", "L2", at(31))  // [31, 51]: r31
	equal(t, "inner", readKVT(d, "inner"), []kvt{{"k", "L1+r25", 25}, {"k", "L2+r31", 31}})
}

// The join's stores and changelogs are named as Kafka Streams names them, and Describe
// shows the windowed, join and merge nodes with their stores.
func TestStreamStreamJoinNamesAndChangelogs(t *testing.T) {
	b := streams.NewBuilder()
	l := streams.Stream(b, "left", serde.String, serde.String)
	r := streams.Stream(b, "right", serde.String, serde.String)
	streams.To(streams.LeftJoinStreams(l, r, func(a, c string, _ bool) string { return a + c },
		streams.JoinTimeDifferenceAndGrace(time.Second, 0)), "out", serde.String, serde.String)
	want := `Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [left])
      --> KSTREAM-WINDOWED-0000000002
    Source: KSTREAM-SOURCE-0000000001 (topics: [right])
      --> KSTREAM-WINDOWED-0000000003
    Processor: KSTREAM-WINDOWED-0000000002 (stores: [KSTREAM-JOINTHIS-0000000004-store])
      --> KSTREAM-JOINTHIS-0000000004
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-WINDOWED-0000000003 (stores: [KSTREAM-OUTEROTHER-0000000005-store])
      --> KSTREAM-OUTEROTHER-0000000005
      <-- KSTREAM-SOURCE-0000000001
    Processor: KSTREAM-JOINTHIS-0000000004 (stores: [KSTREAM-OUTEROTHER-0000000005-store, KSTREAM-OUTERSHARED-0000000004-store])
      --> KSTREAM-MERGE-0000000006
      <-- KSTREAM-WINDOWED-0000000002
    Processor: KSTREAM-OUTEROTHER-0000000005 (stores: [KSTREAM-JOINTHIS-0000000004-store, KSTREAM-OUTERSHARED-0000000004-store])
      --> KSTREAM-MERGE-0000000006
      <-- KSTREAM-WINDOWED-0000000003
    Processor: KSTREAM-MERGE-0000000006 (stores: [])
      --> KSTREAM-SINK-0000000007
      <-- KSTREAM-JOINTHIS-0000000004, KSTREAM-OUTEROTHER-0000000005
    Sink: KSTREAM-SINK-0000000007 (topic: out)
      <-- KSTREAM-MERGE-0000000006

`
	if got := b.Describe(); got != want {
		t.Fatalf("Describe:\n%s\nwant:\n%s", got, want)
	}
	d := streamstest.New(t, b)
	streamstest.Input(d, "left", serde.String, serde.String).Pipe("k", "v", at(0))
	streamstest.Input(d, "right", serde.String, serde.String).Pipe("k", "w", at(5000))
	for _, topic := range []string{"KSTREAM-JOINTHIS-0000000004-store-changelog", "KSTREAM-OUTEROTHER-0000000005-store-changelog",
		"KSTREAM-OUTERSHARED-0000000004-store-changelog"} {
		rs := d.Raw().ReadOutput(d.Raw().TopicName(topic))
		if len(rs) == 0 {
			t.Fatalf("nothing written to %s", d.Raw().TopicName(topic))
		}
		if !strings.HasPrefix(d.Raw().TopicName(topic), streamstest.AppID+"-KSTREAM-") {
			t.Fatalf("changelog %s", d.Raw().TopicName(topic))
		}
	}
	// The left record waited in the shared store, then was emitted and removed (a tombstone).
	equal(t, "out", readKVT(d, "out"), []kvt{{"k", "v", 0}})
}

// Null keys (KIP-962): a left join's left record with a null key joins nothing and gets
// its result at once, in stream-stream and stream-table joins alike; an inner join drops
// it, and a stream-stream join counts it dropped.
func TestJoinNullKeys(t *testing.T) {
	b := streams.NewBuilder()
	buildStreamJoins(b, streams.JoinTimeDifferenceAndGrace(ms(10), 0))
	users := streams.Table(b, "users", serde.String, serde.String)
	events := streams.Stream(b, "events", serde.String, serde.String)
	streams.To(streams.LeftJoin(events, users, func(e, u string, found bool) string { return sideJoiner(e, u, true, found) }), "st-left", serde.String, serde.String)
	streams.To(streams.Join(events, users, func(e, u string) string { return e + u }), "st-inner", serde.String, serde.String)
	d := streamstest.New(t, b)
	streamstest.Input(d, "left", serde.String, serde.String).PipeBytes(nil, []byte("L"), at(0))
	streamstest.Input(d, "right", serde.String, serde.String).PipeBytes(nil, []byte("R"), at(0))
	streamstest.Input(d, "events", serde.String, serde.String).PipeBytes(nil, []byte("E"), at(0))
	equal(t, "inner", readKVT(d, "inner"), nil)
	equal(t, "left", readKVT(d, "leftj"), []kvt{{"", "L+null", 0}})
	equal(t, "outer", readKVT(d, "outer"), []kvt{{"", "L+null", 0}, {"", "null+R", 0}})
	equal(t, "stream-table left", readKVT(d, "st-left"), []kvt{{"", "E+null", 0}})
	equal(t, "stream-table inner", readKVT(d, "st-inner"), nil)
	// Dropped: the inner join's two records, the left join's right one.
	if n := d.DroppedRecords(); n != 3 {
		t.Fatalf("dropped %d, want 3", n)
	}
}

// Streams whose key changed are repartitioned by the new key before a stream-stream join:
// with Named(n) through n-left-repartition and n-right-repartition.
func TestStreamStreamJoinRepartitions(t *testing.T) {
	b := streams.NewBuilder()
	// Values are "user:item"; both sides are re-keyed by user.
	byUser := func(_, v string) string { return strings.SplitN(v, ":", 2)[0] }
	l := streams.SelectKey(streams.Stream(b, "left", serde.String, serde.String), byUser)
	r := streams.SelectKey(streams.Stream(b, "right", serde.String, serde.String), byUser)
	streams.To(streams.JoinStreams(l, r, func(a, c string) string { return a + "+" + c },
		streams.JoinTimeDifferenceAndGrace(ms(10), 0), streams.Named("j")), "out", serde.String, serde.String)
	d := streamstest.New(t, b)
	streamstest.Input(d, "left", serde.String, serde.String).Pipe("x", "u1:a", at(0))
	streamstest.Input(d, "right", serde.String, serde.String).Pipe("y", "u1:b", at(5))
	streamstest.Input(d, "right", serde.String, serde.String).Pipe("z", "u2:c", at(6))
	equal(t, "out", readKVT(d, "out"), []kvt{{"u1", "u1:a+u1:b", 5}})
	for _, topic := range []string{"j-left-repartition", "j-right-repartition"} {
		if len(d.Raw().ReadOutput(d.Raw().TopicName(topic))) == 0 {
			t.Fatalf("nothing through %s", topic)
		}
	}
	if !strings.Contains(b.Describe(), "Processor: j-this-join (stores: [KSTREAM-JOINOTHER-") {
		t.Fatalf("Describe:\n%s", b.Describe())
	}
}
