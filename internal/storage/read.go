package storage

import (
	"fmt"

	"github.com/gregor-project/gregor/internal/batch"
)

// Slice is a run of whole batches in one segment's .log: the caller sends File's bytes
// [Pos, Pos+Size) (sendfile with an explicit offset, or ReadAt) and then calls Release exactly
// once. Until then the segment's files stay open (the .log's descriptor pinned in the
// FileCache), even if retention deletes the segment. An
// empty Slice (Size 0, File nil) needs no Release, but calling it is harmless.
//
// A Slice never covers bytes that a later TruncateTo removes in the normal course (the
// replica layer truncates only above the high watermark, and reads stop below it); a read
// racing such a truncation may come up short.
type Slice struct {
	File File
	Pos  int64
	Size int32
	seg  *segment
}

// Release drops the Slice's hold on its segment.
func (s Slice) Release() {
	if s.seg != nil {
		s.seg.log.release()
		s.seg.decRef()
	}
}

// Read returns the whole batches starting with the one containing offset, from one segment:
// only batches whose last offset is below maxOffset (exclusive: the high watermark or last
// stable offset), at most maxBytes in total, except that with minOneBatch the first batch is
// returned whole even when it is larger (KIP-74). An offset equal to the log end offset, or a
// first batch that does not qualify, gives an empty Slice and a nil error; an offset below the
// log start offset or past the log end offset gives ErrOffsetOutOfRange.
func (l *Log) Read(offset int64, maxBytes int32, maxOffset int64, minOneBatch bool) (Slice, error) {
	return l.read(offset, maxBytes, maxOffset, minOneBatch, false)
}

// ReadRecords is Read for a consumer: batches that compaction emptied (no records, kept only
// for a producer's state or a cleaned segment's end offset) are stepped over when they come
// first, so the answer starts with a batch holding records, or is empty. A follower reads with
// Read and copies them, as its log must match the leader's; a consumer gains nothing from them
// and several clients stop at an answer of only an empty batch (kafkajs, kafka-go and
// kafka-python do not move past it).
func (l *Log) ReadRecords(offset int64, maxBytes int32, maxOffset int64, minOneBatch bool) (Slice, error) {
	return l.read(offset, maxBytes, maxOffset, minOneBatch, true)
}

func (l *Log) read(offset int64, maxBytes int32, maxOffset int64, minOneBatch, skipEmpty bool) (Slice, error) {
	// A reader at the end of what it may read (a consumer caught up) gets its empty answer
	// without the lock, from the published offsets. The fields may come from different
	// moments, but empty is then still an answer the locked path could have given an instant
	// earlier or later: the offsets only move forward between truncations.
	if l.pub.open.Load() && offset == l.pub.logEndOffset.Load() && offset >= l.pub.logStartOffset.Load() {
		return Slice{}, nil
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.usableLocked(); err != nil {
		return Slice{}, err
	}
	leo, lso := l.mu.logEndOffset, l.mu.logStartOffset
	if offset == leo {
		return Slice{}, nil
	}
	if offset < lso || offset > leo {
		return Slice{}, fmt.Errorf("%w: offset %d, log start offset %d, log end offset %d", ErrOffsetOutOfRange, offset, lso, leo)
	}
	maxOffset = min(maxOffset, leo)
	if offset >= maxOffset {
		return Slice{}, nil
	}
	buf := headerPool.Get().(*headerBuf)
	defer headerPool.Put(buf)
	segs := l.mu.segments
	for i := l.floorSegmentLocked(offset); i < len(segs); i++ {
		s, found, err := segs[i].read(offset, int64(max(maxBytes, 0)), maxOffset, minOneBatch, skipEmpty, buf)
		if err != nil || found {
			return s, err
		}
	}
	return Slice{}, nil
}

// read is Read within one segment; found is false when no batch in it reaches offset (the
// caller moves on to the next segment). Holding Log.mu (read) or Log.writeMu.
func (s *segment) read(offset, maxBytes, maxOffset int64, minOneBatch, skipEmpty bool, buf *headerBuf) (Slice, bool, error) {
	size := s.size
	start, h, found, err := s.translateOffset(offset, 0, size, buf)
	if err != nil || !found {
		return Slice{}, false, err
	}
	for skipEmpty && h.RecordCount == 0 && !h.IsControl() && h.LastOffset() < maxOffset {
		if start += int64(h.Size()); start >= size {
			return Slice{}, false, nil // only emptied batches left here: the next segment
		}
		if h, err = s.readHeader(start, buf); err != nil {
			return Slice{}, true, err
		}
	}
	if h.LastOffset() >= maxOffset {
		return Slice{}, true, nil
	}
	first := int64(h.Size())
	if first > maxBytes && !minOneBatch {
		return Slice{}, true, nil
	}
	end := start + first
	limit := start + maxBytes // end may not pass it, except for the first batch
	if end < limit && end < size {
		if maxOffset >= s.nextOffset && size <= limit {
			end = size // everything left qualifies
		} else {
			// Index entries are batch starts: every batch before the one at the largest
			// indexed position <= limit ends by limit, and every batch before an entry
			// whose last offset is below maxOffset ends below maxOffset.
			_, byBytes := s.index.lookupPosition(limit)
			_, byOffset := s.index.lookupBelow(maxOffset)
			end = max(end, min(byBytes, byOffset))
			for end < size {
				h, err := s.readHeader(end, buf)
				if err != nil {
					return Slice{}, true, err
				}
				if h.LastOffset() >= maxOffset || end+int64(h.Size()) > limit {
					break
				}
				end += int64(h.Size())
			}
		}
	}
	f, err := s.log.acquire() // pinned until Release
	if err != nil {
		return Slice{}, true, err
	}
	s.incRef()
	return Slice{File: f, Pos: start, Size: int32(end - start), seg: s}, true, nil
}

// ScanBatches calls fn with the header of every batch whose last offset is >= from, in
// order, up to the log end offset at the time of the call; it stops at fn's first error and
// returns it. It holds no lock while fn runs (so fn may call the Log), but the segments it
// walks stay open.
func (l *Log) ScanBatches(from int64, fn func(h batch.Header) error) error {
	return l.ScanBatchesControl(from, func(h batch.Header, _ []byte) error { return fn(h) })
}

// ScanBatchesControl is ScanBatches that also reads each control batch (a transaction marker)
// whole: fn gets its bytes as control (valid only during the call), nil for other batches.
// The replica layer replays markers from it.
func (l *Log) ScanBatchesControl(from int64, fn func(h batch.Header, control []byte) error) error {
	type span struct {
		s          *segment
		start, end int64
	}
	var spans []span
	buf := headerPool.Get().(*headerBuf)
	defer headerPool.Put(buf)

	l.mu.RLock()
	if err := l.usableLocked(); err != nil {
		l.mu.RUnlock()
		return err
	}
	segs := l.mu.segments
	for i := l.floorSegmentLocked(from); i < len(segs); i++ {
		s := segs[i]
		start := int64(0)
		if len(spans) == 0 {
			pos, _, found, err := s.translateOffset(from, 0, s.size, buf)
			if err != nil {
				l.mu.RUnlock()
				for _, sp := range spans {
					sp.s.decRef()
				}
				return err
			}
			if !found {
				continue
			}
			start = pos
		}
		s.incRef()
		spans = append(spans, span{s, start, s.size})
	}
	l.mu.RUnlock()

	defer func() {
		for _, sp := range spans {
			sp.s.decRef()
		}
	}()
	var ctrl []byte
	for _, sp := range spans {
		for pos := sp.start; pos < sp.end; {
			h, err := sp.s.readHeader(pos, buf)
			if err != nil {
				return err
			}
			if h.LastOffset() >= from {
				var control []byte
				if h.IsControl() {
					if cap(ctrl) < h.Size() {
						ctrl = make([]byte, h.Size())
					}
					control = ctrl[:h.Size()]
					if _, err := sp.s.log.ReadAt(control, pos); err != nil {
						return err
					}
				}
				if err := fn(h, control); err != nil {
					return err
				}
			}
			pos += int64(h.Size())
		}
	}
	return nil
}
