package storage

import (
	"fmt"

	"github.com/gregor-project/gregor/internal/batch"
)

// OffsetForTimestamp answers ListOffsets by time (Kafka's fetchOffsetByTimestamp): the offset
// and timestamp of the first record at or past the log start offset whose timestamp is >= ts.
// The first segment whose largest timestamp reaches ts is searched from its time index's
// guess, batch headers are scanned for the first batch whose maxTimestamp reaches ts, and that
// batch's records are decoded (decompressing) to find the exact record. ok is false when no
// record qualifies.
func (l *Log) OffsetForTimestamp(ts int64) (offset int64, timestamp int64, ok bool, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.usableLocked(); err != nil {
		return -1, -1, false, err
	}
	lso := l.mu.logStartOffset
	buf := headerPool.Get().(*headerBuf)
	defer headerPool.Put(buf)
	var data []byte
	match := func(rts, off int64) bool { return rts >= ts && off >= lso }
	segs := l.mu.segments
	for i := l.floorSegmentLocked(lso); i < len(segs); i++ {
		s := segs[i]
		if s.maxTimestamp < ts {
			continue
		}
		_, pos := s.index.lookup(s.timeIndex.lookup(ts))
		for pos < s.size {
			h, err := s.readHeader(pos, buf)
			if err != nil {
				return -1, -1, false, err
			}
			if h.MaxTimestamp >= ts && h.LastOffset() >= lso {
				off, rts, found, err := s.findRecord(pos, &h, match, &data)
				if err != nil || found {
					return off, rts, found, err
				}
			}
			pos += int64(h.Size())
		}
	}
	return -1, -1, false, nil
}

// MaxTimestamp answers ListOffsets with timestamp -3 (KIP-734): the largest timestamp in the
// log and the offset of the first record carrying it; -1, -1 when no batch has a timestamp.
// Should the batch fail to decode, the offset is the last offset of its batch.
func (l *Log) MaxTimestamp() (ts int64, offset int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.usableLocked() != nil {
		return -1, -1
	}
	var best *segment
	for _, s := range l.mu.segments {
		if s.maxTimestamp >= 0 && (best == nil || s.maxTimestamp > best.maxTimestamp) {
			best = s
		}
	}
	if best == nil {
		return -1, -1
	}
	ts, shallow := best.maxTimestamp, best.offsetOfMaxTimestamp
	buf := headerPool.Get().(*headerBuf)
	defer headerPool.Put(buf)
	pos, h, found, err := best.translateOffset(shallow, 0, best.size, buf)
	if err != nil || !found || h.MaxTimestamp != ts {
		if err != nil {
			l.logger.Warn("finding the record with the largest timestamp", "err", err)
		}
		return ts, shallow
	}
	var data []byte
	off, _, found, err := best.findRecord(pos, &h, func(rts, _ int64) bool { return rts == ts }, &data)
	if err != nil || !found {
		if err != nil {
			l.logger.Warn("finding the record with the largest timestamp", "err", err)
		}
		return ts, shallow
	}
	return ts, off
}

// findRecord returns the offset and timestamp of the first record of the batch h at pos for
// which match holds. Records of a LogAppendTime batch all carry its maxTimestamp. The batch is
// read into *data (grown as needed) and its records walked.
func (s *segment) findRecord(pos int64, h *batch.Header, match func(ts, off int64) bool, data *[]byte) (int64, int64, bool, error) {
	logAppendTime := h.Attributes&batch.AttrLogAppendTime != 0
	if logAppendTime && match(h.MaxTimestamp, h.BaseOffset) {
		return h.BaseOffset, h.MaxTimestamp, true, nil
	}
	n := h.Size()
	if cap(*data) < n {
		*data = make([]byte, n)
	}
	b := (*data)[:n]
	if _, err := s.log.ReadAt(b, pos); err != nil {
		return -1, -1, false, err
	}
	// The records are walked as a stream (keys and values skipped): a compressed batch of any
	// decompressed size is searched in bounded memory.
	foundOff, foundTs, found := int64(-1), int64(-1), false
	err := batch.EachRecord(b, func(tsDelta int64, offDelta int32) bool {
		rts := h.BaseTimestamp + tsDelta
		if logAppendTime {
			rts = h.MaxTimestamp
		}
		if off := h.BaseOffset + int64(offDelta); match(rts, off) {
			foundOff, foundTs, found = off, rts, true
			return false
		}
		return true
	})
	if err != nil {
		return -1, -1, false, fmt.Errorf("%w: %s: batch at position %d: %w", ErrCorruptLog, s.logPath(), pos, err)
	}
	return foundOff, foundTs, found, nil
}
