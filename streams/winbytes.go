package streams

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"sort"

	"github.com/cockroachdb/pebble/v2"
)

// winBytes is the byte core of a time-window store: values by key bytes and window start
// (ms), in memory (memWinBytes) or on disk (pebbleWin). Both behave alike, which the
// property test checks against a plain reference:
//
//   - expire(before) removes every window starting before before; reads never see one;
//   - fetch yields one key's windows by start; all yields every window in the order of
//     its changelog key's bytes (key bytes, then the start as 8 bytes big endian).
//
// A core is used by one goroutine at a time.
type winBytes interface {
	get(k []byte, start int64) ([]byte, bool, error)
	// set writes v for key k's window at start; a nil v deletes it.
	set(k []byte, start int64, v []byte) error
	// apply writes changelog records in order (a nil value deletes).
	apply(recs []winRec) error
	// fetch calls f with key k's windows starting in [from, to], by start, until f
	// returns false. v is valid during the call only.
	fetch(k []byte, from, to int64, f func(start int64, v []byte) bool) error
	// all calls f with every window in changelog-key order until f returns false.
	all(f func(k []byte, start int64, v []byte) bool) error
	expire(before int64) error
	count() (int, error)
}

type winRec struct {
	k     []byte
	start int64
	v     []byte
}

// memWinBytes keeps each key's windows in a slice sorted by start.
//
// Invariant: every slice in keys is sorted by start, without duplicates or expired
// windows, and is not empty.
type memWinBytes struct {
	keys map[string][]winVal
}

type winVal struct {
	start int64
	v     []byte
}

func newMemWinBytes() *memWinBytes { return &memWinBytes{keys: map[string][]winVal{}} }

func (m *memWinBytes) find(k []byte, start int64) ([]winVal, int, bool) {
	ws := m.keys[string(k)]
	i := sort.Search(len(ws), func(i int) bool { return ws[i].start >= start })
	return ws, i, i < len(ws) && ws[i].start == start
}

func (m *memWinBytes) get(k []byte, start int64) ([]byte, bool, error) {
	ws, i, ok := m.find(k, start)
	if !ok {
		return nil, false, nil
	}
	return ws[i].v, true, nil
}

func (m *memWinBytes) set(k []byte, start int64, v []byte) error {
	ws, i, ok := m.find(k, start)
	switch {
	case v == nil && ok:
		ws = slices.Delete(ws, i, i+1)
	case v == nil:
		return nil
	case ok:
		ws[i].v = v
	default:
		ws = slices.Insert(ws, i, winVal{start, v})
	}
	if len(ws) == 0 {
		delete(m.keys, string(k))
	} else {
		m.keys[string(k)] = ws
	}
	return nil
}

func (m *memWinBytes) apply(recs []winRec) error {
	for _, r := range recs {
		if err := m.set(r.k, r.start, r.v); err != nil {
			return err
		}
	}
	return nil
}

func (m *memWinBytes) fetch(k []byte, from, to int64, f func(int64, []byte) bool) error {
	ws, i, _ := m.find(k, from)
	for ; i < len(ws) && ws[i].start <= to; i++ {
		if !f(ws[i].start, ws[i].v) {
			break
		}
	}
	return nil
}

func (m *memWinBytes) all(f func([]byte, int64, []byte) bool) error {
	type entry struct {
		ck []byte // changelog key
		v  []byte
	}
	var es []entry
	for k, ws := range m.keys {
		for _, w := range ws {
			es = append(es, entry{binary.BigEndian.AppendUint64([]byte(k), uint64(w.start)), w.v})
		}
	}
	slices.SortFunc(es, func(a, b entry) int { return bytes.Compare(a.ck, b.ck) })
	for _, e := range es {
		k, start, _ := splitChangelogKey(e.ck)
		if !f(k, start, e.v) {
			return nil
		}
	}
	return nil
}

func (m *memWinBytes) expire(before int64) error {
	for k, ws := range m.keys {
		i := sort.Search(len(ws), func(i int) bool { return ws[i].start >= before })
		if i == len(ws) {
			delete(m.keys, k)
		} else if i > 0 {
			m.keys[k] = slices.Delete(ws, 0, i)
		}
	}
	return nil
}

func (m *memWinBytes) count() (int, error) {
	n := 0
	for _, ws := range m.keys {
		n += len(ws)
	}
	return n, nil
}

// pebbleWin is the persistent window core, laid out in time segments as Kafka Streams'
// segmented RocksDB window store:
//
//	key   = segment (8 bytes big endian) | key bytes | window start (8 bytes big endian)
//	value = the value bytes
//
// with segment = start / interval. Within a segment, one key's windows sit together in
// start order, so a fetch by key and time range is one seek per segment it spans; expiry
// deletes whole segments with one range deletion. A window of the boundary segment older
// than the expiry point stays on disk until its segment goes, hidden by minStart.
//
// The expiry point is kept under the metadata key 0xff "min-start" (segments are
// non-negative, so their keys start below 0xff) and survives a restart.
//
// Invariant: no visible window starts before minStart; every window on disk lies in a
// segment >= minStart / interval.
type pebbleWin struct {
	*pebbleDB
	interval int64
	minStart int64
	// lo and hi are the lowest and highest segments that may hold windows (lo > hi: none).
	lo, hi int64
}

var winMetaKey = []byte("\xffmin-start")

func openPebbleWin(p *pebbleDB, interval int64) (*pebbleWin, error) {
	w := &pebbleWin{pebbleDB: p, interval: interval}
	return w, w.load()
}

// load reads the expiry point and the segment bounds from the database.
func (w *pebbleWin) load() error {
	w.minStart, w.lo, w.hi = math.MinInt64, 0, -1
	v, ok, err := w.pebbleDB.get(winMetaKey)
	if err != nil {
		return err
	}
	if ok && len(v) == 8 {
		w.minStart = int64(binary.BigEndian.Uint64(v))
	}
	it, err := w.db.NewIter(&pebble.IterOptions{UpperBound: []byte{0xff}})
	if err != nil {
		return err
	}
	if it.First() && len(it.Key()) >= 8 {
		w.lo = int64(binary.BigEndian.Uint64(it.Key()))
		if it.Last() {
			w.hi = int64(binary.BigEndian.Uint64(it.Key()))
		}
	}
	return errors.Join(it.Error(), it.Close())
}

func (w *pebbleWin) wipe() error {
	if err := w.pebbleDB.wipe(); err != nil {
		return err
	}
	return w.load()
}

func (w *pebbleWin) disk() diskStore { return w }

func (w *pebbleWin) segment(start int64) int64 {
	if start < 0 {
		return 0
	}
	return start / w.interval
}

func (w *pebbleWin) key(seg int64, k []byte, start int64) []byte {
	b := make([]byte, 0, 16+len(k))
	b = binary.BigEndian.AppendUint64(b, uint64(seg))
	b = append(b, k...)
	return binary.BigEndian.AppendUint64(b, uint64(start))
}

// split is key's inverse; ok is false for the metadata key or a short key.
func (w *pebbleWin) split(b []byte) (k []byte, start int64, ok bool) {
	if len(b) < 16 || b[0] == 0xff {
		return nil, 0, false
	}
	return b[8 : len(b)-8], int64(binary.BigEndian.Uint64(b[len(b)-8:])), true
}

func (w *pebbleWin) get(k []byte, start int64) ([]byte, bool, error) {
	if start < w.minStart {
		return nil, false, nil
	}
	return w.pebbleDB.get(w.key(w.segment(start), k, start))
}

func (w *pebbleWin) set(k []byte, start int64, v []byte) error {
	return w.apply([]winRec{{k, start, v}})
}

// apply writes the records in one batch; a record older than the expiry point is
// dropped, as the store has already expired its window.
func (w *pebbleWin) apply(recs []winRec) error {
	b := w.db.NewBatch()
	lo, hi := w.lo, w.hi
	for _, r := range recs {
		if r.start < w.minStart {
			continue
		}
		seg := w.segment(r.start)
		key := w.key(seg, r.k, r.start)
		var err error
		if r.v == nil {
			err = b.Delete(key, nil)
		} else {
			err = b.Set(key, r.v, nil)
			if lo > hi {
				lo, hi = seg, seg
			}
			lo, hi = min(lo, seg), max(hi, seg)
		}
		if err != nil {
			return errors.Join(err, b.Close())
		}
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return err
	}
	w.lo, w.hi = lo, hi
	return nil
}

func (w *pebbleWin) fetch(k []byte, from, to int64, f func(int64, []byte) bool) error {
	from = max(from, w.minStart, 0)
	if from > to || w.lo > w.hi {
		return nil
	}
	first, last := max(w.segment(from), w.lo), min(w.segment(to), w.hi)
	for seg := first; seg <= last; seg++ {
		lo := w.key(seg, k, from)
		var hi []byte
		if to < math.MaxInt64 {
			hi = w.key(seg, k, to+1)
		} else {
			hi = w.key(seg+1, nil, 0)[:8]
		}
		more := true
		err := w.scanRange(lo, hi, func(key, v []byte) bool {
			kk, start, ok := w.split(key)
			if !ok || !bytes.Equal(kk, k) || start < from || start > to {
				return true // another key with k as a prefix
			}
			more = f(start, v)
			return more
		})
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// all merges the segments' iterators: each is in key then start order.
func (w *pebbleWin) all(f func([]byte, int64, []byte) bool) error {
	if w.lo > w.hi {
		return nil
	}
	var its []*pebble.Iterator
	closeAll := func(err error) error {
		for _, it := range its {
			err = errors.Join(err, it.Error(), it.Close())
		}
		return err
	}
	for seg := w.lo; seg <= w.hi; seg++ {
		it, err := w.db.NewIter(&pebble.IterOptions{LowerBound: w.key(seg, nil, 0)[:8], UpperBound: w.key(seg+1, nil, 0)[:8]})
		if err != nil {
			return closeAll(err)
		}
		its = append(its, it)
		w.skipHidden(it, it.First())
	}
	for {
		var best *pebble.Iterator
		for _, it := range its {
			if it.Valid() && (best == nil || bytes.Compare(it.Key()[8:], best.Key()[8:]) < 0) {
				best = it
			}
		}
		if best == nil {
			return closeAll(nil)
		}
		k, start, _ := w.split(best.Key())
		v, err := best.ValueAndErr()
		if err != nil {
			return closeAll(err)
		}
		if !f(k, start, v) {
			return closeAll(nil)
		}
		w.skipHidden(best, best.Next())
	}
}

// skipHidden moves it past expired windows.
func (w *pebbleWin) skipHidden(it *pebble.Iterator, ok bool) {
	for ok {
		if _, start, valid := w.split(it.Key()); valid && start >= w.minStart {
			return
		}
		ok = it.Next()
	}
}

// expire raises the expiry point, stores it, and deletes the segments wholly before it.
func (w *pebbleWin) expire(before int64) error {
	if before <= w.minStart {
		return nil
	}
	w.minStart = before
	b := w.db.NewBatch()
	if err := b.Set(winMetaKey, binary.BigEndian.AppendUint64(nil, uint64(before)), nil); err != nil {
		return errors.Join(err, b.Close())
	}
	if seg := w.segment(before); seg > w.lo && w.lo <= w.hi {
		end := min(seg, w.hi+1)
		if err := b.DeleteRange(w.key(w.lo, nil, 0)[:8], w.key(end, nil, 0)[:8], nil); err != nil {
			return errors.Join(err, b.Close())
		}
		w.lo = end
	}
	return b.Commit(pebble.NoSync)
}

func (w *pebbleWin) count() (int, error) {
	n := 0
	err := w.all(func([]byte, int64, []byte) bool { n++; return true })
	return n, err
}
