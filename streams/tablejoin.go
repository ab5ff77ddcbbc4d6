package streams

import (
	"cmp"
	"slices"
)

// JoinTables is the table-table inner join (Kafka's KTable.join): a key is in the result
// while it is in both tables, with f of their values. An update on either side looks the
// key up in the other and, when it is there, forwards the new result, or a deletion when the
// update was one. The tables must be co-partitioned. The result has no store unless
// Materialized (MaterializedWith) gives it one; Named names its nodes (n-join-this,
// n-join-other, n).
//
// A result record has the later of both sides' timestamps (the update's and the other
// table's value's, from its timestamped store), as Kafka Streams gives it.
func JoinTables[K, V, VO, VR any](left KTable[K, V], right KTable[K, VO], f func(v V, vo VO) VR, o ...Option) KTable[K, VR] {
	return tableTableJoin[K, V, VO, VR](left, right, "JOIN", false, false, o, func(l, r any, _, _ bool) any {
		return f(as[V](l), as[VO](r))
	})
}

// LeftJoinTables is the table-table left join: a key is in the result while it is in the
// left table, with f of its value and the right one's (found false and VO's zero value when
// the right table has none). A right update for a key not in the left table gives nothing.
func LeftJoinTables[K, V, VO, VR any](left KTable[K, V], right KTable[K, VO], f func(v V, vo VO, found bool) VR, o ...Option) KTable[K, VR] {
	return tableTableJoin[K, V, VO, VR](left, right, "LEFT", true, false, o, func(l, r any, _, hasR bool) any {
		return f(as[V](l), as[VO](r), hasR)
	})
}

// OuterJoinTables is the table-table outer join: a key is in the result while it is in
// either table, with f of both values (hasV or hasVO false for a missing one).
func OuterJoinTables[K, V, VO, VR any](left KTable[K, V], right KTable[K, VO], f func(v V, vo VO, hasV, hasVO bool) VR, o ...Option) KTable[K, VR] {
	return tableTableJoin[K, V, VO, VR](left, right, "OUTER", true, true, o, func(l, r any, hasL, hasR bool) any {
		return f(as[V](l), as[VO](r), hasL, hasR)
	})
}

// tableTableJoin adds KTABLE-<kind>THIS- (left updates, reading the right table),
// KTABLE-<kind>OTHER- (right updates, reading the left) and KTABLE-MERGE- (the result,
// kept in its store when materialized), as Kafka Streams' KTableImpl.doJoin.
func tableTableJoin[K, V, VO, VR any](left KTable[K, V], right KTable[K, VO], kind string, leftOuter, rightOuter bool,
	o []Option, joiner func(l, r any, hasL, hasR bool) any) KTable[K, VR] {
	b := left.b
	op := opts(o)
	thisName, otherName := "KTABLE-"+kind+"THIS-", "KTABLE-"+kind+"OTHER-"
	if op.name != "" {
		thisName, otherName = op.name+"-join-this", op.name+"-join-other"
	} else {
		thisName, otherName = b.newName(thisName), b.newName(otherName)
	}
	mergeName := b.nameOr(options{name: op.name}, "KTABLE-MERGE-")
	lv, rv := viewOf(left), viewOf(right)
	needView(b, lv)
	needView(b, rv)

	// result is the join of l and r, nil when the key is not in the result.
	result := func(l, r any, hasL, hasR bool) any {
		switch {
		case hasL && hasR:
		case hasL && leftOuter:
		case hasR && rightOuter:
		default:
			return nil
		}
		return joiner(l, r, hasL, hasR)
	}
	side := func(isLeft bool, other *tableView) func() procInstance {
		return func() procInstance {
			return &tableJoinSide{other: other, f: func(r rec, ov any, found bool) (any, bool) {
				hasThis := r.value != nil
				l, r2, hasL, hasR := r.value, ov, hasThis, found
				outerThis := leftOuter
				if !isLeft {
					l, r2, hasL, hasR = ov, r.value, found, hasThis
					outerThis = rightOuter
				}
				// Nothing to say when the other side is missing and this side does not stand
				// alone (an inner join, or the inner side of a left join): the key is in the
				// result neither before nor after this update.
				if !found && !outerThis {
					return nil, false
				}
				return result(l, r2, hasL, hasR), true
			}}
		}
	}
	jt := b.add(&node{kind: processorNode, name: thisName, stores: slices.Clone(rv.stores), supplier: side(true, rv)}, left.n)
	jo := b.add(&node{kind: processorNode, name: otherName, stores: slices.Clone(lv.stores), supplier: side(false, lv)}, right.n)
	b.copartition(left.n, right.n)

	view := &tableView{stores: append(slices.Clone(lv.stores), rv.stores...), missing: cmp.Or(lv.missing, rv.missing), open: func(tk *task) (tableGetter, error) {
		lg, err := lv.open(tk)
		if err != nil {
			return nil, err
		}
		rg, err := rv.open(tk)
		if err != nil {
			return nil, err
		}
		return func(k any) (any, int64, bool, error) {
			l, lts, hasL, err := lg(k)
			if err != nil {
				return nil, -1, false, err
			}
			r, rts, hasR, err := rg(k)
			if err != nil {
				return nil, -1, false, err
			}
			v := result(l, r, hasL, hasR)
			return v, max(lts, rts), v != nil, nil
		}, nil
	}}
	return derivedTable[K, VR](b, mergeName, []*node{jt, jo}, left.ks, nil, op, nil,
		func(*task) (func(r rec) (rec, bool, error), error) {
			return func(r rec) (rec, bool, error) { return r, false, nil }, nil
		}, view)
}

// tableJoinSide is one side of a table-table join: an update of this side's table, joined
// with the other table's current value of the key. f returns the result (nil: a deletion)
// or false for nothing to forward.
type tableJoinSide struct {
	other *tableView
	f     func(r rec, ov any, found bool) (any, bool)
	get   tableGetter
	c     *nodeContext
}

func (p *tableJoinSide) init(c *nodeContext) error {
	g, err := p.other.open(c.task)
	if err != nil {
		return err
	}
	p.c, p.get = c, g
	return nil
}

func (p *tableJoinSide) process(r rec) error {
	if r.key == nil {
		return nil
	}
	ov, ots, found, err := p.get(r.key)
	if err != nil {
		return err
	}
	if found {
		r.ts = max(r.ts, ots)
	}
	v, ok := p.f(r, ov, found)
	if !ok {
		return nil
	}
	r.value = v
	return p.c.forward(r)
}

func (p *tableJoinSide) close() error { return nil }
