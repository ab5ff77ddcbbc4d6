package storage

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gregor-project/gregor/internal/batch"
)

// Loading and recovery, after Kafka's LogLoader.
//
// First a swap of cleaned segments that a crash interrupted is completed or undone
// (completeSwaps; the files and the rule are in cleaner.go), and leftover *.cleaned and
// *.deleted files are removed.
//
// On every Open each segment's indexes are read back, touching nothing past their entries
// (see indexFile), and sanity-checked: the file sizes are whole entries (trailing zero
// entries, as an active or preallocated file leaves them, are dropped), entries strictly
// increase, offset index positions lie inside the .log and the batch at the
// last indexed position has the indexed last offset, and the time index does not reach past
// the segment's end. The batches after the last index entry are then walked by header, which
// gives the segment's next offset and largest timestamp and adds index entries a crash may
// have lost. A segment whose index is missing or fails a check is recovered.
//
// After an unclean stop (no clean-shutdown marker) every segment from the one containing the
// recovery point on is recovered too. Recovering a segment re-reads all its batches: each must
// parse, fit in the file, pass its CRC (batch.CheckCRC) and have offsets above the previous
// batch's; the first batch that does not ends the segment, the file is truncated there, and
// during unclean recovery every later segment is deleted. Both indexes are rebuilt from the
// batches. Each repair is logged. A recovered segment's transaction index (txnindex.go) loses
// the entries at or past its new end; the replica layer adds back what its replay finds.

// load builds the segment list from the files in l.dir. It runs before the Log is shared.
func (l *Log) load(opt OpenOptions) error {
	bases, err := l.listSegments()
	if err != nil {
		return err
	}
	nowMs := l.nowMs()
	recovered, err := l.openSegments(bases, nowMs)
	if err != nil {
		return err
	}
	if len(l.mu.segments) == 0 {
		s, _, err := openSegment(l.fs, l.files, l.dir, max(opt.LogStartOffset, 0), l.mu.cfg, nowMs, l.logger, true)
		if err != nil {
			return err
		}
		l.mu.segments = []*segment{s}
		l.wr.dirDirty = true
	}
	if !opt.Clean {
		if err := l.recoverUnflushed(opt.RecoveryPoint, recovered); err != nil {
			return err
		}
	}
	if err := l.sealInactive(); err != nil {
		return err
	}
	return l.setLoadedOffsets(opt)
}

// listSegments prepares l.dir and returns the base offsets of its segments, sorted: it
// completes or undoes an interrupted swap of cleaned segments, and removes leftover
// *.deleted and *.cleaned files and index files whose .log is gone.
func (l *Log) listSegments() ([]int64, error) {
	if err := l.fs.MkdirAll(l.dir, 0o755); err != nil {
		return nil, err
	}
	ents, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return nil, err
	}
	if changed, err := l.completeSwaps(ents); err != nil {
		return nil, err
	} else if changed {
		if ents, err = l.fs.ReadDir(l.dir); err != nil {
			return nil, err
		}
	}
	var bases []int64
	logs := make(map[int64]bool)
	var indexes []string
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() {
			continue
		}
		path := filepath.Join(l.dir, name)
		switch {
		case strings.HasSuffix(name, deletedSuffix), strings.HasSuffix(name, cleanedSuffix):
			l.logger.Info("removing leftover file", "path", path)
			if err := l.fs.Remove(path); err != nil {
				return nil, err
			}
			l.wr.dirDirty = true
		default:
			if base, ok := parseSegmentName(name, logSuffix); ok {
				bases = append(bases, base)
				logs[base] = true
			} else if _, ok := parseSegmentName(name, indexSuffix); ok {
				indexes = append(indexes, name)
			} else if _, ok := parseSegmentName(name, timeIndexSuffix); ok {
				indexes = append(indexes, name)
			} else if _, ok := parseSegmentName(name, txnIndexSuffix); ok {
				indexes = append(indexes, name)
			}
		}
	}
	if err := l.removeOrphanIndexes(indexes, logs); err != nil {
		return nil, err
	}
	slices.Sort(bases)
	return bases, nil
}

// removeOrphanIndexes removes the index files (names in l.dir) whose segment has no .log
// (logs holds the base offsets of the .log files).
func (l *Log) removeOrphanIndexes(indexes []string, logs map[int64]bool) error {
	for _, name := range indexes {
		var base int64
		for _, suffix := range []string{indexSuffix, timeIndexSuffix, txnIndexSuffix} {
			if b, ok := parseSegmentName(name, suffix); ok {
				base = b
				break
			}
		}
		if !logs[base] {
			path := filepath.Join(l.dir, name)
			l.logger.Warn("removing index file without a .log", "path", path)
			if err := l.fs.Remove(path); err != nil {
				return err
			}
			l.wr.dirDirty = true
		}
	}
	return nil
}

// openSegments opens the segments at bases (sorted) into l.mu.segments, reading back and
// checking each one's indexes; a segment whose index is missing or fails its check is
// recovered. It returns the recovered segments with the bytes each lost.
func (l *Log) openSegments(bases []int64, nowMs int64) (map[*segment]int64, error) {
	cfg := l.mu.cfg
	recovered := make(map[*segment]int64) // segments recovered so far -> bytes cut
	for _, base := range bases {
		s, missing, err := openSegment(l.fs, l.files, l.dir, base, cfg, nowMs, l.logger, false)
		if err != nil {
			return nil, err
		}
		l.mu.segments = append(l.mu.segments, s)
		reason := "index file missing"
		if !missing {
			if reason, err = s.loadIndexes(cfg.IndexIntervalBytes); err != nil {
				return nil, err
			}
		}
		if reason != "" {
			l.logger.Warn("rebuilding segment indexes", "segment", s.logPath(), "reason", reason)
			n, err := l.recoverSegment(s)
			if err != nil {
				return nil, err
			}
			recovered[s] = n
		}
	}
	return recovered, nil
}

// recoverUnflushed is recovery after an unclean stop: every segment from the one holding
// recoveryPoint on is recovered (unless openSegments did already, recovered), and after the
// first one that loses bytes every later segment is deleted.
func (l *Log) recoverUnflushed(recoveryPoint int64, recovered map[*segment]int64) error {
	segs := l.mu.segments
	start := l.floorSegmentLocked(recoveryPoint)
	l.logger.Info("recovering log after an unclean shutdown", "recovery_point", recoveryPoint,
		"segments", len(segs)-start)
	for i := start; i < len(segs); i++ {
		s := segs[i]
		n, done := recovered[s]
		if !done {
			var err error
			if n, err = l.recoverSegment(s); err != nil {
				return err
			}
		}
		if n > 0 && i+1 < len(segs) {
			victims := segs[i+1:]
			l.logger.Warn("deleting segments after a corrupt batch", "segment", s.logPath(), "deleted", len(victims))
			l.mu.segments = segs[: i+1 : i+1]
			for _, v := range victims {
				paths, err := v.renameDeleted()
				if err != nil {
					v.decRef()
					return err
				}
				l.deleteFilesLocked(v, paths)
			}
			break
		}
	}
	return nil
}

// sealInactive seals every segment but the last; indexes rebuilt or extended by the load
// are written and fsynced now, so the recovery point never stands past an index that is not
// durable.
func (l *Log) sealInactive() error {
	segs := l.mu.segments
	for _, s := range segs[:len(segs)-1] {
		if err := s.seal(); err != nil {
			return err
		}
		if err := s.syncFiles(s.logDirty, s.index.dirty, s.timeIndex.dirty); err != nil {
			return err
		}
		s.logDirty, s.index.dirty, s.timeIndex.dirty = false, false, false
	}
	return nil
}

// setLoadedOffsets sets the log end offset, log start offset and recovery point from the
// loaded segments and opt, and publishes them. A log end offset below the log start offset
// (every segment lost) truncates the log fully to start there.
func (l *Log) setLoadedOffsets(opt OpenOptions) error {
	segs := l.mu.segments
	l.mu.logEndOffset = segs[len(segs)-1].nextOffset
	l.mu.logStartOffset = max(opt.LogStartOffset, segs[0].baseOffset)
	if opt.Clean {
		l.mu.recoveryPoint = l.mu.logEndOffset
	} else {
		l.mu.recoveryPoint = min(max(opt.RecoveryPoint, 0), l.mu.logEndOffset)
	}
	if l.mu.logEndOffset < l.mu.logStartOffset {
		l.logger.Warn("log end offset is below the log start offset: deleting all segments",
			"log_end_offset", l.mu.logEndOffset, "log_start_offset", l.mu.logStartOffset)
		return l.truncateFullyLocked(l.mu.logStartOffset)
	}
	l.publishLocked()
	return nil
}

// recoverSegment recovers s and logs what it cut. It returns the bytes truncated.
func (l *Log) recoverSegment(s *segment) (int64, error) {
	n, reason, err := s.recover(l.mu.cfg.IndexIntervalBytes)
	if err != nil {
		return 0, fmt.Errorf("recovering %s: %w", s.logPath(), err)
	}
	if n > 0 {
		l.logger.Warn("truncated corrupt or torn tail of segment", "segment", s.logPath(),
			"valid_bytes", s.size, "truncated_bytes", n, "reason", reason)
	}
	return n, nil
}

// loadIndexes reads the segment's index files back and checks them (see the top of this
// file). It returns why the segment must be recovered, or "".
func (s *segment) loadIndexes(interval int32) (reason string, err error) {
	for _, x := range []*indexFile{&s.index.indexFile, &s.timeIndex.indexFile} {
		if err := x.load(); errors.Is(err, errCorruptIndex) {
			return err.Error(), nil
		} else if err != nil {
			return "", err
		}
	}
	if err := s.index.sanityCheck(s.size); err != nil {
		return err.Error(), nil
	}
	from := int64(0)
	expectLast := int64(-1)
	if s.index.entries() > 0 {
		expectLast, from = s.index.lastEntry()
	}
	s.maxTimestamp, s.offsetOfMaxTimestamp = s.timeIndex.lastEntry()
	s.nextOffset = s.baseOffset
	s.bytesSinceIndexEntry = 0
	added := 0
	t, err := s.scanTail(from, s.size, s.baseOffset-1, func(h *batch.Header, pos int64) error {
		if pos == from && expectLast >= 0 {
			if h.LastOffset() != expectLast {
				return fmt.Errorf("%w: last index entry says offset %d, the batch there ends at %d", errCorruptIndex, expectLast, h.LastOffset())
			}
			s.bytesSinceIndexEntry = int64(h.Size())
			s.nextOffset = h.LastOffset() + 1
			if h.MaxTimestamp > s.maxTimestamp {
				s.maxTimestamp, s.offsetOfMaxTimestamp = h.MaxTimestamp, h.LastOffset()
			}
			return nil
		}
		n := s.index.entries()
		err := s.indexBatch(h, pos, interval)
		added += s.index.entries() - n
		return err
	})
	if errors.Is(err, errCorruptIndex) {
		return err.Error(), nil
	} else if err != nil {
		return "", err
	}
	if t.bad != "" {
		return "log tail: " + t.bad, nil
	}
	if err := s.timeIndex.sanityCheck(s.nextOffset); err != nil {
		return err.Error(), nil
	}
	if added > 0 {
		s.logger.Info("added missing index entries", "segment", s.logPath(), "entries", added)
	}
	return "", nil
}

// recover re-reads every batch of the segment, checking CRCs and offsets, truncates the file
// after the last good batch and rebuilds both indexes. It returns the bytes cut and why.
// Holding Log.writeMu (or before the Log is shared).
func (s *segment) recover(interval int32) (truncated int64, reason string, err error) {
	fi, err := s.log.Stat()
	if err != nil {
		return 0, "", err
	}
	fileSize := fi.Size()
	for _, x := range []*indexFile{&s.index.indexFile, &s.timeIndex.indexFile} {
		if err := x.truncateEntries(0); err != nil {
			return 0, "", err
		}
	}
	s.nextOffset = s.baseOffset
	s.maxTimestamp, s.offsetOfMaxTimestamp = -1, s.baseOffset
	s.bytesSinceIndexEntry = 0
	s.firstBatchTimestamp = -1
	s.sealed = false

	hb := headerPool.Get().(*headerBuf)
	defer headerPool.Put(hb)
	var data []byte
	pos, prevLast := int64(0), s.baseOffset-1
	for pos < fileSize {
		if fileSize-pos < batch.HeaderSize {
			reason = fmt.Sprintf("%d bytes at position %d are too few for a batch", fileSize-pos, pos)
			break
		}
		h, err := s.readHeader(pos, hb)
		if errors.Is(err, ErrCorruptLog) {
			reason = err.Error()
			break
		} else if err != nil {
			return 0, "", err
		}
		size := int64(h.Size())
		if pos+size > fileSize {
			reason = fmt.Sprintf("batch at position %d needs %d bytes, %d remain", pos, size, fileSize-pos)
			break
		}
		if int64(cap(data)) < size {
			data = make([]byte, size)
		}
		b := data[:size]
		if _, err := s.log.ReadAt(b, pos); err != nil {
			return 0, "", err
		}
		if _, err := batch.CheckCRC(b); err != nil {
			reason = fmt.Sprintf("batch at position %d: %v", pos, err)
			break
		}
		if h.BaseOffset <= prevLast || h.LastOffset() < h.BaseOffset || h.LastOffset()-s.baseOffset > math.MaxInt32 {
			reason = fmt.Sprintf("batch at position %d has offsets %d..%d after %d", pos, h.BaseOffset, h.LastOffset(), prevLast)
			break
		}
		if err := s.indexBatch(&h, pos, interval); err != nil {
			return 0, "", err
		}
		prevLast = h.LastOffset()
		pos += size
	}
	s.size = pos
	// The transaction index is not rebuilt here (its entries need the producers' transaction
	// starts: the replica layer re-adds them as it replays the log); entries for markers cut
	// off go.
	if err := s.txn.truncateTo(s.nextOffset); err != nil {
		return 0, "", err
	}
	if truncated = fileSize - pos; truncated > 0 {
		if err := s.log.Truncate(pos); err != nil {
			return 0, "", err
		}
		s.logDirty = true
	}
	if err := s.timeIndex.maybeAppend(s.maxTimestamp, s.offsetOfMaxTimestamp, false); err != nil {
		return 0, "", err
	}
	return truncated, reason, nil
}
