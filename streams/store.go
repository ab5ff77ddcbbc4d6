package streams

import (
	"bytes"
	"fmt"
	"iter"
	"maps"
	"slices"

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
	// Len is the number of entries.
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
}

// changelogWriter sends one store change to the changelog; a nil value is a deletion.
type changelogWriter func(key, value []byte) error

// memKV is the in-memory key-value store. It holds serialized bytes, keyed by the key's
// bytes, so it is what the changelog holds and restore needs no serde.
type memKV[K, V any] struct {
	name  string
	ks    serde.Serde[K]
	vs    serde.Serde[V]
	topic string // for the serdes: the changelog topic's logical name
	data  map[string][]byte
	log   changelogWriter
}

func newMemKV[K, V any](name string, ks serde.Serde[K], vs serde.Serde[V]) storeDef {
	return storeDef{name: name, changelog: true, make: func(log changelogWriter) stateStore {
		return &memKV[K, V]{name: name, ks: ks, vs: vs, topic: name + "-changelog", data: map[string][]byte{}, log: log}
	}}
}

func (s *memKV[K, V]) Name() string { return s.name }
func (s *memKV[K, V]) Len() int     { return len(s.data) }
func (s *memKV[K, V]) typed() any   { return KeyValueStore[K, V](s) }

func (s *memKV[K, V]) restore(key, value []byte) {
	if value == nil {
		delete(s.data, string(key))
		return
	}
	s.data[string(key)] = value
}

func (s *memKV[K, V]) Get(k K) (V, bool, error) {
	var z V
	kb, err := s.ks.Serialize(s.topic, k)
	if err != nil {
		return z, false, fmt.Errorf("streams: store %q key: %w", s.name, err)
	}
	vb, ok := s.data[string(kb)]
	if !ok {
		return z, false, nil
	}
	v, err := s.vs.Deserialize(s.topic, vb)
	if err != nil {
		return z, false, fmt.Errorf("streams: store %q value: %w", s.name, err)
	}
	return v, true, nil
}

func (s *memKV[K, V]) Put(k K, v V) error {
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
	s.data[string(kb)] = vb
	if s.log != nil {
		return s.log(kb, vb)
	}
	return nil
}

func (s *memKV[K, V]) Delete(k K) error {
	kb, err := s.ks.Serialize(s.topic, k)
	if err != nil {
		return fmt.Errorf("streams: store %q key: %w", s.name, err)
	}
	delete(s.data, string(kb))
	if s.log != nil {
		return s.log(kb, nil)
	}
	return nil
}

// All yields the entries in key-byte order; an entry that does not deserialize ends the
// iteration (the bytes came from this store's own serdes, so that is a broken serde).
func (s *memKV[K, V]) All() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		keys := slices.SortedFunc(maps.Keys(s.data), func(a, b string) int {
			return bytes.Compare([]byte(a), []byte(b))
		})
		for _, kb := range keys {
			k, err := s.ks.Deserialize(s.topic, []byte(kb))
			if err != nil {
				return
			}
			v, err := s.vs.Deserialize(s.topic, s.data[kb])
			if err != nil {
				return
			}
			if !yield(k, v) {
				return
			}
		}
	}
}
