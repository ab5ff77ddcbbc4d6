package streams

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"
)

// windowClosing says when the windows of a windowed aggregation's table close: once the
// stream time reaches a window's end plus after (ms). Time windows close at end+grace
// (their end is exclusive); sliding windows and sessions, whose ends are inclusive, at
// end+grace+1 and end+gap+grace+1, the first stream time at which their aggregation
// would drop a record for them.
type windowClosing struct {
	after int64
}

// BufferConfig bounds a suppression buffer (Kafka's Suppressed.BufferConfig). Zero
// MaxRecords or MaxBytes is no bound on that measure; Unbounded() has neither.
type BufferConfig struct {
	MaxRecords int64
	// MaxBytes bounds the buffered keys', values' and headers' bytes plus 16 per record.
	MaxBytes int64
	// EmitEarlyWhenFull emits the oldest records early when the buffer is over a bound
	// (Kafka's emitEarlyWhenFull); otherwise processing stops with an error
	// (shutDownWhenFull). UntilWindowCloses allows only the latter.
	EmitEarlyWhenFull bool
}

// Unbounded is a buffer of no bound (Kafka's BufferConfig.unbounded()).
func Unbounded() BufferConfig { return BufferConfig{} }

// Suppressed says what Suppress holds back (Kafka Streams' Suppressed).
type Suppressed struct {
	untilWindowCloses bool
	timeLimit         time.Duration
	buffer            BufferConfig
}

// UntilWindowCloses emits only the final result of each window of a windowed aggregation's
// table, once the stream time has passed the window's end and grace period (and, for
// sessions, the inactivity gap), so the window can change no more.
func UntilWindowCloses(buffer BufferConfig) Suppressed {
	return Suppressed{untilWindowCloses: true, buffer: buffer}
}

// UntilTimeLimit holds each key's updates back until the stream time has passed its first
// held-back update's time by limit, then emits the key's latest value (Kafka's
// Suppressed.untilTimeLimit), or earlier when the buffer is full and EmitEarlyWhenFull.
func UntilTimeLimit(limit time.Duration, buffer BufferConfig) Suppressed {
	return Suppressed{timeLimit: limit, buffer: buffer}
}

// Suppress holds back t's updates as s says, keeping the latest per key in a buffer whose
// changes go to a compacted changelog (<application.id>-<store>-changelog, the store being
// KTABLE-SUPPRESS-STATE-STORE-NNNNNNNNNN or <name>-store with Named), restored with the task.
// With UntilWindowCloses, deletions (sessions merged away) are not emitted.
func Suppress[K, V any](t KTable[K, V], s Suppressed, o ...Option) KTable[K, V] {
	b := t.b
	op := opts(o)
	name := b.nameOr(op, "KTABLE-SUPPRESS-")
	store := op.name + "-store"
	if op.name == "" {
		store = b.newName("KTABLE-SUPPRESS-STATE-STORE-")
	}
	duration := s.timeLimit.Milliseconds()
	switch {
	case s.untilWindowCloses && t.closing == nil:
		b.errs = append(b.errs, fmt.Errorf("streams: suppress %q: UntilWindowCloses needs the table of a windowed aggregation", name))
	case s.untilWindowCloses && s.buffer.EmitEarlyWhenFull:
		b.errs = append(b.errs, fmt.Errorf("streams: suppress %q: UntilWindowCloses cannot emit early when its buffer is full", name))
	case s.untilWindowCloses:
		duration = t.closing.after
	case s.timeLimit < 0:
		b.errs = append(b.errs, fmt.Errorf("streams: suppress %q: negative time limit", name))
	}
	if t.ks == nil || t.vs == nil {
		b.errs = append(b.errs, fmt.Errorf("streams: suppress %q needs the table's key and value serdes", name))
	}
	b.addStore(storeDef{name: store, changelog: true, make: func(log changelogWriter) stateStore {
		return &suppressBuffer{name: store, entries: map[string]*bufEntry{}, log: log}
	}})
	final, cfg := s.untilWindowCloses, s.buffer
	ks, vs := serializer(t.ks), serializer(t.vs)
	kd, vd := deserializer(t.ks), deserializer(t.vs)
	topic := store + "-changelog"
	n := b.add(&node{kind: processorNode, name: name, stores: []string{store}, supplier: func() procInstance {
		return &suppressor{store: store, topic: topic, final: final, duration: duration, cfg: cfg,
			ks: ks, vs: vs, kd: kd, vd: vd, observed: -1}
	}}, t.n)
	return KTable[K, V]{b: b, n: n, ks: t.ks, vs: t.vs, closing: t.closing}
}

// windowEnd is a windowed key's window end (ms), the time its final result waits for.
func (w Windowed[K]) windowEnd() int64 { return millis(w.Window.End) }

type windowEnder interface{ windowEnd() int64 }

// suppressor is Kafka Streams' KTableSuppressProcessor. Each update is put in the buffer
// under its key, at the key's buffer time: the window end for final results, else the time
// of the key's first update still buffered. Then every entry whose buffer time is at or
// before the observed stream time (the largest timestamp of the updates it has seen) minus
// duration is emitted, oldest first, with its latest value, timestamp and headers; then, if
// the buffer is over its bounds, it emits the oldest early or fails.
type suppressor struct {
	store, topic string
	final        bool
	duration     int64
	cfg          BufferConfig
	ks, vs       func(string, any) ([]byte, error)
	kd, vd       func(string, []byte) (any, error)
	c            *nodeContext
	buf          *suppressBuffer
	observed     int64
}

func (p *suppressor) init(c *nodeContext) error {
	buf, ok := c.task.stores[p.store].(*suppressBuffer)
	if !ok {
		return fmt.Errorf("streams: store %q is not a suppression buffer", p.store)
	}
	p.c, p.buf = c, buf
	return nil
}

func (p *suppressor) close() error { return nil }

func (p *suppressor) process(r rec) error {
	if r.key == nil {
		return nil
	}
	p.observed = max(p.observed, r.ts)
	kb, err := p.ks(p.topic, r.key)
	if err != nil {
		return fmt.Errorf("streams: suppress key: %w", err)
	}
	var vb []byte
	if r.value != nil {
		if vb, err = p.vs(p.topic, r.value); err != nil {
			return fmt.Errorf("streams: suppress value: %w", err)
		}
		if vb == nil {
			vb = []byte{}
		}
	}
	bufTime := r.ts
	if p.final {
		w, ok := r.key.(windowEnder)
		if !ok {
			return fmt.Errorf("streams: suppress: key %T is not windowed", r.key)
		}
		bufTime = w.windowEnd()
	}
	if err := p.buf.put(string(kb), bufTime, r.ts, vb, r.headers); err != nil {
		return err
	}
	for {
		e := p.buf.oldest()
		if e == nil || e.time > p.observed-p.duration {
			break
		}
		if err := p.emit(e); err != nil {
			return err
		}
	}
	for p.over() {
		if !p.cfg.EmitEarlyWhenFull {
			return fmt.Errorf("streams: suppress: buffer %q exceeded its max capacity: %d records and %d bytes", p.store, len(p.buf.entries), p.buf.bytes)
		}
		if err := p.emit(p.buf.oldest()); err != nil {
			return err
		}
	}
	return nil
}

func (p *suppressor) over() bool {
	return (p.cfg.MaxRecords > 0 && int64(len(p.buf.entries)) > p.cfg.MaxRecords) ||
		(p.cfg.MaxBytes > 0 && p.buf.bytes > p.cfg.MaxBytes)
}

// emit removes e from the buffer and forwards it, but for a deletion of a final result
// (nothing downstream ever saw the deleted window).
func (p *suppressor) emit(e *bufEntry) error {
	if err := p.buf.remove(e.key); err != nil {
		return err
	}
	if e.value == nil && p.final {
		return nil
	}
	k, err := p.kd(p.topic, []byte(e.key))
	if err != nil {
		return fmt.Errorf("streams: suppress key: %w", err)
	}
	r := rec{key: k, ts: e.ts, headers: e.headers}
	if e.value != nil {
		if r.value, err = p.vd(p.topic, e.value); err != nil {
			return fmt.Errorf("streams: suppress value: %w", err)
		}
	}
	return p.c.forward(r)
}

// bufEntry is a key's held-back update. value nil is a deletion.
type bufEntry struct {
	key     string
	time    int64 // buffer time: the entry is emitted after it (ms)
	seq     uint64
	ts      int64 // the update's timestamp
	value   []byte
	headers []Header
}

func (e *bufEntry) size() int64 {
	n := int64(len(e.key) + len(e.value) + 16)
	for _, h := range e.headers {
		n += int64(len(h.Key) + len(h.Value))
	}
	return n
}

// suppressBuffer is a suppression's buffer: the latest update per key, in buffer-time order.
// Every put and removal goes to its changelog, keyed by the key's bytes, so a restored
// buffer holds what was held back.
//
// Invariant: order holds exactly the entries, sorted by (time, seq); bytes is their size.
type suppressBuffer struct {
	name    string
	entries map[string]*bufEntry
	order   []*bufEntry
	seq     uint64
	bytes   int64
	log     changelogWriter
}

func (b *suppressBuffer) typed() any { return nil }

func cmpEntry(a, c *bufEntry) int {
	if a.time != c.time {
		return cmpInt(a.time, c.time)
	}
	return cmpInt(int64(a.seq), int64(c.seq))
}

func (b *suppressBuffer) oldest() *bufEntry {
	if len(b.order) == 0 {
		return nil
	}
	return b.order[0]
}

// set puts an entry in memory: a key already buffered keeps its buffer time and place.
func (b *suppressBuffer) set(key string, time, ts int64, value []byte, headers []Header) *bufEntry {
	if e, ok := b.entries[key]; ok {
		b.bytes -= e.size()
		e.ts, e.value, e.headers = ts, value, headers
		b.bytes += e.size()
		return e
	}
	b.seq++
	e := &bufEntry{key: key, time: time, seq: b.seq, ts: ts, value: value, headers: headers}
	b.entries[key] = e
	i, _ := slices.BinarySearchFunc(b.order, e, cmpEntry)
	b.order = slices.Insert(b.order, i, e)
	b.bytes += e.size()
	return e
}

func (b *suppressBuffer) unset(key string) {
	e, ok := b.entries[key]
	if !ok {
		return
	}
	delete(b.entries, key)
	b.bytes -= e.size()
	i, _ := slices.BinarySearchFunc(b.order, e, cmpEntry)
	if i == 0 { // the oldest, as emission removes them: no shift
		b.order[0] = nil
		b.order = b.order[1:]
		return
	}
	b.order = slices.Delete(b.order, i, i+1)
}

func (b *suppressBuffer) put(key string, time, ts int64, value []byte, headers []Header) error {
	e := b.set(key, time, ts, value, headers)
	if b.log == nil {
		return nil
	}
	return b.log([]byte(key), encodeBufEntry(e), -1)
}

func (b *suppressBuffer) remove(key string) error {
	b.unset(key)
	if b.log == nil {
		return nil
	}
	return b.log([]byte(key), nil, -1)
}

func (b *suppressBuffer) restore(key, value []byte) {
	if value == nil {
		b.unset(string(key))
		return
	}
	e, err := decodeBufEntry(value)
	if err != nil {
		return // not a record this buffer wrote
	}
	b.set(string(key), e.time, e.ts, e.value, e.headers)
}

// encodeBufEntry is a buffered update as its changelog value: buffer time and timestamp (8
// bytes each), the value (4-byte length, -1 for a deletion, then the bytes), and the headers
// (4-byte count, then each key and value length-prefixed, a null value as -1).
func encodeBufEntry(e *bufEntry) []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(e.time))
	b = binary.BigEndian.AppendUint64(b, uint64(e.ts))
	b = appendBytes(b, e.value)
	b = binary.BigEndian.AppendUint32(b, uint32(len(e.headers)))
	for _, h := range e.headers {
		b = appendBytes(b, []byte(h.Key))
		b = appendBytes(b, h.Value)
	}
	return b
}

func appendBytes(b, v []byte) []byte {
	if v == nil {
		return binary.BigEndian.AppendUint32(b, ^uint32(0))
	}
	return append(binary.BigEndian.AppendUint32(b, uint32(len(v))), v...)
}

var errBufEntry = errors.New("streams: malformed suppression buffer record")

func decodeBufEntry(b []byte) (*bufEntry, error) {
	if len(b) < 16 {
		return nil, errBufEntry
	}
	e := &bufEntry{time: int64(binary.BigEndian.Uint64(b)), ts: int64(binary.BigEndian.Uint64(b[8:]))}
	b = b[16:]
	var ok bool
	if e.value, b, ok = readBytes(b); !ok || len(b) < 4 {
		return nil, errBufEntry
	}
	n := binary.BigEndian.Uint32(b)
	b = b[4:]
	for range n {
		var k, v []byte
		if k, b, ok = readBytes(b); !ok {
			return nil, errBufEntry
		}
		if v, b, ok = readBytes(b); !ok {
			return nil, errBufEntry
		}
		e.headers = append(e.headers, Header{Key: string(k), Value: v})
	}
	return e, nil
}

func readBytes(b []byte) (v, rest []byte, ok bool) {
	if len(b) < 4 {
		return nil, b, false
	}
	n := binary.BigEndian.Uint32(b)
	b = b[4:]
	if n == ^uint32(0) {
		return nil, b, true
	}
	if uint64(len(b)) < uint64(n) {
		return nil, b, false
	}
	return append([]byte{}, b[:n]...), b[n:], true
}
