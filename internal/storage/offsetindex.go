package storage

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"
)

// offsetIndexEntrySize is the size of one .index entry.
const offsetIndexEntrySize = 8

// offsetIndex is a segment's .index file: a sparse map from offsets to positions in the .log.
//
// Format: 8-byte entries, big endian: 4 bytes offset relative to the segment's base offset,
// 4 bytes byte position in the .log.
//
// Invariants (checked by sanityCheck when a file is read back):
//   - entry (o, p) means the batch starting at position p has last offset baseOffset+o, so
//     every batch before p ends below baseOffset+o and every offset >= baseOffset+o is in a
//     batch starting at p or later;
//   - relative offsets and positions both strictly increase;
//   - every position is below the .log's size.
//
// An entry is added for a batch once more than index.interval.bytes of log were appended since
// the previous entry (the first batch of a segment never gets one: position 0 is implied).
type offsetIndex struct {
	indexFile
	baseOffset int64
}

func (x *offsetIndex) at(i int) (offset, pos int64) {
	e := x.entry(i)
	return x.baseOffset + int64(binary.BigEndian.Uint32(e)), int64(binary.BigEndian.Uint32(e[4:]))
}

// lastEntry returns the last entry, or (baseOffset, 0) when there is none.
func (x *offsetIndex) lastEntry() (offset, pos int64) {
	if n := x.entries(); n > 0 {
		return x.at(n - 1)
	}
	return x.baseOffset, 0
}

// lookup returns the entry with the largest offset <= target, or (baseOffset, 0) when there is
// none: the position a forward scan for target starts at.
func (x *offsetIndex) lookup(target int64) (offset, pos int64) {
	n := x.entries()
	i := sort.Search(n, func(i int) bool {
		o, _ := x.at(i)
		return o > target
	})
	if i == 0 {
		return x.baseOffset, 0
	}
	return x.at(i - 1)
}

// lookupPosition returns the entry with the largest position <= limit, or (baseOffset, 0).
func (x *offsetIndex) lookupPosition(limit int64) (offset, pos int64) {
	n := x.entries()
	i := sort.Search(n, func(i int) bool {
		_, p := x.at(i)
		return p > limit
	})
	if i == 0 {
		return x.baseOffset, 0
	}
	return x.at(i - 1)
}

// lookupBelow returns the entry with the largest offset < limit, or (baseOffset, 0).
func (x *offsetIndex) lookupBelow(limit int64) (offset, pos int64) {
	return x.lookup(limit - 1)
}

// append adds the entry (offset, pos) in memory; the caller checked the invariants.
func (x *offsetIndex) append(offset, pos int64) error {
	var e [offsetIndexEntrySize]byte
	binary.BigEndian.PutUint32(e[:], uint32(offset-x.baseOffset))
	binary.BigEndian.PutUint32(e[4:], uint32(pos))
	return x.add(e[:])
}

// canAppend reports whether (offset, pos) keeps the entries strictly increasing.
func (x *offsetIndex) canAppend(offset, pos int64) bool {
	if offset-x.baseOffset > math.MaxInt32 || offset < x.baseOffset || pos > math.MaxInt32 {
		return false
	}
	if x.entries() == 0 {
		return true
	}
	lo, lp := x.lastEntry()
	return offset > lo && pos > lp
}

// truncateToPosition drops the entries at or after position pos (the .log is being truncated
// to pos).
func (x *offsetIndex) truncateToPosition(pos int64) error {
	n := x.entries()
	i := sort.Search(n, func(i int) bool {
		_, p := x.at(i)
		return p >= pos
	})
	return x.truncateEntries(i)
}

// sanityCheck checks the invariants against a .log of logSize bytes.
func (x *offsetIndex) sanityCheck(logSize int64) error {
	prevOff, prevPos := int64(-1), int64(-1)
	for i := range x.entries() {
		e := x.entry(i)
		rel := int64(binary.BigEndian.Uint32(e))
		pos := int64(binary.BigEndian.Uint32(e[4:]))
		if rel > math.MaxInt32 {
			return fmt.Errorf("%w: %s entry %d has relative offset %d", errCorruptIndex, x.path, i, rel)
		}
		if i > 0 && (rel <= prevOff || pos <= prevPos) {
			return fmt.Errorf("%w: %s entry %d (%d, %d) does not follow (%d, %d)", errCorruptIndex, x.path, i, rel, pos, prevOff, prevPos)
		}
		if pos >= logSize {
			return fmt.Errorf("%w: %s entry %d points at position %d past the log's %d bytes", errCorruptIndex, x.path, i, pos, logSize)
		}
		prevOff, prevPos = rel, pos
	}
	return nil
}
