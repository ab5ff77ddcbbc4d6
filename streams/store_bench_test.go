package streams

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/gregor-project/gregor/streams/serde"
)

// BenchmarkCountStore is a count's store access alone: per op, one Get and one Put of a
// counter among 10,000 keys, as Count does per record, in the in-memory store and the
// pebble one (changelog writes not included).
func BenchmarkCountStore(b *testing.B) {
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = fmt.Sprintf("word-%d", i)
	}
	run := func(b *testing.B, s *kvStore[string, int64]) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			k := keys[(i*7919)%len(keys)]
			n, _, err := s.Get(k)
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Put(k, n+1); err != nil {
				b.Fatal(err)
			}
		}
	}
	def := newKVStore("counts", serde.String, serde.Int64, "")
	b.Run("in_memory", func(b *testing.B) { run(b, def.make(nil).(*kvStore[string, int64])) })
	b.Run("pebble", func(b *testing.B) {
		st, err := def.open(nil, filepath.Join(b.TempDir(), "counts"), slog.New(slog.DiscardHandler))
		if err != nil {
			b.Fatal(err)
		}
		s := st.(*kvStore[string, int64])
		run(b, s)
		if err := s.disk().close(); err != nil {
			b.Fatal(err)
		}
	})
}
