package streams

import (
	"fmt"
	"time"

	"github.com/gregor-project/gregor/streams/serde"
)

// JoinWindows bound a stream-stream join (Kafka Streams' JoinWindows): a record of the left
// stream at time t joins the right stream's records of the same key timed within
// [t-Before, t+After]; symmetrically a right record at t joins left records within
// [t-After, t+Before]. Records arriving out of order are joined until stream time passes
// their window's end by Grace; a record older than that is dropped by the window store
// (and counted, DroppedRecords).
type JoinWindows struct {
	Before, After, Grace time.Duration
}

// JoinTimeDifferenceAndGrace joins records at most d apart in either direction, accepting
// out-of-order records for grace (Kafka's JoinWindows.ofTimeDifferenceAndGrace).
func JoinTimeDifferenceAndGrace(d, grace time.Duration) JoinWindows {
	return JoinWindows{Before: d, After: d, Grace: grace}
}

// JoinTimeDifferenceWithNoGrace joins records at most d apart, with no grace period (Kafka's
// JoinWindows.ofTimeDifferenceWithNoGrace).
func JoinTimeDifferenceWithNoGrace(d time.Duration) JoinWindows {
	return JoinWindows{Before: d, After: d}
}

// WithBefore returns w with the window reaching d before a left record (Kafka's before()).
func (w JoinWindows) WithBefore(d time.Duration) JoinWindows { w.Before = d; return w }

// WithAfter returns w with the window reaching d after a left record (Kafka's after()).
func (w JoinWindows) WithAfter(d time.Duration) JoinWindows { w.After = d; return w }

func (w JoinWindows) size() time.Duration { return w.Before + w.After }

// JoinStreams is the stream-stream inner join: every pair of a left and a right record of
// the same key within the windows w gives one result, f of their values, timed at the later
// of the two. Both streams keep their records in window stores (KSTREAM-JOINTHIS-...-store and
// KSTREAM-JOINOTHER-...-store, each with a changelog) for the window's size plus its grace.
// Records with a null key or value are dropped (and counted, DroppedRecords). A stream
// whose key changed upstream is repartitioned first; the two streams must be
// co-partitioned.
func JoinStreams[K, V, VO, VR any](left KStream[K, V], right KStream[K, VO], f func(v V, vo VO) VR, w JoinWindows, o ...Option) KStream[K, VR] {
	return streamStreamJoin[K, V, VO, VR](left, right, w, false, false, o, func(l, r any, _, _ bool) any {
		return f(as[V](l), as[VO](r))
	})
}

// LeftJoinStreams is JoinStreams also giving, for each left record that joined no right
// record, f with found false and VO's zero value. As in Kafka Streams 3.x, that result is
// emitted only once the record's window has closed (stream time past its end plus the grace
// period), so a right record arriving late but in time still joins it instead: the waiting
// records are kept in a shared store (KSTREAM-OUTERSHARED-...-store). A left record already
// out of its window when it arrives, or with a null key, gets its result at once.
func LeftJoinStreams[K, V, VO, VR any](left KStream[K, V], right KStream[K, VO], f func(v V, vo VO, found bool) VR, w JoinWindows, o ...Option) KStream[K, VR] {
	return streamStreamJoin[K, V, VO, VR](left, right, w, true, false, o, func(l, r any, _, hasR bool) any {
		return f(as[V](l), as[VO](r), hasR)
	})
}

// OuterJoinStreams is LeftJoinStreams for both sides: a record of either stream that joined
// none of the other gives f with the missing side's zero value (hasV or hasVO false), once
// its window has closed.
func OuterJoinStreams[K, V, VO, VR any](left KStream[K, V], right KStream[K, VO], f func(v V, vo VO, hasV, hasVO bool) VR, w JoinWindows, o ...Option) KStream[K, VR] {
	return streamStreamJoin[K, V, VO, VR](left, right, w, true, true, o, func(l, r any, hasL, hasR bool) any {
		return f(as[V](l), as[VO](r), hasL, hasR)
	})
}

// streamStreamJoin adds the nodes and stores of a stream-stream join, named as Kafka
// Streams' KStreamImplJoin names them: KSTREAM-WINDOWED- for each side (putting the side's
// records into its window store), KSTREAM-JOINTHIS-/OUTERTHIS- and
// KSTREAM-JOINOTHER-/OUTEROTHER- (looking into the other side's store), KSTREAM-MERGE-.
// With Named(n): n-this-windowed, n-other-windowed, n-this-join (n-outer-this-join),
// n-other-join (n-outer-other-join), n-merge. leftOuter keeps unjoined left records,
// rightOuter unjoined right ones.
func streamStreamJoin[K, V, VO, VR any](left KStream[K, V], right KStream[K, VO], w JoinWindows, leftOuter, rightOuter bool,
	o []Option, joiner func(l, r any, hasL, hasR bool) any) KStream[K, VR] {
	b := left.b
	op := opts(o)
	if w.size() < 0 || w.Grace < 0 {
		b.errs = append(b.errs, fmt.Errorf("streams: join windows %+v: need Before+After >= 0 and Grace >= 0", w))
	}
	ks := left.ks
	if ks == nil {
		ks = right.ks
	}
	if ks == nil || left.vs == nil || right.vs == nil {
		b.errs = append(b.errs, fmt.Errorf("streams: a stream-stream join needs the key serde and both value serdes (WithSerdes)"))
		return KStream[K, VR]{b: b, n: left.n}
	}
	if left.keyChanged {
		left = repartition(WithSerdes(left, ks, left.vs), joinRepartitionName(b, op, "-left"))
	}
	if right.keyChanged {
		right = repartition(WithSerdes(right, ks, right.vs), joinRepartitionName(b, op, "-right"))
	}
	named := func(suffix, prefix string) string {
		if op.name != "" {
			return op.name + suffix
		}
		return b.newName(prefix)
	}
	thisWindowed := named("-this-windowed", "KSTREAM-WINDOWED-")
	otherWindowed := named("-other-windowed", "KSTREAM-WINDOWED-")
	thisGen, otherGen := b.newName("KSTREAM-JOINTHIS-"), b.newName("KSTREAM-JOINOTHER-")
	thisSuffix, otherSuffix := "-this-join", "-other-join"
	if rightOuter {
		thisGen = "KSTREAM-OUTERTHIS-" + thisGen[len("KSTREAM-JOINTHIS-"):]
		thisSuffix = "-outer-this-join"
	}
	if leftOuter {
		otherGen = "KSTREAM-OUTEROTHER-" + otherGen[len("KSTREAM-JOINOTHER-"):]
		otherSuffix = "-outer-other-join"
	}
	thisName, otherName := thisGen, otherGen
	if op.name != "" {
		thisName, otherName = op.name+thisSuffix, op.name+otherSuffix
	}
	mergeName := named("-merge", "KSTREAM-MERGE-")

	thisStore, otherStore := thisGen+"-store", otherGen+"-store"
	retention := w.size() + w.Grace
	b.addStore(newJoinWindowStore(thisStore, retention, op.storeType))
	b.addStore(newJoinWindowStore(otherStore, retention, op.storeType))
	outerStore := ""
	if leftOuter {
		outerStore = "KSTREAM-OUTERSHARED-" + thisGen[len(thisGen)-10:] + "-store"
		b.addStore(newOuterJoinStore(outerStore))
	}

	keySer := func(k any) ([]byte, error) { return ks.Serialize(thisStore+"-changelog", as[K](k)) }
	lser, lde := valueCodec(left.vs, thisStore+"-changelog")
	rser, rde := valueCodec(right.vs, otherStore+"-changelog")
	tw := b.add(&node{kind: processorNode, name: thisWindowed, stores: []string{thisStore}, supplier: func() procInstance {
		return &joinWindowProc{store: thisStore, key: keySer, value: lser}
	}}, left.n)
	ow := b.add(&node{kind: processorNode, name: otherWindowed, stores: []string{otherStore}, supplier: func() procInstance {
		return &joinWindowProc{store: otherStore, key: keySer, value: rser}
	}}, right.n)
	stores := func(s string) []string {
		if outerStore == "" {
			return []string{s}
		}
		return []string{s, outerStore}
	}
	ms := w.Before.Milliseconds()
	ma := w.After.Milliseconds()
	grace := w.Grace.Milliseconds()
	common := streamJoinShared{tracker: mergeName, outer: outerStore, before: ms, after: ma, grace: grace,
		key: keySer, keyDe: func(b []byte) (any, error) { return ks.Deserialize(thisStore+"-changelog", b) },
		leftSer: lser, leftDe: lde, rightSer: rser, rightDe: rde, joiner: joiner}
	jt := b.add(&node{kind: processorNode, name: thisName, stores: stores(otherStore), supplier: func() procInstance {
		return &streamJoinProc{streamJoinShared: common, left: true, other: otherStore, outerSide: leftOuter}
	}}, tw)
	jo := b.add(&node{kind: processorNode, name: otherName, stores: stores(thisStore), supplier: func() procInstance {
		return &streamJoinProc{streamJoinShared: common, left: false, other: thisStore, outerSide: rightOuter}
	}}, ow)
	n := b.add(&node{kind: processorNode, name: mergeName,
		supplier: func() procInstance { return &funcProc{f: (*nodeContext).forward} }}, jt, jo)
	b.copartition(left.n, right.n)
	return KStream[K, VR]{b: b, n: n, ks: ks}
}

func joinRepartitionName(b *Builder, op options, side string) string {
	if op.name != "" {
		return op.name + side
	}
	return b.newName("KSTREAM-JOIN-REPARTITION-")
}

// valueCodec is a value serde's two directions on untyped values, for a store's topic.
func valueCodec[V any](s serde.Serde[V], topic string) (func(any) ([]byte, error), func([]byte) (any, error)) {
	return func(v any) ([]byte, error) { return s.Serialize(topic, as[V](v)) },
		func(b []byte) (any, error) { return s.Deserialize(topic, b) }
}

// joinWindowProc puts each record of its side into the side's window store and passes it
// on (Kafka's KStreamJoinWindow). Records with a null key or value are passed on only.
type joinWindowProc struct {
	store string
	key   func(any) ([]byte, error)
	value func(any) ([]byte, error)
	c     *nodeContext
	ws    *joinWindowStore
}

func (p *joinWindowProc) init(c *nodeContext) error {
	ws, ok := c.task.stores[p.store].(*joinWindowStore)
	if !ok {
		return fmt.Errorf("streams: store %q is not a join window store", p.store)
	}
	p.c, p.ws = c, ws
	return nil
}

func (p *joinWindowProc) process(r rec) error {
	if r.key != nil && r.value != nil {
		kb, err := p.key(r.key)
		if err != nil {
			return err
		}
		vb, err := p.value(r.value)
		if err != nil {
			return err
		}
		if vb == nil {
			vb = []byte{}
		}
		ok, err := p.ws.put(kb, r.ts, vb)
		if err != nil {
			return err
		}
		if !ok {
			p.c.task.dropped++ // expired: Kafka's window store drops and counts it
		}
	}
	return p.c.forward(r)
}

func (p *joinWindowProc) close() error { return nil }

// streamJoinShared is what both sides' join processors of one join share.
type streamJoinShared struct {
	tracker           string // key of the join's time tracker in the task
	outer             string // the shared outer store, "" for an inner join
	before, after     int64  // ms, as seen from the left side
	grace             int64
	key               func(any) ([]byte, error)
	keyDe             func([]byte) (any, error)
	leftSer, rightSer func(any) ([]byte, error)
	leftDe, rightDe   func([]byte) (any, error)
	joiner            func(l, r any, hasL, hasR bool) any
}

// sharedState is the task's state named name, made by mk on first use: what the nodes of
// one operator share within one task.
func (tk *task) sharedState(name string, mk func() any) any {
	if tk.shared == nil {
		tk.shared = map[string]any{}
	}
	s, ok := tk.shared[name]
	if !ok {
		s = mk()
		tk.shared[name] = s
	}
	return s
}

// joinTimeTracker is a join's stream time: the largest timestamp either side's join
// processor has seen in this task (Kafka's KStreamImplJoin.TimeTracker), and minTime, a
// lower bound of the times waiting in the outer store. It lives as long as the task.
type joinTimeTracker struct {
	streamTime int64
	minTime    int64
	// primed is set once minTime has taken in the records restored into the outer store
	// (restore comes after init, before the first record).
	primed bool
}

// streamJoinProc joins one side's records with the other side's window store (Kafka's
// KStreamKStreamJoin). With an outer store, a record of an outer side that joins nothing
// waits there until its window closes, and a record that joins removes the other side's
// waiting entry it joined.
type streamJoinProc struct {
	streamJoinShared
	left      bool   // this processor's records are the left stream's
	other     string // the other side's window store
	outerSide bool   // this side keeps records that join nothing
	c         *nodeContext
	ows       *joinWindowStore
	os        *outerJoinStore
	tt        *joinTimeTracker
}

func (p *streamJoinProc) init(c *nodeContext) error {
	ows, ok := c.task.stores[p.other].(*joinWindowStore)
	if !ok {
		return fmt.Errorf("streams: store %q is not a join window store", p.other)
	}
	p.c, p.ows = c, ows
	if p.outer != "" {
		if p.os, ok = c.task.stores[p.outer].(*outerJoinStore); !ok {
			return fmt.Errorf("streams: store %q is not an outer join store", p.outer)
		}
	}
	tt, _ := c.task.sharedState(p.tracker, func() any { return &joinTimeTracker{streamTime: -1, minTime: maxTime} }).(*joinTimeTracker)
	p.tt = tt
	return nil
}

const maxTime = int64(^uint64(0) >> 1)

// window is the time range of the other side's records that a record of this side at ts
// joins.
func (p *streamJoinProc) window(ts int64) (from, to int64) {
	before, after := p.before, p.after
	if !p.left {
		before, after = after, before
	}
	return max(0, ts-before), max(0, ts+after)
}

// join is the joiner applied to a value of this side and one of the other.
func (p *streamJoinProc) join(this, other any, hasOther bool) any {
	if p.left {
		return p.joiner(this, other, true, hasOther)
	}
	return p.joiner(other, this, hasOther, true)
}

func (p *streamJoinProc) process(r rec) error {
	ts := r.ts
	p.tt.streamTime = max(p.tt.streamTime, ts)
	if r.key == nil && r.value != nil && p.outerSide {
		// A null key joins nothing: an outer side's record gets its result at once (KIP-962).
		return p.c.forward(rec{value: p.join(r.value, nil, false), ts: ts, headers: r.headers})
	}
	if r.key == nil || r.value == nil {
		p.c.task.dropped++
		return nil
	}
	if !p.tt.primed && p.os != nil {
		_, first := p.os.entries(-1)
		p.tt.minTime, p.tt.primed = min(p.tt.minTime, first), true
	}
	if p.os != nil && ts == p.tt.streamTime {
		if err := p.emitClosed(r); err != nil {
			return err
		}
	}
	kb, err := p.key(r.key)
	if err != nil {
		return err
	}
	from, to := p.window(ts)
	otherDe := p.rightDe
	if !p.left {
		otherDe = p.leftDe
	}
	joined := false
	for _, e := range p.ows.fetch(kb, from, to) {
		joined = true
		ov, err := otherDe(e.value)
		if err != nil {
			return err
		}
		if p.os != nil {
			// The other side's record at e.ts joined: it no longer waits for a null join.
			if err := p.os.remove(e.ts, !p.left, kb); err != nil {
				return err
			}
		}
		out := rec{key: r.key, value: p.join(r.value, ov, true), ts: max(ts, e.ts), headers: r.headers}
		if err := p.c.forward(out); err != nil {
			return err
		}
	}
	if joined || !p.outerSide {
		return nil
	}
	if p.os == nil || to < p.tt.streamTime {
		// Out of order past its window already: nothing can join it any more.
		return p.c.forward(rec{key: r.key, value: p.join(r.value, nil, false), ts: ts, headers: r.headers})
	}
	ser := p.leftSer
	if !p.left {
		ser = p.rightSer
	}
	vb, err := ser(r.value)
	if err != nil {
		return err
	}
	p.tt.minTime = min(p.tt.minTime, ts)
	return p.os.add(ts, p.left, kb, vb)
}

// emitClosed emits the null-joined results of the waiting records whose window has closed:
// a left record at t closes at t+After+Grace, a right one at t+Before+Grace. Results come
// out in time order, each with its record's timestamp.
func (p *streamJoinProc) emitClosed(r rec) error {
	now := p.tt.streamTime
	if p.tt.minTime >= now-min(p.before, p.after)-p.grace {
		return nil // nothing waiting can have closed yet
	}
	// Only records older than this can have closed.
	entries, next := p.os.entries(now - min(p.before, p.after) - p.grace - 1)
	p.tt.minTime = next
	for _, e := range entries {
		lookAhead := p.after
		if !e.left {
			lookAhead = p.before
		}
		if e.ts+lookAhead+p.grace >= now {
			// Not closed yet; later entries may still be closed when this side's look-ahead
			// is the shorter one, so keep scanning, remembering the oldest still waiting.
			p.tt.minTime = min(p.tt.minTime, e.ts)
			continue
		}
		k, err := p.keyDe(e.key)
		if err != nil {
			return err
		}
		for _, vb := range e.values {
			if len(vb) < 1 {
				continue
			}
			var out any
			if vb[0] == 1 {
				v, err := p.leftDe(vb[1:])
				if err != nil {
					return err
				}
				out = p.joiner(v, nil, true, false)
			} else {
				v, err := p.rightDe(vb[1:])
				if err != nil {
					return err
				}
				out = p.joiner(nil, v, false, true)
			}
			if err := p.c.forward(rec{key: k, value: out, ts: e.ts, headers: r.headers}); err != nil {
				return err
			}
		}
		if err := p.os.removeKey(e.storeKey); err != nil {
			return err
		}
	}
	return nil
}

func (p *streamJoinProc) close() error { return nil }
