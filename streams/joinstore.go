package streams

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sort"
	"time"
)

// joinWindowStore is the window store of one side of a stream-stream join (Kafka's
// persistent window store with retainDuplicates): every record of the side, by key and
// timestamp, duplicates kept apart by a sequence number. It holds bytes, as its changelog
// does, so restore needs no serde.
//
// Its changelog key is Kafka's WindowKeySchema: the key's bytes, the timestamp as 8 bytes
// big-endian, the sequence number as 4 bytes big-endian; the value is the value's bytes.
//
// Invariants: entries of a key are sorted by (timestamp, seq); observed is the largest
// timestamp put or restored; an entry older than observed minus retention is gone (Kafka's
// segments expire by the same rule), and a put that old is refused.
type joinWindowStore struct {
	name      string
	retention int64 // ms: the join window's size plus its grace period
	data      map[string][]joinWindowEntry
	observed  int64
	swept     int64 // observed time of the last removal of expired entries
	seq       uint32
	log       changelogWriter
}

type joinWindowEntry struct {
	ts    int64
	seq   uint32
	value []byte
}

// newJoinWindowStore declares a join window store. Its changelog is compacted and deleted
// past the retention plus a day, as Kafka Streams' window store changelogs
// (windowstore.changelog.additional.retention.ms).
func newJoinWindowStore(name string, retention time.Duration) storeDef {
	return storeDef{
		name:      name,
		changelog: true,
		topicConfigs: map[string]string{
			"cleanup.policy": "compact,delete",
			"retention.ms":   fmt.Sprint((retention + 24*time.Hour).Milliseconds()),
		},
		make: func(log changelogWriter) stateStore {
			return &joinWindowStore{name: name, retention: retention.Milliseconds(), data: map[string][]joinWindowEntry{},
				observed: -1, log: log}
		},
	}
}

func (s *joinWindowStore) typed() any { return s }

// expired reports whether a record at ts is past the store's retention.
func (s *joinWindowStore) expired(ts int64) bool {
	return s.observed >= 0 && ts <= s.observed-s.retention
}

// put adds one record; it returns false, storing nothing, when ts is already expired.
func (s *joinWindowStore) put(key []byte, ts int64, value []byte) (bool, error) {
	s.observe(ts)
	if s.expired(ts) {
		return false, nil
	}
	s.seq++
	s.insert(string(key), joinWindowEntry{ts: ts, seq: s.seq, value: value})
	if s.log == nil {
		return true, nil
	}
	return true, s.log(windowKey(key, ts, s.seq), value)
}

func (s *joinWindowStore) insert(k string, e joinWindowEntry) {
	es := s.data[k]
	i := sort.Search(len(es), func(i int) bool {
		return es[i].ts > e.ts || (es[i].ts == e.ts && es[i].seq >= e.seq)
	})
	if i < len(es) && es[i].ts == e.ts && es[i].seq == e.seq {
		es[i] = e
		return
	}
	s.data[k] = slices.Insert(es, i, e)
}

// observe advances the observed time. Expired entries are removed from memory in a sweep
// once the time has moved by half the retention since the last one (fetch skips those not
// removed yet), so a record costs no pass over the store.
func (s *joinWindowStore) observe(ts int64) {
	if ts <= s.observed {
		return
	}
	s.observed = ts
	if ts-s.swept < max(1, s.retention/2) {
		return
	}
	s.swept = ts
	for k, es := range s.data {
		n := 0
		for n < len(es) && s.expired(es[n].ts) {
			n++
		}
		switch {
		case n == len(es):
			delete(s.data, k)
		case n > 0:
			s.data[k] = slices.Clone(es[n:])
		}
	}
}

// fetch is the entries of key with from <= timestamp <= to, oldest first.
func (s *joinWindowStore) fetch(key []byte, from, to int64) []joinWindowEntry {
	if s.observed >= 0 {
		from = max(from, s.observed-s.retention+1)
	}
	es := s.data[string(key)]
	i := sort.Search(len(es), func(i int) bool { return es[i].ts >= from })
	j := sort.Search(len(es), func(i int) bool { return es[i].ts > to })
	if i >= j {
		return nil
	}
	return es[i:j]
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
		es := s.data[string(k)]
		s.data[string(k)] = slices.DeleteFunc(es, func(e joinWindowEntry) bool { return e.ts == ts && e.seq == seq })
		return
	}
	s.observe(ts)
	if !s.expired(ts) {
		s.insert(string(k), joinWindowEntry{ts: ts, seq: seq, value: value})
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
	return s.log([]byte(k), l)
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
	return s.log([]byte(k), nil)
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
