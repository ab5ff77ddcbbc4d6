package streams

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
)

// refWin is the window stores' reference: a plain map, filtered and sorted on every read.
type refWin struct {
	data     map[string]map[int64][]byte
	minStart int64
}

type refEntry struct {
	k     string
	start int64
	v     string
}

func (r *refWin) set(k []byte, start int64, v []byte) {
	if start < r.minStart {
		return
	}
	if v == nil {
		delete(r.data[string(k)], start)
		return
	}
	if r.data[string(k)] == nil {
		r.data[string(k)] = map[int64][]byte{}
	}
	r.data[string(k)][start] = v
}

func (r *refWin) entries(keep func(k string, start int64) bool) []refEntry {
	var out []refEntry
	for k, ws := range r.data {
		for s, v := range ws {
			if s >= r.minStart && keep(k, s) {
				out = append(out, refEntry{k, s, string(v)})
			}
		}
	}
	slices.SortFunc(out, func(a, b refEntry) int {
		return bytes.Compare(binary.BigEndian.AppendUint64([]byte(a.k), uint64(a.start)),
			binary.BigEndian.AppendUint64([]byte(b.k), uint64(b.start)))
	})
	return out
}

func collectAll(t *testing.T, w winBytes) []refEntry {
	t.Helper()
	var out []refEntry
	if err := w.all(func(k []byte, start int64, v []byte) bool {
		out = append(out, refEntry{string(k), start, string(v)})
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func collectFetch(t *testing.T, w winBytes, k []byte, from, to int64) []refEntry {
	t.Helper()
	var out []refEntry
	if err := w.fetch(k, from, to, func(start int64, v []byte) bool {
		out = append(out, refEntry{string(k), start, string(v)})
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// The pebble window store (segmented layout) and the in-memory one behave as the plain
// reference under random writes, deletions, batches, expiry and (pebble) close and reopen:
// every get, fetch by key and time range, scan of all windows and count agrees.
func TestWindowStoresMatchReference(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { testWindowStores(t, seed) })
	}
}

func testWindowStores(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 99))
	// Keys that are prefixes of one another, and a key of a zero byte, share segments: a
	// fetch must not return another key's windows.
	keys := [][]byte{[]byte("a"), []byte("ab"), []byte("a\x00"), []byte("b"), {0}, []byte("abc")}
	const interval = 100
	dir := filepath.Join(t.TempDir(), "store")
	open := func() *pebbleWin {
		p, err := openPebble(dir, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		w, err := openPebbleWin(p, interval)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	pw := open()
	defer func() {
		if err := pw.close(); err != nil {
			t.Error(err)
		}
	}()
	mw := newMemWinBytes()
	ref := &refWin{data: map[string]map[int64][]byte{}, minStart: 0}
	clock := int64(0) // expiry only moves forward, as stream time
	for step := range 600 {
		k := keys[rng.IntN(len(keys))]
		start := clock + rng.Int64N(700)
		switch op := rng.IntN(20); {
		case op < 9:
			v := []byte(fmt.Sprintf("v%d", step))
			for _, w := range []winBytes{pw, mw} {
				if err := w.set(k, start, v); err != nil {
					t.Fatal(err)
				}
			}
			ref.set(k, start, v)
		case op < 12:
			// Delete a window that may exist.
			if ws := ref.entries(func(string, int64) bool { return true }); len(ws) > 0 {
				e := ws[rng.IntN(len(ws))]
				k, start = []byte(e.k), e.start
			}
			for _, w := range []winBytes{pw, mw} {
				if err := w.set(k, start, nil); err != nil {
					t.Fatal(err)
				}
			}
			ref.set(k, start, nil)
		case op < 15:
			var recs []winRec
			for i := range rng.IntN(10) {
				var v []byte
				if rng.IntN(4) > 0 {
					v = []byte(fmt.Sprintf("b%d.%d", step, i))
				}
				recs = append(recs, winRec{keys[rng.IntN(len(keys))], clock + rng.Int64N(700), v})
			}
			for _, w := range []winBytes{pw, mw} {
				if err := w.apply(recs); err != nil {
					t.Fatal(err)
				}
			}
			for _, r := range recs {
				ref.set(r.k, r.start, r.v)
			}
		case op < 17:
			clock += rng.Int64N(150)
			for _, w := range []winBytes{pw, mw} {
				if err := w.expire(clock); err != nil {
					t.Fatal(err)
				}
			}
			ref.minStart = max(ref.minStart, clock)
		case op < 18:
			if err := pw.flush(); err != nil {
				t.Fatal(err)
			}
			if err := pw.close(); err != nil {
				t.Fatal(err)
			}
			pw = open()
		default:
			from := clock - 100 + rng.Int64N(800)
			to := from + rng.Int64N(400)
			want := ref.entries(func(kk string, s int64) bool { return kk == string(k) && s >= from && s <= to })
			for name, w := range map[string]winBytes{"pebble": pw, "memory": mw} {
				if got := collectFetch(t, w, k, from, to); !slices.Equal(got, want) {
					t.Fatalf("step %d: %s fetch(%q, %d, %d) = %v, want %v", step, name, k, from, to, got, want)
				}
			}
		}
		want := ref.entries(func(string, int64) bool { return true })
		for name, w := range map[string]winBytes{"pebble": pw, "memory": mw} {
			if got := collectAll(t, w); !slices.Equal(got, want) {
				t.Fatalf("step %d: %s all = %v, want %v", step, name, got, want)
			}
			n, err := w.count()
			if err != nil || n != len(want) {
				t.Fatalf("step %d: %s count = %d, %v; want %d", step, name, n, err, len(want))
			}
			if len(want) > 0 {
				e := want[rng.IntN(len(want))]
				v, ok, err := w.get([]byte(e.k), e.start)
				if err != nil || !ok || string(v) != e.v {
					t.Fatalf("step %d: %s get(%q, %d) = %q %v %v, want %q", step, name, e.k, e.start, v, ok, err, e.v)
				}
			}
		}
	}
}

// A fetch over the whole time line of a key visits only the segments that exist.
func TestPebbleWindowFetchUnbounded(t *testing.T) {
	p, err := openPebble(filepath.Join(t.TempDir(), "s"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	w, err := openPebbleWin(p, 60_000)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := w.close(); err != nil {
			t.Error(err)
		}
	}()
	for _, s := range []int64{5, 70_000, 1 << 40} {
		if err := w.set([]byte("k"), s, []byte(fmt.Sprint(s))); err != nil {
			t.Fatal(err)
		}
	}
	got := collectFetch(t, w, []byte("k"), -10, 1<<62)
	if len(got) != 3 || got[0].start != 5 || got[2].start != 1<<40 {
		t.Fatalf("fetch = %v", got)
	}
}
