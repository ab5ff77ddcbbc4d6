package streams

import (
	"fmt"

	"github.com/gregor-project/gregor/streams/serde"
)

// KTable is a typed changelog stream seen as a table: the latest value per key (Kafka
// Streams' KTable), kept in a key-value store. Every update is forwarded downstream (there
// is no record cache yet).
type KTable[K, V any] struct {
	b     *Builder
	n     *node
	ks    serde.Serde[K]
	vs    serde.Serde[V]
	store string
	// closing is set on the table of a windowed aggregation: when its windows close, for
	// Suppress's UntilWindowCloses.
	closing *windowClosing
	// view reads the table of a derived table without a store of its own (Filter,
	// MapValuesTable, a table-table join); nil reads store (tableview.go).
	view *tableView
}

// StoreName is the name of the store that holds the table, "" for a table derived without
// one (Materialized gives it one).
func (t KTable[K, V]) StoreName() string { return t.store }

// Table is the table of topic's records: a null value deletes its key. Named names the store
// (default <topic>-STATE-STORE-NNNNNNNNNN, as Kafka Streams).
func Table[K, V any](b *Builder, topic string, ks serde.Serde[K], vs serde.Serde[V], o ...Option) KTable[K, V] {
	op := opts(o)
	src := Stream(b, topic, ks, vs)
	store := op.name
	if store == "" {
		store = b.newName(topic + "-STATE-STORE-")
	}
	b.addStore(newTimestampedKVStore(store, ks, vs, op.storeType))
	n := b.add(&node{kind: processorNode, name: b.newName("KTABLE-SOURCE-"), stores: []string{store},
		supplier: func() procInstance { return &tableSource[K, V]{store: store} }}, src.n)
	return KTable[K, V]{b: b, n: n, ks: ks, vs: vs, store: store}
}

// tableSource keeps a table's records in its timestamped store, each value with its
// record's timestamp.
type tableSource[K, V any] struct {
	store string
	c     *nodeContext
	kv    *kvStore[K, V]
}

func (p *tableSource[K, V]) init(c *nodeContext) error {
	s, err := c.store(p.store)
	if err != nil {
		return err
	}
	kv, ok := s.(*kvStore[K, V])
	if !ok {
		return fmt.Errorf("streams: store %q is not a key-value store of the table's types", p.store)
	}
	p.c, p.kv = c, kv
	return nil
}

func (p *tableSource[K, V]) process(r rec) error {
	if r.key == nil {
		return nil
	}
	k := r.key.(K)
	r.old = nil
	if p.c.task.topo.b.sendsOld(p.c.n) {
		old, found, err := p.kv.Get(k)
		if err != nil {
			return err
		}
		if found {
			r.old = old
		}
	}
	if r.value == nil {
		if err := p.kv.Delete(k); err != nil {
			return err
		}
	} else if err := p.kv.putAt(k, r.value.(V), r.ts); err != nil {
		return err
	}
	return p.c.forward(r)
}

func (p *tableSource[K, V]) close() error { return nil }

// ToStream is the table's stream of updates: each new value with its key (a deletion is a
// record with a null value).
func ToStream[K, V any](t KTable[K, V], o ...Option) KStream[K, V] {
	n := t.b.add(&node{kind: processorNode, name: t.b.nameOr(opts(o), "KTABLE-TOSTREAM-"),
		supplier: func() procInstance { return &funcProc{f: (*nodeContext).forward} }}, t.n)
	return KStream[K, V]{b: t.b, n: n, ks: t.ks, vs: t.vs}
}

// KGroupedStream is a stream grouped by key, ready for an aggregation (Count, Reduce,
// Aggregate). When the key may have changed upstream, the aggregation first repartitions
// the stream through <application.id>-<name>-repartition, so every record of a key reaches
// the same task.
type KGroupedStream[K, V any] struct {
	s           KStream[K, V]
	name        string
	repartition bool
}

// GroupByKey groups s by its key. Named names the repartition topic (<name>-repartition)
// when one is needed.
func GroupByKey[K, V any](s KStream[K, V], o ...Option) KGroupedStream[K, V] {
	return KGroupedStream[K, V]{s: s, name: opts(o).name, repartition: s.keyChanged}
}

// GroupBy groups s by the key f chooses, written with ks (a repartition always follows,
// through a topic that needs the stream's value serde too).
func GroupBy[K, V, KR any](s KStream[K, V], f func(K, V) KR, ks serde.Serde[KR], o ...Option) KGroupedStream[KR, V] {
	sel := WithSerdes(SelectKey(s, f), ks, s.vs)
	return KGroupedStream[KR, V]{s: sel, name: opts(o).name, repartition: true}
}

// Count counts the records per key into a table of int64. Records with a null key or value
// are skipped, as in Kafka Streams.
func Count[K, V any](g KGroupedStream[K, V], o ...Option) KTable[K, int64] {
	return aggregate(g, func() int64 { return 0 }, func(_ K, _ V, n int64) int64 { return n + 1 }, serde.Int64, opts(o))
}

// Reduce combines the values per key: the first value of a key is kept as is, each later
// one combined with the current result by f.
func Reduce[K, V any](g KGroupedStream[K, V], f func(acc, v V) V, o ...Option) KTable[K, V] {
	if g.s.vs == nil {
		g.s.b.errs = append(g.s.b.errs, fmt.Errorf("streams: Reduce needs the stream's value serde (WithSerdes)"))
	}
	return aggregateWith(g, g.s.vs, opts(o), func(_ K, v V, acc V, found bool) V {
		if !found {
			return v
		}
		return f(acc, v)
	})
}

// Aggregate folds the values per key into an aggregate of type VA, starting each key from
// init(); vas writes the aggregate to the store's changelog.
func Aggregate[K, V, VA any](g KGroupedStream[K, V], init func() VA, f func(k K, v V, acc VA) VA, vas serde.Serde[VA], o ...Option) KTable[K, VA] {
	return aggregate(g, init, f, vas, opts(o))
}

func aggregate[K, V, VA any](g KGroupedStream[K, V], init func() VA, f func(K, V, VA) VA, vas serde.Serde[VA], op options) KTable[K, VA] {
	return aggregateWith(g, vas, op, func(k K, v V, acc VA, found bool) VA {
		if !found {
			acc = init()
		}
		return f(k, v, acc)
	})
}

// aggregationInput names an aggregation's store and node as Kafka Streams numbers them
// (prefix+"STATE-STORE-" first, then prefix; Named names the store) and returns the stream
// it reads: g's, through a repartition topic first when g's key changed. what names the
// aggregation in the error for a missing key serde.
func aggregationInput[K, V any](g KGroupedStream[K, V], op options, prefix, what string) (s KStream[K, V], store, name string) {
	b := g.s.b
	store = op.name
	if store == "" {
		store = b.newName(prefix + "STATE-STORE-")
	}
	name = b.nameOr(op, prefix)
	s = g.s
	if g.repartition {
		base := g.name
		if base == "" {
			base = store
		}
		s = repartition(s, base)
	}
	if s.ks == nil {
		b.errs = append(b.errs, fmt.Errorf("streams: %s %q needs the key serde (WithSerdes)", what, store))
	}
	return s, store, name
}

// aggregateWith adds the aggregation: its store (named as Kafka Streams names it), the
// repartition when needed, and the processor that reads, updates and forwards per record.
func aggregateWith[K, V, VA any](g KGroupedStream[K, V], vas serde.Serde[VA], op options, f func(k K, v V, acc VA, found bool) VA) KTable[K, VA] {
	b := g.s.b
	s, store, name := aggregationInput(g, op, "KSTREAM-AGGREGATE-", "aggregation")
	b.addStore(newTimestampedKVStore(store, s.ks, vas, op.storeType))
	n := b.add(&node{kind: processorNode, name: name, stores: []string{store},
		supplier: func() procInstance { return &aggregator[K, V, VA]{store: store, f: f} }}, s.n)
	return KTable[K, VA]{b: b, n: n, ks: s.ks, vs: vas, store: store}
}

// aggregator is Kafka Streams' KStreamAggregate over a timestamped store: a result's
// timestamp is the largest of its inputs' (the previous result's and the record's), so an
// out-of-order record does not move a result back in time.
type aggregator[K, V, VA any] struct {
	store string
	f     func(k K, v V, acc VA, found bool) VA
	c     *nodeContext
	kv    *kvStore[K, VA]
}

func (a *aggregator[K, V, VA]) init(c *nodeContext) error {
	s, err := c.store(a.store)
	if err != nil {
		return err
	}
	kv, ok := s.(*kvStore[K, VA])
	if !ok || !kv.stamped {
		return fmt.Errorf("streams: store %q is not a timestamped key-value store", a.store)
	}
	a.c, a.kv = c, kv
	return nil
}

func (a *aggregator[K, V, VA]) process(r rec) error {
	if r.key == nil || r.value == nil {
		return nil
	}
	k := r.key.(K)
	prev, prevTS, found, err := a.kv.getAt(k)
	if err != nil {
		return err
	}
	acc := a.f(k, r.value.(V), prev, found)
	ts := max(prevTS, r.ts)
	if err := a.kv.putAt(k, acc, ts); err != nil {
		return err
	}
	out := rec{key: k, value: acc, ts: ts, headers: r.headers}
	if found {
		out.old = prev
	}
	return a.c.forward(out)
}

func (a *aggregator[K, V, VA]) close() error { return nil }
