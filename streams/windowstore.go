package streams

import (
	"encoding/binary"
	"fmt"
	"iter"
	"log/slog"
	"math"
	"time"

	"github.com/gregor-project/gregor/streams/serde"
)

// windowLayout is how a windowed store lays out its changelog keys, as Kafka's key schemas:
// the time-windowed one is the key's bytes then the window start (8 bytes big-endian ms,
// the end being start plus the windows' size); the session one is the key's bytes, then the
// session end, then its start.
type windowLayout int

const (
	timeWindowLayout windowLayout = iota
	sessionWindowLayout
)

// winEntry is one window of one key in a windowed store: its bounds (ms) and value bytes.
type winEntry struct {
	start, end int64
	value      []byte
}

// memWindowStore is the store of windows (sliding windows) and sessions: values by key
// bytes and window over a window core (windowcore.go), in memory or pebble, with every
// key's windows sorted by start (then end), so a processor finds the windows of a key near
// a time without scanning the others. Writes go to the changelog
// (<application.id>-<store>-changelog) as they happen; restore replays it.
//
// The store is used by one task's goroutine.
type memWindowStore struct {
	name   string
	layout windowLayout
	size   int64 // time-window layout: end = start + size
	c      windowCore
	log    changelogWriter
	// err is the first failed read, restore or expiry, returned by the next write.
	err error
}

func newMemWindowStore(name string, layout windowLayout, size int64, log changelogWriter) *memWindowStore {
	return &memWindowStore{name: name, layout: layout, size: size, c: newMemWindowCore(), log: log}
}

// openWindowStore is newMemWindowStore over a pebble database in dir.
func openWindowStore(name string, layout windowLayout, size int64, log changelogWriter, dir string, lg *slog.Logger) (*memWindowStore, error) {
	p, err := openPebble(dir, lg)
	if err != nil {
		return nil, err
	}
	return &memWindowStore{name: name, layout: layout, size: size, c: pebbleWindowCore{p}, log: log}, nil
}

// disk is the store's database when it is persistent.
func (s *memWindowStore) disk() diskStore {
	if p, ok := s.c.(persistent); ok {
		return p.disk()
	}
	return nil
}

// fail keeps the first error for the next write.
func (s *memWindowStore) fail(err error) {
	if err != nil && s.err == nil {
		s.err = fmt.Errorf("streams: store %q: %w", s.name, err)
	}
}

// storeKey is the changelog key of window [start, end] of key kb.
func (s *memWindowStore) storeKey(kb string, start, end int64) []byte {
	b := append([]byte(nil), kb...)
	if s.layout == sessionWindowLayout {
		b = binary.BigEndian.AppendUint64(b, uint64(end))
	}
	return binary.BigEndian.AppendUint64(b, uint64(start))
}

// splitKey is storeKey's inverse; ok is false for a key too short to hold its bounds.
func (s *memWindowStore) splitKey(b []byte) (kb string, start, end int64, ok bool) {
	if s.layout == sessionWindowLayout {
		if len(b) < 16 {
			return "", 0, 0, false
		}
		n := len(b) - 16
		return string(b[:n]), int64(binary.BigEndian.Uint64(b[n+8:])), int64(binary.BigEndian.Uint64(b[n : n+8])), true
	}
	if len(b) < 8 {
		return "", 0, 0, false
	}
	n := len(b) - 8
	start = int64(binary.BigEndian.Uint64(b[n:]))
	return string(b[:n]), start, start + s.size, true
}

func cmpWin(e winEntry, b [2]int64) int {
	if e.start != b[0] {
		return cmpInt(e.start, b[0])
	}
	return cmpInt(e.end, b[1])
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (s *memWindowStore) restore(key, value []byte) {
	kb, start, end, ok := s.splitKey(key)
	if !ok {
		return // not a key this store wrote
	}
	s.fail(s.c.set(kb, start, end, value))
}

// restoreBatch applies changelog records in one write (keys too short to be this store's
// are skipped, as restore does).
func (s *memWindowStore) restoreBatch(recs []kvPair) error {
	ws := make([]windowRec, 0, len(recs))
	for _, r := range recs {
		if kb, start, end, ok := s.splitKey(r.k); ok {
			ws = append(ws, windowRec{kb, start, end, r.v})
		}
	}
	if err := s.c.apply(ws); err != nil {
		return fmt.Errorf("streams: restore store %q: %w", s.name, err)
	}
	return nil
}

// put writes a window and logs it; a nil value removes the window.
func (s *memWindowStore) put(kb string, start, end int64, value []byte) error {
	if s.err != nil {
		return s.err
	}
	if value == nil {
		if _, ok := s.get(kb, start, end); !ok {
			return s.err
		}
	}
	if err := s.c.set(kb, start, end, value); err != nil {
		return fmt.Errorf("streams: store %q: %w", s.name, err)
	}
	if s.log != nil {
		return s.log(s.storeKey(kb, start, end), value, -1)
	}
	return nil
}

func (s *memWindowStore) get(kb string, start, end int64) ([]byte, bool) {
	v, ok, err := s.c.get(kb, start, end)
	s.fail(err)
	return v, ok
}

// between is a copy of key kb's windows starting in [from, to], by start.
func (s *memWindowStore) between(kb string, from, to int64) []winEntry {
	es, err := s.c.between(kb, from, to)
	s.fail(err)
	return es
}

// expire removes, from the store only, the windows for which old is true. Their changelog
// records stay (compaction and the topic's retention remove them), so a restore brings them
// back until the next expiry, which the processor runs before it reads the store.
func (s *memWindowStore) expire(old func(start, end int64) bool) {
	s.fail(s.c.expire(old))
}

// scan calls f with the windows starting in [from, to] of the keys whose bytes are in
// [kFrom, kTo] (a nil bound is open), in key-byte then start order, until f returns false.
func (s *memWindowStore) scan(kFrom, kTo []byte, from, to int64, f func(kb string, e winEntry) bool) error {
	if err := s.c.scan(kFrom, kTo, from, to, f); err != nil {
		return fmt.Errorf("streams: store %q: %w", s.name, err)
	}
	return nil
}

// len is the number of windows (a persistent store counts them by scanning).
func (s *memWindowStore) len() int {
	n, err := s.c.count()
	s.fail(err)
	return n
}

// SessionStore is a task's store of sessions (Kafka Streams' SessionStore): per key, the
// aggregate of each session, a session being a Windowed key whose window holds its first
// and last record times (both inclusive). Writes go to the changelog topic
// <application.id>-<store>-changelog, keyed as Kafka's session key schema (key, end, start).
type SessionStore[K, V any] interface {
	Name() string
	// FetchSession is the value of key k's session [start, end], if there is one.
	FetchSession(k K, start, end time.Time) (V, bool, error)
	// FindSessions yields key k's sessions that end at or after earliestEnd and start at
	// or before latestStart, by start.
	FindSessions(k K, earliestEnd, latestStart time.Time) iter.Seq2[Windowed[K], V]
	Put(w Windowed[K], v V) error
	Remove(w Windowed[K]) error
	// All yields every session, by key bytes then start.
	All() iter.Seq2[Windowed[K], V]
	// Len is the number of sessions.
	Len() int
}

// WindowStore is a task's store of sliding windows' aggregates (Kafka Streams'
// TimestampedWindowStore seen without the timestamps): per key, the value of each window.
type WindowStore[K, V any] interface {
	Name() string
	// Fetch is the value of key k's window starting at start.
	Fetch(k K, start time.Time) (V, bool, error)
	// All yields every window, by key bytes then start.
	All() iter.Seq2[Windowed[K], V]
	// Len is the number of windows.
	Len() int
}

// sessionView is a memWindowStore of the session layout, typed.
type sessionView[K, V any] struct {
	s     *memWindowStore
	ks    serde.Serde[K]
	vs    serde.Serde[V]
	topic string
}

// newSessionStore declares a session store of type st ("" for the App's default).
func newSessionStore[K, V any](name string, ks serde.Serde[K], vs serde.Serde[V], st StoreType) storeDef {
	mk := func(s *memWindowStore) stateStore {
		return &sessionView[K, V]{s: s, ks: ks, vs: vs, topic: name + "-changelog"}
	}
	return storeDef{name: name, changelog: true, storeType: st,
		make: func(log changelogWriter) stateStore { return mk(newMemWindowStore(name, sessionWindowLayout, 0, log)) },
		open: func(log changelogWriter, dir string, lg *slog.Logger) (stateStore, error) {
			s, err := openWindowStore(name, sessionWindowLayout, 0, log, dir, lg)
			if err != nil {
				return nil, err
			}
			return mk(s), nil
		}}
}

func (v *sessionView[K, V]) restore(key, value []byte)        { v.s.restore(key, value) }
func (v *sessionView[K, V]) restoreBatch(recs []kvPair) error { return v.s.restoreBatch(recs) }
func (v *sessionView[K, V]) disk() diskStore                  { return v.s.disk() }
func (v *sessionView[K, V]) typed() any                       { return SessionStore[K, V](v) }
func (v *sessionView[K, V]) Name() string                     { return v.s.name }
func (v *sessionView[K, V]) Len() int                         { return v.s.len() }

func (v *sessionView[K, V]) key(k K) (string, error) {
	kb, err := v.ks.Serialize(v.topic, k)
	if err != nil {
		return "", fmt.Errorf("streams: store %q key: %w", v.s.name, err)
	}
	return string(kb), nil
}

func (v *sessionView[K, V]) value(b []byte) (V, error) {
	x, err := v.vs.Deserialize(v.topic, b)
	if err != nil {
		return x, fmt.Errorf("streams: store %q value: %w", v.s.name, err)
	}
	return x, nil
}

func (v *sessionView[K, V]) FetchSession(k K, start, end time.Time) (V, bool, error) {
	var z V
	kb, err := v.key(k)
	if err != nil {
		return z, false, err
	}
	b, ok := v.s.get(kb, millis(start), millis(end))
	if !ok {
		return z, false, nil
	}
	x, err := v.value(b)
	return x, err == nil, err
}

// FindSessions stops at a value that does not deserialize (a broken serde).
func (v *sessionView[K, V]) FindSessions(k K, earliestEnd, latestStart time.Time) iter.Seq2[Windowed[K], V] {
	return v.findSessions(k, millis(earliestEnd), millis(latestStart))
}

func (v *sessionView[K, V]) findSessions(k K, earliestEnd, latestStart int64) iter.Seq2[Windowed[K], V] {
	return func(yield func(Windowed[K], V) bool) {
		kb, err := v.key(k)
		if err != nil {
			return
		}
		for _, e := range v.s.between(kb, -1<<63, latestStart) {
			if e.end < earliestEnd {
				continue
			}
			x, err := v.value(e.value)
			if err != nil || !yield(sessionKey(k, e.start, e.end), x) {
				return
			}
		}
	}
}

func (v *sessionView[K, V]) Put(w Windowed[K], x V) error {
	kb, err := v.key(w.Key)
	if err != nil {
		return err
	}
	b, err := v.vs.Serialize(v.topic, x)
	if err != nil {
		return fmt.Errorf("streams: store %q value: %w", v.s.name, err)
	}
	if b == nil {
		b = []byte{}
	}
	return v.s.put(kb, millis(w.Window.Start), millis(w.Window.End), b)
}

func (v *sessionView[K, V]) Remove(w Windowed[K]) error {
	kb, err := v.key(w.Key)
	if err != nil {
		return err
	}
	return v.s.put(kb, millis(w.Window.Start), millis(w.Window.End), nil)
}

func (v *sessionView[K, V]) All() iter.Seq2[Windowed[K], V] {
	return allWindows(v.s, v.ks, v.vs, v.topic, func(b []byte) []byte { return b })
}

// allWindows yields every window of s typed, unwrap taking a stored value to the value's
// own bytes; it stops at bytes that do not deserialize.
func allWindows[K, V any](s *memWindowStore, ks serde.Serde[K], vs serde.Serde[V], topic string, unwrap func([]byte) []byte) iter.Seq2[Windowed[K], V] {
	return func(yield func(Windowed[K], V) bool) {
		_ = readTyped(s, ks, vs, topic, nil, nil, math.MinInt64, math.MaxInt64, func(winEntry) bool { return true }, unwrap, yield)
	}
}

// sessionKey is key k in the window [start, end] (ms).
func sessionKey[K any](k K, start, end int64) Windowed[K] {
	return Windowed[K]{Key: k, Window: Window{Start: fromMillis(start), End: fromMillis(end)}}
}
