package streams

import "fmt"

// StoreType is the kind of store a stateful operator keeps its state in, by Kafka Streams'
// default.dsl.store and Materialized.withStoreType.
type StoreType string

const (
	// Persistent stores (the default) are pebble databases under Config.StateDir, one per
	// store and task. A restarted instance keeps them and restores only the changelog
	// written after its checkpoint.
	Persistent StoreType = "pebble"
	// InMemory stores live in the heap and are restored from the whole changelog whenever
	// their task starts.
	InMemory StoreType = "in_memory"
)

// WithStoreType chooses the type of an operator's store (Count, Reduce, Aggregate, their
// time-, sliding- and session-windowed forms, Table, AddKeyValueStore, and the window stores
// of a stream-stream join), as Kafka Streams' Materialized.withStoreType and
// StreamJoined.withStoreType;
// without it the store is of Config.DefaultDSLStore's type. The test driver keeps every
// store in memory.
func WithStoreType(t StoreType) Option { return func(o *options) { o.storeType = t } }

func (t StoreType) check() error {
	switch t {
	case Persistent, InMemory:
		return nil
	}
	return fmt.Errorf("streams: unknown store type %q (want %q or %q)", t, Persistent, InMemory)
}
