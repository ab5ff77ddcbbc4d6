package streams

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/gregor-project/gregor/streams/serde"
)

// TimeWindows are fixed-size windows over record time (Kafka Streams' TimeWindows): each
// Advance a new window of Size starts, aligned to the epoch. Advance == Size is tumbling
// (each record in one window); Advance < Size is hopping (each record in Size/Advance).
// A window accepts records until stream time passes its end by Grace; later ones are
// dropped (and counted: TestDriver.DroppedRecords, App.DroppedRecords).
type TimeWindows struct {
	Size, Advance, Grace time.Duration
}

// TumblingWindows are windows of size, one after another, with a grace period.
func TumblingWindows(size, grace time.Duration) TimeWindows {
	return TimeWindows{Size: size, Advance: size, Grace: grace}
}

// HoppingWindows are windows of size starting every advance, with a grace period.
func HoppingWindows(size, advance, grace time.Duration) TimeWindows {
	return TimeWindows{Size: size, Advance: advance, Grace: grace}
}

// windowsFor is the start (ms) of every window that holds timestamp ts, oldest first, as
// Kafka's TimeWindows.windowsFor.
func (w TimeWindows) windowsFor(ts int64) []int64 {
	size, adv := w.Size.Milliseconds(), w.Advance.Milliseconds()
	start := max(0, ts-size+adv) / adv * adv
	var out []int64
	for ; start <= ts; start += adv {
		out = append(out, start)
	}
	return out
}

// Window is a window of time: for time windows Start is inclusive and End exclusive; for
// sliding windows and sessions both are inclusive, as in Kafka Streams.
type Window struct {
	Start, End time.Time
}

// Windowed is a key in a window: the key of a windowed aggregation's table.
type Windowed[K any] struct {
	Key    K
	Window Window
}

func (w Windowed[K]) String() string {
	return fmt.Sprintf("[%v@%d/%d]", w.Key, w.Window.Start.UnixMilli(), w.Window.End.UnixMilli())
}

// WindowedSerde writes a windowed key as Kafka's TimeWindowedSerializer does: the key's
// bytes, then the window start as 8 bytes big-endian milliseconds. Reading needs the window
// size for the end.
func WindowedSerde[K any](inner serde.Serde[K], size time.Duration) serde.Serde[Windowed[K]] {
	return serde.New(
		func(topic string, w Windowed[K]) ([]byte, error) {
			kb, err := inner.Serialize(topic, w.Key)
			if err != nil {
				return nil, err
			}
			return binary.BigEndian.AppendUint64(kb, uint64(w.Window.Start.UnixMilli())), nil
		},
		func(topic string, b []byte) (Windowed[K], error) {
			var w Windowed[K]
			if len(b) < 8 {
				return w, fmt.Errorf("streams: windowed key in %q: %d bytes, want at least 8", topic, len(b))
			}
			k, err := inner.Deserialize(topic, b[:len(b)-8])
			if err != nil {
				return w, err
			}
			start := int64(binary.BigEndian.Uint64(b[len(b)-8:]))
			return Windowed[K]{Key: k, Window: Window{Start: fromMillis(start), End: fromMillis(start + size.Milliseconds())}}, nil
		})
}

// TimeWindowedKStream is a grouped stream cut into time windows, ready for a windowed
// aggregation (CountWindowed, ReduceWindowed, AggregateWindowed).
type TimeWindowedKStream[K, V any] struct {
	g KGroupedStream[K, V]
	w TimeWindows
	// sliding, when set, makes the windows sliding ones (SlidingWindowedBy), w unused.
	sliding *SlidingWindows
}

// WindowedBy cuts g into windows w.
func WindowedBy[K, V any](g KGroupedStream[K, V], w TimeWindows) TimeWindowedKStream[K, V] {
	if w.Size <= 0 || w.Advance <= 0 || w.Advance > w.Size || w.Grace < 0 {
		g.s.b.errs = append(g.s.b.errs, fmt.Errorf("streams: windows %+v: need 0 < Advance <= Size and Grace >= 0", w))
	}
	return TimeWindowedKStream[K, V]{g: g, w: w}
}

// CountWindowed counts the records per key and window.
func CountWindowed[K, V any](ws TimeWindowedKStream[K, V], o ...Option) KTable[Windowed[K], int64] {
	return AggregateWindowed(ws, func() int64 { return 0 }, func(_ K, _ V, n int64) int64 { return n + 1 }, serde.Int64, o...)
}

// ReduceWindowed combines the values per key and window, as Reduce.
func ReduceWindowed[K, V any](ws TimeWindowedKStream[K, V], f func(acc, v V) V, o ...Option) KTable[Windowed[K], V] {
	if ws.g.s.vs == nil {
		ws.g.s.b.errs = append(ws.g.s.b.errs, fmt.Errorf("streams: ReduceWindowed needs the stream's value serde (WithSerdes)"))
	}
	return windowedAggregate(ws, ws.g.s.vs, opts(o), "KSTREAM-REDUCE-", func(_ K, v V, acc V, found bool) V {
		if !found {
			return v
		}
		return f(acc, v)
	})
}

// AggregateWindowed folds the values per key and window, each window of a key starting from
// init().
func AggregateWindowed[K, V, VA any](ws TimeWindowedKStream[K, V], init func() VA, f func(k K, v V, acc VA) VA, vas serde.Serde[VA], o ...Option) KTable[Windowed[K], VA] {
	return windowedAggregate(ws, vas, opts(o), "KSTREAM-AGGREGATE-", func(k K, v V, acc VA, found bool) VA {
		if !found {
			acc = init()
		}
		return f(k, v, acc)
	})
}

// windowedAggregate adds a windowed aggregation, its node and store named with prefix
// (KSTREAM-AGGREGATE- or KSTREAM-REDUCE-, as Kafka Streams names them).
func windowedAggregate[K, V, VA any](ws TimeWindowedKStream[K, V], vas serde.Serde[VA], op options, prefix string, f func(k K, v V, acc VA, found bool) VA) KTable[Windowed[K], VA] {
	if ws.sliding != nil {
		return slidingAggregate(ws, vas, op, prefix, f)
	}
	g := ws.g
	b := g.s.b
	s, store, name := aggregationInput(g, op, prefix, "windowed aggregation")
	wks := WindowedSerde(s.ks, ws.w.Size)
	def := newWinStore(store, s.ks, vas, ws.w.Size.Milliseconds(), (ws.w.Size + ws.w.Grace).Milliseconds(), op.storeType)
	// As Kafka Streams: a window store's changelog is compacted and also deleted past the
	// retention plus a day (windowstore.changelog.additional.retention.ms).
	def.topicConfigs = map[string]string{
		"cleanup.policy": "compact,delete",
		"retention.ms":   fmt.Sprint((ws.w.Size + ws.w.Grace + 24*time.Hour).Milliseconds()),
	}
	b.addStore(def)
	w := ws.w
	n := b.add(&node{kind: processorNode, name: name, stores: []string{store},
		supplier: func() procInstance { return &windowAggregator[K, V, VA]{store: store, w: w, f: f, expired: -1} }}, s.n)
	return KTable[Windowed[K], VA]{b: b, n: n, ks: wks, vs: vas, store: store, closing: &windowClosing{after: w.Grace.Milliseconds()}}
}

// windowAggregator updates every window a record falls in that is still open: its end
// plus the grace period is after the stream time (Kafka Streams' KStreamWindowAggregate).
// A record all of whose windows are closed is late: dropped and counted.
//
// Windows are kept until the stream time passes their start by Size+Grace (the store's
// retention, Kafka's default: the window has closed), then removed from the store (not from the changelog, whose old
// records compaction and the restore's own expiry leave behind).
type windowAggregator[K, V, VA any] struct {
	store   string
	w       TimeWindows
	f       func(k K, v V, acc VA, found bool) VA
	c       *nodeContext
	kv      *winStore[K, VA]
	expired int64 // stream time of the last expiry pass
}

func (a *windowAggregator[K, V, VA]) init(c *nodeContext) error {
	a.c = c
	kv, ok := c.task.stores[a.store].(*winStore[K, VA])
	if !ok {
		return fmt.Errorf("streams: store %q is not a window store", a.store)
	}
	a.kv = kv
	return nil
}

func (a *windowAggregator[K, V, VA]) process(r rec) error {
	if r.key == nil || r.value == nil || r.ts < 0 {
		return nil
	}
	tk := a.c.task
	k := r.key.(K)
	size, grace := a.w.Size.Milliseconds(), a.w.Grace.Milliseconds()
	closeTime := tk.streamTime - grace
	for _, start := range a.w.windowsFor(r.ts) {
		end := start + size
		if end <= closeTime {
			// As Kafka's KStreamWindowAggregate: a drop is counted for every closed window
			// the record falls in, so a hopping window's late record counts once per window.
			tk.dropped++
			continue
		}
		wk := Windowed[K]{Key: k, Window: Window{Start: fromMillis(start), End: fromMillis(end)}}
		acc, prevTS, found, err := a.kv.getAt(wk)
		if err != nil {
			return err
		}
		acc = a.f(k, r.value.(V), acc, found)
		ts := max(prevTS, r.ts) // the window's result is as late as its latest input
		if err := a.kv.putAt(wk, acc, ts); err != nil {
			return err
		}
		if err := a.c.forward(rec{key: wk, value: acc, ts: ts, headers: r.headers}); err != nil {
			return err
		}
	}
	return a.expire()
}

// expire removes windows past the retention, at most once per Advance of stream time.
func (a *windowAggregator[K, V, VA]) expire() error {
	now := a.c.task.streamTime
	if a.expired >= 0 && now-a.expired < a.w.Advance.Milliseconds() {
		return nil
	}
	a.expired = now
	return a.kv.expire(now - (a.w.Size + a.w.Grace).Milliseconds() + 1)
}

func (a *windowAggregator[K, V, VA]) close() error { return nil }
