package streams

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/gregor-project/gregor/streams/serde"
)

// Interactive queries of window and session stores, as Kafka Streams' ReadOnlyWindowStore
// and ReadOnlySessionStore over a composite of this instance's tasks: WindowStoreOf reads
// the store of a tumbling, hopping or sliding windowed aggregation, SessionStoreOf that of a
// session aggregation. They find their instances as Store does (eachLocal), with the same
// ErrInvalidStateStore refusals.

// ReadOnlyWindowStore is a query over the local instances of a window store. Times bound a
// window's start, both ends included. Results come store instance by store instance
// (partition order), each in key-byte order then by window start; the Backward forms
// return the same windows in the reverse order.
type ReadOnlyWindowStore[K, V any] interface {
	// Get is the value of k's window starting at start (Kafka's fetch(key, time)).
	Get(k K, start time.Time) (V, bool, error)
	// Fetch is k's windows starting in [from, to], by start.
	Fetch(k K, from, to time.Time) ([]KeyValue[Windowed[K], V], error)
	// FetchRange is the windows starting in [from, to] of the keys whose serialized
	// bytes are between keyFrom's and keyTo's (both included).
	FetchRange(keyFrom, keyTo K, from, to time.Time) ([]KeyValue[Windowed[K], V], error)
	// All is every window.
	All() ([]KeyValue[Windowed[K], V], error)
	// FetchAll is every window starting in [from, to].
	FetchAll(from, to time.Time) ([]KeyValue[Windowed[K], V], error)
	BackwardFetch(k K, from, to time.Time) ([]KeyValue[Windowed[K], V], error)
	BackwardFetchRange(keyFrom, keyTo K, from, to time.Time) ([]KeyValue[Windowed[K], V], error)
	BackwardAll() ([]KeyValue[Windowed[K], V], error)
	BackwardFetchAll(from, to time.Time) ([]KeyValue[Windowed[K], V], error)
}

// ReadOnlySessionStore is a query over the local instances of a session store. A session
// is a Windowed key whose window holds its first and last record times. Results come store
// instance by store instance (partition order), each in key-byte order then by session
// start; the Backward forms return the same sessions in the reverse order.
type ReadOnlySessionStore[K, V any] interface {
	// Fetch is every session of k.
	Fetch(k K) ([]KeyValue[Windowed[K], V], error)
	// FetchRange is every session of the keys whose serialized bytes are between keyFrom's
	// and keyTo's (both included).
	FetchRange(keyFrom, keyTo K) ([]KeyValue[Windowed[K], V], error)
	// FindSessions is k's sessions that end at or after earliestEnd and start at or
	// before latestStart.
	FindSessions(k K, earliestEnd, latestStart time.Time) ([]KeyValue[Windowed[K], V], error)
	// FindSessionsRange is FindSessions over the keys FetchRange reads.
	FindSessionsRange(keyFrom, keyTo K, earliestEnd, latestStart time.Time) ([]KeyValue[Windowed[K], V], error)
	// FetchSession is the value of k's session [start, end], if there is one.
	FetchSession(k K, start, end time.Time) (V, bool, error)
	BackwardFetch(k K) ([]KeyValue[Windowed[K], V], error)
	BackwardFindSessions(k K, earliestEnd, latestStart time.Time) ([]KeyValue[Windowed[K], V], error)
}

// windowReader is a store of windows as a window query reads it.
type windowReader[K, V any] interface {
	queryKey(k K) ([]byte, error)
	// readWindows calls f with the windows starting in [from, to] of the keys whose bytes
	// are in [kFrom, kTo] (a nil bound is open), in key-byte then start order, until f
	// returns false.
	readWindows(kFrom, kTo []byte, from, to int64, f func(Windowed[K], V) bool) error
}

// sessionReader is a store of sessions as a session query reads it.
type sessionReader[K, V any] interface {
	queryKey(k K) ([]byte, error)
	// readSessions calls f with the sessions ending at or after earliestEnd and starting
	// at or before latestStart of the keys whose bytes are in [kFrom, kTo] (a nil bound is
	// open), in key-byte then start order, until f returns false.
	readSessions(kFrom, kTo []byte, earliestEnd, latestStart int64, f func(Windowed[K], V) bool) error
}

// inKeyRange is whether kb lies in [from, to], a nil bound being open.
func inKeyRange(kb, from, to []byte) bool {
	return (from == nil || bytes.Compare(kb, from) >= 0) && (to == nil || bytes.Compare(kb, to) <= 0)
}

// WindowStoreOf returns a query over window store name's instances held by this App's
// running tasks (and, with StaleStores, its standby tasks): the store of a tumbling,
// hopping or sliding windowed aggregation. K and V must be the aggregation's key and value
// types.
func WindowStoreOf[K, V any](a *App, name string, o ...QueryOption) (ReadOnlyWindowStore[K, V], error) {
	q := &windowQuery[K, V]{a: a, name: name, o: queryOpts{partition: -1}}
	for _, f := range o {
		f(&q.o)
	}
	err := q.each(func(windowReader[K, V]) bool { return false })
	return q, err
}

type windowQuery[K, V any] struct {
	a    *App
	name string
	o    queryOpts
}

func (q *windowQuery[K, V]) each(f func(windowReader[K, V]) bool) error {
	return eachLocal(q.a, q.name, q.o, "a window store", func(s stateStore) (windowReader[K, V], bool) {
		r, ok := s.(windowReader[K, V])
		return r, ok
	}, f)
}

// read collects the windows of [kFrom, kTo] (nil: open; from a key when key is set)
// starting in [from, to] over every instance.
func (q *windowQuery[K, V]) read(key *K, kFrom, kTo *K, from, to int64, backward bool) ([]KeyValue[Windowed[K], V], error) {
	return collectWindowed(q.each, func(r windowReader[K, V], emit func(Windowed[K], V) bool) error {
		lo, hi, err := queryBounds(r.queryKey, key, kFrom, kTo)
		if err != nil {
			return err
		}
		return r.readWindows(lo, hi, from, to, emit)
	}, backward)
}

// collectWindowed gathers what read yields from each instance each visits (all of them,
// unless read fails), in the stores' order or, backward, the reverse.
func collectWindowed[K, V, R any](each func(func(R) bool) error, read func(r R, emit func(Windowed[K], V) bool) error, backward bool) ([]KeyValue[Windowed[K], V], error) {
	var out []KeyValue[Windowed[K], V]
	var rerr error
	err := each(func(r R) bool {
		rerr = read(r, func(w Windowed[K], v V) bool {
			out = append(out, KV(w, v))
			return true
		})
		return rerr == nil
	})
	if backward {
		slices.Reverse(out)
	}
	return out, errors.Join(err, rerr)
}

// queryBounds serializes a query's key bounds: both key's bytes when key is set.
func queryBounds[K any](ser func(K) ([]byte, error), key, kFrom, kTo *K) (lo, hi []byte, err error) {
	if key != nil {
		kFrom, kTo = key, key
	}
	if kFrom != nil {
		if lo, err = ser(*kFrom); err != nil {
			return nil, nil, err
		}
	}
	if kTo != nil {
		if hi, err = ser(*kTo); err != nil {
			return nil, nil, err
		}
	}
	return lo, hi, nil
}

func (q *windowQuery[K, V]) Get(k K, start time.Time) (V, bool, error) {
	var z V
	ws, err := q.read(&k, nil, nil, millis(start), millis(start), false)
	if err != nil || len(ws) == 0 {
		return z, false, err
	}
	return ws[0].Value, true, nil
}

func (q *windowQuery[K, V]) Fetch(k K, from, to time.Time) ([]KeyValue[Windowed[K], V], error) {
	return q.read(&k, nil, nil, millis(from), millis(to), false)
}

func (q *windowQuery[K, V]) FetchRange(kFrom, kTo K, from, to time.Time) ([]KeyValue[Windowed[K], V], error) {
	return q.read(nil, &kFrom, &kTo, millis(from), millis(to), false)
}

func (q *windowQuery[K, V]) All() ([]KeyValue[Windowed[K], V], error) {
	return q.read(nil, nil, nil, math.MinInt64, math.MaxInt64, false)
}

func (q *windowQuery[K, V]) FetchAll(from, to time.Time) ([]KeyValue[Windowed[K], V], error) {
	return q.read(nil, nil, nil, millis(from), millis(to), false)
}

func (q *windowQuery[K, V]) BackwardFetch(k K, from, to time.Time) ([]KeyValue[Windowed[K], V], error) {
	return q.read(&k, nil, nil, millis(from), millis(to), true)
}

func (q *windowQuery[K, V]) BackwardFetchRange(kFrom, kTo K, from, to time.Time) ([]KeyValue[Windowed[K], V], error) {
	return q.read(nil, &kFrom, &kTo, millis(from), millis(to), true)
}

func (q *windowQuery[K, V]) BackwardAll() ([]KeyValue[Windowed[K], V], error) {
	return q.read(nil, nil, nil, math.MinInt64, math.MaxInt64, true)
}

func (q *windowQuery[K, V]) BackwardFetchAll(from, to time.Time) ([]KeyValue[Windowed[K], V], error) {
	return q.read(nil, nil, nil, millis(from), millis(to), true)
}

// SessionStoreOf returns a query over session store name's instances held by this App's
// running tasks (and, with StaleStores, its standby tasks): the store of a session
// aggregation. K and V must be the aggregation's key and value types.
func SessionStoreOf[K, V any](a *App, name string, o ...QueryOption) (ReadOnlySessionStore[K, V], error) {
	q := &sessionQuery[K, V]{a: a, name: name, o: queryOpts{partition: -1}}
	for _, f := range o {
		f(&q.o)
	}
	err := q.each(func(sessionReader[K, V]) bool { return false })
	return q, err
}

type sessionQuery[K, V any] struct {
	a    *App
	name string
	o    queryOpts
}

func (q *sessionQuery[K, V]) each(f func(sessionReader[K, V]) bool) error {
	return eachLocal(q.a, q.name, q.o, "a session store", func(s stateStore) (sessionReader[K, V], bool) {
		r, ok := s.(sessionReader[K, V])
		return r, ok
	}, f)
}

func (q *sessionQuery[K, V]) read(key *K, kFrom, kTo *K, earliestEnd, latestStart int64, backward bool) ([]KeyValue[Windowed[K], V], error) {
	return collectWindowed(q.each, func(r sessionReader[K, V], emit func(Windowed[K], V) bool) error {
		lo, hi, err := queryBounds(r.queryKey, key, kFrom, kTo)
		if err != nil {
			return err
		}
		return r.readSessions(lo, hi, earliestEnd, latestStart, emit)
	}, backward)
}

func (q *sessionQuery[K, V]) Fetch(k K) ([]KeyValue[Windowed[K], V], error) {
	return q.read(&k, nil, nil, math.MinInt64, math.MaxInt64, false)
}

func (q *sessionQuery[K, V]) FetchRange(kFrom, kTo K) ([]KeyValue[Windowed[K], V], error) {
	return q.read(nil, &kFrom, &kTo, math.MinInt64, math.MaxInt64, false)
}

func (q *sessionQuery[K, V]) FindSessions(k K, earliestEnd, latestStart time.Time) ([]KeyValue[Windowed[K], V], error) {
	return q.read(&k, nil, nil, millis(earliestEnd), millis(latestStart), false)
}

func (q *sessionQuery[K, V]) FindSessionsRange(kFrom, kTo K, earliestEnd, latestStart time.Time) ([]KeyValue[Windowed[K], V], error) {
	return q.read(nil, &kFrom, &kTo, millis(earliestEnd), millis(latestStart), false)
}

func (q *sessionQuery[K, V]) FetchSession(k K, start, end time.Time) (V, bool, error) {
	var z V
	ss, err := q.read(&k, nil, nil, millis(end), millis(start), false)
	if err != nil {
		return z, false, err
	}
	for _, s := range ss {
		if s.Key.Window.Start.Equal(fromMillis(millis(start))) && s.Key.Window.End.Equal(fromMillis(millis(end))) {
			return s.Value, true, nil
		}
	}
	return z, false, nil
}

func (q *sessionQuery[K, V]) BackwardFetch(k K) ([]KeyValue[Windowed[K], V], error) {
	return q.read(&k, nil, nil, math.MinInt64, math.MaxInt64, true)
}

func (q *sessionQuery[K, V]) BackwardFindSessions(k K, earliestEnd, latestStart time.Time) ([]KeyValue[Windowed[K], V], error) {
	return q.read(&k, nil, nil, millis(earliestEnd), millis(latestStart), true)
}

// queryKey, readWindows: the time-window store as a window query reads it.
func (s *winStore[K, V]) queryKey(k K) ([]byte, error) {
	kb, err := s.ks.Serialize(s.topic, k)
	if err != nil {
		return nil, fmt.Errorf("streams: store %q key: %w", s.name, err)
	}
	return kb, nil
}

func (s *winStore[K, V]) readWindows(kFrom, kTo []byte, from, to int64, f func(Windowed[K], V) bool) error {
	if s.err != nil {
		return s.err
	}
	var derr error
	emit := func(kb []byte, start int64, vb []byte) bool {
		k, err := s.ks.Deserialize(s.topic, append([]byte{}, kb...))
		if err != nil {
			derr = fmt.Errorf("streams: store %q key: %w", s.name, err)
			return false
		}
		_, vb = unstamp(vb)
		v, err := s.vs.Deserialize(s.topic, append([]byte{}, vb...))
		if err != nil {
			derr = fmt.Errorf("streams: store %q value: %w", s.name, err)
			return false
		}
		return f(s.windowed(k, start), v)
	}
	var err error
	if kFrom != nil && bytes.Equal(kFrom, kTo) {
		err = s.b.fetch(kFrom, from, to, func(start int64, vb []byte) bool { return emit(kFrom, start, vb) })
	} else {
		err = s.b.all(func(kb []byte, start int64, vb []byte) bool {
			if !inKeyRange(kb, kFrom, kTo) || start < from || start > to {
				return true
			}
			return emit(kb, start, vb)
		})
	}
	if err != nil {
		return fmt.Errorf("streams: store %q: %w", s.name, err)
	}
	return derr
}

// readTyped calls f with the windows scan yields that keep passes, typed (unwrap takes a
// stored value to the value's own bytes).
func readTyped[K, V any](s *memWindowStore, ks serde.Serde[K], vs serde.Serde[V], topic string, kFrom, kTo []byte, from, to int64,
	keep func(winEntry) bool, unwrap func([]byte) []byte, f func(Windowed[K], V) bool) error {
	var derr error
	err := s.scan(kFrom, kTo, from, to, func(kb string, e winEntry) bool {
		if !keep(e) {
			return true
		}
		k, err := ks.Deserialize(topic, []byte(kb))
		if err != nil {
			derr = fmt.Errorf("streams: store %q key: %w", s.name, err)
			return false
		}
		v, err := vs.Deserialize(topic, unwrap(e.value))
		if err != nil {
			derr = fmt.Errorf("streams: store %q value: %w", s.name, err)
			return false
		}
		return f(sessionKey(k, e.start, e.end), v)
	})
	return errors.Join(err, derr)
}

func (v *slidingView[K, V]) queryKey(k K) ([]byte, error) {
	kb, err := v.ks.Serialize(v.topic, k)
	if err != nil {
		return nil, fmt.Errorf("streams: store %q key: %w", v.s.name, err)
	}
	return kb, nil
}

func (v *slidingView[K, V]) readWindows(kFrom, kTo []byte, from, to int64, f func(Windowed[K], V) bool) error {
	return readTyped(v.s, v.ks, v.vs, v.topic, kFrom, kTo, from, to, func(winEntry) bool { return true },
		func(b []byte) []byte { return b[8:] }, f)
}

func (v *sessionView[K, V]) queryKey(k K) ([]byte, error) {
	kb, err := v.key(k)
	return []byte(kb), err
}

func (v *sessionView[K, V]) readSessions(kFrom, kTo []byte, earliestEnd, latestStart int64, f func(Windowed[K], V) bool) error {
	return readTyped(v.s, v.ks, v.vs, v.topic, kFrom, kTo, math.MinInt64, latestStart,
		func(e winEntry) bool { return e.end >= earliestEnd }, func(b []byte) []byte { return b }, f)
}
