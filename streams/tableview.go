package streams

import (
	"fmt"

	"github.com/gregor-project/gregor/streams/serde"
)

// Materialized keeps a derived table (Filter, MapValuesTable, a table-table join) in a
// key-value store of that name, with a changelog (<application.id>-<name>-changelog), as
// Kafka Streams' Materialized.as: it can then be queried from the driver and joined by a
// stream. Without it, a derived table has no store: joins read it through its parent's.
func Materialized(name string) Option { return func(o *options) { o.store = name } }

// MaterializedWith is Materialized with the serde of the table's values, for a table whose
// value type has no serde yet (MapValuesTable, a join's result).
func MaterializedWith[V any](name string, vs serde.Serde[V]) Option {
	return func(o *options) { o.store, o.storeSerde = name, vs }
}

// tableView is how an operator reads a table's current value of a key inside a task
// (Kafka's KTableValueGetter): from the table's store, or for a table derived without one,
// computed from its parents' views. stores are the stores it reads, which the reading
// node must be connected to.
type tableView struct {
	stores []string
	open   func(tk *task) (tableGetter, error)
	// missing is set for a table that cannot be read by key (a foreign-key join's result
	// without a store): a join of it is an invalid topology (needView).
	missing error
}

// needView records v's table as unreadable in b when it is.
func needView(b *Builder, v *tableView) {
	if v.missing != nil {
		b.errs = append(b.errs, v.missing)
	}
}

// tableGetter is a view opened in a task: the value of k, its timestamp (the latest of the
// updates it derives from, as Kafka's ValueAndTimestamp; -1 when its store keeps none), and
// whether there is one.
type tableGetter func(k any) (v any, ts int64, found bool, err error)

// viewOf is t's view.
func viewOf[K, V any](t KTable[K, V]) *tableView {
	if t.view != nil {
		return t.view
	}
	store := t.store
	if store == "" {
		// A foreign-key join's result: its values come from another partition's table.
		err := fmt.Errorf("streams: table %s has no store to read it by key: give it one (Materialized)", t.n.name)
		return &tableView{missing: err, open: func(*task) (tableGetter, error) { return nil, err }}
	}
	return &tableView{stores: []string{store}, open: func(tk *task) (tableGetter, error) {
		st, ok := tk.stores[store]
		if !ok {
			return nil, fmt.Errorf("streams: task %s has no store %q", tk.id, store)
		}
		if kv, ok := st.(*kvStore[K, V]); ok {
			return func(k any) (any, int64, bool, error) {
				v, ts, found, err := kv.getAt(k.(K))
				if err != nil || !found {
					return nil, -1, false, err
				}
				return v, ts, true, nil
			}, nil
		}
		kv, ok := st.typed().(KeyValueStore[K, V])
		if !ok {
			return nil, fmt.Errorf("streams: store %q is %T", store, st.typed())
		}
		return func(k any) (any, int64, bool, error) {
			v, found, err := kv.Get(k.(K))
			if err != nil || !found {
				return nil, -1, false, err
			}
			return v, -1, true, nil
		}, nil
	}}
}

// derivedTable adds the node of a table derived from parents by proc, materialized into a
// store when o says so. proc returns the new value of a key (nil deletes) or skip; the node
// keeps the store and forwards. view computes the derived table from the parents' views when
// it has no store.
func derivedTable[K, VR any](b *Builder, name string, parents []*node, ks serde.Serde[K], vs serde.Serde[VR], op options,
	stores []string, open func(tk *task) (func(r rec) (out rec, skip bool, err error), error), view *tableView) KTable[K, VR] {
	if s, ok := op.storeSerde.(serde.Serde[VR]); ok {
		vs = s
	}
	store := op.store
	if store != "" {
		if ks == nil || vs == nil {
			b.errs = append(b.errs, fmt.Errorf("streams: materialized table %q needs its key and value serdes (MaterializedWith)", store))
		} else {
			b.addStore(newTimestampedKVStore(store, ks, vs, op.storeType))
			stores = append(stores, store)
		}
	}
	n := b.add(&node{kind: processorNode, name: name, stores: stores, supplier: func() procInstance {
		return &derivedProc[K, VR]{open: open, store: store}
	}}, parents...)
	t := KTable[K, VR]{b: b, n: n, ks: ks, vs: vs, store: store}
	if store == "" {
		t.view = view
	}
	return t
}

type derivedProc[K, V any] struct {
	open  func(tk *task) (func(r rec) (rec, bool, error), error)
	f     func(r rec) (rec, bool, error)
	store string
	kv    *kvStore[K, V]
	c     *nodeContext
}

func (p *derivedProc[K, V]) init(c *nodeContext) error {
	f, err := p.open(c.task)
	if err != nil {
		return err
	}
	p.c, p.f = c, f
	if p.store != "" {
		kv, ok := c.task.stores[p.store].(*kvStore[K, V])
		if !ok {
			return fmt.Errorf("streams: store %q is not a KeyValueStore of the table's types", p.store)
		}
		p.kv = kv
	}
	return nil
}

func (p *derivedProc[K, V]) process(r rec) error {
	if r.key == nil {
		return nil
	}
	out, skip, err := p.f(r)
	if err != nil || skip {
		return err
	}
	out.old = nil
	if p.kv != nil {
		k := out.key.(K)
		if p.c.task.topo.b.sendsOld(p.c.n) {
			old, found, err := p.kv.Get(k)
			if err != nil {
				return err
			}
			if found {
				out.old = old
			}
		}
		if out.value == nil {
			err = p.kv.Delete(k)
		} else {
			err = p.kv.putAt(k, out.value.(V), out.ts)
		}
		if err != nil {
			return err
		}
	}
	return p.c.forward(out)
}

func (p *derivedProc[K, V]) close() error { return nil }

// Filter is the table of t's entries for which pred is true (Kafka's KTable.filter): an
// update that pred rejects is forwarded as a deletion of its key, since the key may have
// been in the filtered table before.
func (t KTable[K, V]) Filter(pred func(K, V) bool, o ...Option) KTable[K, V] {
	op := opts(o)
	name := t.b.nameOr(options{name: op.name}, "KTABLE-FILTER-")
	pv := viewOf(t)
	keepIt := func(k, v any) bool { return v != nil && pred(as[K](k), as[V](v)) }
	view := &tableView{stores: pv.stores, missing: pv.missing, open: func(tk *task) (tableGetter, error) {
		get, err := pv.open(tk)
		if err != nil {
			return nil, err
		}
		return func(k any) (any, int64, bool, error) {
			v, ts, found, err := get(k)
			if err != nil || !found || !keepIt(k, v) {
				return nil, -1, false, err
			}
			return v, ts, true, nil
		}, nil
	}}
	return derivedTable(t.b, name, []*node{t.n}, t.ks, t.vs, op, nil,
		func(*task) (func(r rec) (rec, bool, error), error) {
			return func(r rec) (rec, bool, error) {
				if !keepIt(r.key, r.value) {
					r.value = nil
				}
				return r, false, nil
			}, nil
		}, view)
}

// FilterNot is Filter keeping the entries for which pred is false.
func (t KTable[K, V]) FilterNot(pred func(K, V) bool, o ...Option) KTable[K, V] {
	return t.Filter(func(k K, v V) bool { return !pred(k, v) }, o...)
}

// MapValuesTable is the table of f applied to each of t's values (Kafka's
// KTable.mapValues); deletions stay deletions.
func MapValuesTable[K, V, VR any](t KTable[K, V], f func(V) VR, o ...Option) KTable[K, VR] {
	op := opts(o)
	name := t.b.nameOr(options{name: op.name}, "KTABLE-MAPVALUES-")
	pv := viewOf(t)
	view := &tableView{stores: pv.stores, missing: pv.missing, open: func(tk *task) (tableGetter, error) {
		get, err := pv.open(tk)
		if err != nil {
			return nil, err
		}
		return func(k any) (any, int64, bool, error) {
			v, ts, found, err := get(k)
			if err != nil || !found {
				return nil, -1, false, err
			}
			return f(as[V](v)), ts, true, nil
		}, nil
	}}
	return derivedTable(t.b, name, []*node{t.n}, t.ks, keep[V, VR](t.vs), op, nil,
		func(*task) (func(r rec) (rec, bool, error), error) {
			return func(r rec) (rec, bool, error) {
				if r.value != nil {
					r.value = f(r.value.(V))
				}
				return r, false, nil
			}, nil
		}, view)
}
