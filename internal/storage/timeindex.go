package storage

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"
)

// timeIndexEntrySize is the size of one .timeindex entry.
const timeIndexEntrySize = 12

// timeIndex is a segment's .timeindex file: a sparse map from timestamps to offsets.
//
// Format: 12-byte entries, big endian: 8 bytes timestamp (ms), 4 bytes offset relative to the
// segment's base offset.
//
// Invariants (checked by sanityCheck):
//   - entry (t, o) means t is the largest timestamp among the batches up to and including the
//     batch whose last offset is o, and that batch is the first to reach t. So no record
//     before that batch has a timestamp >= t, and a search for the first record with
//     timestamp >= target may start at the batch containing o of the largest entry with t <= target;
//   - timestamps strictly increase, offsets never decrease (an entry is added only when the
//     segment's largest timestamp grows);
//   - the last entry is the segment's largest timestamp once the segment is sealed (sealing
//     and closing add it), and its offset is below the segment's next offset.
//
// Entries are added alongside offset index entries (every index.interval.bytes of log).
type timeIndex struct {
	indexFile
	baseOffset int64
}

func (x *timeIndex) at(i int) (ts, offset int64) {
	e := x.entry(i)
	return int64(binary.BigEndian.Uint64(e)), x.baseOffset + int64(binary.BigEndian.Uint32(e[8:]))
}

// lastEntry returns the last entry, or (-1, baseOffset) when there is none.
func (x *timeIndex) lastEntry() (ts, offset int64) {
	if n := x.entries(); n > 0 {
		return x.at(n - 1)
	}
	return -1, x.baseOffset
}

// lookup returns the offset of the entry with the largest timestamp <= target, or baseOffset
// when there is none.
func (x *timeIndex) lookup(target int64) (offset int64) {
	n := x.entries()
	i := sort.Search(n, func(i int) bool {
		t, _ := x.at(i)
		return t > target
	})
	if i == 0 {
		return x.baseOffset
	}
	_, o := x.at(i - 1)
	return o
}

// maybeAppend adds (ts, offset) if ts is larger than the last entry's timestamp (and the
// offset does not go backwards); with respectFull it also refuses once the index is full.
func (x *timeIndex) maybeAppend(ts, offset int64, respectFull bool) error {
	if ts < 0 || offset < x.baseOffset || offset-x.baseOffset > math.MaxInt32 {
		return nil
	}
	if respectFull && x.isFull() {
		return nil
	}
	if n := x.entries(); n > 0 {
		lt, lo := x.at(n - 1)
		if ts <= lt || offset < lo {
			return nil
		}
	}
	var e [timeIndexEntrySize]byte
	binary.BigEndian.PutUint64(e[:], uint64(ts))
	binary.BigEndian.PutUint32(e[8:], uint32(offset-x.baseOffset))
	return x.add(e[:])
}

// truncateToOffset drops the entries whose offset is >= offset.
func (x *timeIndex) truncateToOffset(offset int64) error {
	n := x.entries()
	i := sort.Search(n, func(i int) bool {
		_, o := x.at(i)
		return o >= offset
	})
	return x.truncateEntries(i)
}

// sanityCheck checks the invariants; nextOffset is the segment's next offset.
func (x *timeIndex) sanityCheck(nextOffset int64) error {
	prevTs, prevOff := int64(math.MinInt64), int64(-1)
	for i := range x.entries() {
		e := x.entry(i)
		ts := int64(binary.BigEndian.Uint64(e))
		rel := int64(binary.BigEndian.Uint32(e[8:]))
		if ts < 0 || rel > math.MaxInt32 {
			return fmt.Errorf("%w: %s entry %d is (%d, %d)", errCorruptIndex, x.path, i, ts, rel)
		}
		if i > 0 && (ts <= prevTs || rel < prevOff) {
			return fmt.Errorf("%w: %s entry %d (%d, %d) does not follow (%d, %d)", errCorruptIndex, x.path, i, ts, rel, prevTs, prevOff)
		}
		prevTs, prevOff = ts, rel
	}
	if n := x.entries(); n > 0 {
		if _, o := x.at(n - 1); o >= nextOffset {
			return fmt.Errorf("%w: %s last entry has offset %d at or past the log end %d", errCorruptIndex, x.path, o, nextOffset)
		}
	}
	return nil
}
