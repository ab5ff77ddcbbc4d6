package streams

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/gregor-project/gregor/streams/serde"
)

// SessionWindows group a key's records into sessions of activity (Kafka Streams'
// SessionWindows.ofInactivityGapAndGrace): records of a key at most InactivityGap apart
// are in one session, a window from its first record's time to its last one's,
// both inclusive. A record within the gap of two sessions bridges them: they merge into
// one. A session accepts records until the stream time passes its end by more than
// InactivityGap+Grace.
type SessionWindows struct {
	InactivityGap, Grace time.Duration
}

// SessionWindowsOf are sessions closed by an inactivity gap, with a grace period.
func SessionWindowsOf(inactivityGap, grace time.Duration) SessionWindows {
	return SessionWindows{InactivityGap: inactivityGap, Grace: grace}
}

// SessionWindowedKStream is a grouped stream cut into sessions, ready for a session
// aggregation (CountSessionWindowed, ReduceSessionWindowed, AggregateSessionWindowed).
type SessionWindowedKStream[K, V any] struct {
	g KGroupedStream[K, V]
	w SessionWindows
}

// SessionWindowedBy cuts g into sessions w.
func SessionWindowedBy[K, V any](g KGroupedStream[K, V], w SessionWindows) SessionWindowedKStream[K, V] {
	if w.InactivityGap <= 0 || w.Grace < 0 {
		g.s.b.errs = append(g.s.b.errs, fmt.Errorf("streams: session windows %+v: need InactivityGap > 0 and Grace >= 0", w))
	}
	return SessionWindowedKStream[K, V]{g: g, w: w}
}

// CountSessionWindowed counts the records per key and session into a table keyed by
// session (write it with SessionWindowedSerde). When sessions merge, the merged-away ones
// are deleted from the table (a null value downstream) and the new one holds the sum.
func CountSessionWindowed[K, V any](ws SessionWindowedKStream[K, V], o ...Option) KTable[Windowed[K], int64] {
	return AggregateSessionWindowed(ws, func() int64 { return 0 }, func(_ K, _ V, n int64) int64 { return n + 1 },
		func(_ K, a, b int64) int64 { return a + b }, serde.Int64, o...)
}

// ReduceSessionWindowed combines the values per key and session with f, which also merges
// the aggregates of sessions a record bridges.
func ReduceSessionWindowed[K, V any](ws SessionWindowedKStream[K, V], f func(acc, v V) V, o ...Option) KTable[Windowed[K], V] {
	if ws.g.s.vs == nil {
		ws.g.s.b.errs = append(ws.g.s.b.errs, fmt.Errorf("streams: ReduceSessionWindowed needs the stream's value serde (WithSerdes)"))
	}
	combine := func(acc V, has bool, v V) V {
		if !has {
			return v
		}
		return f(acc, v)
	}
	return sessionAggregate(ws, ws.g.s.vs, opts(o), "KSTREAM-REDUCE-", sessionOps[K, V, V]{
		init:  func() (V, bool) { var z V; return z, false },
		add:   func(_ K, v V, acc V, has bool) V { return combine(acc, has, v) },
		merge: func(_ K, acc V, has bool, other V) V { return combine(acc, has, other) },
	})
}

// AggregateSessionWindowed folds the values per key and session, each session starting from
// init(); merger combines the aggregates of sessions a record bridges (Kafka's Merger).
func AggregateSessionWindowed[K, V, VA any](ws SessionWindowedKStream[K, V], init func() VA, f func(k K, v V, acc VA) VA,
	merger func(k K, a, b VA) VA, vas serde.Serde[VA], o ...Option) KTable[Windowed[K], VA] {
	return sessionAggregate(ws, vas, opts(o), "KSTREAM-AGGREGATE-", sessionOps[K, V, VA]{
		init:  func() (VA, bool) { return init(), true },
		add:   func(k K, v V, acc VA, _ bool) VA { return f(k, v, acc) },
		merge: func(k K, acc VA, _ bool, other VA) VA { return merger(k, acc, other) },
	})
}

// sessionOps are a session aggregation's steps: the initial aggregate (has is false when
// there is none, as for Reduce), adding a record, and merging a session's aggregate in.
type sessionOps[K, V, VA any] struct {
	init  func() (acc VA, has bool)
	add   func(k K, v V, acc VA, has bool) VA
	merge func(k K, acc VA, has bool, other VA) VA
}

func sessionAggregate[K, V, VA any](ws SessionWindowedKStream[K, V], vas serde.Serde[VA], op options, prefix string, ops sessionOps[K, V, VA]) KTable[Windowed[K], VA] {
	g, w := ws.g, ws.w
	b := g.s.b
	s, store, name := aggregationInput(g, op, prefix, "session aggregation")
	gap, grace := w.InactivityGap.Milliseconds(), w.Grace.Milliseconds()
	def := newSessionStore(store, s.ks, vas, op.storeType)
	// As Kafka Streams: a session store's changelog is compacted and also deleted past the
	// store's retention (gap plus grace) plus a day.
	def.topicConfigs = map[string]string{
		"cleanup.policy": "compact,delete",
		"retention.ms":   fmt.Sprint(gap + grace + (24 * time.Hour).Milliseconds()),
	}
	b.addStore(def)
	n := b.add(&node{kind: processorNode, name: name, stores: []string{store},
		supplier: func() procInstance {
			return &sessionAggregator[K, V, VA]{store: store, gap: gap, grace: grace, ops: ops, expired: -1}
		}}, s.n)
	return KTable[Windowed[K], VA]{b: b, n: n, ks: SessionWindowedSerde(s.ks), vs: vas, store: store,
		closing: &windowClosing{after: gap + grace + 1}}
}

// sessionAggregator is Kafka Streams' KStreamSessionWindowAggregate. For a record of key k
// at t, the sessions of k still open that end at or after t-gap and start at or before
// t+gap are merged with [t, t]: their aggregates folded together by the merger, from the
// initial one. If the merged session has closed (it ends before the stream time minus grace
// and gap) the record is late: dropped and counted. Otherwise the merged-away sessions are
// removed and deleted downstream (a null value, timestamped with their end), and the merged
// session, with the record added, is stored and forwarded (timestamped with its end).
//
// Closed sessions are never merged into a new one (Kafka's stores expire them by segment,
// so whether one is still there to merge depends on the store); they are removed from memory
// as the stream time moves on, at most once per gap.
type sessionAggregator[K, V, VA any] struct {
	store      string
	gap, grace int64
	ops        sessionOps[K, V, VA]
	c          *nodeContext
	view       *sessionView[K, VA]
	expired    int64 // stream time of the last expiry pass
}

func (a *sessionAggregator[K, V, VA]) init(c *nodeContext) error {
	view, ok := c.task.stores[a.store].(*sessionView[K, VA])
	if !ok {
		return fmt.Errorf("streams: store %q is not a session store", a.store)
	}
	a.c, a.view = c, view
	return nil
}

func (a *sessionAggregator[K, V, VA]) close() error { return nil }

func (a *sessionAggregator[K, V, VA]) process(r rec) error {
	if r.key == nil || r.value == nil || r.ts < 0 {
		return nil
	}
	tk := a.c.task
	ts := r.ts
	closeTime := tk.streamTime - a.grace - a.gap
	if a.expired < 0 || tk.streamTime-a.expired >= a.gap {
		a.expired = tk.streamTime
		a.view.s.expire(func(_, end int64) bool { return end < closeTime })
	}
	k, v := r.key.(K), r.value.(V)
	acc, has := a.ops.init()
	start, end := ts, ts
	var merged []Windowed[K]
	for s, sv := range a.view.findSessions(k, max(ts-a.gap, closeTime), ts+a.gap) {
		merged = append(merged, s)
		acc, has = a.ops.merge(k, acc, has, sv), true
		start, end = min(start, millis(s.Window.Start)), max(end, millis(s.Window.End))
	}
	if end < closeTime {
		tk.dropped++
		return nil
	}
	if start != ts || end != ts {
		for _, s := range merged {
			if err := a.view.Remove(s); err != nil {
				return err
			}
			if err := a.c.forward(rec{key: s, ts: millis(s.Window.End), headers: r.headers}); err != nil {
				return err
			}
		}
	}
	acc = a.ops.add(k, v, acc, has)
	sk := sessionKey(k, start, end)
	if err := a.view.Put(sk, acc); err != nil {
		return err
	}
	return a.c.forward(rec{key: sk, value: acc, ts: end, headers: r.headers})
}

// SessionWindowedSerde writes a session-windowed key as Kafka's SessionWindowedSerializer
// does: the key's bytes, then the session end, then its start, each 8 bytes big-endian
// milliseconds.
func SessionWindowedSerde[K any](inner serde.Serde[K]) serde.Serde[Windowed[K]] {
	return serde.New(
		func(topic string, w Windowed[K]) ([]byte, error) {
			kb, err := inner.Serialize(topic, w.Key)
			if err != nil {
				return nil, err
			}
			kb = binary.BigEndian.AppendUint64(kb, uint64(w.Window.End.UnixMilli()))
			return binary.BigEndian.AppendUint64(kb, uint64(w.Window.Start.UnixMilli())), nil
		},
		func(topic string, b []byte) (Windowed[K], error) {
			var w Windowed[K]
			if len(b) < 16 {
				return w, fmt.Errorf("streams: session-windowed key in %q: %d bytes, want at least 16", topic, len(b))
			}
			n := len(b) - 16
			k, err := inner.Deserialize(topic, b[:n])
			if err != nil {
				return w, err
			}
			end, start := int64(binary.BigEndian.Uint64(b[n:n+8])), int64(binary.BigEndian.Uint64(b[n+8:]))
			return sessionKey(k, start, end), nil
		})
}
