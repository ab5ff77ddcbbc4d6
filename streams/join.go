package streams

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

// LeftJoin is Join keeping the records whose key is not in the table, or null (as Kafka
// Streams 3.7, KIP-962): f gets found false and the zero value for them.
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
	view := viewOf(t)
	needView(s.b, view)
	s.b.copartition(s.n, t.n)
	name := s.b.nameOr(op, prefix)
	n := s.b.add(&node{kind: processorNode, name: name, stores: view.stores, supplier: func() procInstance {
		return &tableJoin[K, V, VR]{view: view, f: func(v V, vt any, found bool) (VR, bool) { return f(v, as[VT](vt), found) }}
	}}, s.n)
	return KStream[K, VR]{b: s.b, n: n, ks: s.ks, vs: keep[V, VR](s.vs)}
}

// tableJoin looks each stream record's key up in the table (through its view: its store,
// or the stores of the tables it derives from).
type tableJoin[K, V, VR any] struct {
	view *tableView
	f    func(V, any, bool) (VR, bool)
	c    *nodeContext
	get  tableGetter
}

func (j *tableJoin[K, V, VR]) init(c *nodeContext) error {
	g, err := j.view.open(c.task)
	if err != nil {
		return err
	}
	j.c, j.get = c, g
	return nil
}

func (j *tableJoin[K, V, VR]) process(r rec) error {
	var vt any
	found := false
	if r.key != nil {
		var err error
		if vt, _, found, err = j.get(r.key); err != nil {
			return err
		}
	}
	vr, ok := j.f(as[V](r.value), vt, found)
	if !ok {
		return nil
	}
	r.value = vr
	return j.c.forward(r)
}

func (j *tableJoin[K, V, VR]) close() error { return nil }
