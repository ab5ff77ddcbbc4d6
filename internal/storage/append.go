package storage

import (
	"fmt"
	"math"

	"github.com/gregor-project/gregor/internal/batch"
)

// AppendOptions says how Append treats the batches.
type AppendOptions struct {
	// AssignOffsets (the leader) rewrites each batch's baseOffset in place, starting at the log
	// end offset, and stamps LeaderEpoch as its partitionLeaderEpoch. Without it (a follower)
	// the batches keep their offsets, which must start at or past the log end offset and
	// increase.
	AssignOffsets bool
	// LogAppendTimeMs > 0 stamps every batch with LogAppendTime = LogAppendTimeMs (rewriting
	// its attributes, maxTimestamp and CRC in place). 0 or negative keeps the batches'
	// timestamps. (0 is not a time any broker stamps, so the zero value is the safe default.)
	LogAppendTimeMs int64
	// LeaderEpoch is stamped when AssignOffsets.
	LeaderEpoch int32
}

// AppendInfo describes an append.
type AppendInfo struct {
	FirstOffset          int64 // base offset of the first batch
	LastOffset           int64 // last offset of the last batch
	MaxTimestamp         int64 // largest batch maxTimestamp; -1 when none
	OffsetOfMaxTimestamp int64 // last offset of the first batch with MaxTimestamp (Kafka's shallow offset); -1 when none
	LogAppendTime        int64 // the stamped time; -1 unless stamped
	Records              int64 // sum of the batches' record counts
	Bytes                int
}

// appendedBatch is one batch of an append: its header and position in the append buffer.
type appendedBatch struct {
	h   batch.Header
	off int64
}

// Append writes batches — one or more concatenated, already validated v2 record batches — to
// the end of the log with one write, rolling a new segment first when the active one is full
// or old. With opt.AssignOffsets it patches offsets (and leader epoch, and LogAppendTime when
// asked) into the caller's buffer. Once flush.messages messages are unflushed it also flushes.
//
// A failed write takes the log offline: the error wraps ErrLogOffline and the cause, and no
// byte of the failed append is ever read. If only the flush that follows a successful append
// fails, the AppendInfo is returned with the error.
func (l *Log) Append(batches []byte, opt AppendOptions) (AppendInfo, error) {
	l.writeMu.Lock()
	info, flush, err := l.appendLocked(batches, opt)
	l.writeMu.Unlock()
	if err == nil && flush {
		err = l.Flush()
	}
	return info, err
}

func (l *Log) appendLocked(b []byte, opt AppendOptions) (info AppendInfo, flush bool, err error) {
	if err := l.usableLocked(); err != nil {
		return info, false, err
	}
	cfg := l.mu.cfg
	info = AppendInfo{FirstOffset: -1, LastOffset: -1, MaxTimestamp: -1, OffsetOfMaxTimestamp: -1, LogAppendTime: -1, Bytes: len(b)}
	if len(b) == 0 {
		return info, false, nil
	}

	// Walk the batches, assigning or checking offsets.
	var small [8]appendedBatch
	bs := small[:0]
	next := l.mu.logEndOffset
	for off := 0; off < len(b); {
		h, err := batch.ParseHeader(b[off:])
		if err != nil {
			return info, false, fmt.Errorf("%w: batch %d at byte %d: %w", ErrInvalidBatch, len(bs), off, err)
		}
		size := h.Size()
		if size > len(b)-off {
			return info, false, fmt.Errorf("%w: batch %d at byte %d declares %d bytes, %d remain", ErrInvalidBatch, len(bs), off, size, len(b)-off)
		}
		if int64(size) > cfg.SegmentBytes {
			return info, false, fmt.Errorf("%w: %d bytes, segment.bytes is %d", ErrRecordBatchTooLarge, size, cfg.SegmentBytes)
		}
		if h.LastOffsetDelta < 0 {
			return info, false, fmt.Errorf("%w: batch %d has lastOffsetDelta %d", ErrInvalidBatch, len(bs), h.LastOffsetDelta)
		}
		one := b[off : off+size]
		if opt.AssignOffsets {
			batch.SetBaseOffset(one, next)
			batch.SetPartitionLeaderEpoch(one, opt.LeaderEpoch)
			h.BaseOffset, h.PartitionLeaderEpoch = next, opt.LeaderEpoch
		} else if h.BaseOffset < next {
			return info, false, fmt.Errorf("%w: batch %d starts at offset %d, expected at least %d", ErrOffsetOutOfOrder, len(bs), h.BaseOffset, next)
		}
		if h.LastOffset() < h.BaseOffset || h.LastOffset() == math.MaxInt64 {
			return info, false, fmt.Errorf("%w: batch %d has offsets %d + %d, past the largest offset", ErrOffsetOutOfOrder, len(bs), h.BaseOffset, h.LastOffsetDelta)
		}
		if opt.LogAppendTimeMs > 0 {
			batch.SetLogAppendTime(one, opt.LogAppendTimeMs)
			h.MaxTimestamp = opt.LogAppendTimeMs
			h.Attributes |= batch.AttrLogAppendTime
			info.LogAppendTime = opt.LogAppendTimeMs
		}
		if h.MaxTimestamp > info.MaxTimestamp {
			info.MaxTimestamp, info.OffsetOfMaxTimestamp = h.MaxTimestamp, h.LastOffset()
		}
		info.Records += int64(h.RecordCount)
		bs = append(bs, appendedBatch{h: h, off: int64(off)})
		next = h.LastOffset() + 1
		off += size
	}
	info.FirstOffset, info.LastOffset = bs[0].h.BaseOffset, next-1

	// Roll if needed.
	if err := l.maybeRollLocked(int64(len(b)), info.FirstOffset, info.LastOffset, info.MaxTimestamp); err != nil {
		return info, false, err
	}
	seg := l.activeLocked()
	if info.LastOffset-seg.baseOffset > math.MaxInt32 {
		return info, false, fmt.Errorf("%w: offsets %d..%d do not fit one segment", ErrOffsetOutOfOrder, info.FirstOffset, info.LastOffset)
	}
	if seg.size+int64(len(b)) > math.MaxInt32 {
		return info, false, fmt.Errorf("%w: %d bytes do not fit one segment", ErrRecordBatchTooLarge, len(b))
	}

	// One write, past the committed end: readers do not look there.
	// Not getting a descriptor (ErrTooManyOpenFiles) wrote nothing: the log stays online.
	pos := seg.size
	f, err := seg.log.acquire()
	if err != nil {
		return info, false, fmt.Errorf("append to %s: %w", seg.logPath(), err)
	}
	n, err := f.WriteAt(b, pos)
	if err != nil || n != len(b) {
		if err == nil {
			err = fmt.Errorf("short write: %d of %d bytes", n, len(b))
		}
		// Best effort: drop the torn bytes now, so even a later clean-looking open does not
		// find them. Recovery cuts them anyway.
		if terr := f.Truncate(pos); terr != nil {
			l.logger.Warn("could not cut a failed write", "segment", seg.logPath(), "err", terr)
		}
		seg.log.release()
		return info, false, l.fail(fmt.Errorf("append to %s at %d: %w", seg.logPath(), pos, err))
	}
	seg.log.release()
	seg.logDirty = true

	// Publish.
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range bs {
		if err := seg.indexBatch(&bs[i].h, pos+bs[i].off, cfg.IndexIntervalBytes); err != nil {
			return info, false, l.failLocked(fmt.Errorf("index append to %s: %w", seg.logPath(), err))
		}
	}
	seg.size = pos + int64(len(b))
	l.mu.logEndOffset = next
	l.publishLocked()
	return info, l.mu.logEndOffset-l.mu.recoveryPoint >= cfg.FlushIntervalMessages, nil
}

// maybeRollLocked rolls a new active segment when an append of size bytes with offsets
// [first, last] and largest timestamp maxTs should not go into the current one (Kafka's
// shouldRoll): it would grow past segment.bytes, the segment has waited segment.ms, an index is
// full, or the offsets do not fit relative to the base offset. Holding writeMu.
func (l *Log) maybeRollLocked(size, first, last, maxTs int64) error {
	seg := l.activeLocked()
	cfg := l.mu.cfg
	nowMs := l.nowMs()
	roll := last-seg.baseOffset > math.MaxInt32
	if seg.size > 0 && !roll {
		waited, err := seg.timeWaitedForRoll(nowMs, maxTs)
		if err != nil {
			return err
		}
		roll = seg.size > cfg.SegmentBytes-size || waited > cfg.SegmentMs ||
			seg.index.isFull() || seg.timeIndex.isFull()
	}
	if !roll {
		return nil
	}
	return l.rollLocked(max(first, l.mu.logEndOffset))
}

// rollLocked seals the active segment and starts a new one at base (an empty active segment
// is replaced instead). Holding writeMu.
func (l *Log) rollLocked(base int64) error {
	old := l.activeLocked()
	if old.size == 0 && old.baseOffset == base {
		return nil
	}
	var replaced []*segment
	if old.size == 0 {
		// An empty active segment at the wrong base: free its name and replace it.
		replaced = append(replaced, old)
	}
	cfg := l.mu.cfg
	var deleted []string
	if len(replaced) > 0 {
		paths, err := old.renameDeleted()
		deleted = paths
		if err != nil {
			return l.fail(fmt.Errorf("roll: %w", err))
		}
	}
	s, _, err := openSegment(l.fs, l.files, l.dir, base, cfg, l.nowMs(), l.logger, true)
	if err != nil {
		if len(replaced) == 0 && outOfFiles(err) {
			// Nothing has changed yet (the new .log, if created, is empty, which the next
			// roll accepts): the append is refused and the log stays online.
			return fmt.Errorf("roll: %w", err)
		}
		return l.fail(fmt.Errorf("roll: %w", err))
	}
	l.wr.dirDirty = true
	l.mu.Lock()
	if len(replaced) == 0 {
		if err := old.seal(); err != nil {
			l.mu.Unlock()
			s.decRef()
			return l.fail(fmt.Errorf("roll: sealing %s: %w", old.logPath(), err))
		}
		l.mu.segments = append(l.mu.segments, s)
		// The sealed indexes are not fsynced yet. The recovery point may already stand at the
		// log end offset (a flush just before this roll); keep it at the old segment's base
		// until a flush syncs them, so that a crash rebuilds them instead of trusting them.
		if old.index.dirty || old.timeIndex.dirty {
			l.mu.recoveryPoint = min(l.mu.recoveryPoint, old.baseOffset)
		}
	} else {
		l.mu.segments[len(l.mu.segments)-1] = s
	}
	l.mu.Unlock()
	l.logger.Debug("rolled segment", "base_offset", base)
	for _, r := range replaced {
		l.deleteFilesLocked(r, deleted)
	}
	return nil
}

// MaybeRoll rolls the active segment when it is non-empty and segment.ms has passed since its
// first batch's timestamp (or since it was created, when it has none), so that time-based
// retention can delete it even if nothing more is appended.
func (l *Log) MaybeRoll(nowMs int64) error {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if err := l.usableLocked(); err != nil {
		return err
	}
	seg := l.activeLocked()
	if seg.size == 0 {
		return nil
	}
	waited, err := seg.timeWaitedForRoll(nowMs, nowMs)
	if err != nil {
		return err
	}
	if waited <= l.mu.cfg.SegmentMs {
		return nil
	}
	return l.rollLocked(l.mu.logEndOffset)
}
