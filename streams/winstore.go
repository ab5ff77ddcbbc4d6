package streams

import (
	"encoding/binary"
	"fmt"
	"iter"
	"log/slog"

	"github.com/gregor-project/gregor/streams/serde"
)

// winStore is the store of a time-windowed aggregation: values by key and window start
// over a window core (winbytes.go), in memory or pebble. Processors see it as a
// KeyValueStore of Windowed keys. Its changelog key is Kafka's time-window layout, the
// key's bytes then the window start (8 bytes big-endian ms), so restore needs no serde.
//
// It is timestamped, as Kafka's TimestampedWindowStore: the core holds each value with its
// result's timestamp before it (stamp); the changelog holds the value's bytes alone, the
// timestamp being the changelog record's, and restore puts it back.
//
// Windows start at or after 0 (windowsFor never yields an earlier one).
type winStore[K, V any] struct {
	name  string
	ks    serde.Serde[K]
	vs    serde.Serde[V]
	size  int64 // window size (ms): a window ends at start + size
	topic string
	b     winBytes
	log   changelogWriter
	// err is the first failed restore or count, returned by the next operation.
	err error
}

// newWinStore declares a window store of type st ("" for the App's default) for windows
// of size, kept for retention past their start (ms): the persistent one is cut into time
// segments of max(retention/2, 60s), as Kafka Streams cuts its RocksDB window stores.
func newWinStore[K, V any](name string, ks serde.Serde[K], vs serde.Serde[V], size, retention int64, st StoreType) storeDef {
	mk := func(log changelogWriter, b winBytes) *winStore[K, V] {
		return &winStore[K, V]{name: name, ks: ks, vs: vs, size: size, topic: name + "-changelog", b: b, log: log}
	}
	return storeDef{name: name, changelog: true, storeType: st, format: "timestamped",
		make: func(log changelogWriter) stateStore { return mk(log, newMemWinBytes()) },
		open: func(log changelogWriter, dir string, lg *slog.Logger) (stateStore, error) {
			p, err := openPebble(dir, lg)
			if err != nil {
				return nil, err
			}
			w, err := openPebbleWin(p, max(retention/2, 60_000))
			if err != nil {
				return nil, fmt.Errorf("streams: open store %s: %w", dir, err)
			}
			return mk(log, w), nil
		}}
}

func (s *winStore[K, V]) Name() string { return s.name }
func (s *winStore[K, V]) typed() any   { return KeyValueStore[Windowed[K], V](s) }

func (s *winStore[K, V]) disk() diskStore {
	if p, ok := s.b.(persistent); ok {
		return p.disk()
	}
	return nil
}

// splitChangelogKey is a changelog key's key bytes and window start.
func splitChangelogKey(b []byte) ([]byte, int64, bool) {
	if len(b) < 8 {
		return nil, 0, false
	}
	n := len(b) - 8
	return b[:n], int64(binary.BigEndian.Uint64(b[n:])), true
}

func (s *winStore[K, V]) restore(key, value []byte) { s.restoreAt(key, value, -1) }

func (s *winStore[K, V]) restoreAt(key, value []byte, ts int64) {
	if err := s.restoreBatch([]kvPair{{key, value, ts}}); err != nil && s.err == nil {
		s.err = err
	}
}

// restoreBatch applies changelog records; a key too short to hold a window start is not
// one this store wrote, and fails the restore.
func (s *winStore[K, V]) restoreBatch(recs []kvPair) error {
	ws := make([]winRec, 0, len(recs))
	for _, r := range recs {
		k, start, ok := splitChangelogKey(r.k)
		if !ok {
			return fmt.Errorf("streams: restore store %q: changelog key of %d bytes", s.name, len(r.k))
		}
		ws = append(ws, winRec{k, start, stamp(r.ts, r.v)})
	}
	if err := s.b.apply(ws); err != nil {
		return fmt.Errorf("streams: restore store %q: %w", s.name, err)
	}
	return nil
}

func (s *winStore[K, V]) Len() int {
	n, err := s.b.count()
	if err != nil && s.err == nil {
		s.err = fmt.Errorf("streams: store %q: %w", s.name, err)
	}
	return n
}

func (s *winStore[K, V]) Get(w Windowed[K]) (V, bool, error) {
	v, _, ok, err := s.getAt(w)
	return v, ok, err
}

// getAt is w's value and its timestamp.
func (s *winStore[K, V]) getAt(w Windowed[K]) (V, int64, bool, error) {
	var z V
	if s.err != nil {
		return z, -1, false, s.err
	}
	kb, err := s.ks.Serialize(s.topic, w.Key)
	if err != nil {
		return z, -1, false, fmt.Errorf("streams: store %q key: %w", s.name, err)
	}
	sb, ok, err := s.b.get(kb, w.Window.Start.UnixMilli())
	if err != nil || !ok {
		return z, -1, false, err
	}
	ts, vb := unstamp(sb)
	v, err := s.vs.Deserialize(s.topic, vb)
	if err != nil {
		return z, -1, false, fmt.Errorf("streams: store %q value: %w", s.name, err)
	}
	return v, ts, true, nil
}

// Put writes w's value timestamped with the record being processed.
func (s *winStore[K, V]) Put(w Windowed[K], v V) error { return s.putAt(w, v, -1) }

// putAt writes w's value with timestamp ts (-1: the time of the record being processed,
// kept in the store as -1).
func (s *winStore[K, V]) putAt(w Windowed[K], v V, ts int64) error {
	vb, err := s.vs.Serialize(s.topic, v)
	if err != nil {
		return fmt.Errorf("streams: store %q value: %w", s.name, err)
	}
	if vb == nil {
		vb = []byte{}
	}
	return s.write(w, vb, ts)
}

func (s *winStore[K, V]) Delete(w Windowed[K]) error { return s.write(w, nil, -1) }

func (s *winStore[K, V]) write(w Windowed[K], vb []byte, ts int64) error {
	if s.err != nil {
		return s.err
	}
	kb, err := s.ks.Serialize(s.topic, w.Key)
	if err != nil {
		return fmt.Errorf("streams: store %q key: %w", s.name, err)
	}
	start := w.Window.Start.UnixMilli()
	if err := s.b.set(kb, start, stamp(ts, vb)); err != nil {
		return fmt.Errorf("streams: store %q: %w", s.name, err)
	}
	if s.log != nil {
		return s.log(binary.BigEndian.AppendUint64(append([]byte{}, kb...), uint64(start)), vb, ts)
	}
	return nil
}

func (s *winStore[K, V]) windowed(k K, start int64) Windowed[K] {
	return Windowed[K]{Key: k, Window: Window{Start: fromMillis(start), End: fromMillis(start + s.size)}}
}

// All yields every window in the order of its changelog key's bytes (key bytes, then start).
func (s *winStore[K, V]) All() iter.Seq2[Windowed[K], V] {
	return func(yield func(Windowed[K], V) bool) {
		err := s.b.all(func(kb []byte, start int64, vb []byte) bool {
			k, err := s.ks.Deserialize(s.topic, append([]byte{}, kb...))
			if err != nil {
				return false
			}
			_, vb = unstamp(vb)
			v, err := s.vs.Deserialize(s.topic, append([]byte{}, vb...))
			if err != nil {
				return false
			}
			return yield(s.windowed(k, start), v)
		})
		if err != nil && s.err == nil {
			s.err = fmt.Errorf("streams: store %q: %w", s.name, err)
		}
	}
}

// Fetch yields key k's windows starting in [from, to] (ms), by start, as Kafka's
// WindowStore.fetch(key, timeFrom, timeTo).
func (s *winStore[K, V]) Fetch(k K, from, to int64) iter.Seq2[Windowed[K], V] {
	return func(yield func(Windowed[K], V) bool) {
		kb, err := s.ks.Serialize(s.topic, k)
		if err != nil {
			return
		}
		err = s.b.fetch(kb, from, to, func(start int64, vb []byte) bool {
			_, vb = unstamp(vb)
			v, err := s.vs.Deserialize(s.topic, append([]byte{}, vb...))
			if err != nil {
				return false
			}
			return yield(s.windowed(k, start), v)
		})
		if err != nil && s.err == nil {
			s.err = fmt.Errorf("streams: store %q: %w", s.name, err)
		}
	}
}

// expire removes the windows starting before before (not from the changelog).
func (s *winStore[K, V]) expire(before int64) error {
	if err := s.b.expire(before); err != nil {
		return fmt.Errorf("streams: store %q: %w", s.name, err)
	}
	return nil
}
