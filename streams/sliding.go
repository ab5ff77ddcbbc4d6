package streams

import (
	"encoding/binary"
	"fmt"
	"iter"
	"log/slog"
	"time"

	"github.com/gregor-project/gregor/streams/serde"
)

// SlidingWindows are windows defined by the time difference between records (Kafka
// Streams' SlidingWindows.ofTimeDifferenceAndGrace): two records of a key are in a common
// window when their times differ by at most TimeDifference. A window is [start, start +
// TimeDifference], both ends inclusive, and only the windows that hold a distinct set of
// records exist: each record at t makes its left window [t-TimeDifference, t] and, when a
// record of the key is in (t, t+1+TimeDifference], its right window [t+1, t+1+TimeDifference].
// A window accepts records until the stream time passes its end by more than Grace.
type SlidingWindows struct {
	TimeDifference, Grace time.Duration
}

// SlidingWindowsOf are sliding windows of a time difference, with a grace period.
func SlidingWindowsOf(timeDifference, grace time.Duration) SlidingWindows {
	return SlidingWindows{TimeDifference: timeDifference, Grace: grace}
}

// SlidingWindowedBy cuts g into sliding windows w; CountWindowed, ReduceWindowed and
// AggregateWindowed aggregate them, as for time windows. The table's keys are Windowed with
// End = Start + TimeDifference (inclusive); WindowedSerde(ks, w.TimeDifference) writes them.
func SlidingWindowedBy[K, V any](g KGroupedStream[K, V], w SlidingWindows) TimeWindowedKStream[K, V] {
	if w.TimeDifference < 0 || w.Grace < 0 {
		g.s.b.errs = append(g.s.b.errs, fmt.Errorf("streams: sliding windows %+v: need TimeDifference >= 0 and Grace >= 0", w))
	}
	return TimeWindowedKStream[K, V]{g: g, sliding: &w}
}

// slidingAggregate is windowedAggregate for sliding windows: the same store naming,
// repartition and changelog (compact,delete, retained for the store's retention plus a day),
// with a store of windows and the sliding processor.
func slidingAggregate[K, V, VA any](ws TimeWindowedKStream[K, V], vas serde.Serde[VA], op options, prefix string, f func(k K, v V, acc VA, found bool) VA) KTable[Windowed[K], VA] {
	g, w := ws.g, *ws.sliding
	b := g.s.b
	s, store, name := aggregationInput(g, op, prefix, "windowed aggregation")
	diff, grace := w.TimeDifference.Milliseconds(), w.Grace.Milliseconds()
	ks := s.ks
	b.addStore(storeDef{name: store, changelog: true,
		topicConfigs: map[string]string{
			"cleanup.policy": "compact,delete",
			"retention.ms":   fmt.Sprint(2*diff + grace + 1 + (24 * time.Hour).Milliseconds()),
		},
		storeType: op.storeType,
		make: func(log changelogWriter) stateStore {
			return &slidingView[K, VA]{s: newMemWindowStore(store, timeWindowLayout, diff, log), ks: ks, vs: vas, topic: store + "-changelog"}
		},
		open: func(log changelogWriter, dir string, lg *slog.Logger) (stateStore, error) {
			s, err := openWindowStore(store, timeWindowLayout, diff, log, dir, lg)
			if err != nil {
				return nil, err
			}
			return &slidingView[K, VA]{s: s, ks: ks, vs: vas, topic: store + "-changelog"}, nil
		}})
	n := b.add(&node{kind: processorNode, name: name, stores: []string{store},
		supplier: func() procInstance {
			return &slidingAggregator[K, V, VA]{store: store, diff: diff, grace: grace, f: f, expired: -1}
		}}, s.n)
	return KTable[Windowed[K], VA]{b: b, n: n, ks: WindowedSerde(s.ks, w.TimeDifference), vs: vas, store: store,
		closing: &windowClosing{after: grace + 1}}
}

// slidingView is a memWindowStore of sliding windows, typed. A stored value is the largest
// record time in the window (8 bytes big-endian ms) then the aggregate's bytes, as Kafka's
// timestamped stores keep them.
type slidingView[K, V any] struct {
	s     *memWindowStore
	ks    serde.Serde[K]
	vs    serde.Serde[V]
	topic string
}

func (v *slidingView[K, V]) restore(key, value []byte)        { v.s.restore(key, value) }
func (v *slidingView[K, V]) restoreBatch(recs []kvPair) error { return v.s.restoreBatch(recs) }
func (v *slidingView[K, V]) disk() diskStore                  { return v.s.disk() }
func (v *slidingView[K, V]) typed() any                       { return WindowStore[K, V](v) }
func (v *slidingView[K, V]) Name() string                     { return v.s.name }
func (v *slidingView[K, V]) Len() int                         { return v.s.len() }

func (v *slidingView[K, V]) Fetch(k K, start time.Time) (V, bool, error) {
	var z V
	kb, err := v.ks.Serialize(v.topic, k)
	if err != nil {
		return z, false, fmt.Errorf("streams: store %q key: %w", v.s.name, err)
	}
	b, ok := v.s.get(string(kb), millis(start), millis(start)+v.s.size)
	if !ok {
		return z, false, nil
	}
	x, err := v.vs.Deserialize(v.topic, b[8:])
	if err != nil {
		return z, false, fmt.Errorf("streams: store %q value: %w", v.s.name, err)
	}
	return x, true, nil
}

func (v *slidingView[K, V]) All() iter.Seq2[Windowed[K], V] {
	return allWindows(v.s, v.ks, v.vs, v.topic, func(b []byte) []byte { return b[8:] })
}

// slidingAggregator is Kafka Streams' KStreamSlidingWindowAggregate, on the store's sorted
// windows: for a record at t it reads the key's windows starting in [t-2d, t+1] (d the time
// difference) and, in one pass by start,
//   - updates every existing window that holds t and is open;
//   - finds the latest window ending before t (its aggregate holds exactly the records of t's
//     left window other than t, when the previous record is within d of t) and the latest
//     window holding t that ends after it (its aggregate, before t is added, is what t's
//     right window holds);
//
// then creates the windows that do not exist yet: the previous record's right window when
// it holds t, t's left window, and t's right window when a later record is in it.
//
// A window is open while its end is at or after the stream time minus the grace period; a
// record whose right window would already be closed is late: dropped and counted, as is one
// that updated no window. A record before the close time whose right window is open updates
// the open windows it is in only (its left window is not made), so windows made later from
// those aggregates may miss it, as in Kafka Streams. Windows are removed from memory once their start is more than
// 2d+grace+1 before the stream time: no later record reads them. (Kafka's default
// retention is 2d+grace; the window one millisecond older holds the previous record of a
// record whose previous record's right window is still open.)
type slidingAggregator[K, V, VA any] struct {
	store       string
	diff, grace int64
	f           func(k K, v V, acc VA, found bool) VA
	c           *nodeContext
	view        *slidingView[K, VA]
	expired     int64 // stream time of the last expiry pass
}

func (a *slidingAggregator[K, V, VA]) init(c *nodeContext) error {
	view, ok := c.task.stores[a.store].(*slidingView[K, VA])
	if !ok {
		return fmt.Errorf("streams: store %q is not a sliding window store", a.store)
	}
	a.c, a.view = c, view
	return nil
}

func (a *slidingAggregator[K, V, VA]) close() error { return nil }

// timed splits a stored value into its largest record time and its aggregate.
func (a *slidingAggregator[K, V, VA]) timed(b []byte) (int64, VA, error) {
	var z VA
	if len(b) < 8 {
		return 0, z, fmt.Errorf("streams: store %q: a window value of %d bytes", a.store, len(b))
	}
	acc, err := a.view.vs.Deserialize(a.view.topic, b[8:])
	if err != nil {
		return 0, z, fmt.Errorf("streams: store %q value: %w", a.store, err)
	}
	return int64(binary.BigEndian.Uint64(b)), acc, nil
}

func (a *slidingAggregator[K, V, VA]) process(r rec) error {
	if r.key == nil || r.value == nil || r.ts < 0 {
		return nil
	}
	tk := a.c.task
	a.expire()
	ts, d := r.ts, a.diff
	closeTime := tk.streamTime - a.grace
	if ts+1+d <= closeTime {
		tk.dropped++
		return nil
	}
	k, v := r.key.(K), r.value.(V)
	kbb, err := a.view.ks.Serialize(a.view.topic, k)
	if err != nil {
		return fmt.Errorf("streams: store %q key: %w", a.store, err)
	}
	kb := string(kbb)
	updated := false
	// update adds the record to window [start, start+d], from acc (found: an aggregate, not
	// the initial value) whose records' largest time is maxTS, when the window is open.
	update := func(start int64, acc VA, found bool, maxTS int64) error {
		end := start + d
		if end < closeTime {
			return nil
		}
		acc = a.f(k, v, acc, found)
		newTS := ts
		if found {
			newTS = max(ts, maxTS)
		}
		if err := a.put(kb, start, acc, newTS); err != nil {
			return err
		}
		updated = true
		return a.c.forward(rec{key: sessionKey(k, start, end), value: acc, ts: newTS, headers: r.headers})
	}

	starts := map[int64]bool{}
	var leftAcc, rightAcc VA
	haveLeft, haveRight := false, false
	var rightMax int64
	leftExists, rightExists := false, false
	prev, havePrev := int64(0), false
	for _, w := range a.view.s.between(kb, ts-2*d, ts+1) {
		starts[w.start] = true
		end := w.start + d
		maxTS, acc, err := a.timed(w.value)
		if err != nil {
			return err
		}
		switch {
		case end < ts:
			leftAcc, haveLeft = acc, true
			prev, havePrev = maxTS, true
		case end == ts:
			leftExists = true
			if maxTS < ts {
				prev, havePrev = maxTS, true
			}
			if err := update(w.start, acc, true, maxTS); err != nil {
				return err
			}
		case w.start <= ts:
			rightAcc, haveRight, rightMax = acc, true, maxTS
			if err := update(w.start, acc, true, maxTS); err != nil {
				return err
			}
		case w.start == ts+1:
			rightExists = true
		default:
			return fmt.Errorf("streams: store %q: window at %d found for a record at %d", a.store, w.start, ts)
		}
	}
	var zero VA
	// The previous record's right window, when it holds this record and is not this
	// record's left window (made next).
	if havePrev && !starts[prev+1] && prev+1+d >= ts && prev+1 != ts-d {
		if err := update(prev+1, zero, false, ts); err != nil {
			return err
		}
	}
	if !leftExists {
		// The left window holds the previous record's left window's records when the
		// previous record is within d.
		if havePrev && haveLeft && ts-d <= prev {
			if err := update(ts-d, leftAcc, true, ts); err != nil {
				return err
			}
		} else if err := update(ts-d, zero, false, ts); err != nil {
			return err
		}
	}
	if !rightExists && haveRight && rightMax > ts {
		if err := a.put(kb, ts+1, rightAcc, rightMax); err != nil {
			return err
		}
		if err := a.c.forward(rec{key: sessionKey(k, ts+1, ts+1+d), value: rightAcc, ts: rightMax, headers: r.headers}); err != nil {
			return err
		}
	}
	if !updated {
		tk.dropped++
	}
	return nil
}

func (a *slidingAggregator[K, V, VA]) put(kb string, start int64, acc VA, maxTS int64) error {
	vb, err := a.view.vs.Serialize(a.view.topic, acc)
	if err != nil {
		return fmt.Errorf("streams: store %q value: %w", a.store, err)
	}
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(vb)), uint64(maxTS))
	return a.view.s.put(kb, start, start+a.diff, append(b, vb...))
}

// expire removes the windows past the retention, at most once per time difference of
// stream time (and always first after a restore).
func (a *slidingAggregator[K, V, VA]) expire() {
	now := a.c.task.streamTime
	if a.expired >= 0 && now-a.expired < max(a.diff, 1) {
		return
	}
	a.expired = now
	retention := 2*a.diff + a.grace + 1
	a.view.s.expire(func(start, _ int64) bool { return start < now-retention })
}
