package storage

import (
	"fmt"
)

// TruncateTo removes every batch whose last offset is >= offset (a follower diverging from
// its leader): later segments are deleted and the segment holding offset is cut at the start
// of the batch containing it, which becomes the active segment. The log end offset becomes
// the next offset after what remains (offset itself when offset is a batch boundary, as the
// replication protocol guarantees). Nothing happens when offset >= the log end offset; an
// offset below the first segment truncates fully and starts there.
func (l *Log) TruncateTo(offset int64) error {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if err := l.usableLocked(); err != nil {
		return err
	}
	if offset < 0 {
		return fmt.Errorf("%w: truncate to %d", ErrOffsetOutOfRange, offset)
	}
	if offset >= l.mu.logEndOffset {
		return nil
	}
	if offset < l.mu.segments[0].baseOffset {
		return l.truncateFullyLocked(offset)
	}
	i := l.floorSegmentLocked(offset) // kept, even if it becomes empty
	victims := append([]*segment(nil), l.mu.segments[i+1:]...)
	renamed := make([][]string, len(victims))
	for k, s := range victims {
		paths, err := s.renameDeleted()
		renamed[k] = paths
		if err != nil {
			return l.fail(fmt.Errorf("truncate: %w", err))
		}
	}
	seg := l.mu.segments[i]

	l.mu.Lock()
	l.mu.segments = l.mu.segments[: i+1 : i+1]
	newSize, err := seg.truncateTo(offset)
	if err != nil {
		l.mu.Unlock()
		return l.fail(fmt.Errorf("truncate %s: %w", seg.logPath(), err))
	}
	seg.sealed = false // the active segment again
	l.mu.logEndOffset = seg.nextOffset
	l.mu.recoveryPoint = min(l.mu.recoveryPoint, l.mu.logEndOffset)
	l.mu.logStartOffset = min(l.mu.logStartOffset, l.mu.logEndOffset)
	l.mu.truncations++
	leo := l.mu.logEndOffset
	l.publishLocked()
	l.mu.Unlock()

	for k, s := range victims {
		l.deleteFilesLocked(s, renamed[k])
	}
	if err := seg.log.Truncate(newSize); err != nil {
		return l.fail(fmt.Errorf("truncate %s: %w", seg.logPath(), err))
	}
	l.logger.Info("truncated log", "to_offset", offset, "log_end_offset", leo, "segments_deleted", len(victims))
	return nil
}

// TruncateFullyAndStartAt deletes every segment and starts an empty log at offset: the log
// start, end and recovery point all become offset.
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if err := l.usableLocked(); err != nil {
		return err
	}
	if offset < 0 {
		return fmt.Errorf("%w: start at %d", ErrOffsetOutOfRange, offset)
	}
	return l.truncateFullyLocked(offset)
}

func (l *Log) truncateFullyLocked(offset int64) error {
	victims := append([]*segment(nil), l.mu.segments...)
	renamed := make([][]string, len(victims))
	for k, s := range victims {
		paths, err := s.renameDeleted()
		renamed[k] = paths
		if err != nil {
			return l.fail(fmt.Errorf("truncate fully: %w", err))
		}
	}
	s, _, err := openSegment(l.fs, l.files, l.dir, offset, l.mu.cfg, l.nowMs(), l.logger, true)
	if err != nil {
		return l.fail(fmt.Errorf("truncate fully: %w", err))
	}
	l.mu.Lock()
	l.mu.segments = []*segment{s}
	l.mu.logStartOffset, l.mu.logEndOffset, l.mu.recoveryPoint = offset, offset, offset
	l.mu.truncations++
	l.publishLocked()
	l.mu.Unlock()
	for k, v := range victims {
		l.deleteFilesLocked(v, renamed[k])
	}
	l.logger.Info("truncated log fully", "start_offset", offset, "segments_deleted", len(victims))
	return nil
}
