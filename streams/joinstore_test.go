package streams

import (
	"log/slog"
	"path/filepath"
	"testing"
	"time"
)

// A persistent join window store reopened on its files keeps every record, numbers new
// duplicates after the old ones (none overwritten), and still refuses records past its
// retention from the time it had observed; the in-memory store answers alike.
func TestPersistentJoinWindowStoreReopens(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	def := newJoinWindowStore("j", 10*time.Second, Persistent)
	log := func(_, _ []byte, _ int64) error { return nil }
	open := func() *joinWindowStore {
		t.Helper()
		s, err := def.open(log, dir, slog.Default())
		if err != nil {
			t.Fatal(err)
		}
		return s.(*joinWindowStore)
	}
	mem := def.make(nil).(*joinWindowStore)
	s := open()
	for _, w := range []*joinWindowStore{s, mem} {
		for _, ts := range []int64{100_000, 100_000, 105_000, 120_000} {
			if ok, err := w.put([]byte("k"), ts, []byte{byte(ts / 1000)}); !ok || err != nil {
				t.Fatalf("put %d: %v %v", ts, ok, err)
			}
		}
	}
	if err := s.disk().flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.disk().close(); err != nil {
		t.Fatal(err)
	}
	s = open()
	if s.observed != 120_000 || s.seq != 4 {
		t.Fatalf("reopened: observed %d, seq %d; want 120000 and 4", s.observed, s.seq)
	}
	for _, w := range []*joinWindowStore{s, mem} {
		for _, ts := range []int64{115_000, 120_000} {
			if ok, err := w.put([]byte("k"), ts, []byte{99}); !ok || err != nil {
				t.Fatalf("put %d: %v %v", ts, ok, err)
			}
		}
		if ok, _ := w.put([]byte("k"), 110_000, []byte{1}); ok {
			t.Fatal("a record past the retention was stored")
		}
		// 100000 and 105000 are past the retention of 120000 (10 s): not read.
		got := w.fetch([]byte("k"), 0, 200_000)
		if len(got) != 3 || got[0].ts != 115_000 || got[0].seq != 5 || got[1].seq != 4 || got[1].value[0] != 120 ||
			got[2].seq != 6 || got[2].value[0] != 99 {
			t.Fatalf("fetch: %+v", got)
		}
	}
	if err := s.disk().close(); err != nil {
		t.Fatal(err)
	}
}
