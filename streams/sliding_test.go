package streams_test

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gregor-project/gregor/streams"
	"github.com/gregor-project/gregor/streams/serde"
	"github.com/gregor-project/gregor/streams/streamstest"
)

// win is a window of a key with its value, as a test expects it; null is a deletion.
type win struct {
	key        string
	start, end int64
	value      int64
	null       bool
}

func sortWins(ws []win) []win {
	slices.SortFunc(ws, func(a, b win) int {
		return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.start, b.start), cmp.Compare(a.end, b.end),
			cmp.Compare(a.value, b.value))
	})
	return ws
}

type input struct {
	key   string
	ts    int64
	value int64
}

// bruteSliding computes, per input record, the sliding-window updates a topology must emit,
// from the definition rather than from the library's arithmetic: the windows of a key are
// the left window [t-d, t] of each accepted record t and the right window [q+1, q+1+d] of
// each accepted q with a later accepted record in it; a window's value is fold over the
// accepted records in it. A record is dropped when its right window is already closed
// (t+1+d at or before the stream time minus grace) or when it updates no window (then it
// is in no window, ever); a window is updated while its end is at or after that close time.
func bruteSliding(d, grace int64, in []input, fold func(vs []int64) int64) (perRecord [][]win, final map[win]bool, dropped int64) {
	type wkey struct {
		key        string
		start, end int64
	}
	state := map[wkey]int64{}
	accepted := map[string][]input{}
	st := int64(-1)
	for _, r := range in {
		st = max(st, r.ts)
		closeTime := st - grace
		if r.ts+1+d <= closeTime {
			dropped++
			perRecord = append(perRecord, nil)
			continue
		}
		k, t := r.key, r.ts
		accepted[k] = append(accepted[k], r)
		value := func(s, e int64) int64 {
			var vs []int64
			for _, a := range accepted[k] {
				if s <= a.ts && a.ts <= e {
					vs = append(vs, a.value)
				}
			}
			return fold(vs)
		}
		cand := map[wkey]bool{{k, t - d, t}: true}
		for w := range state {
			if w.key == k && w.start <= t && t <= w.end {
				cand[w] = true
			}
		}
		for _, a := range accepted[k] {
			if a.ts < t && t <= a.ts+1+d {
				cand[wkey{k, a.ts + 1, a.ts + 1 + d}] = true
			}
			if a.ts > t && a.ts <= t+1+d {
				cand[wkey{k, t + 1, t + 1 + d}] = true
			}
		}
		var out []win
		holdsT := false
		for w := range cand {
			_, exists := state[w]
			contains := w.start <= t && t <= w.end
			if (exists && !contains) || w.end < closeTime {
				continue
			}
			holdsT = holdsT || contains
			state[w] = value(w.start, w.end)
			out = append(out, win{w.key, w.start, w.end, state[w], false})
		}
		if !holdsT {
			// The record is in no window: as good as dropped.
			dropped++
			accepted[k] = accepted[k][:len(accepted[k])-1]
		}
		perRecord = append(perRecord, sortWins(out))
	}
	final = map[win]bool{}
	for w, v := range state {
		final[win{w.key, w.start, w.end, v, false}] = true
	}
	return perRecord, final, dropped
}

// slidingInput is records of three keys, mostly in time order, some out of order within the
// grace period, some late past it, some at equal times. None is in between (older than the
// close time but with an open right window): such a record updates only the open windows
// it is in, and windows made later from those aggregates may miss it, as in Kafka Streams
// (TestSlidingWindowsByHand shows one).
func slidingInput(seed uint64, n int, d, grace int64) []input {
	rng := rand.New(rand.NewPCG(seed, 1))
	now := at(0).UnixMilli()
	st := now // the stream time: the largest time so far
	var in []input
	for range n {
		now += rng.Int64N(d)
		ts := now
		switch rng.IntN(10) {
		case 0:
			ts = now - rng.Int64N(grace+1) // out of order, within grace
		case 1:
			ts = st - grace - d - 1 - rng.Int64N(3*d) // late
		case 2:
			ts = st - grace // at the close time: its left window is still open
		case 3:
			ts = st - grace - d - 1 // the first time that is late
		}
		st = max(st, ts)
		in = append(in, input{key: string(rune('a' + rng.IntN(3))), ts: ts, value: rng.Int64N(100)})
	}
	return in
}

func TestSlidingWindows(t *testing.T) {
	count := func(vs []int64) int64 { return int64(len(vs)) }
	sum := func(vs []int64) int64 {
		var s int64
		for _, v := range vs {
			s += v
		}
		return s
	}
	maxOf := func(vs []int64) int64 { return slices.Max(vs) }
	for _, tc := range []struct {
		name     string
		d, grace int64
		fold     func([]int64) int64
		agg      func(streams.TimeWindowedKStream[string, int64]) streams.KTable[streams.Windowed[string], int64]
	}{
		{"count", 10, 5, count, func(ws streams.TimeWindowedKStream[string, int64]) streams.KTable[streams.Windowed[string], int64] {
			return streams.CountWindowed(ws, streams.Named("w"))
		}},
		{"count without grace", 7, 0, count, func(ws streams.TimeWindowedKStream[string, int64]) streams.KTable[streams.Windowed[string], int64] {
			return streams.CountWindowed(ws, streams.Named("w"))
		}},
		{"aggregate sum", 20, 8, sum, func(ws streams.TimeWindowedKStream[string, int64]) streams.KTable[streams.Windowed[string], int64] {
			return streams.AggregateWindowed(ws, func() int64 { return 0 }, func(_ string, v, acc int64) int64 { return acc + v }, serde.Int64, streams.Named("w"))
		}},
		{"reduce max", 5, 3, maxOf, func(ws streams.TimeWindowedKStream[string, int64]) streams.KTable[streams.Windowed[string], int64] {
			return streams.ReduceWindowed(ws, func(a, v int64) int64 { return max(a, v) }, streams.Named("w"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := streams.NewBuilder()
			s := streams.Stream(b, "in", serde.String, serde.Int64)
			w := streams.SlidingWindowsOf(time.Duration(tc.d)*time.Millisecond, time.Duration(tc.grace)*time.Millisecond)
			table := tc.agg(streams.SlidingWindowedBy(streams.GroupByKey(s), w))
			ws := streams.WindowedSerde(serde.String, w.TimeDifference)
			streams.To(streams.ToStream(table), "out", ws, serde.Int64)

			d := streamstest.New(t, b)
			in := streamstest.Input(d, "in", serde.String, serde.Int64)
			out := streamstest.Output(d, "out", ws, serde.Int64)
			records := slidingInput(uint64(tc.d), 400, tc.d, tc.grace)
			want, final, wantDropped := bruteSliding(tc.d, tc.grace, records, tc.fold)
			base := at(0).UnixMilli()
			for i, r := range records {
				in.Pipe(r.key, r.value, time.UnixMilli(r.ts))
				var got []win
				for _, o := range out.ReadRecords() {
					got = append(got, win{o.Key.Key, o.Key.Window.Start.UnixMilli(), o.Key.Window.End.UnixMilli(), o.Value, false})
				}
				if !slices.Equal(sortWins(got), want[i]) {
					st := int64(0)
					for j, x := range records[:i+1] {
						st = max(st, x.ts)
						if x.key == r.key && x.ts > r.ts-3*tc.d && x.ts < r.ts+3*tc.d {
							t.Logf("%d: %d (%d) st %d", j, x.ts-base, x.value, st-base)
						}
					}
					t.Fatalf("record %d %+v:\n got %v\nwant %v", i, r, got, want[i])
				}
			}
			if got := d.DroppedRecords(); got != wantDropped || wantDropped == 0 {
				t.Fatalf("dropped %d, want %d (and some)", got, wantDropped)
			}
			// The store holds the windows still within the retention, with their values.
			store := streamstest.WindowStore[string, int64](d, "w")
			n := 0
			for k, v := range store.All() {
				n++
				if w := (win{k.Key, k.Window.Start.UnixMilli(), k.Window.End.UnixMilli(), v, false}); !final[w] {
					t.Fatalf("store holds %v, not a final window", w)
				}
				if got, ok, err := store.Fetch(k.Key, k.Window.Start); !ok || err != nil || got != v {
					t.Fatalf("fetch %v: %d %v %v", k, got, ok, err)
				}
			}
			if n == 0 || n != store.Len() {
				t.Fatalf("store: %d windows, Len %d", n, store.Len())
			}
		})
	}
}

// The example of Kafka's sliding-window documentation, by hand: d = 10, records at 8, 9,
// 15 (the windows a record makes and updates), and one late record.
func TestSlidingWindowsByHand(t *testing.T) {
	b := streams.NewBuilder()
	s := streams.Stream(b, "in", serde.String, serde.String)
	w := streams.SlidingWindowsOf(10*time.Millisecond, 0)
	counts := streams.CountWindowed(streams.SlidingWindowedBy(streams.GroupByKey(s), w))
	ws := streams.WindowedSerde(serde.String, w.TimeDifference)
	streams.To(streams.ToStream(counts), "out", ws, serde.Int64)
	d := streamstest.New(t, b)
	in := streamstest.Input(d, "in", serde.String, serde.String)
	out := streamstest.Output(d, "out", ws, serde.Int64)
	read := func() []win {
		var got []win
		for _, o := range out.ReadRecords() {
			got = append(got, win{o.Key.Key, o.Key.Window.Start.UnixMilli() - 1000, o.Key.Window.End.UnixMilli() - 1000, o.Value, false})
		}
		return got
	}
	in.Pipe("k", "x", time.UnixMilli(1008))
	equal(t, "at 8", read(), []win{{"k", -2, 8, 1, false}})
	in.Pipe("k", "x", time.UnixMilli(1009))
	// 9's left window [-1,9] holds 8 and 9; 8's right window [9,19] holds 9.
	equal(t, "at 9", sortWins(read()), []win{{"k", -1, 9, 2, false}, {"k", 9, 19, 1, false}})
	in.Pipe("k", "x", time.UnixMilli(1015))
	// [9,19] gets 15; 9's right window [10,20] is new with 15; the left window [5,15] holds 8, 9, 15.
	equal(t, "at 15", sortWins(read()), []win{{"k", 5, 15, 3, false}, {"k", 9, 19, 2, false}, {"k", 10, 20, 1, false}})
	in.Pipe("k", "x", time.UnixMilli(1030))
	equal(t, "at 30", read(), []win{{"k", 20, 30, 1, false}})
	// 25 is before the close time (30), so its left window [15,25] has closed, but its right
	// window has not: it updates the open window [20,30] and makes its right window [26,36]
	// (holding 30).
	in.Pipe("k", "x", time.UnixMilli(1025))
	equal(t, "at 25", sortWins(read()), []win{{"k", 20, 30, 2, false}, {"k", 26, 36, 1, false}})
	in.Pipe("k", "x", time.UnixMilli(1019)) // 19+1+10 <= 30: late
	if got := read(); len(got) != 0 || d.DroppedRecords() != 1 {
		t.Fatalf("late record: emitted %v, dropped %d", got, d.DroppedRecords())
	}
}
