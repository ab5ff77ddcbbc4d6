package streams_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/embed"
	"github.com/gregor-project/gregor/embed/embedtest"
	"github.com/gregor-project/gregor/streams"
	"github.com/gregor-project/gregor/streams/serde"
)

// Window sizes of windowQueries' topology (ms).
const (
	qHopSize, qHopAdvance = 10_000, 5_000
	qSlideDiff            = 3_000
	qSessionGap           = 1_000
)

// windowQueries counts views per user in hopping windows (hop-counts), sliding windows
// (slide-counts) and sessions (session-counts), each store of type st.
func windowQueries(st streams.StoreType) func(*streams.Builder) {
	return func(b *streams.Builder) {
		g := streams.GroupByKey(streams.Stream(b, "views", serde.String, serde.String))
		streams.CountWindowed(streams.WindowedBy(g, streams.HoppingWindows(qHopSize*time.Millisecond, qHopAdvance*time.Millisecond, time.Hour)),
			streams.Named("hop-counts"), streams.WithStoreType(st))
		streams.CountWindowed(streams.SlidingWindowedBy(g, streams.SlidingWindowsOf(qSlideDiff*time.Millisecond, time.Hour)),
			streams.Named("slide-counts"), streams.WithStoreType(st))
		streams.CountSessionWindowed(streams.SessionWindowedBy(g, streams.SessionWindowsOf(qSessionGap*time.Millisecond, time.Hour)),
			streams.Named("session-counts"), streams.WithStoreType(st))
	}
}

// viewInput is n views of six users, each user's in time order, some close together and
// some more than a session gap apart.
func viewInput(base int64, n int) []input {
	rng := rand.New(rand.NewPCG(13, 13))
	last := map[string]int64{}
	var in []input
	for range n {
		k := fmt.Sprintf("u%d", rng.IntN(6))
		if _, ok := last[k]; !ok {
			last[k] = base + rng.Int64N(2000)
		}
		last[k] += rng.Int64N(1500)
		in = append(in, input{key: k, ts: last[k], value: 1})
	}
	return in
}

// expectedHopping is every user's count per hopping window, from the definition: the
// windows [s, s+size) with s a multiple of advance that hold a view.
func expectedHopping(in []input) []win {
	counts := map[win]int64{}
	for _, r := range in {
		for s := (r.ts - qHopSize) / qHopAdvance * qHopAdvance; s <= r.ts; s += qHopAdvance {
			if s >= 0 && r.ts < s+qHopSize {
				counts[win{key: r.key, start: s, end: s + qHopSize}]++
			}
		}
	}
	var out []win
	for w, n := range counts {
		w.value = n
		out = append(out, w)
	}
	return sortWins(out)
}

// expectedSessions is the session table bruteSessions' updates make.
func expectedSessions(in []input) []win {
	per, _ := bruteSessions(qSessionGap, time.Hour.Milliseconds(), in, func(a, v int64) int64 { return a + v })
	table := map[[3]any]win{}
	for _, ups := range per {
		for _, u := range ups {
			id := [3]any{u.key, u.start, u.end}
			if u.null {
				delete(table, id)
			} else {
				table[id] = u
			}
		}
	}
	return sortWins(slices.Collect(maps.Values(table)))
}

func expectedSliding(in []input) []win {
	_, final, _ := bruteSliding(qSlideDiff, time.Hour.Milliseconds(), in, func(vs []int64) int64 { return int64(len(vs)) })
	return sortWins(slices.Collect(maps.Keys(final)))
}

// asWins is a query's answer as wins, in its order.
func asWins(kvs []streams.KeyValue[streams.Windowed[string], int64]) []win {
	var out []win
	for _, kv := range kvs {
		out = append(out, win{key: kv.Key.Key, start: kv.Key.Window.Start.UnixMilli(), end: kv.Key.Window.End.UnixMilli(), value: kv.Value})
	}
	return out
}

func filterWins(ws []win, keep func(win) bool) []win {
	var out []win
	for _, w := range ws {
		if keep(w) {
			out = append(out, w)
		}
	}
	return out
}

// Interactive queries of window and session stores against a real node: a hopping, a
// sliding and a session count over two partitions, each store in memory and persistent,
// answer every fetch as the windows computed from the input say, and refuse with
// ErrInvalidStateStore as key-value queries do.
func TestWindowAndSessionQueries(t *testing.T) {
	n := embedtest.Start(t, embed.Options{})
	cl := topics(t, n.Addr(), 2, "views")
	base := time.Now().UnixMilli()
	in := viewInput(base, 300)
	var recs []*kgo.Record
	for _, r := range in {
		recs = append(recs, &kgo.Record{Topic: "views", Key: []byte(r.key), Value: []byte("view"), Timestamp: time.UnixMilli(r.ts)})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	hop, slide, sess := expectedHopping(in), expectedSliding(in), expectedSessions(in)
	for _, st := range []streams.StoreType{streams.InMemory, streams.Persistent} {
		t.Run(string(st), func(t *testing.T) {
			r := startSessionApp(t, n.Addr(), "wq-"+string(st), streams.AtLeastOnce, windowQueries(st))
			testWindowQueries(t, r.app, "hop-counts", hop)
			testWindowQueries(t, r.app, "slide-counts", slide)
			testSessionQueries(t, r.app, sess)

			if _, err := streams.WindowStoreOf[string, int64](r.app, "session-counts"); !errors.Is(err, streams.ErrInvalidStateStore) {
				t.Fatalf("a session store as a window store: %v", err)
			}
			if _, err := streams.SessionStoreOf[string, int64](r.app, "hop-counts"); !errors.Is(err, streams.ErrInvalidStateStore) {
				t.Fatalf("a window store as a session store: %v", err)
			}
			if _, err := streams.WindowStoreOf[string, string](r.app, "hop-counts"); !errors.Is(err, streams.ErrInvalidStateStore) {
				t.Fatalf("wrong value type: %v", err)
			}
			if _, err := streams.SessionStoreOf[string, int64](r.app, "nope"); !errors.Is(err, streams.ErrUnknownStateStore) {
				t.Fatalf("unknown store: %v", err)
			}
			q, err := streams.WindowStoreOf[string, int64](r.app, "hop-counts")
			if err != nil {
				t.Fatal(err)
			}
			app := r.app
			r.stop(t)
			if _, err := q.All(); !errors.Is(err, streams.ErrInvalidStateStore) {
				t.Fatalf("a query after Close: %v", err)
			}
			if _, err := streams.SessionStoreOf[string, int64](app, "session-counts"); !errors.Is(err, streams.ErrInvalidStateStore) {
				t.Fatalf("a session store after Close: %v", err)
			}
		})
	}
}

// testWindowQueries waits for store's All to hold want, then checks every other read.
func testWindowQueries(t *testing.T, app *streams.App, store string, want []win) {
	t.Helper()
	var q streams.ReadOnlyWindowStore[string, int64]
	var got []win
	var err error
	eventually(t, func() bool {
		if q, err = streams.WindowStoreOf[string, int64](app, store); err != nil {
			return false
		}
		all, err := q.All()
		got = sortWins(asWins(all))
		return err == nil && slices.Equal(got, want)
	}, func() string { return fmt.Sprintf("%s: All %v (%v), want %v", store, got, err, want) })

	mid := want[len(want)/2].start
	from, to := time.UnixMilli(mid-4000), time.UnixMilli(mid+4000)
	inTime := func(w win) bool { return w.start >= mid-4000 && w.start <= mid+4000 }
	for _, k := range []string{"u0", "u3", "u5", "nobody"} {
		wk := filterWins(want, func(w win) bool { return w.key == k }) // by start: sortWins
		f, err := q.Fetch(k, time.UnixMilli(0), time.UnixMilli(1<<50))
		if err != nil || !slices.Equal(asWins(f), wk) {
			t.Fatalf("%s: Fetch(%s) %v %v, want %v", store, k, asWins(f), err, wk)
		}
		wkt := filterWins(wk, inTime)
		f, err = q.Fetch(k, from, to)
		if err != nil || !slices.Equal(asWins(f), wkt) {
			t.Fatalf("%s: Fetch(%s, %d±4000) %v %v, want %v", store, k, mid, asWins(f), err, wkt)
		}
		b, err := q.BackwardFetch(k, from, to)
		slices.Reverse(wkt)
		if err != nil || !slices.Equal(asWins(b), wkt) {
			t.Fatalf("%s: BackwardFetch(%s) %v %v, want %v", store, k, asWins(b), err, wkt)
		}
		for _, w := range wk {
			v, found, err := q.Get(k, time.UnixMilli(w.start))
			if err != nil || !found || v != w.value {
				t.Fatalf("%s: Get(%s, %d) %d %v %v, want %d", store, k, w.start, v, found, err, w.value)
			}
		}
		if !slices.ContainsFunc(wk, func(w win) bool { return w.start == mid+1 }) {
			if _, found, err := q.Get(k, time.UnixMilli(mid+1)); found || err != nil {
				t.Fatalf("%s: Get(%s, %d) found a window that is not there (%v)", store, k, mid+1, err)
			}
		}
	}
	fa, err := q.FetchAll(from, to)
	if wt := filterWins(want, inTime); err != nil || !slices.Equal(sortWins(asWins(fa)), wt) {
		t.Fatalf("%s: FetchAll %v %v, want %v", store, asWins(fa), err, wt)
	}
	fr, err := q.FetchRange("u1", "u3", from, to)
	if wr := filterWins(want, func(w win) bool { return inTime(w) && w.key >= "u1" && w.key <= "u3" }); err != nil || !slices.Equal(sortWins(asWins(fr)), wr) {
		t.Fatalf("%s: FetchRange(u1, u3) %v %v, want %v", store, asWins(fr), err, wr)
	}
	ba, err := q.BackwardAll()
	all, err2 := q.All()
	slices.Reverse(all)
	if err != nil || err2 != nil || !slices.Equal(asWins(ba), asWins(all)) {
		t.Fatalf("%s: BackwardAll is not All reversed: %v %v", store, err, err2)
	}
	// Each partition holds its own keys: together they are the store.
	var parts []win
	for p := int32(0); p < 2; p++ {
		pq, err := streams.WindowStoreOf[string, int64](app, store, streams.InPartition(p))
		if err != nil {
			t.Fatal(err)
		}
		pa, err := pq.All()
		if err != nil || len(pa) == 0 {
			t.Fatalf("%s: partition %d: %d windows, %v", store, p, len(pa), err)
		}
		parts = append(parts, asWins(pa)...)
	}
	if !slices.Equal(sortWins(parts), want) {
		t.Fatalf("%s: the partitions hold %v, want %v", store, parts, want)
	}
}

func testSessionQueries(t *testing.T, app *streams.App, want []win) {
	t.Helper()
	var q streams.ReadOnlySessionStore[string, int64]
	var got []win
	var err error
	eventually(t, func() bool {
		if q, err = streams.SessionStoreOf[string, int64](app, "session-counts"); err != nil {
			return false
		}
		all, err := q.FetchRange("", "\xff")
		got = sortWins(asWins(all))
		return err == nil && slices.Equal(got, want)
	}, func() string { return fmt.Sprintf("sessions %v (%v), want %v", got, err, want) })
	mid := want[len(want)/2]
	earliestEnd, latestStart := mid.start-3000, mid.start+3000
	for _, k := range []string{"u0", "u2", "u4", "nobody"} {
		wk := filterWins(want, func(w win) bool { return w.key == k })
		f, err := q.Fetch(k)
		if err != nil || !slices.Equal(asWins(f), wk) {
			t.Fatalf("Fetch(%s) %v %v, want %v", k, asWins(f), err, wk)
		}
		b, err := q.BackwardFetch(k)
		rev := slices.Clone(wk)
		slices.Reverse(rev)
		if err != nil || !slices.Equal(asWins(b), rev) {
			t.Fatalf("BackwardFetch(%s) %v %v, want %v", k, asWins(b), err, rev)
		}
		wf := filterWins(wk, func(w win) bool { return w.end >= earliestEnd && w.start <= latestStart })
		f, err = q.FindSessions(k, time.UnixMilli(earliestEnd), time.UnixMilli(latestStart))
		if err != nil || !slices.Equal(asWins(f), wf) {
			t.Fatalf("FindSessions(%s, %d, %d) %v %v, want %v", k, earliestEnd, latestStart, asWins(f), err, wf)
		}
		b, err = q.BackwardFindSessions(k, time.UnixMilli(earliestEnd), time.UnixMilli(latestStart))
		slices.Reverse(wf)
		if err != nil || !slices.Equal(asWins(b), wf) {
			t.Fatalf("BackwardFindSessions(%s) %v %v, want %v", k, asWins(b), err, wf)
		}
		for _, w := range wk {
			v, found, err := q.FetchSession(k, time.UnixMilli(w.start), time.UnixMilli(w.end))
			if err != nil || !found || v != w.value {
				t.Fatalf("FetchSession(%s, %d, %d) %d %v %v, want %d", k, w.start, w.end, v, found, err, w.value)
			}
			if _, found, err := q.FetchSession(k, time.UnixMilli(w.start), time.UnixMilli(w.end+1)); found || err != nil {
				t.Fatalf("FetchSession(%s, %d, %d) found a session that is not there (%v)", k, w.start, w.end+1, err)
			}
		}
	}
	fr, err := q.FindSessionsRange("u1", "u3", time.UnixMilli(earliestEnd), time.UnixMilli(latestStart))
	wr := filterWins(want, func(w win) bool {
		return w.key >= "u1" && w.key <= "u3" && w.end >= earliestEnd && w.start <= latestStart
	})
	if err != nil || !slices.Equal(sortWins(asWins(fr)), wr) {
		t.Fatalf("FindSessionsRange(u1, u3) %v %v, want %v", asWins(fr), err, wr)
	}
}
