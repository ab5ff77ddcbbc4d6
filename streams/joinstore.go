package streams

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"time"
)

// joinWindowStore is the window store of one side of a stream-stream join (Kafka's
// persistent window store with retainDuplicates): every record of the side, by key and
// timestamp, duplicates kept apart by a sequence number, over a window core
// (windowcore.go: the timestamp as a window's start, the sequence number as its end), in
// memory or pebble. It holds bytes, as its changelog does, so restore needs no serde.
//
// Its changelog key is Kafka's WindowKeySchema: the key's bytes, the timestamp as 8 bytes
// big-endian, the sequence number as 4 bytes big-endian; the value is the value's bytes.
//
// Invariants: observed is the largest timestamp put or restored (read back from the core
// when a persistent store opens, as is the largest sequence number); an entry older than
// observed minus retention is not read (Kafka's segments expire by the same rule), and a
// put that old is refused.
type joinWindowStore struct {
	name      string
	retention int64 // ms: the join window's size plus its grace period
	c         windowCore
	observed  int64
	swept     int64 // observed time of the last removal of expired entries
	seq       uint32
	log       changelogWriter
	// err is the first failed read, restore or sweep, returned by the next put.
	err error
}

type joinWindowEntry struct {
	ts    int64
	seq   uint32
	value []byte
}

// newJoinWindowStore declares a join window store of type st ("" for the App's default).
// Its changelog is compacted and deleted past the retention plus a day, as Kafka Streams'
// window store changelogs (windowstore.changelog.additional.retention.ms).
func newJoinWindowStore(name string, retention time.Duration, st StoreType) storeDef {
	mk := func(c windowCore, log changelogWriter) (*joinWindowStore, error) {
		s := &joinWindowStore{name: name, retention: retention.Milliseconds(), c: c, observed: -1, log: log}
		return s, s.load()
	}
	return storeDef{
		name:      name,
		changelog: true,
		storeType: st,
		topicConfigs: map[string]string{
			"cleanup.policy": "compact,delete",
			"retention.ms":   fmt.Sprint((retention + 24*time.Hour).Milliseconds()),
		},
		make: func(log changelogWriter) stateStore {
			s, _ := mk(newMemWindowCore(), log) // an empty core: nothing to load
			return s
		},
		open: func(log changelogWriter, dir string, lg *slog.Logger) (stateStore, error) {
			p, err := openPebble(dir, lg)
			if err != nil {
				return nil, err
			}
			return mk(pebbleWindowCore{p}, log)
		},
	}
}

func (s *joinWindowStore) typed() any { return s }

func (s *joinWindowStore) disk() diskStore {
	if p, ok := s.c.(persistent); ok {
		return &joinDisk{p.disk(), s}
	}
	return nil
}

// joinDisk is a persistent join store's database: a wipe also forgets the times and
// sequence numbers read from it.
type joinDisk struct {
	diskStore
	s *joinWindowStore
}

func (d *joinDisk) wipe() error {
	if err := d.diskStore.wipe(); err != nil {
		return err
	}
	d.s.observed, d.s.swept, d.s.seq = -1, 0, 0
	return nil
}

// load reads the largest timestamp and sequence number in the core (a reopened store's).
func (s *joinWindowStore) load() error {
	return s.c.scan(nil, nil, math.MinInt64, math.MaxInt64, func(_ string, e winEntry) bool {
		s.observed, s.seq = max(s.observed, e.start), max(s.seq, uint32(e.end))
		return true
	})
}

func (s *joinWindowStore) fail(err error) {
	if err != nil && s.err == nil {
		s.err = fmt.Errorf("streams: store %q: %w", s.name, err)
	}
}

// expired reports whether a record at ts is past the store's retention.
func (s *joinWindowStore) expired(ts int64) bool {
	return s.observed >= 0 && ts <= s.observed-s.retention
}

// put adds one record; it returns false, storing nothing, when ts is already expired.
func (s *joinWindowStore) put(key []byte, ts int64, value []byte) (bool, error) {
	if s.err != nil {
		return false, s.err
	}
	s.observe(ts)
	if s.expired(ts) {
		return false, s.err
	}
	s.seq++
	if err := s.c.set(string(key), ts, int64(s.seq), value); err != nil {
		return false, fmt.Errorf("streams: store %q: %w", s.name, err)
	}
	if s.log == nil {
		return true, nil
	}
	return true, s.log(windowKey(key, ts, s.seq), value, -1)
}

// observe advances the observed time. Expired entries are removed from the core in a
// sweep once the time has moved by half the retention since the last one (fetch skips
// those not removed yet), so a record costs no pass over the store.
func (s *joinWindowStore) observe(ts int64) {
	if ts <= s.observed {
		return
	}
	s.observed = ts
	if ts-s.swept < max(1, s.retention/2) {
		return
	}
	s.swept = ts
	s.fail(s.c.expire(func(start, _ int64) bool { return s.expired(start) }))
}

// fetch is the entries of key with from <= timestamp <= to, oldest first.
func (s *joinWindowStore) fetch(key []byte, from, to int64) []joinWindowEntry {
	if s.observed >= 0 {
		from = max(from, s.observed-s.retention+1)
	}
	es, err := s.c.between(string(key), from, to)
	s.fail(err)
	out := make([]joinWindowEntry, 0, len(es))
	for _, e := range es {
		out = append(out, joinWindowEntry{ts: e.start, seq: uint32(e.end), value: e.value})
	}
	return out
}

func (s *joinWindowStore) restore(key, value []byte) {
	if len(key) < 12 {
		return
	}
	k := key[:len(key)-12]
	ts := int64(binary.BigEndian.Uint64(key[len(key)-12:]))
	seq := binary.BigEndian.Uint32(key[len(key)-4:])
	s.seq = max(s.seq, seq)
	if value == nil {
		s.fail(s.c.set(string(k), ts, int64(seq), nil))
		return
	}
	s.observe(ts)
	if !s.expired(ts) {
		s.fail(s.c.set(string(k), ts, int64(seq), value))
	}
}

func windowKey(key []byte, ts int64, seq uint32) []byte {
	b := append(slices.Clip(key), make([]byte, 0, 12)...)
	b = binary.BigEndian.AppendUint64(b, uint64(ts))
	return binary.BigEndian.AppendUint32(b, seq)
}

// outerJoinStore is the shared store of a left or outer stream-stream join (Kafka's
// KSTREAM-OUTERSHARED store): the records of an outer side not joined yet, waiting for their
// window to close. Its key is Kafka's TimestampedKeyAndJoinSide (the timestamp as 8 bytes
// big-endian, 1 for the left side or 0 for the right, the key's bytes), so iterating in key
// order is iterating in time order; its value is the list of that key's values at that time,
// each a 4-byte length and a LeftOrRightValue (1 for left or 0 for right, the value's bytes).
type outerJoinStore struct {
	name string
	data map[string][]byte
	keys []string // the keys of data, in byte order
	log  changelogWriter
}

func newOuterJoinStore(name string) storeDef {
	return storeDef{name: name, changelog: true, make: func(log changelogWriter) stateStore {
		return &outerJoinStore{name: name, data: map[string][]byte{}, log: log}
	}}
}

func (s *outerJoinStore) typed() any { return s }

func (s *outerJoinStore) restore(key, value []byte) {
	if value == nil {
		s.drop(string(key))
		return
	}
	s.set(string(key), value)
}

func (s *outerJoinStore) set(k string, v []byte) {
	if _, ok := s.data[k]; !ok {
		i, _ := slices.BinarySearch(s.keys, k)
		s.keys = slices.Insert(s.keys, i, k)
	}
	s.data[k] = v
}

func (s *outerJoinStore) drop(k string) {
	if _, ok := s.data[k]; !ok {
		return
	}
	delete(s.data, k)
	if i, ok := slices.BinarySearch(s.keys, k); ok {
		s.keys = slices.Delete(s.keys, i, i+1)
	}
}

func outerKey(ts int64, left bool, key []byte) []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 9+len(key)), uint64(ts))
	if left {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	return append(b, key...)
}

// add appends value to the list of (ts, side, key).
func (s *outerJoinStore) add(ts int64, left bool, key, value []byte) error {
	k := string(outerKey(ts, left, key))
	l := s.data[k]
	l = binary.BigEndian.AppendUint32(l, uint32(1+len(value)))
	if left {
		l = append(l, 1)
	} else {
		l = append(l, 0)
	}
	l = append(l, value...)
	s.set(k, l)
	if s.log == nil {
		return nil
	}
	return s.log([]byte(k), l, -1)
}

// remove deletes the list of (ts, side, key), if there is one.
func (s *outerJoinStore) remove(ts int64, left bool, key []byte) error {
	k := outerKey(ts, left, key)
	if _, ok := s.data[string(k)]; !ok {
		return nil
	}
	return s.removeKey(string(k))
}

func (s *outerJoinStore) removeKey(k string) error {
	s.drop(k)
	if s.log == nil {
		return nil
	}
	return s.log([]byte(k), nil, -1)
}

// outerEntry is one waiting record of the outer store.
type outerEntry struct {
	storeKey string
	ts       int64
	left     bool
	key      []byte
	values   [][]byte
}

// entries is the waiting records timed at most until, oldest first, a list of values per
// (ts, side, key), and the time of the first record after until (maxTime if none).
func (s *outerJoinStore) entries(until int64) ([]outerEntry, int64) {
	var out []outerEntry
	for _, k := range s.keys {
		if len(k) < 9 {
			continue
		}
		ts := int64(binary.BigEndian.Uint64([]byte(k[:8])))
		if ts > until {
			return out, ts
		}
		e := outerEntry{storeKey: k, ts: ts, left: k[8] == 1, key: []byte(k[9:])}
		l := s.data[k]
		for len(l) >= 4 {
			n := int(binary.BigEndian.Uint32(l))
			if n < 1 || 4+n > len(l) {
				break
			}
			e.values = append(e.values, l[4:4+n]) // the side byte and the value
			l = l[4+n:]
		}
		out = append(out, e)
	}
	return out, maxTime
}
