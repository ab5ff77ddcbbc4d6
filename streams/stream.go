package streams

import (
	"fmt"
	"time"

	"github.com/gregor-project/gregor/streams/serde"
)

// KStream is a typed stream of records in a topology (Kafka Streams' KStream). Operators
// that keep the types are methods (Filter, Peek, Merge, ...); those that change the key or
// value type are package functions (Map, MapValues, GroupBy, ...), since Go methods take no
// type parameters.
//
// A stream carries the serdes of its key and value when known (from its source, or kept
// through operators that do not change a type) so a repartition can write it; WithSerdes
// sets them.
type KStream[K, V any] struct {
	b  *Builder
	n  *node
	ks serde.Serde[K]
	vs serde.Serde[V]
	// keyChanged is set after an operator that may change the key (Map, FlatMap,
	// SelectKey): grouping then repartitions by the new key first.
	keyChanged bool
}

// KeyValue is a key and a value, what FlatMap returns many of.
type KeyValue[K, V any] struct {
	Key   K
	Value V
}

// KV makes a KeyValue.
func KV[K, V any](k K, v V) KeyValue[K, V] { return KeyValue[K, V]{k, v} }

func deserializer[T any](s serde.Serde[T]) func(string, []byte) (any, error) {
	return func(topic string, b []byte) (any, error) { return s.Deserialize(topic, b) }
}

func serializer[T any](s serde.Serde[T]) func(string, any) ([]byte, error) {
	return func(topic string, v any) ([]byte, error) { return s.Serialize(topic, as[T](v)) }
}

// Stream is a stream of the records of topics, read with serdes ks and vs.
func Stream[K, V any](b *Builder, topic string, ks serde.Serde[K], vs serde.Serde[V], o ...Option) KStream[K, V] {
	n := b.add(&node{kind: sourceNode, name: b.nameOr(opts(o), "KSTREAM-SOURCE-"), topics: []string{topic},
		keyDe: deserializer(ks), valDe: deserializer(vs)})
	return KStream[K, V]{b: b, n: n, ks: ks, vs: vs}
}

// Consumed says how StreamWith reads a topic: serdes and an optional timestamp extractor.
type Consumed[K, V any] struct {
	Key   serde.Serde[K]
	Value serde.Serde[V]
	// TimestampExtractor gives a record its timestamp instead of the record's own (Kafka's
	// TimestampExtractor; streamTime is the task's, zero before its first record). A time
	// before the epoch drops the record (counted with the skipped records).
	TimestampExtractor func(r Record[K, V], streamTime time.Time) time.Time
	Name               string
}

// StreamWith is a stream of the records of topic, read as c says.
func StreamWith[K, V any](b *Builder, topic string, c Consumed[K, V]) KStream[K, V] {
	s := Stream(b, topic, c.Key, c.Value, Named(c.Name))
	if f := c.TimestampExtractor; f != nil {
		s.n.timestamp = func(r rec, streamTime int64) int64 {
			st := time.Time{}
			if streamTime >= 0 {
				st = fromMillis(streamTime)
			}
			t := f(typed[K, V](r), st)
			if t.Before(time.Unix(0, 0)) {
				return -1
			}
			return millis(t)
		}
	}
	return s
}

// WithSerdes returns s with its key and value serdes set, for a later repartition.
func WithSerdes[K, V any](s KStream[K, V], ks serde.Serde[K], vs serde.Serde[V]) KStream[K, V] {
	s.ks, s.vs = ks, vs
	return s
}

// keep returns s as a Serde[T] when T is s's type (an operator that kept the type keeps the
// serde), else nil.
func keep[S, T any](s serde.Serde[S]) serde.Serde[T] {
	t, _ := any(s).(serde.Serde[T])
	return t
}

// processor adds a processor node with one parent and returns the stream it outputs.
func processor[K, V, KR, VR any](s KStream[K, V], name string, f func(c *nodeContext, r rec) error, keyChanged bool) KStream[KR, VR] {
	n := s.b.add(&node{kind: processorNode, name: name, supplier: func() procInstance { return &funcProc{f: f} }}, s.n)
	return KStream[KR, VR]{b: s.b, n: n, ks: keep[K, KR](s.ks), vs: keep[V, VR](s.vs), keyChanged: s.keyChanged || keyChanged}
}

// Filter keeps the records for which pred is true.
func (s KStream[K, V]) Filter(pred func(K, V) bool, o ...Option) KStream[K, V] {
	return processor[K, V, K, V](s, s.b.nameOr(opts(o), "KSTREAM-FILTER-"), func(c *nodeContext, r rec) error {
		if pred(as[K](r.key), as[V](r.value)) {
			return c.forward(r)
		}
		return nil
	}, false)
}

// FilterNot keeps the records for which pred is false.
func (s KStream[K, V]) FilterNot(pred func(K, V) bool, o ...Option) KStream[K, V] {
	return s.Filter(func(k K, v V) bool { return !pred(k, v) }, o...)
}

// Peek calls f for each record and passes the record on unchanged.
func (s KStream[K, V]) Peek(f func(K, V), o ...Option) KStream[K, V] {
	return processor[K, V, K, V](s, s.b.nameOr(opts(o), "KSTREAM-PEEK-"), func(c *nodeContext, r rec) error {
		f(as[K](r.key), as[V](r.value))
		return c.forward(r)
	}, false)
}

// Foreach calls f for each record; the stream ends there.
func (s KStream[K, V]) Foreach(f func(K, V), o ...Option) {
	processor[K, V, K, V](s, s.b.nameOr(opts(o), "KSTREAM-FOREACH-"), func(_ *nodeContext, r rec) error {
		f(as[K](r.key), as[V](r.value))
		return nil
	}, false)
}

// Merge is the records of s and other, interleaved as they are processed.
func (s KStream[K, V]) Merge(other KStream[K, V], o ...Option) KStream[K, V] {
	n := s.b.add(&node{kind: processorNode, name: s.b.nameOr(opts(o), "KSTREAM-MERGE-"),
		supplier: func() procInstance { return &funcProc{f: (*nodeContext).forward} }}, s.n, other.n)
	out := KStream[K, V]{b: s.b, n: n, ks: s.ks, vs: s.vs, keyChanged: s.keyChanged || other.keyChanged}
	if out.ks == nil {
		out.ks = other.ks
	}
	if out.vs == nil {
		out.vs = other.vs
	}
	return out
}

// Map replaces each record's key and value by f's.
func Map[K, V, KR, VR any](s KStream[K, V], f func(K, V) (KR, VR), o ...Option) KStream[KR, VR] {
	return processor[K, V, KR, VR](s, s.b.nameOr(opts(o), "KSTREAM-MAP-"), func(c *nodeContext, r rec) error {
		k, v := f(as[K](r.key), as[V](r.value))
		r.key, r.value = k, v
		return c.forward(r)
	}, true)
}

// MapValues replaces each record's value by f's, keeping the key (no repartition follows).
func MapValues[K, V, VR any](s KStream[K, V], f func(V) VR, o ...Option) KStream[K, VR] {
	return processor[K, V, K, VR](s, s.b.nameOr(opts(o), "KSTREAM-MAPVALUES-"), func(c *nodeContext, r rec) error {
		r.value = f(as[V](r.value))
		return c.forward(r)
	}, false)
}

// FlatMap replaces each record by the records f returns (none, one or many).
func FlatMap[K, V, KR, VR any](s KStream[K, V], f func(K, V) []KeyValue[KR, VR], o ...Option) KStream[KR, VR] {
	return processor[K, V, KR, VR](s, s.b.nameOr(opts(o), "KSTREAM-FLATMAP-"), func(c *nodeContext, r rec) error {
		for _, kv := range f(as[K](r.key), as[V](r.value)) {
			if err := c.forward(rec{key: kv.Key, value: kv.Value, ts: r.ts, headers: r.headers}); err != nil {
				return err
			}
		}
		return nil
	}, true)
}

// FlatMapValues replaces each record by one record per value f returns, with the same key.
func FlatMapValues[K, V, VR any](s KStream[K, V], f func(V) []VR, o ...Option) KStream[K, VR] {
	return processor[K, V, K, VR](s, s.b.nameOr(opts(o), "KSTREAM-FLATMAPVALUES-"), func(c *nodeContext, r rec) error {
		for _, v := range f(as[V](r.value)) {
			if err := c.forward(rec{key: r.key, value: v, ts: r.ts, headers: r.headers}); err != nil {
				return err
			}
		}
		return nil
	}, false)
}

// SelectKey sets each record's key to f's result.
func SelectKey[K, V, KR any](s KStream[K, V], f func(K, V) KR, o ...Option) KStream[KR, V] {
	return processor[K, V, KR, V](s, s.b.nameOr(opts(o), "KSTREAM-KEY-SELECT-"), func(c *nodeContext, r rec) error {
		r.key = f(as[K](r.key), as[V](r.value))
		return c.forward(r)
	}, true)
}

// Produced says how To writes a topic: serdes and an optional partitioner.
type Produced[K, V any] struct {
	Key   serde.Serde[K]
	Value serde.Serde[V]
	// Partitioner picks a record's partition among numPartitions (Kafka's
	// StreamPartitioner); nil is the producer's default, murmur2 of the key bytes.
	Partitioner func(topic string, k K, v V, numPartitions int) int
	Name        string
}

// To writes the stream to topic with the serdes ks and vs.
func To[K, V any](s KStream[K, V], topic string, ks serde.Serde[K], vs serde.Serde[V]) {
	ToWith(s, topic, Produced[K, V]{Key: ks, Value: vs})
}

// ToWith writes the stream to topic as p says.
func ToWith[K, V any](s KStream[K, V], topic string, p Produced[K, V]) {
	if p.Key == nil || p.Value == nil {
		s.b.errs = append(s.b.errs, fmt.Errorf("streams: To(%q) without a key or value serde", topic))
		return
	}
	n := &node{kind: sinkNode, name: s.b.nameOr(options{name: p.Name}, "KSTREAM-SINK-"), topic: topic,
		keySer: serializer(p.Key), valSer: serializer(p.Value)}
	if f := p.Partitioner; f != nil {
		n.partition = func(topic string, r rec, num int) int { return f(topic, as[K](r.key), as[V](r.value), num) }
	}
	s.b.add(n, s.n)
}

// Process runs a Processor API processor on the stream, one instance per task from
// supplier, connected to the named stores (added with AddKeyValueStore). What it forwards is
// the returned stream.
func Process[K, V, KR, VR any](s KStream[K, V], supplier func() Processor[K, V, KR, VR], stores []string, o ...Option) KStream[KR, VR] {
	n := s.b.add(&node{kind: processorNode, name: s.b.nameOr(opts(o), "KSTREAM-PROCESSOR-"), stores: stores,
		supplier: func() procInstance { return &procAdapter[K, V, KR, VR]{p: supplier()} }}, s.n)
	return KStream[KR, VR]{b: s.b, n: n, ks: keep[K, KR](s.ks), vs: keep[V, VR](s.vs), keyChanged: true}
}

// AddKeyValueStore adds a key-value store with a changelog topic
// (<application.id>-<name>-changelog) for processors to connect to by name: persistent
// unless WithStoreType or Config.DefaultDSLStore says InMemory.
func AddKeyValueStore[K, V any](b *Builder, name string, ks serde.Serde[K], vs serde.Serde[V], o ...Option) {
	b.addStore(newKVStore(name, ks, vs, opts(o).storeType))
}

// Repartition writes the stream through an internal topic (<application.id>-<name>-repartition,
// partitioned by key) and reads it back: downstream, each key is in the partition its hash
// chooses. It needs the stream's serdes (from its source, or WithSerdes).
func Repartition[K, V any](s KStream[K, V], o ...Option) KStream[K, V] {
	op := opts(o)
	name := op.name
	if name == "" {
		name = s.b.newName("KSTREAM-REPARTITION-")
	}
	return repartition(s, name)
}

// repartition adds filter (null keys dropped) -> sink -> topic base-repartition -> source,
// named as Kafka Streams names them.
func repartition[K, V any](s KStream[K, V], base string) KStream[K, V] {
	topic := base + "-repartition"
	if s.ks == nil || s.vs == nil {
		s.b.errs = append(s.b.errs, fmt.Errorf("streams: repartition %q needs the stream's key and value serdes (WithSerdes)", topic))
		return s
	}
	s.b.internal[topic] = true
	sinkName, filterName, sourceName := topic+"-sink", topic+"-filter", topic+"-source"
	filtered := processor[K, V, K, V](s, filterName, func(c *nodeContext, r rec) error {
		if r.key == nil {
			return nil
		}
		return c.forward(r)
	}, false)
	s.b.add(&node{kind: sinkNode, name: sinkName, topic: topic, keySer: serializer(s.ks), valSer: serializer(s.vs)}, filtered.n)
	n := s.b.add(&node{kind: sourceNode, name: sourceName, topics: []string{topic},
		keyDe: deserializer(s.ks), valDe: deserializer(s.vs)})
	return KStream[K, V]{b: s.b, n: n, ks: s.ks, vs: s.vs}
}
