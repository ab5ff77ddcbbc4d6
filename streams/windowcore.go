package streams

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"maps"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// windowCore is the byte core of a memWindowStore (the store of sliding windows and of
// sessions): values by key bytes and window bounds, in memory (memWindowCore) or on disk
// (pebbleWindowCore). Both behave alike, which the property test checks:
//
//   - between yields one key's windows starting in [from, to], by start then end;
//   - scan yields the windows of a key range in key-byte order, then by start and end;
//   - expire removes every window old says is, and reads never see it again.
//
// A core is used by one goroutine at a time.
type windowCore interface {
	get(kb string, start, end int64) ([]byte, bool, error)
	// set writes value for the window; a nil value removes it.
	set(kb string, start, end int64, value []byte) error
	// apply writes changelog records in order (a nil value removes).
	apply(recs []windowRec) error
	between(kb string, from, to int64) ([]winEntry, error)
	// scan calls f with the windows starting in [from, to] of the keys whose bytes are in
	// [kFrom, kTo] (a nil bound is open) until f returns false.
	scan(kFrom, kTo []byte, from, to int64, f func(kb string, e winEntry) bool) error
	expire(old func(start, end int64) bool) error
	count() (int, error)
}

type windowRec struct {
	kb         string
	start, end int64
	value      []byte
}

// memWindowCore keeps every key's windows sorted by start (then end).
//
// Invariant: keys[k] is sorted by (start, end) with no two entries of the same bounds and
// is not empty; n is the number of entries over every key.
type memWindowCore struct {
	keys map[string][]winEntry
	n    int
}

func newMemWindowCore() *memWindowCore { return &memWindowCore{keys: map[string][]winEntry{}} }

func (m *memWindowCore) get(kb string, start, end int64) ([]byte, bool, error) {
	es := m.keys[kb]
	i, found := slices.BinarySearchFunc(es, [2]int64{start, end}, cmpWin)
	if !found {
		return nil, false, nil
	}
	return es[i].value, true, nil
}

func (m *memWindowCore) set(kb string, start, end int64, value []byte) error {
	es := m.keys[kb]
	i, found := slices.BinarySearchFunc(es, [2]int64{start, end}, cmpWin)
	switch {
	case value == nil && found:
		es = slices.Delete(es, i, i+1)
		m.n--
	case value == nil:
		return nil
	case found:
		es[i].value = value
	default:
		es = slices.Insert(es, i, winEntry{start: start, end: end, value: value})
		m.n++
	}
	if len(es) == 0 {
		delete(m.keys, kb)
	} else {
		m.keys[kb] = es
	}
	return nil
}

func (m *memWindowCore) apply(recs []windowRec) error {
	for _, r := range recs {
		_ = m.set(r.kb, r.start, r.end, r.value)
	}
	return nil
}

func (m *memWindowCore) between(kb string, from, to int64) ([]winEntry, error) {
	es := m.keys[kb]
	i, _ := slices.BinarySearchFunc(es, [2]int64{from, -1 << 63}, cmpWin)
	var out []winEntry
	for ; i < len(es) && es[i].start <= to; i++ {
		out = append(out, es[i])
	}
	return out, nil
}

func (m *memWindowCore) scan(kFrom, kTo []byte, from, to int64, f func(string, winEntry) bool) error {
	keys := []string{string(kFrom)}
	if kFrom == nil || !bytes.Equal(kFrom, kTo) {
		keys = slices.SortedFunc(maps.Keys(m.keys), func(a, b string) int { return bytes.Compare([]byte(a), []byte(b)) })
	}
	for _, kb := range keys {
		if !inKeyRange([]byte(kb), kFrom, kTo) {
			continue
		}
		es, _ := m.between(kb, from, to)
		for _, e := range es {
			if !f(kb, e) {
				return nil
			}
		}
	}
	return nil
}

func (m *memWindowCore) expire(old func(start, end int64) bool) error {
	for kb, es := range m.keys {
		kept := es[:0]
		for _, e := range es {
			if old(e.start, e.end) {
				m.n--
			} else {
				kept = append(kept, e)
			}
		}
		if len(kept) == 0 {
			delete(m.keys, kb)
		} else {
			m.keys[kb] = kept
		}
	}
	return nil
}

func (m *memWindowCore) count() (int, error) { return m.n, nil }

// pebbleWindowCore is the persistent window core: one pebble entry per window,
//
//	key   = key bytes | start | end   (each 8 bytes big endian, sign bit flipped)
//	value = the value bytes
//
// so one key's windows sit together by start then end (times may be negative: a sliding
// window can start before the epoch). Another key that has this one as a prefix may sort
// among them; reads skip its entries by their length. An expiry pass reads the whole
// store (the session and sliding processors run one at most once per gap or time
// difference of stream time).
type pebbleWindowCore struct{ *pebbleDB }

func orderedTime(t int64) uint64 { return uint64(t) ^ (1 << 63) }

func (p pebbleWindowCore) key(kb string, start, end int64) []byte {
	b := make([]byte, 0, len(kb)+16)
	b = append(b, kb...)
	b = binary.BigEndian.AppendUint64(b, orderedTime(start))
	return binary.BigEndian.AppendUint64(b, orderedTime(end))
}

// split is key's inverse.
func (pebbleWindowCore) split(b []byte) (kb []byte, start, end int64, ok bool) {
	if len(b) < 16 {
		return nil, 0, 0, false
	}
	n := len(b) - 16
	return b[:n], int64(binary.BigEndian.Uint64(b[n:]) ^ (1 << 63)), int64(binary.BigEndian.Uint64(b[n+8:]) ^ (1 << 63)), true
}

func (p pebbleWindowCore) disk() diskStore { return p.pebbleDB }

func (p pebbleWindowCore) get(kb string, start, end int64) ([]byte, bool, error) {
	return p.pebbleDB.get(p.key(kb, start, end))
}

func (p pebbleWindowCore) set(kb string, start, end int64, value []byte) error {
	if value == nil {
		return p.db.Delete(p.key(kb, start, end), pebble.NoSync)
	}
	return p.db.Set(p.key(kb, start, end), value, pebble.NoSync)
}

func (p pebbleWindowCore) apply(recs []windowRec) error {
	b := p.db.NewBatch()
	for _, r := range recs {
		var err error
		if r.value == nil {
			err = b.Delete(p.key(r.kb, r.start, r.end), nil)
		} else {
			err = b.Set(p.key(r.kb, r.start, r.end), r.value, nil)
		}
		if err != nil {
			return errors.Join(err, b.Close())
		}
	}
	return b.Commit(pebble.NoSync)
}

func (p pebbleWindowCore) between(kb string, from, to int64) ([]winEntry, error) {
	var out []winEntry
	err := p.keyScan(kb, from, to, func(e winEntry) bool { out = append(out, e); return true })
	return out, err
}

// keyScan calls f with key kb's windows starting in [from, to], by start then end.
func (p pebbleWindowCore) keyScan(kb string, from, to int64, f func(winEntry) bool) error {
	if from > to {
		return nil
	}
	lo := p.key(kb, from, -1<<63)
	var hi []byte
	if to < 1<<63-1 {
		hi = p.key(kb, to+1, -1<<63)
	} else {
		hi = append([]byte(kb), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
	}
	return p.scanRange(lo, hi, func(k, v []byte) bool {
		k2, start, end, ok := p.split(k)
		if !ok || string(k2) != kb || start < from || start > to {
			return true // a longer key with kb as a prefix
		}
		return f(winEntry{start: start, end: end, value: append([]byte{}, v...)})
	})
}

func (p pebbleWindowCore) scan(kFrom, kTo []byte, from, to int64, f func(string, winEntry) bool) error {
	if kFrom != nil && bytes.Equal(kFrom, kTo) {
		return p.keyScan(string(kFrom), from, to, func(e winEntry) bool { return f(string(kFrom), e) })
	}
	// Keys that are prefixes of one another interleave in pebble's order: collect, then
	// sort by key bytes, start and end. Every entry of a key at or after kFrom sorts at or
	// after kFrom; an upper bound gives no such cut.
	type kwin struct {
		kb string
		e  winEntry
	}
	var all []kwin
	err := p.scanRange(kFrom, nil, func(k, v []byte) bool {
		kb, start, end, ok := p.split(k)
		if !ok || !inKeyRange(kb, kFrom, kTo) {
			// A shorter key of the range may still follow (its window suffix sorts it
			// after longer keys), so the scan goes on to the end.
			return true
		}
		if start >= from && start <= to {
			all = append(all, kwin{string(kb), winEntry{start: start, end: end, value: append([]byte{}, v...)}})
		}
		return true
	})
	if err != nil {
		return err
	}
	slices.SortFunc(all, func(a, b kwin) int {
		return cmp.Or(bytes.Compare([]byte(a.kb), []byte(b.kb)), cmpWin(a.e, [2]int64{b.e.start, b.e.end}))
	})
	for _, w := range all {
		if !f(w.kb, w.e) {
			return nil
		}
	}
	return nil
}

func (p pebbleWindowCore) expire(old func(start, end int64) bool) error {
	b := p.db.NewBatch()
	err := p.scanRange(nil, nil, func(k, _ []byte) bool {
		if _, start, end, ok := p.split(k); ok && old(start, end) {
			if err := b.Delete(append([]byte{}, k...), nil); err != nil {
				return false
			}
		}
		return true
	})
	if err != nil {
		return errors.Join(err, b.Close())
	}
	return b.Commit(pebble.NoSync)
}

func (p pebbleWindowCore) count() (int, error) {
	n := 0
	err := p.scanRange(nil, nil, func(_, _ []byte) bool { n++; return true })
	return n, err
}
