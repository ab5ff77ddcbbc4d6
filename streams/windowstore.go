package streams

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"iter"
	"maps"
	"slices"
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

// memWindowStore is the in-memory store of windows (sliding windows) and sessions: values
// by key bytes and window, with every key's windows sorted by start (then end), so a
// processor finds the windows of a key near a time without scanning the others. Writes go
// to the changelog (<application.id>-<store>-changelog) as they happen; restore replays it.
//
// Invariant: keys[k] is sorted by (start, end) with no two entries of the same bounds, and
// n is the number of entries over every key. The store is used by one task's goroutine.
type memWindowStore struct {
	name   string
	layout windowLayout
	size   int64 // time-window layout: end = start + size
	keys   map[string][]winEntry
	n      int
	log    changelogWriter
}

func newMemWindowStore(name string, layout windowLayout, size int64, log changelogWriter) *memWindowStore {
	return &memWindowStore{name: name, layout: layout, size: size, keys: map[string][]winEntry{}, log: log}
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

// set writes or (value nil) removes a window, in memory only.
func (s *memWindowStore) set(kb string, start, end int64, value []byte) {
	es := s.keys[kb]
	i, found := slices.BinarySearchFunc(es, [2]int64{start, end}, cmpWin)
	switch {
	case value == nil && found:
		es = slices.Delete(es, i, i+1)
		s.n--
	case value == nil:
		return
	case found:
		es[i].value = value
	default:
		es = slices.Insert(es, i, winEntry{start: start, end: end, value: value})
		s.n++
	}
	if len(es) == 0 {
		delete(s.keys, kb)
	} else {
		s.keys[kb] = es
	}
}

func (s *memWindowStore) restore(key, value []byte) {
	kb, start, end, ok := s.splitKey(key)
	if !ok {
		return // not a key this store wrote
	}
	s.set(kb, start, end, value)
}

// put writes a window and logs it; a nil value removes the window.
func (s *memWindowStore) put(kb string, start, end int64, value []byte) error {
	if value == nil {
		if _, ok := s.get(kb, start, end); !ok {
			return nil
		}
	}
	s.set(kb, start, end, value)
	if s.log != nil {
		return s.log(s.storeKey(kb, start, end), value)
	}
	return nil
}

func (s *memWindowStore) get(kb string, start, end int64) ([]byte, bool) {
	es := s.keys[kb]
	i, found := slices.BinarySearchFunc(es, [2]int64{start, end}, cmpWin)
	if !found {
		return nil, false
	}
	return es[i].value, true
}

// between is a copy of key kb's windows starting in [from, to], by start.
func (s *memWindowStore) between(kb string, from, to int64) []winEntry {
	es := s.keys[kb]
	i, _ := slices.BinarySearchFunc(es, [2]int64{from, -1 << 63}, cmpWin)
	var out []winEntry
	for ; i < len(es) && es[i].start <= to; i++ {
		out = append(out, es[i])
	}
	return out
}

// expire removes, from memory only, the windows for which old is true. Their changelog
// records stay (compaction and the topic's retention remove them), so a restore brings them
// back until the next expiry, which the processor runs before it reads the store.
func (s *memWindowStore) expire(old func(start, end int64) bool) {
	for kb, es := range s.keys {
		kept := es[:0]
		for _, e := range es {
			if old(e.start, e.end) {
				s.n--
			} else {
				kept = append(kept, e)
			}
		}
		if len(kept) == 0 {
			delete(s.keys, kb)
		} else {
			s.keys[kb] = kept
		}
	}
}

// sortedKeys are the store's keys in byte order.
func (s *memWindowStore) sortedKeys() []string {
	return slices.SortedFunc(maps.Keys(s.keys), func(a, b string) int { return bytes.Compare([]byte(a), []byte(b)) })
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

func newMemSessionStore[K, V any](name string, ks serde.Serde[K], vs serde.Serde[V]) storeDef {
	return storeDef{name: name, changelog: true, make: func(log changelogWriter) stateStore {
		return &sessionView[K, V]{s: newMemWindowStore(name, sessionWindowLayout, 0, log), ks: ks, vs: vs, topic: name + "-changelog"}
	}}
}

func (v *sessionView[K, V]) restore(key, value []byte) { v.s.restore(key, value) }
func (v *sessionView[K, V]) typed() any                { return SessionStore[K, V](v) }
func (v *sessionView[K, V]) Name() string              { return v.s.name }
func (v *sessionView[K, V]) Len() int                  { return v.s.n }

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
		for _, kb := range s.sortedKeys() {
			k, err := ks.Deserialize(topic, []byte(kb))
			if err != nil {
				return
			}
			for _, e := range slices.Clone(s.keys[kb]) {
				x, err := vs.Deserialize(topic, unwrap(e.value))
				if err != nil || !yield(sessionKey(k, e.start, e.end), x) {
					return
				}
			}
		}
	}
}

// sessionKey is key k in the window [start, end] (ms).
func sessionKey[K any](k K, start, end int64) Windowed[K] {
	return Windowed[K]{Key: k, Window: Window{Start: fromMillis(start), End: fromMillis(end)}}
}
