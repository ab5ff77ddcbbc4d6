package streams_test

import (
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/gregor-project/gregor/streams"
	"github.com/gregor-project/gregor/streams/serde"
	"github.com/gregor-project/gregor/streams/streamstest"
)

// bruteSessions computes, per input record, the session updates a topology must emit, over
// plain lists of sessions: a record of key k at t merges with k's open sessions (ending at or
// after the stream time minus grace and gap) that end at or after t-gap and start at or
// before t+gap; when the merged session ends before that close time the record is dropped;
// otherwise the merged-away sessions are deleted (unless the record only updates [t, t]) and
// the merged one emitted, its value the fold of theirs and the record's.
func bruteSessions(gap, grace int64, in []input, fold func(acc, v int64) int64) (perRecord [][]win, dropped int64) {
	type sess struct{ start, end, value int64 }
	sessions := map[string][]sess{}
	st := int64(-1)
	for _, r := range in {
		st = max(st, r.ts)
		closeTime := st - grace - gap
		k, t := r.key, r.ts
		var found, others []sess
		for _, s := range sessions[k] {
			if s.end >= closeTime && s.end >= t-gap && s.start <= t+gap {
				found = append(found, s)
			} else {
				others = append(others, s)
			}
		}
		merged := sess{t, t, r.value}
		first := true
		for _, s := range found {
			merged.start, merged.end = min(merged.start, s.start), max(merged.end, s.end)
			if first {
				merged.value, first = s.value, false
			} else {
				merged.value = fold(merged.value, s.value)
			}
		}
		if !first {
			merged.value = fold(merged.value, r.value)
		}
		if merged.end < closeTime {
			dropped++
			perRecord = append(perRecord, nil)
			continue
		}
		var out []win
		if merged.start != t || merged.end != t {
			for _, s := range found {
				out = append(out, win{k, s.start, s.end, 0, true})
			}
		}
		out = append(out, win{k, merged.start, merged.end, merged.value, false})
		sessions[k] = append(others, merged)
		perRecord = append(perRecord, sortWins(out))
	}
	return perRecord, dropped
}

// sessionInput is records of three keys in bursts: mostly in order, some out of order within
// grace (bridging sessions), some late.
func sessionInput(seed uint64, n int, gap, grace int64, late bool) []input {
	rng := rand.New(rand.NewPCG(seed, 2))
	now := at(0).UnixMilli()
	st := now
	var in []input
	for range n {
		if rng.IntN(4) == 0 {
			now += gap + 1 + rng.Int64N(2*gap) // a pause: new sessions
		} else {
			now += rng.Int64N(gap / 2)
		}
		ts := now
		switch rng.IntN(8) {
		case 0:
			ts = now - rng.Int64N(grace+1)
		case 1:
			ts = st - grace // exactly at the grace limit
		case 2:
			if late {
				ts = st - grace - gap - 1 - rng.Int64N(3*gap)
			}
		}
		st = max(st, ts)
		in = append(in, input{key: string(rune('a' + rng.IntN(3))), ts: ts, value: rng.Int64N(100)})
	}
	return in
}

func sessionRecords(out *streamstest.OutputTopic[streams.Windowed[string], int64]) []win {
	var got []win
	for _, o := range out.ReadRecords() {
		got = append(got, win{o.Key.Key, o.Key.Window.Start.UnixMilli(), o.Key.Window.End.UnixMilli(), o.Value, o.NullValue})
	}
	return sortWins(got)
}

func TestSessionWindows(t *testing.T) {
	for _, tc := range []struct {
		name       string
		gap, grace int64
		fold       func(acc, v int64) int64
		agg        func(streams.SessionWindowedKStream[string, int64]) streams.KTable[streams.Windowed[string], int64]
		count      bool
	}{
		{"count", 10, 5, nil, func(ws streams.SessionWindowedKStream[string, int64]) streams.KTable[streams.Windowed[string], int64] {
			return streams.CountSessionWindowed(ws, streams.Named("s"))
		}, true},
		{"count without grace", 6, 0, nil, func(ws streams.SessionWindowedKStream[string, int64]) streams.KTable[streams.Windowed[string], int64] {
			return streams.CountSessionWindowed(ws, streams.Named("s"))
		}, true},
		{"aggregate sum", 20, 8, func(a, v int64) int64 { return a + v }, func(ws streams.SessionWindowedKStream[string, int64]) streams.KTable[streams.Windowed[string], int64] {
			return streams.AggregateSessionWindowed(ws, func() int64 { return 0 }, func(_ string, v, acc int64) int64 { return acc + v },
				func(_ string, a, b int64) int64 { return a + b }, serde.Int64, streams.Named("s"))
		}, false},
		{"reduce max", 8, 3, func(a, v int64) int64 { return max(a, v) }, func(ws streams.SessionWindowedKStream[string, int64]) streams.KTable[streams.Windowed[string], int64] {
			return streams.ReduceSessionWindowed(ws, func(a, v int64) int64 { return max(a, v) }, streams.Named("s"))
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := streams.NewBuilder()
			s := streams.Stream(b, "in", serde.String, serde.Int64)
			w := streams.SessionWindowsOf(time.Duration(tc.gap)*time.Millisecond, time.Duration(tc.grace)*time.Millisecond)
			table := tc.agg(streams.SessionWindowedBy(streams.GroupByKey(s), w))
			ks := streams.SessionWindowedSerde(serde.String)
			streams.To(streams.ToStream(table), "out", ks, serde.Int64)

			d := streamstest.New(t, b)
			in := streamstest.Input(d, "in", serde.String, serde.Int64)
			out := streamstest.Output(d, "out", ks, serde.Int64)
			records := sessionInput(uint64(tc.gap), 400, tc.gap, tc.grace, true)
			if tc.count {
				for i := range records {
					records[i].value = 1
				}
				tc.fold = func(a, v int64) int64 { return a + v }
			}
			want, wantDropped := bruteSessions(tc.gap, tc.grace, records, tc.fold)
			merges := 0
			for i, r := range records {
				in.Pipe(r.key, r.value, time.UnixMilli(r.ts))
				got := sessionRecords(out)
				if !slices.Equal(got, want[i]) {
					t.Fatalf("record %d %+v:\n got %v\nwant %v", i, r, got, want[i])
				}
				if len(got) > 2 {
					merges++
				}
			}
			// Without grace no record comes between two sessions that are still open.
			if got := d.DroppedRecords(); got != wantDropped || wantDropped == 0 || (merges == 0) != (tc.grace == 0) {
				t.Fatalf("dropped %d, want %d (and some); %d merges of two sessions", got, wantDropped, merges)
			}
			// The store holds a session only if it is the latest emitted for it.
			store := streamstest.SessionStore[string, int64](d, "s")
			last := map[win]bool{}
			for _, ws := range want {
				for _, w := range ws {
					w.value, w.null = 0, false
					delete(last, w)
				}
				for _, w := range ws {
					if !w.null {
						last[win{w.key, w.start, w.end, 0, false}] = true
					}
				}
			}
			for k, v := range store.All() {
				w := win{k.Key, k.Window.Start.UnixMilli(), k.Window.End.UnixMilli(), 0, false}
				if !last[w] {
					t.Fatalf("store holds %v = %d, which was deleted", w, v)
				}
				if got, ok, err := store.FetchSession(k.Key, k.Window.Start, k.Window.End); !ok || err != nil || got != v {
					t.Fatalf("fetch %v: %d %v %v", w, got, ok, err)
				}
			}
		})
	}
}

// With every record within grace, the sessions left in the table are exactly the clusters
// of each key's times in which neighbours are at most the gap apart, whatever the order
// the records came in.
func TestSessionWindowsAreClusters(t *testing.T) {
	const gap, grace = 10, 30
	b := streams.NewBuilder()
	s := streams.Stream(b, "in", serde.String, serde.Int64)
	counts := streams.CountSessionWindowed(streams.SessionWindowedBy(streams.GroupByKey(s), streams.SessionWindowsOf(gap*time.Millisecond, grace*time.Millisecond)))
	ks := streams.SessionWindowedSerde(serde.String)
	streams.To(streams.ToStream(counts), "out", ks, serde.Int64)
	d := streamstest.New(t, b)
	in := streamstest.Input(d, "in", serde.String, serde.Int64)
	out := streamstest.Output(d, "out", ks, serde.Int64)

	records := sessionInput(7, 500, gap, grace, false)
	table := map[win]int64{}
	for _, r := range records {
		in.Pipe(r.key, r.value, time.UnixMilli(r.ts))
	}
	for _, o := range out.ReadRecords() { // in order: a session's deletion follows its updates
		k := win{o.Key.Key, o.Key.Window.Start.UnixMilli(), o.Key.Window.End.UnixMilli(), 0, false}
		if o.NullValue {
			delete(table, k)
		} else {
			table[k] = o.Value
		}
	}
	want := map[win]int64{}
	byKey := map[string][]int64{}
	for _, r := range records {
		byKey[r.key] = append(byKey[r.key], r.ts)
	}
	for k, ts := range byKey {
		sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
		start, n := ts[0], int64(1)
		for i := 1; i <= len(ts); i++ {
			if i == len(ts) || ts[i]-ts[i-1] > gap {
				want[win{k, start, ts[i-1], 0, false}] = n
				if i < len(ts) {
					start, n = ts[i], 0
				}
			}
			n++
		}
	}
	if d.DroppedRecords() != 0 || len(table) != len(want) {
		t.Fatalf("%d sessions, want %d; %d dropped", len(table), len(want), d.DroppedRecords())
	}
	for w, n := range want {
		if table[w] != n {
			t.Fatalf("session %v: %d, want %d", w, table[w], n)
		}
	}
}

// A record between two sessions bridges them: both are deleted downstream and the merged
// one holds the sum; output keys are laid out as Kafka's session-windowed serde. A closed
// session is not merged.
func TestSessionMerge(t *testing.T) {
	b := streams.NewBuilder()
	s := streams.Stream(b, "in", serde.String, serde.String)
	counts := streams.CountSessionWindowed(streams.SessionWindowedBy(streams.GroupByKey(s), streams.SessionWindowsOf(5*time.Millisecond, 10*time.Millisecond)))
	ks := streams.SessionWindowedSerde(serde.String)
	streams.To(streams.ToStream(counts), "out", ks, serde.Int64)
	d := streamstest.New(t, b)
	in := streamstest.Input(d, "in", serde.String, serde.String)
	in.Pipe("u", "x", time.UnixMilli(100))
	in.Pipe("u", "x", time.UnixMilli(104))
	in.Pipe("u", "x", time.UnixMilli(112))
	in.Pipe("u", "x", time.UnixMilli(108)) // within 5 of 104 and of 112
	raw := d.Raw().ReadOutput("out")
	type kv struct {
		key   string
		value []byte
	}
	var got []kv
	for _, r := range raw {
		got = append(got, kv{string(r.Key), r.Value})
	}
	key := func(start, end uint64) string {
		b := []byte("u")
		for _, x := range []uint64{end, start} {
			for i := 7; i >= 0; i-- {
				b = append(b, byte(x>>(8*i)))
			}
		}
		return string(b)
	}
	n := func(c byte) []byte { return []byte{0, 0, 0, 0, 0, 0, 0, c} }
	want := []kv{
		{key(100, 100), n(1)},
		{key(100, 100), nil}, {key(100, 104), n(2)},
		{key(112, 112), n(1)},
		{key(100, 104), nil}, {key(112, 112), nil}, {key(100, 112), n(4)},
	}
	if len(got) != len(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for i := range want {
		if got[i].key != want[i].key || string(got[i].value) != string(want[i].value) || (got[i].value == nil) != (want[i].value == nil) {
			t.Fatalf("record %d: got %q, want %q", i, got[i], want[i])
		}
	}
	// Records are timestamped with their session's end, deletions with the deleted one's.
	if ts := raw[len(raw)-1].Timestamp.UnixMilli(); ts != 112 {
		t.Fatalf("merged session at %d", ts)
	}
	if ts := raw[4].Timestamp.UnixMilli(); ts != 104 {
		t.Fatalf("deletion of [100,104] at %d", ts)
	}
	store := streamstest.SessionStore[string, int64](d, counts.StoreName())
	var found []string
	for w, n := range store.FindSessions("u", time.UnixMilli(105), time.UnixMilli(111)) {
		found = append(found, w.String()+"="+string(rune('0'+n)))
	}
	equal(t, "sessions ending at or after 105 and starting at or before 111", found, []string{"[u@100/112]=4"})
	// At 130 the close time is 115: [100,112] has closed, and the record at 116, within
	// the gap of it but on time, makes a session of its own; the one at 114 is before the
	// close time but merges with the open [116,116].
	in.Pipe("u", "x", time.UnixMilli(130))
	in.Pipe("u", "x", time.UnixMilli(116))
	in.Pipe("u", "x", time.UnixMilli(114))
	rs := d.Raw().ReadOutput("out")
	if len(rs) != 4 || string(rs[1].Key) != key(116, 116) || rs[2].Value != nil || string(rs[3].Key) != key(114, 116) || rs[3].Value[7] != 2 {
		t.Fatalf("after [100,112] closed: %q", rs)
	}
	// At 200 everything before 185 is closed: the record at 113 is dropped.
	in.Pipe("u", "x", time.UnixMilli(200))
	in.Pipe("u", "x", time.UnixMilli(113))
	if rs := d.Raw().ReadOutput("out"); len(rs) != 1 || d.DroppedRecords() != 1 {
		t.Fatalf("after the close: %d records, %d dropped", len(rs), d.DroppedRecords())
	}
	back, err := ks.Deserialize("out", raw[len(raw)-1].Key)
	if err != nil || back.Key != "u" || back.Window.Start.UnixMilli() != 100 || back.Window.End.UnixMilli() != 112 {
		t.Fatalf("deserialized %v %v", back, err)
	}
	// The store's changelog carries the same keys, the deletions as tombstones.
	cl := d.Raw().ReadOutput(d.Raw().TopicName(counts.StoreName() + "-changelog"))
	for i, w := range want {
		if i >= len(cl) || string(cl[i].Key) != w.key || string(cl[i].Value) != string(w.value) || (cl[i].Value == nil) != (w.value == nil) {
			t.Fatalf("changelog %q", cl)
		}
	}
}
