package streams

import "fmt"

// Join enriches each record of s with the value of its key in table t (Kafka Streams'
// stream-table inner join): f combines them, and a record whose key is not in the table (or
// has a null key) is dropped. The lookup is into the table as it is when the stream record
// is processed; table updates trigger nothing. The stream and the table must be
// co-partitioned (same key, same partition count); a stream whose key changed upstream is
// repartitioned first.
func Join[K, V, VT, VR any](s KStream[K, V], t KTable[K, VT], f func(v V, vt VT) VR, o ...Option) KStream[K, VR] {
	return streamTableJoin(s, t, o, "KSTREAM-JOIN-", func(v V, vt VT, found bool) (VR, bool) {
		if !found {
			var z VR
			return z, false
		}
		return f(v, vt), true
	})
}

// LeftJoin is Join keeping the records whose key is not in the table: f gets found false
// and the zero value for them.
func LeftJoin[K, V, VT, VR any](s KStream[K, V], t KTable[K, VT], f func(v V, vt VT, found bool) VR, o ...Option) KStream[K, VR] {
	return streamTableJoin(s, t, o, "KSTREAM-LEFTJOIN-", func(v V, vt VT, found bool) (VR, bool) {
		return f(v, vt, found), true
	})
}

func streamTableJoin[K, V, VT, VR any](s KStream[K, V], t KTable[K, VT], o []Option, prefix string, f func(V, VT, bool) (VR, bool)) KStream[K, VR] {
	op := opts(o)
	if s.keyChanged {
		base := op.name
		if base == "" {
			base = s.b.newName("KSTREAM-JOIN-REPARTITION-")
		}
		s = repartition(s, base)
	}
	store := t.store
	s.b.copartition(s.n, t.n)
	name := s.b.nameOr(op, prefix)
	n := s.b.add(&node{kind: processorNode, name: name, stores: []string{store}, supplier: func() procInstance {
		return &tableJoin[K, V, VT, VR]{store: store, f: f}
	}}, s.n)
	return KStream[K, VR]{b: s.b, n: n, ks: s.ks, vs: keep[V, VR](s.vs)}
}

// tableJoin looks each stream record's key up in the table's store.
type tableJoin[K, V, VT, VR any] struct {
	store string
	f     func(V, VT, bool) (VR, bool)
	c     *nodeContext
	kv    KeyValueStore[K, VT]
}

func (j *tableJoin[K, V, VT, VR]) init(c *nodeContext) error {
	st, err := c.store(j.store)
	if err != nil {
		return err
	}
	kv, ok := st.(KeyValueStore[K, VT])
	if !ok {
		return fmt.Errorf("streams: join: store %q is %T", j.store, st)
	}
	j.c, j.kv = c, kv
	return nil
}

func (j *tableJoin[K, V, VT, VR]) process(r rec) error {
	if r.key == nil {
		return nil
	}
	vt, found, err := j.kv.Get(r.key.(K))
	if err != nil {
		return err
	}
	vr, ok := j.f(as[V](r.value), vt, found)
	if !ok {
		return nil
	}
	r.value = vr
	return j.c.forward(r)
}

func (j *tableJoin[K, V, VT, VR]) close() error { return nil }
