package storage

import (
	"errors"
	"fmt"
	"os"
)

// Retention deletes whole segments from the front of the log, as Kafka's UnifiedLog does:
//   - retention.ms: a segment whose largest timestamp (file mtime when it has none) is more
//     than retention.ms before now;
//   - retention.bytes: the oldest segments while the log stays at least retention.bytes
//     without them;
//   - the log start offset: a segment whose successor starts at or below it.
//
// Deletion stops at the first segment that does not qualify, never deletes a segment holding
// offsets at or past the high watermark, and never the empty active segment. When every
// segment qualifies the active one is rolled first, so the log end offset survives in a new
// empty segment. The log start offset then moves up to the first remaining segment.

// DeleteExpired applies retention at nowMs and removes *.deleted files whose delay has
// passed. It returns how many segments it deleted.
func (l *Log) DeleteExpired(nowMs int64) (int, error) {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if err := l.usableLocked(); err != nil {
		return 0, err
	}
	l.removeDueFilesLocked(nowMs)
	cfg := l.mu.cfg
	total := 0

	if cfg.RetentionMs >= 0 {
		n, err := l.deletableLocked(func(s, _ *segment) (bool, error) {
			ts, err := s.largestTimestamp()
			return nowMs-ts > cfg.RetentionMs, err
		})
		if err == nil {
			n, err = l.deleteOldestLocked(n, "retention.ms")
		}
		total += n
		if err != nil {
			return total, err
		}
	}

	if cfg.RetentionBytes >= 0 {
		diff := l.sizeLocked() - cfg.RetentionBytes
		if diff > 0 {
			n, err := l.deletableLocked(func(s, _ *segment) (bool, error) {
				if diff-s.size >= 0 {
					diff -= s.size
					return true, nil
				}
				return false, nil
			})
			if err == nil {
				n, err = l.deleteOldestLocked(n, "retention.bytes")
			}
			total += n
			if err != nil {
				return total, err
			}
		}
	}

	n, err := l.deleteBelowStartLocked()
	return total + n, err
}

// deleteBelowStartLocked deletes the segments wholly below the log start offset. Holding
// writeMu.
func (l *Log) deleteBelowStartLocked() (int, error) {
	n, err := l.deletableLocked(func(_, next *segment) (bool, error) {
		return next != nil && next.baseOffset <= l.mu.logStartOffset, nil
	})
	if err != nil {
		return 0, err
	}
	return l.deleteOldestLocked(n, "log start offset")
}

// SetLogStartOffset moves the log start offset up to off (DeleteRecords) and deletes the
// segments wholly below it. off must not pass the high watermark (ErrOffsetOutOfRange); an off
// at or below the current log start offset changes nothing.
func (l *Log) SetLogStartOffset(off int64) error {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if err := l.usableLocked(); err != nil {
		return err
	}
	if hw := l.highWatermarkLocked(); off > hw {
		return fmt.Errorf("%w: log start offset %d is past the high watermark %d", ErrOffsetOutOfRange, off, hw)
	}
	if off <= l.mu.logStartOffset {
		return nil
	}
	l.mu.Lock()
	l.mu.logStartOffset = off
	l.mu.recoveryPoint = max(l.mu.recoveryPoint, off)
	l.publishLocked()
	l.mu.Unlock()
	_, err := l.deleteBelowStartLocked()
	return err
}

// deletableLocked counts the segments from the front that pred accepts and that may be
// deleted at all. Holding writeMu.
func (l *Log) deletableLocked(pred func(s, next *segment) (bool, error)) (int, error) {
	hw := l.highWatermarkLocked()
	segs := l.mu.segments
	n := 0
	for i, s := range segs {
		var next *segment
		upper := l.mu.logEndOffset
		if i+1 < len(segs) {
			next = segs[i+1]
			upper = next.baseOffset
		}
		if next == nil && s.size == 0 {
			break
		}
		if upper > hw {
			break
		}
		ok, err := pred(s, next)
		if err != nil {
			return 0, err
		}
		if !ok {
			break
		}
		n++
	}
	return n, nil
}

// deleteOldestLocked deletes the first n segments, rolling first if that is all of them, and
// moves the log start offset to the new first segment. Holding writeMu.
func (l *Log) deleteOldestLocked(n int, reason string) (int, error) {
	if n == 0 {
		return 0, nil
	}
	if n == len(l.mu.segments) {
		if err := l.rollLocked(l.mu.logEndOffset); err != nil {
			return 0, err
		}
	}
	victims := append([]*segment(nil), l.mu.segments[:n]...)
	renamed := make([][]string, len(victims))
	for i, s := range victims {
		paths, err := s.renameDeleted()
		renamed[i] = paths
		if err != nil {
			return 0, l.fail(fmt.Errorf("deleting segment %s: %w", s.logPath(), err))
		}
	}
	l.mu.Lock()
	l.mu.segments = append([]*segment(nil), l.mu.segments[n:]...)
	l.mu.logStartOffset = max(l.mu.logStartOffset, l.mu.segments[0].baseOffset)
	l.mu.recoveryPoint = max(l.mu.recoveryPoint, l.mu.logStartOffset)
	lso := l.mu.logStartOffset
	l.publishLocked()
	l.mu.Unlock()
	for i, s := range victims {
		l.deleteFilesLocked(s, renamed[i])
	}
	l.logger.Info("deleted segments", "reason", reason, "segments", n,
		"first_base_offset", victims[0].baseOffset, "log_start_offset", lso)
	return n, nil
}

// deleteFilesLocked finishes deleting a segment that has left the log and whose files were
// renamed to paths: they are removed now, or after file.delete.delay.ms, and the log's
// reference is dropped (the descriptors close once no Slice uses them). Holding writeMu.
func (l *Log) deleteFilesLocked(s *segment, paths []string) {
	s.keepForReaders()
	l.wr.dirDirty = true
	if delay := l.mu.cfg.FileDeleteDelayMs; delay > 0 {
		l.wr.pendingDeletes = append(l.wr.pendingDeletes, pendingDelete{paths: paths, dueMs: l.nowMs() + delay})
	} else {
		l.removeFiles(paths)
	}
	s.decRef()
}

// removeDueFilesLocked removes the *.deleted files whose delay has passed. Holding writeMu.
func (l *Log) removeDueFilesLocked(nowMs int64) {
	keep := l.wr.pendingDeletes[:0]
	for _, pd := range l.wr.pendingDeletes {
		if pd.dueMs <= nowMs {
			l.removeFiles(pd.paths)
		} else {
			keep = append(keep, pd)
		}
	}
	clear(l.wr.pendingDeletes[len(keep):])
	l.wr.pendingDeletes = keep
}

// removeFiles removes files, logging failures: a leftover *.deleted file is removed by the
// next Open, so it is not worth taking the log offline for.
func (l *Log) removeFiles(paths []string) {
	for _, p := range paths {
		if err := l.fs.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			l.logger.Warn("removing deleted segment file", "path", p, "err", err)
		}
	}
	l.wr.dirDirty = true
}
