package streams

import (
	"fmt"
	"iter"
	"log/slog"

	"github.com/gregor-project/gregor/streams/serde"
)

// KeyValueStore is a task's key-value state store (Kafka Streams' KeyValueStore). Writes go
// to the store's changelog topic as they happen, so a task moved to another instance, or
// restarted, restores the store by replaying the changelog.
type KeyValueStore[K, V any] interface {
	Name() string
	// Get returns the value for k and whether there is one.
	Get(k K) (V, bool, error)
	Put(k K, v V) error
	Delete(k K) error
	// All yields every entry in the order of the serialized keys' bytes, as Kafka's stores
	// order them. Writing to the store during the iteration is not allowed.
	All() iter.Seq2[K, V]
	// Len is the number of entries (a persistent store counts them by scanning).
	Len() int
}

// stateStore is a store inside a task, untyped: the task restores it from its changelog and
// hands it to processors.
type stateStore interface {
	// restore applies one changelog record (a nil value deletes).
	restore(key, value []byte)
	// typed is the store as processors see it (a KeyValueStore[K, V]).
	typed() any
}

// storeDef declares a store in a topology: its name, whether it has a changelog topic, and
// how a task makes its instance (log is the changelog writer, nil without one).
type storeDef struct {
	name      string
	changelog bool
	// topicConfigs of the changelog topic; nil is cleanup.policy=compact.
	topicConfigs map[string]string
	make         func(log changelogWriter) stateStore
	// storeType is the operator's choice (WithStoreType); "" is the App's default.dsl.store.
	storeType StoreType
	// open, when set, makes the store persistent in directory dir (pebble); make is then its
	// in-memory form. A store without open is always in memory.
	open func(log changelogWriter, dir string, lg *slog.Logger) (stateStore, error)
	// format, when set, names the layout of a persistent store's values ("timestamped"):
	// files without its marker are restored from the changelog (taskState.checkFormat).
	format string
}

// changelogWriter sends one store change to the changelog; a nil value is a deletion. ts is
// the changelog record's timestamp: a timestamped store's own, or (ts < 0) the time of the
// record being processed (the wall clock outside one).
type changelogWriter func(key, value []byte, ts int64) error

// kvStore is the key-value store over a byte core, in memory or pebble (kvbytes.go). It
// holds serialized bytes keyed by the key's bytes, so it is what the changelog holds and
// restore needs no serde.
type kvStore[K, V any] struct {
	name  string
	ks    serde.Serde[K]
	vs    serde.Serde[V]
	topic string // for the serdes: the changelog topic's logical name
	b     kvBytes
	log   changelogWriter
	// stamped makes the store timestamped, as Kafka's TimestampedKeyValueStore (an
	// aggregation's): the core holds each value with its result's timestamp before it
	// (stamp); the changelog holds the value's bytes alone, the timestamp being the
	// changelog record's, and restore puts it back.
	stamped bool
	// err is the first failed write of a restore or count, returned by the next operation.
	err error
}

// newKVStore declares a key-value store of type st ("" for the App's default).
func newKVStore[K, V any](name string, ks serde.Serde[K], vs serde.Serde[V], st StoreType) storeDef {
	return newKVStoreOf(name, ks, vs, st, false)
}

// newTimestampedKVStore declares a timestamped key-value store (an aggregation's).
func newTimestampedKVStore[K, V any](name string, ks serde.Serde[K], vs serde.Serde[V], st StoreType) storeDef {
	return newKVStoreOf(name, ks, vs, st, true)
}

func newKVStoreOf[K, V any](name string, ks serde.Serde[K], vs serde.Serde[V], st StoreType, stamped bool) storeDef {
	mk := func(log changelogWriter, b kvBytes) *kvStore[K, V] {
		return &kvStore[K, V]{name: name, ks: ks, vs: vs, topic: name + "-changelog", b: b, log: log, stamped: stamped}
	}
	format := ""
	if stamped {
		format = "timestamped"
	}
	return storeDef{name: name, changelog: true, storeType: st, format: format,
		make: func(log changelogWriter) stateStore { return mk(log, newMemBytes()) },
		open: func(log changelogWriter, dir string, lg *slog.Logger) (stateStore, error) {
			p, err := openPebble(dir, lg)
			if err != nil {
				return nil, err
			}
			return mk(log, pebbleKV{p}), nil
		}}
}

func (s *kvStore[K, V]) Name() string { return s.name }
func (s *kvStore[K, V]) typed() any   { return KeyValueStore[K, V](s) }

// Len counts the entries (a persistent store counts them by scanning).
func (s *kvStore[K, V]) Len() int {
	n, err := s.b.count()
	if err != nil && s.err == nil {
		s.err = fmt.Errorf("streams: store %q: %w", s.name, err)
	}
	return n
}

func (s *kvStore[K, V]) disk() diskStore {
	if p, ok := s.b.(persistent); ok {
		return p.disk()
	}
	return nil
}

func (s *kvStore[K, V]) restore(key, value []byte) { s.restoreAt(key, value, -1) }

func (s *kvStore[K, V]) restoreAt(key, value []byte, ts int64) {
	if s.stamped {
		value = stamp(ts, value)
	}
	if err := s.b.set(key, value); err != nil && s.err == nil {
		s.err = fmt.Errorf("streams: restore store %q: %w", s.name, err)
	}
}

func (s *kvStore[K, V]) restoreBatch(recs []kvPair) error {
	if s.stamped {
		st := make([]kvPair, len(recs))
		for i, r := range recs {
			st[i] = kvPair{r.k, stamp(r.ts, r.v), r.ts}
		}
		recs = st
	}
	return s.b.apply(recs)
}

// value is the value bytes of stored bytes b, and their timestamp (-1 if the store is
// not timestamped).
func (s *kvStore[K, V]) value(b []byte) (int64, []byte) {
	if !s.stamped {
		return -1, b
	}
	return unstamp(b)
}

func (s *kvStore[K, V]) Get(k K) (V, bool, error) {
	v, _, ok, err := s.getAt(k)
	return v, ok, err
}

// getAt is k's value and its timestamp (-1 if the store is not timestamped).
func (s *kvStore[K, V]) getAt(k K) (V, int64, bool, error) {
	var z V
	if s.err != nil {
		return z, -1, false, s.err
	}
	kb, err := s.ks.Serialize(s.topic, k)
	if err != nil {
		return z, -1, false, fmt.Errorf("streams: store %q key: %w", s.name, err)
	}
	sb, ok, err := s.b.get(kb)
	if err != nil {
		return z, -1, false, fmt.Errorf("streams: store %q: %w", s.name, err)
	}
	if !ok {
		return z, -1, false, nil
	}
	ts, vb := s.value(sb)
	v, err := s.vs.Deserialize(s.topic, vb)
	if err != nil {
		return z, -1, false, fmt.Errorf("streams: store %q value: %w", s.name, err)
	}
	return v, ts, true, nil
}

// Put writes k's value (timestamped, in a timestamped store, with the time of the record
// being processed).
func (s *kvStore[K, V]) Put(k K, v V) error { return s.putAt(k, v, -1) }

// putAt writes k's value with timestamp ts (-1: the time of the record being processed,
// kept in a timestamped store as -1).
func (s *kvStore[K, V]) putAt(k K, v V, ts int64) error {
	if s.err != nil {
		return s.err
	}
	kb, err := s.ks.Serialize(s.topic, k)
	if err != nil {
		return fmt.Errorf("streams: store %q key: %w", s.name, err)
	}
	vb, err := s.vs.Serialize(s.topic, v)
	if err != nil {
		return fmt.Errorf("streams: store %q value: %w", s.name, err)
	}
	if vb == nil {
		vb = []byte{}
	}
	sb := vb
	if s.stamped {
		sb = stamp(ts, vb)
	}
	if err := s.b.set(kb, sb); err != nil {
		return fmt.Errorf("streams: store %q: %w", s.name, err)
	}
	if s.log != nil {
		return s.log(kb, vb, ts)
	}
	return nil
}

func (s *kvStore[K, V]) Delete(k K) error {
	if s.err != nil {
		return s.err
	}
	kb, err := s.ks.Serialize(s.topic, k)
	if err != nil {
		return fmt.Errorf("streams: store %q key: %w", s.name, err)
	}
	if err := s.b.set(kb, nil); err != nil {
		return fmt.Errorf("streams: store %q: %w", s.name, err)
	}
	if s.log != nil {
		return s.log(kb, nil, -1)
	}
	return nil
}

// All yields the entries in key-byte order; an entry that does not deserialize, or a
// failed read, ends the iteration (the bytes came from this store's own serdes, so that is
// a broken serde; a read error is kept for the next operation).
func (s *kvStore[K, V]) All() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		err := s.b.scan(func(kb, vb []byte) bool {
			k, err := s.ks.Deserialize(s.topic, append([]byte{}, kb...))
			if err != nil {
				return false
			}
			_, vb = s.value(vb)
			v, err := s.vs.Deserialize(s.topic, append([]byte{}, vb...))
			if err != nil {
				return false
			}
			return yield(k, v)
		})
		if err != nil && s.err == nil {
			s.err = fmt.Errorf("streams: store %q: %w", s.name, err)
		}
	}
}

// newMemKV declares a key-value store kept in memory whatever the App's default (a global
// table's store, read by every instance from its topic).
func newMemKV[K, V any](name string, ks serde.Serde[K], vs serde.Serde[V]) storeDef {
	return newKVStore(name, ks, vs, InMemory)
}
