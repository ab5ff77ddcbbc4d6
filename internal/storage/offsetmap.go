package storage

import (
	"fmt"
	"hash/maphash"
	"math/bits"
)

// OffsetMap is the log cleaner's key → last offset map (Kafka's SkimpyOffsetMap), in memory
// fixed when it is made: log.cleaner.dedupe.buffer.size divided among the cleaner threads.
// It stores no keys, only a 128-bit hash of each (two independent 64-bit maphash values) and
// the offset, 24 bytes a slot, in one array allocated once and reused by every cleaning
// (Clean clears it). So the cleaner's memory does not grow with the number of keys a log
// holds; a log with more distinct keys than fit is cleaned in several passes (see cleaner.go).
//
// A lookup may be fooled only by two keys with the same 128 hash bits (about 2^-64 for a log
// of 10^10 distinct keys), which would drop the older key's last value: Kafka accepts the
// same odds with MD5.
//
// Slots are found by open addressing with linear probing from the first hash (scaled to the slot count); the map is full
// once loadFactor of the slots are used (log.cleaner.io.buffer.load.factor, 0.9), which keeps
// probe sequences short. Not safe for concurrent use: one cleaner owns it.
//
// Speed: with many distinct keys nearly every lookup misses the CPU caches (and the TLB) in
// a table of many MiB, one miss after another when the lookups run one by one. So the
// cleaner looks keys up a batch at a time: it hashes the batch's keys once (hashKeys), then
// touches each key's first slot in a loop whose loads do not depend on one another
// (prefetch), so that the CPU waits for them together, and only then puts or gets them
// (putHash, getHash) in order, from the cache.
type OffsetMap struct {
	slots   []offsetSlot
	maxUsed int   // used may not pass it
	used    int   // slots holding a key
	latest  int64 // the largest offset put, or set by setLatest; -1 when empty
	seeds   [2]maphash.Seed
	sink    int64 // the sum prefetch loads, unused
}

// offsetSlot is one slot: the key's hash and offset+1 (0: the slot is empty).
type offsetSlot struct {
	h1, h2 uint64
	off1   int64
}

// offsetSlotSize is the bytes of memory one slot takes.
const offsetSlotSize = 24

// NewOffsetMap returns a map that uses memory bytes (rounded down to whole slots) and is full
// once loadFactor of its slots are used. It fails when that leaves no room for a single key,
// so that cleaning always makes progress.
func NewOffsetMap(memory int, loadFactor float64) (*OffsetMap, error) {
	n := memory / offsetSlotSize
	maxUsed := min(int(float64(n)*loadFactor), n-1) // one slot stays empty: probes end
	if loadFactor <= 0 || loadFactor > 1 || maxUsed < 1 {
		return nil, fmt.Errorf("storage: an offset map of %d bytes with load factor %v holds no key: log.cleaner.dedupe.buffer.size is too small", memory, loadFactor)
	}
	m := &OffsetMap{slots: make([]offsetSlot, n), maxUsed: maxUsed, latest: -1}
	m.seeds[0], m.seeds[1] = maphash.MakeSeed(), maphash.MakeSeed()
	return m, nil
}

// Capacity is the most keys the map holds.
func (m *OffsetMap) Capacity() int { return m.maxUsed }

// Len is the number of keys in the map.
func (m *OffsetMap) Len() int { return m.used }

// Utilization is the share of the slots in use.
func (m *OffsetMap) Utilization() float64 { return float64(m.used) / float64(len(m.slots)) }

// LatestOffset is the largest offset the map covers: every keyed record from the start of the
// mapped range up to it has its key in the map. -1 when nothing was mapped.
func (m *OffsetMap) LatestOffset() int64 { return m.latest }

// clear empties the map for a new cleaning.
func (m *OffsetMap) clear() {
	clear(m.slots)
	m.used = 0
	m.latest = -1
}

func (m *OffsetMap) hash(key []byte) (uint64, uint64) {
	return maphash.Bytes(m.seeds[0], key), maphash.Bytes(m.seeds[1], key)
}

// keyHash is a key's two hashes.
type keyHash struct{ h1, h2 uint64 }

// hashKey returns key's hashes.
func (m *OffsetMap) hashKey(key []byte) keyHash {
	h1, h2 := m.hash(key)
	return keyHash{h1, h2}
}

// home is the first slot a hash probes.
func (m *OffsetMap) home(h1 uint64) uint64 {
	i, _ := bits.Mul64(h1, uint64(len(m.slots))) // h1 scaled to [0, n): no division on every lookup
	return i
}

// prefetch loads the first slot of each hash (see Speed above); it changes nothing.
func (m *OffsetMap) prefetch(hs []keyHash) {
	var sum int64
	for i := range hs {
		sum += m.slots[m.home(hs[i].h1)].off1
	}
	m.sink += sum // kept, so that the loads are not optimized away
}

// find returns the slot of key's hash, or the empty slot where it would go.
func (m *OffsetMap) find(h1, h2 uint64) *offsetSlot {
	n := uint64(len(m.slots))
	for i := m.home(h1); ; i++ {
		if i == n {
			i = 0
		}
		s := &m.slots[i]
		if s.off1 == 0 || (s.h1 == h1 && s.h2 == h2) {
			return s
		}
	}
}

// put records offset as key's last offset (offsets are put in increasing order). It returns
// false, changing nothing, when key is new and the map is full.
func (m *OffsetMap) put(key []byte, offset int64) bool {
	return m.putHash(m.hashKey(key), offset)
}

// putHash is put of the key whose hashes are h.
func (m *OffsetMap) putHash(h keyHash, offset int64) bool {
	h1, h2 := h.h1, h.h2
	s := m.find(h1, h2)
	if s.off1 == 0 {
		if m.used >= m.maxUsed {
			return false
		}
		m.used++
		s.h1, s.h2 = h1, h2
	}
	s.off1 = offset + 1
	m.latest = max(m.latest, offset)
	return true
}

// get returns key's last offset, or -1 when the map does not hold it.
func (m *OffsetMap) get(key []byte) int64 {
	return m.getHash(m.hashKey(key))
}

// getHash is get of the key whose hashes are h.
func (m *OffsetMap) getHash(h keyHash) int64 { return m.find(h.h1, h.h2).off1 - 1 }

// setLatest raises LatestOffset to offset: the records up to it were all mapped (a batch
// without keys, a gap between segments).
func (m *OffsetMap) setLatest(offset int64) { m.latest = max(m.latest, offset) }
