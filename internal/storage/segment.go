package storage

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gregor-project/gregor/internal/batch"
)

// File name suffixes, as Kafka names them.
const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	deletedSuffix   = ".deleted" // a segment file removed from the log, waiting for file.delete.delay.ms
	cleanedSuffix   = ".cleaned" // Kafka's log cleaner output; never complete after a restart
	swapSuffix      = ".swap"
)

// segmentName is the 20-digit zero-padded base offset every segment file is named by.
func segmentName(base int64) string { return fmt.Sprintf("%020d", base) }

// parseSegmentName returns the base offset of a file named <20 digits><suffix>.
func parseSegmentName(name, suffix string) (int64, bool) {
	stem, ok := strings.CutSuffix(name, suffix)
	if !ok || len(stem) != 20 {
		return 0, false
	}
	base, err := strconv.ParseInt(stem, 10, 64)
	if err != nil || base < 0 {
		return 0, false
	}
	return base, true
}

// segment is one .log file with its .index and .timeindex: the batches whose offsets are in
// [baseOffset, the next segment's baseOffset).
//
// The .log file is record batches back to back, exactly as on the wire, offsets assigned.
// Invariants of [0, size): whole batches; base offsets >= baseOffset and strictly above the
// previous batch's last offset; last offsets - baseOffset fit in an int32; size fits in an
// int32. Bytes past size (a write in progress, or a torn write before the log went offline)
// are never read.
type segment struct {
	baseOffset int64
	prefix     string // dir/<20 digits>; the files are prefix+suffix
	fs         FS
	logger     *slog.Logger
	log        *segmentFile // opened on demand through the Log's FileCache
	index      offsetIndex
	timeIndex  timeIndex
	txn        txnIndex // the .txnindex, read on demand (txnindex.go)

	// refs counts the Log's reference (dropped when the segment leaves the Log), one per
	// unreleased Slice and one per flush or scan in progress. The files close at zero, so a
	// Slice on a segment deleted by retention stays readable until it is released.
	refs atomic.Int32

	// Guarded by the owning Log: changed holding Log.writeMu and Log.mu, read holding either.
	size                 int64 // committed bytes
	nextOffset           int64 // last offset of the last batch + 1; baseOffset when empty
	maxTimestamp         int64 // largest batch maxTimestamp; -1 when none
	offsetOfMaxTimestamp int64 // last offset of the first batch with maxTimestamp
	bytesSinceIndexEntry int64
	sealed               bool // no longer the active segment: indexes written, final time entry added

	// Guarded by Log.writeMu alone.
	firstBatchTimestamp int64 // maxTimestamp of the first batch (Kafka's rollingBasedTimestamp); -1 none, -2 not loaded
	created             int64 // ms; when this process created or opened the segment
	logDirty            bool  // .log written or truncated since its last fsync
}

func (s *segment) logPath() string       { return s.prefix + logSuffix }
func (s *segment) indexPath() string     { return s.prefix + indexSuffix }
func (s *segment) timeIndexPath() string { return s.prefix + timeIndexSuffix }
func (s *segment) txnIndexPath() string  { return s.prefix + txnIndexSuffix }

// openSegment opens the files of the segment at base in dir, creating missing ones.
// indexMissing reports that the .index or .timeindex did not exist. create requires the .log
// to be new or empty (a roll).
func openSegment(fs FS, files *FileCache, dir string, base int64, cfg Config, nowMs int64, logger *slog.Logger, create bool) (s *segment, indexMissing bool, err error) {
	s = &segment{
		baseOffset:           base,
		prefix:               filepath.Join(dir, segmentName(base)),
		fs:                   fs,
		logger:               logger,
		nextOffset:           base,
		maxTimestamp:         -1,
		offsetOfMaxTimestamp: base,
		firstBatchTimestamp:  -2,
		created:              nowMs,
	}
	s.txn.init(fs, s.prefix)
	if create {
		s.firstBatchTimestamp = -1
	}
	var closers []io.Closer
	defer func() {
		if err != nil {
			for _, f := range closers {
				err = errors.Join(err, f.Close())
			}
		}
	}()
	// An existing .log is only stat'ed: it is opened when first read or written (most
	// segments of a broker are idle). A new one is created open, as the active segment.
	s.log = newSegmentFile(fs, files, s.logPath(), logger)
	if create {
		if err = s.log.create(); err != nil {
			return nil, false, err
		}
	}
	closers = append(closers, s.log)
	fi, err := s.log.Stat()
	if err != nil {
		return nil, false, err
	}
	if create && fi.Size() != 0 {
		return nil, false, fmt.Errorf("storage: new segment %s already exists with %d bytes", s.logPath(), fi.Size())
	}
	if fi.Size() > math.MaxInt32 {
		return nil, false, fmt.Errorf("%w: %s is %d bytes, more than a segment can hold", ErrCorruptLog, s.logPath(), fi.Size())
	}
	s.size = fi.Size()
	for _, p := range []string{s.indexPath(), s.timeIndexPath()} {
		if _, err := fs.Stat(p); errors.Is(err, os.ErrNotExist) {
			indexMissing = true
		} else if err != nil {
			return nil, false, err
		}
	}
	ix, err := openIndexFile(fs, s.indexPath(), offsetIndexEntrySize, cfg.SegmentIndexBytes)
	if err != nil {
		return nil, false, err
	}
	s.index = offsetIndex{indexFile: *ix, baseOffset: base}
	closers = append(closers, closerFunc(s.index.close))
	tx, err := openIndexFile(fs, s.timeIndexPath(), timeIndexEntrySize, cfg.SegmentIndexBytes)
	if err != nil {
		return nil, false, err
	}
	s.timeIndex = timeIndex{indexFile: *tx, baseOffset: base}
	closers = append(closers, closerFunc(s.timeIndex.close))
	if create {
		for _, x := range []*indexFile{&s.index.indexFile, &s.timeIndex.indexFile} {
			if err := x.truncateEntries(0); err != nil {
				return nil, false, err
			}
		}
	}
	s.refs.Store(1)
	return s, indexMissing, nil
}

// closerFunc is a func as an io.Closer.
type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// headerBuf is scratch space for one batch header; pooled so reads do not allocate.
type headerBuf [batch.HeaderSize]byte

var headerPool = sync.Pool{New: func() any { return new(headerBuf) }}

// readHeader reads and parses the batch header at pos.
func (s *segment) readHeader(pos int64, buf *headerBuf) (batch.Header, error) {
	if _, err := s.log.ReadAt(buf[:], pos); err != nil {
		if errors.Is(err, io.EOF) {
			return batch.Header{}, fmt.Errorf("%w: %s: batch header at %d runs past the end of the file", ErrCorruptLog, s.logPath(), pos)
		}
		return batch.Header{}, err
	}
	h, err := batch.ParseHeader(buf[:])
	if err != nil {
		return h, fmt.Errorf("%w: %s at position %d: %w", ErrCorruptLog, s.logPath(), pos, err)
	}
	return h, nil
}

// translateOffset finds the first batch in [from, limit) whose last offset is >= target,
// starting from the offset index. found is false when there is none.
func (s *segment) translateOffset(target, from, limit int64, buf *headerBuf) (pos int64, h batch.Header, found bool, err error) {
	_, pos = s.index.lookup(target)
	pos = max(pos, from)
	for pos < limit {
		if h, err = s.readHeader(pos, buf); err != nil {
			return 0, h, false, err
		}
		if h.LastOffset() >= target {
			return pos, h, true, nil
		}
		pos += int64(h.Size())
	}
	return pos, batch.Header{}, false, nil
}

// tailInfo is what a header scan learns about a run of batches.
type tailInfo struct {
	end                  int64 // position after the last whole batch seen
	lastOffset           int64 // last offset of that batch; -1 when none
	maxTimestamp         int64
	offsetOfMaxTimestamp int64
	bad                  string // why the scan stopped before limit, "" if it did not
}

// scanTail reads the headers of the batches in [from, limit), without checking CRCs, calling
// each (when not nil) for every one. It stops at a header that does not parse, a batch that
// does not end by limit or offsets that go backwards, and says so in bad.
func (s *segment) scanTail(from, limit, prevLast int64, each func(h *batch.Header, pos int64) error) (tailInfo, error) {
	buf := headerPool.Get().(*headerBuf)
	defer headerPool.Put(buf)
	t := tailInfo{end: from, lastOffset: -1, maxTimestamp: -1, offsetOfMaxTimestamp: -1}
	for t.end < limit {
		if limit-t.end < batch.HeaderSize {
			t.bad = fmt.Sprintf("%d bytes at position %d are too few for a batch header", limit-t.end, t.end)
			return t, nil
		}
		h, err := s.readHeader(t.end, buf)
		if errors.Is(err, ErrCorruptLog) {
			t.bad = err.Error()
			return t, nil
		} else if err != nil {
			return t, err
		}
		if t.end+int64(h.Size()) > limit {
			t.bad = fmt.Sprintf("batch at position %d (%d bytes) runs past the end at %d", t.end, h.Size(), limit)
			return t, nil
		}
		if h.BaseOffset < s.baseOffset || h.BaseOffset <= prevLast || h.LastOffset() < h.BaseOffset || h.LastOffset()-s.baseOffset > math.MaxInt32 {
			t.bad = fmt.Sprintf("batch at position %d has offsets %d..%d after %d in a segment based at %d", t.end, h.BaseOffset, h.LastOffset(), prevLast, s.baseOffset)
			return t, nil
		}
		if h.MaxTimestamp > t.maxTimestamp {
			t.maxTimestamp, t.offsetOfMaxTimestamp = h.MaxTimestamp, h.LastOffset()
		}
		if each != nil {
			if err := each(&h, t.end); err != nil {
				return t, err
			}
		}
		prevLast = h.LastOffset()
		t.lastOffset = prevLast
		t.end += int64(h.Size())
	}
	return t, nil
}

// loadFirstBatchTimestamp fills firstBatchTimestamp from the first batch on disk. Holding
// Log.writeMu.
func (s *segment) loadFirstBatchTimestamp() error {
	if s.firstBatchTimestamp != -2 {
		return nil
	}
	if s.size == 0 {
		s.firstBatchTimestamp = -1
		return nil
	}
	buf := headerPool.Get().(*headerBuf)
	defer headerPool.Put(buf)
	h, err := s.readHeader(0, buf)
	if err != nil {
		return err
	}
	s.firstBatchTimestamp = h.MaxTimestamp
	return nil
}

// timeWaitedForRoll is Kafka's: the time since the first batch's timestamp measured by the
// timestamp of what is being appended (nowOrTs), or, when no batch has a timestamp, the wall
// time since the segment was created. Holding Log.writeMu.
func (s *segment) timeWaitedForRoll(nowMs, messageTs int64) (int64, error) {
	if err := s.loadFirstBatchTimestamp(); err != nil {
		return 0, err
	}
	if s.firstBatchTimestamp >= 0 {
		return messageTs - s.firstBatchTimestamp, nil
	}
	return nowMs - s.created, nil
}

// indexBatch updates the in-memory state for the whole batch h just committed at pos: the
// largest timestamp and, every index.interval.bytes, an offset and time index entry. Holding
// Log.writeMu and Log.mu.
func (s *segment) indexBatch(h *batch.Header, pos int64, interval int32) error {
	if pos == 0 {
		s.firstBatchTimestamp = h.MaxTimestamp
	}
	if h.MaxTimestamp > s.maxTimestamp {
		s.maxTimestamp, s.offsetOfMaxTimestamp = h.MaxTimestamp, h.LastOffset()
	}
	if s.bytesSinceIndexEntry > int64(interval) && !s.index.isFull() && s.index.canAppend(h.LastOffset(), pos) {
		// Index entries are sparse: one the process has no descriptor for (an index
		// growing past its mapping opens its file) is left out, the next batch tries again,
		// and the log stays online; a lookup only scans a little further.
		err := s.index.append(h.LastOffset(), pos)
		if err == nil {
			err = s.timeIndex.maybeAppend(s.maxTimestamp, s.offsetOfMaxTimestamp, true)
		}
		switch {
		case err == nil:
			s.bytesSinceIndexEntry = 0
		case outOfFiles(err):
			s.logger.Warn("index entry left out: no file descriptor", "segment", s.logPath(), "err", err)
		default:
			return err
		}
	}
	s.bytesSinceIndexEntry += int64(h.Size())
	s.nextOffset = h.LastOffset() + 1
	return nil
}

// seal makes the segment inactive: the final time index entry, index tails written, files
// trimmed, entries mmapped. Holding Log.writeMu and Log.mu.
func (s *segment) seal() error {
	if err := s.timeIndex.maybeAppend(s.maxTimestamp, s.offsetOfMaxTimestamp, false); err != nil {
		return err
	}
	if err := s.index.seal(); err != nil {
		return err
	}
	if err := s.timeIndex.seal(); err != nil {
		return err
	}
	s.sealed = true
	return nil
}

// largestTimestamp is what retention.ms is measured against: the largest batch timestamp, or
// the file's modification time when no batch has one.
func (s *segment) largestTimestamp() (int64, error) {
	if s.maxTimestamp >= 0 {
		return s.maxTimestamp, nil
	}
	fi, err := s.log.Stat()
	if err != nil {
		return 0, err
	}
	return fi.ModTime().UnixMilli(), nil
}

// truncateTo removes every batch whose last offset is >= offset from the segment, in memory
// and in the indexes, and returns the new size; the caller truncates the .log file after
// publishing it. Holding Log.writeMu and Log.mu.
func (s *segment) truncateTo(offset int64) (int64, error) {
	buf := headerPool.Get().(*headerBuf)
	defer headerPool.Put(buf)
	pos, h, found, err := s.translateOffset(offset, 0, s.size, buf)
	if err != nil || !found {
		return s.size, err
	}
	if err := s.index.truncateToPosition(pos); err != nil {
		return 0, err
	}
	if err := s.timeIndex.truncateToOffset(h.BaseOffset); err != nil {
		return 0, err
	}
	if err := s.txn.truncateTo(h.BaseOffset); err != nil {
		return 0, err
	}
	s.size = pos
	s.sealed = false
	s.logDirty = true
	// Recompute what the removed batches may have changed: the time index holds the largest
	// timestamp up to its last offset index entry; the batches after it are scanned.
	_, from := s.index.lastEntry()
	t, err := s.scanTail(from, pos, s.baseOffset-1, nil)
	if err != nil {
		return 0, err
	}
	if t.bad != "" {
		return 0, fmt.Errorf("%w: %s: %s", ErrCorruptLog, s.logPath(), t.bad)
	}
	s.maxTimestamp, s.offsetOfMaxTimestamp = s.timeIndex.lastEntry()
	if t.maxTimestamp > s.maxTimestamp {
		s.maxTimestamp, s.offsetOfMaxTimestamp = t.maxTimestamp, t.offsetOfMaxTimestamp
	}
	s.nextOffset = s.baseOffset
	if t.lastOffset >= 0 { // pos > 0 means the scan saw at least the batch at from
		s.nextOffset = t.lastOffset + 1
	}
	s.bytesSinceIndexEntry = pos - from
	if pos == 0 {
		s.firstBatchTimestamp = -1
	}
	return pos, nil
}

// syncFiles fsyncs the named files of the segment. Holding Log.writeMu (or before the Log is
// shared), with the segment in the Log; the caller reads and clears the dirty flags.
func (s *segment) syncFiles(log, index, timeIndex bool) error {
	p, err := s.prepareSync(log, index, timeIndex)
	if err != nil {
		return err
	}
	return p.run(true)
}

// pendingSync is the files of a segment to fsync, opened.
type pendingSync struct {
	files []File
	done  []func() error // after the fsync: close a file opened for it, or drop the .log's pin
	txn   *txnIndex      // its dirty flag was cleared for this sync: set again if it fails
}

// prepareSync opens what the fsyncs of the named files need: an index file mapped without a
// descriptor is opened by path, which must be done holding Log.writeMu with the segment in
// the Log (see indexFile). The fsyncs (run) may then go without any lock, holding a
// reference. The .txnindex is synced along whenever it changed since its last sync.
func (s *segment) prepareSync(log, index, timeIndex bool) (pendingSync, error) {
	var p pendingSync
	tf, err := s.txn.syncFile()
	if err != nil {
		return pendingSync{}, err
	}
	if tf != nil {
		p.files, p.done = append(p.files, tf), append(p.done, tf.Close)
		p.txn = &s.txn
	}
	if log {
		f, err := s.log.acquire()
		if err != nil {
			return pendingSync{}, errors.Join(err, p.run(false))
		}
		p.files, p.done = append(p.files, f), append(p.done, func() error { s.log.release(); return nil })
	}
	for _, c := range []struct {
		sync bool
		x    *indexFile
	}{{index, &s.index.indexFile}, {timeIndex, &s.timeIndex.indexFile}} {
		if !c.sync {
			continue
		}
		f, owned, err := c.x.syncFile()
		if err != nil {
			return pendingSync{}, errors.Join(err, p.run(false))
		}
		done := func() error { return nil }
		if owned {
			done = f.Close
		}
		p.files, p.done = append(p.files, f), append(p.done, done)
	}
	return p, nil
}

// run fsyncs the files in order (stopping at the first error) when sync is true, and closes
// those opened for the fsync either way.
func (p pendingSync) run(sync bool) error {
	var err error
	synced := sync
	for i, f := range p.files {
		if sync && err == nil {
			err = f.Sync()
		}
		synced = synced && err == nil
		err = errors.Join(err, p.done[i]())
	}
	if !synced && p.txn != nil {
		p.txn.restoreDirty()
	}
	return err
}

// keepForReaders pins the .log open for the readers still holding the segment once it has
// left the Log (they hold references), because its renamed file may then be removed from the
// directory and could not be opened again. Called before the files are removed, with the
// segment out of the Log, so no new reference can appear. Failing that (no descriptor left),
// such a late reader fails instead of the deletion.
func (s *segment) keepForReaders() {
	if s.refs.Load() <= 1 {
		return // only the Log's reference, which the caller drops next
	}
	if err := s.log.keep(); err != nil {
		s.logger.Warn("a deleted segment's file could not stay open for its readers", "segment", s.log.Name(), "err", err)
	}
}

// incRef takes a reference for a Slice, flush or scan.
func (s *segment) incRef() { s.refs.Add(1) }

// decRef drops a reference; the last one closes the files.
func (s *segment) decRef() {
	if s.refs.Add(-1) != 0 {
		return
	}
	err := errors.Join(s.log.Close(), s.index.close(), s.timeIndex.close())
	if err != nil {
		s.logger.Error("closing segment files", "segment", s.logPath(), "err", err)
	}
}

// renameDeleted renames the segment's files to <name>.deleted, freeing their names; the open
// .log descriptor and the index mappings keep working (the indexes hold no descriptor and are
// never opened by path again: the segment leaves the Log). It returns the new paths.
func (s *segment) renameDeleted() ([]string, error) {
	var paths []string
	for _, p := range []string{s.logPath(), s.indexPath(), s.timeIndexPath(), s.txnIndexPath()} {
		if err := s.fs.Rename(p, p+deletedSuffix); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return paths, err
		}
		if p == s.logPath() {
			s.log.renamed(p + deletedSuffix)
		}
		paths = append(paths, p+deletedSuffix)
	}
	return paths, nil
}
