package streams

import (
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
)

type coreEntry struct {
	kb         string
	start, end int64
	v          string
}

func coreScan(t *testing.T, c windowCore, kFrom, kTo []byte, from, to int64) []coreEntry {
	t.Helper()
	var out []coreEntry
	if err := c.scan(kFrom, kTo, from, to, func(kb string, e winEntry) bool {
		out = append(out, coreEntry{kb, e.start, e.end, string(e.value)})
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// The pebble window core behaves as the in-memory one under random writes, deletions,
// batches and expiry, with keys that are prefixes of one another and times before the
// epoch: every read agrees, after every step and across a close and reopen.
func TestWindowCoreProperty(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			dir := filepath.Join(t.TempDir(), "store")
			p, err := openPebble(dir, slog.Default())
			if err != nil {
				t.Fatal(err)
			}
			defer p.close()
			mem, disk := newMemWindowCore(), pebbleWindowCore{p}
			keys := []string{"", "a", "a\x00", "a\xff", "ab", "abc", "b", "\xff\xff"}
			randKey := func() string { return keys[rng.IntN(len(keys))] }
			randTime := func() int64 { return rng.Int64N(2000) - 500 }
			check := func(step int) {
				t.Helper()
				n1, _ := mem.count()
				n2, err := disk.count()
				if err != nil || n1 != n2 {
					t.Fatalf("step %d: count %d, pebble %d (%v)", step, n1, n2, err)
				}
				all := coreScan(t, mem, nil, nil, math.MinInt64, math.MaxInt64)
				if got := coreScan(t, disk, nil, nil, math.MinInt64, math.MaxInt64); !slices.Equal(all, got) || len(all) != n1 {
					t.Fatalf("step %d: scan\n%v\npebble\n%v", step, all, got)
				}
				lo, hi := []byte(randKey()), []byte(randKey())
				from, to := randTime(), randTime()
				if w, g := coreScan(t, mem, lo, hi, from, to), coreScan(t, disk, lo, hi, from, to); !slices.Equal(w, g) {
					t.Fatalf("step %d: scan [%q, %q] [%d, %d]\n%v\npebble\n%v", step, lo, hi, from, to, w, g)
				}
				k := randKey()
				w, _ := mem.between(k, from, to)
				g, err := disk.between(k, from, to)
				if err != nil || fmt.Sprint(w) != fmt.Sprint(g) {
					t.Fatalf("step %d: between %q [%d, %d]: %v, pebble %v (%v)", step, k, from, to, w, g, err)
				}
				if len(all) > 0 {
					e := all[rng.IntN(len(all))]
					v, ok, err := disk.get(e.kb, e.start, e.end)
					if err != nil || !ok || string(v) != e.v {
						t.Fatalf("step %d: get %v: %q %v %v", step, e, v, ok, err)
					}
				}
			}
			for step := range 600 {
				switch r := rng.IntN(20); {
				case r < 12:
					k, s := randKey(), randTime()
					e := s + rng.Int64N(3)
					var v []byte
					if rng.IntN(4) > 0 {
						v = []byte(fmt.Sprint(step))
					}
					if err := mem.set(k, s, e, v); err != nil {
						t.Fatal(err)
					}
					if err := disk.set(k, s, e, v); err != nil {
						t.Fatal(err)
					}
				case r < 17:
					var recs []windowRec
					for range rng.IntN(8) {
						s := randTime()
						var v []byte
						if rng.IntN(3) > 0 {
							v = []byte(fmt.Sprint(step))
						}
						recs = append(recs, windowRec{randKey(), s, s + rng.Int64N(3), v})
					}
					_ = mem.apply(recs)
					if err := disk.apply(recs); err != nil {
						t.Fatal(err)
					}
				case r < 19:
					cut := randTime() - 1000
					old := func(start, end int64) bool { return end < cut }
					_ = mem.expire(old)
					if err := disk.expire(old); err != nil {
						t.Fatal(err)
					}
				default: // a clean close: flushed, as before a checkpoint
					if err := p.flush(); err != nil {
						t.Fatal(err)
					}
					if err := p.close(); err != nil {
						t.Fatal(err)
					}
					if err := p.open(); err != nil {
						t.Fatal(err)
					}
				}
				check(step)
			}
		})
	}
}
