package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"

	"github.com/gregor-project/gregor/internal/batch"
)

// cleanedSegment writes a new segment's <base>.log.cleaned with its .index.cleaned and
// .timeindex.cleaned (see cleaner.go for the files and the swap). The index entries are made
// as an append makes them (segment.indexBatch), kept in memory and written by finish.
type cleanedSegment struct {
	fs       FS
	base     int64
	prefix   string // dir/<20 digits>
	interval int64
	maxIx    int // most offset index entries (segment.index.bytes)
	maxTx    int // most time index entries

	f    File
	wbuf []byte // batches not yet written; flushed at ioSize
	size int64  // bytes appended, written or not

	ix, tx               []byte       // the index entries
	txn                  []AbortedTxn // the transaction index: the replaced segments' entries whose markers are kept
	srcTxn               int          // how many entries the replaced segments had
	bytesSinceIndexEntry int64
	maxTimestamp         int64
	offsetOfMaxTimestamp int64
}

func (w *cleanedSegment) path(suffix string) string { return w.prefix + suffix + cleanedSuffix }

// createCleaned creates (truncating any leftover) the .log.cleaned file of a new segment at
// base.
func createCleaned(fs FS, dir string, base int64, cfg Config, ioSize int) (*cleanedSegment, error) {
	w := &cleanedSegment{
		fs: fs, base: base, prefix: filepath.Join(dir, segmentName(base)),
		interval:     int64(cfg.IndexIntervalBytes),
		maxIx:        maxEntriesFor(cfg.SegmentIndexBytes, offsetIndexEntrySize),
		maxTx:        maxEntriesFor(cfg.SegmentIndexBytes, timeIndexEntrySize),
		wbuf:         make([]byte, 0, ioSize),
		maxTimestamp: -1, offsetOfMaxTimestamp: base,
	}
	f, err := fs.OpenFile(w.path(logSuffix), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	w.f = f
	return w, nil
}

// append adds one whole batch.
func (w *cleanedSegment) append(b []byte) error {
	h, err := batch.ParseHeader(b)
	if err != nil {
		return err
	}
	pos := w.size
	if pos+int64(len(b)) > math.MaxInt32 || h.LastOffset()-w.base > math.MaxInt32 {
		return fmt.Errorf("%w: cleaned segment %s would not fit a segment", ErrCleaningAborted, w.path(logSuffix))
	}
	if h.MaxTimestamp > w.maxTimestamp {
		w.maxTimestamp, w.offsetOfMaxTimestamp = h.MaxTimestamp, h.LastOffset()
	}
	if w.bytesSinceIndexEntry > w.interval && len(w.ix)/offsetIndexEntrySize < w.maxIx {
		w.addIndexEntry(h.LastOffset(), pos)
		w.addTimeEntry(w.maxTimestamp, w.offsetOfMaxTimestamp, true)
		w.bytesSinceIndexEntry = 0
	}
	w.bytesSinceIndexEntry += int64(len(b))
	if len(w.wbuf)+len(b) > cap(w.wbuf) {
		// The buffer ends at pos: flush it before b counts in w.size.
		if err := w.flushBuf(); err != nil {
			return err
		}
		if len(b) > cap(w.wbuf) {
			if _, err := w.f.WriteAt(b, pos); err != nil {
				return err
			}
			w.size += int64(len(b))
			return nil
		}
	}
	w.wbuf = append(w.wbuf, b...)
	w.size += int64(len(b))
	return nil
}

// flushBuf writes the buffered batches, which end at w.size.
func (w *cleanedSegment) flushBuf() error {
	if len(w.wbuf) == 0 {
		return nil
	}
	if _, err := w.f.WriteAt(w.wbuf, w.size-int64(len(w.wbuf))); err != nil {
		return err
	}
	w.wbuf = w.wbuf[:0]
	return nil
}

// addIndexEntry adds the offset index entry (offset, pos) when it keeps the entries strictly
// increasing (offsetIndex.canAppend).
func (w *cleanedSegment) addIndexEntry(offset, pos int64) {
	if n := len(w.ix); n > 0 {
		lo := int64(binary.BigEndian.Uint32(w.ix[n-8:]))
		lp := int64(binary.BigEndian.Uint32(w.ix[n-4:]))
		if offset-w.base <= lo || pos <= lp {
			return
		}
	}
	w.ix = binary.BigEndian.AppendUint32(w.ix, uint32(offset-w.base))
	w.ix = binary.BigEndian.AppendUint32(w.ix, uint32(pos))
}

// addTimeEntry adds (ts, offset) when ts grows (timeIndex.maybeAppend).
func (w *cleanedSegment) addTimeEntry(ts, offset int64, respectFull bool) {
	if ts < 0 || (respectFull && len(w.tx)/timeIndexEntrySize >= w.maxTx) {
		return
	}
	if n := len(w.tx); n > 0 {
		lt := int64(binary.BigEndian.Uint64(w.tx[n-12:]))
		lo := int64(binary.BigEndian.Uint32(w.tx[n-4:]))
		if ts <= lt || offset-w.base < lo {
			return
		}
	}
	w.tx = binary.BigEndian.AppendUint64(w.tx, uint64(ts))
	w.tx = binary.BigEndian.AppendUint32(w.tx, uint32(offset-w.base))
}

// finish writes the rest of the .log and the two index files (with the final time index
// entry, as sealing adds it) and fsyncs all three. The three fsyncs run at once: each is a
// journal commit of its own when they follow one another, while concurrent ones share one.
func (w *cleanedSegment) finish() error {
	w.addTimeEntry(w.maxTimestamp, w.offsetOfMaxTimestamp, false)
	err := w.flushBuf()
	files := []File{w.f}
	w.f = nil
	for _, x := range []struct {
		suffix string
		data   []byte
	}{{indexSuffix, w.ix}, {timeIndexSuffix, w.tx}} {
		if err != nil {
			break
		}
		var f File
		if f, err = w.fs.OpenFile(w.path(x.suffix), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644); err != nil {
			break
		}
		files = append(files, f)
		_, err = f.WriteAt(x.data, 0)
	}
	if err == nil && w.hasTxnIndex() {
		var f File
		if f, err = writeTxnIndexFile(w.fs, w.path(txnIndexSuffix), w.txn); f != nil {
			files = append(files, f)
		}
	}
	if err == nil {
		errs := make([]error, len(files))
		var wg sync.WaitGroup
		for i, f := range files {
			wg.Go(func() { errs[i] = f.Sync() })
		}
		wg.Wait()
		err = errors.Join(errs...)
	}
	for _, f := range files {
		err = errors.Join(err, f.Close())
	}
	return err
}

// hasTxnIndex reports whether the new segment gets a .txnindex file: when it has entries,
// and also (empty) when the segments it replaces had some, so that the swap replaces theirs
// (see cleaner.go, Files).
func (w *cleanedSegment) hasTxnIndex() bool { return len(w.txn) > 0 || w.srcTxn > 0 }

// remove deletes the .cleaned (and .swap) files of a segment not swapped in.
func (w *cleanedSegment) remove() error {
	var err error
	if w.f != nil {
		err = w.f.Close()
		w.f = nil
	}
	for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix} {
		for _, p := range []string{w.path(suffix), w.prefix + suffix + swapSuffix} {
			if rerr := w.fs.Remove(p); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
				err = errors.Join(err, rerr)
			}
		}
	}
	return err
}

// swapCleaned replaces the segments of g with the new segment w (see cleaner.go, Files). It
// gives up with ErrCleaningAborted when the segments changed since the window was taken.
func (l *Log) swapCleaned(w *cleanedSegment, g []cleanSeg) error {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if err := l.usableLocked(); err != nil {
		return errors.Join(fmt.Errorf("%w: %w", ErrCleaningAborted, err), w.remove())
	}
	at := l.groupIndexLocked(g)
	if at < 0 {
		return errors.Join(fmt.Errorf("%w: the segments from %d changed while they were cleaned", ErrCleaningAborted, g[0].base), w.remove())
	}

	// An aborted transaction re-added to a segment of the group since its entries were
	// taken (a replay after recovery) would be lost: give the group up.
	if n, err := groupTxnEntries(g); err != nil || len(n) != w.srcTxn {
		return errors.Join(fmt.Errorf("%w: the transaction index from %d changed while it was cleaned", ErrCleaningAborted, g[0].base), err, w.remove())
	}
	suffixes := []string{indexSuffix, timeIndexSuffix, logSuffix}
	if w.hasTxnIndex() {
		suffixes = []string{indexSuffix, timeIndexSuffix, txnIndexSuffix, logSuffix}
	}
	// Before the commit point: a failure leaves the log as it was.
	for _, suffix := range suffixes {
		if err := l.fs.Rename(w.path(suffix), w.prefix+suffix+swapSuffix); err != nil {
			return errors.Join(fmt.Errorf("swapping in cleaned segment: %w", err), w.remove())
		}
	}
	// The .log.swap is there: from now on Open completes the swap, so the Log must too, or
	// go offline (and be completed by the next Open).
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.fail(fmt.Errorf("swapping in cleaned segment %s: %w", w.prefix, err))
	}
	old := l.mu.segments[at : at+len(g)]
	renamed := make([][]string, len(old))
	for i, s := range old {
		paths, err := s.renameDeleted()
		renamed[i] = paths
		if err != nil {
			return l.fail(fmt.Errorf("swapping in cleaned segment: %w", err))
		}
	}
	for _, suffix := range suffixes {
		if err := l.fs.Rename(w.prefix+suffix+swapSuffix, w.prefix+suffix); err != nil {
			return l.fail(fmt.Errorf("swapping in cleaned segment: %w", err))
		}
	}
	l.wr.dirDirty = true
	s, missing, err := openSegment(l.fs, l.files, l.dir, w.base, l.mu.cfg, l.nowMs(), l.logger, false)
	if err != nil {
		return l.fail(fmt.Errorf("opening cleaned segment: %w", err))
	}
	reason := "index file missing"
	if !missing {
		if reason, err = s.loadIndexes(l.mu.cfg.IndexIntervalBytes); err != nil {
			s.decRef()
			return l.fail(fmt.Errorf("opening cleaned segment: %w", err))
		}
	}
	if reason != "" { // never, unless the disk changed under us
		l.logger.Warn("rebuilding cleaned segment indexes", "segment", s.logPath(), "reason", reason)
		if _, err := l.recoverSegment(s); err != nil {
			s.decRef()
			return l.fail(err)
		}
	}

	l.mu.Lock()
	if err := s.seal(); err != nil {
		l.mu.Unlock()
		s.decRef()
		return l.fail(fmt.Errorf("sealing cleaned segment: %w", err))
	}
	segs := make([]*segment, 0, len(l.mu.segments)-len(g)+1)
	segs = append(segs, l.mu.segments[:at]...)
	segs = append(segs, s)
	segs = append(segs, l.mu.segments[at+len(g):]...)
	old = append([]*segment(nil), old...)
	l.mu.segments = segs
	l.publishLocked()
	l.mu.Unlock()
	for i, o := range old {
		l.deleteFilesLocked(o, renamed[i])
	}
	l.logger.Info("swapped in cleaned segment", "base_offset", w.base, "replaced", len(g), "bytes", w.size)
	return nil
}

// groupTxnEntries is the transaction index entries of the segments of g, in order.
func groupTxnEntries(g []cleanSeg) ([]AbortedTxn, error) {
	var out []AbortedTxn
	for _, cs := range g {
		es, err := cs.s.txn.all()
		if err != nil {
			return nil, err
		}
		out = append(out, es...)
	}
	return out, nil
}

// groupIndexLocked returns where the segments of g still lie in the log, unchanged (sealed,
// the same size), or -1. Holding writeMu.
func (l *Log) groupIndexLocked(g []cleanSeg) int {
	segs := l.mu.segments
	at := -1
	for i, s := range segs {
		if s == g[0].s {
			at = i
			break
		}
	}
	// The segment after the group must still follow it, so that the group is not the
	// active segment's predecessors cut by a truncation.
	if at < 0 || at+len(g) >= len(segs) {
		return -1
	}
	for i, cs := range g {
		s := segs[at+i]
		if s != cs.s || !s.sealed || s.size != cs.size {
			return -1
		}
	}
	return at
}

// completeSwaps finishes or undoes the swaps a crash interrupted (see cleaner.go, Files),
// before the segments are loaded. It reports whether it changed the directory.
func (l *Log) completeSwaps(ents []os.DirEntry) (bool, error) {
	swapLogs := make(map[int64]bool)
	swapTxn := make(map[int64]string) // base -> its .txnindex.swap
	var swapIndexes []string
	bases := make(map[int64][]string) // base offset -> segment files (not .swap)
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() {
			continue
		}
		if stem, ok := cutSuffix(name, swapSuffix); ok {
			if base, ok := parseSegmentName(stem, logSuffix); ok {
				swapLogs[base] = true
			} else if base, ok := parseSegmentName(stem, txnIndexSuffix); ok {
				swapTxn[base] = name
			} else {
				swapIndexes = append(swapIndexes, name)
			}
			continue
		}
		for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix} {
			if base, ok := parseSegmentName(name, suffix); ok {
				bases[base] = append(bases[base], name)
			}
		}
	}
	if len(swapLogs) == 0 && len(swapIndexes) == 0 && len(swapTxn) == 0 {
		return false, nil
	}
	// A .txnindex.swap cannot be rebuilt from its .log (the replica layer only re-adds
	// entries past its snapshot): it is kept when its swap is committed, and removed with an
	// uncommitted swap like the other index files.
	for base, name := range swapTxn {
		if !swapLogs[base] {
			swapIndexes = append(swapIndexes, name)
		}
	}
	for _, name := range swapIndexes {
		path := filepath.Join(l.dir, name)
		l.logger.Info("removing index file of an interrupted swap", "path", path)
		if err := l.fs.Remove(path); err != nil {
			return true, err
		}
	}
	for base := range swapLogs {
		swapPath := filepath.Join(l.dir, segmentName(base)+logSuffix+swapSuffix)
		next, err := scanNextOffset(l.fs, swapPath, base)
		if err != nil {
			return true, fmt.Errorf("completing the swap of %s: %w", swapPath, err)
		}
		removed := 0
		for b, names := range bases {
			if b < base || b >= next {
				continue
			}
			for _, name := range names {
				if _, hasSwap := swapTxn[base]; b == base && !hasSwap && name == segmentName(base)+txnIndexSuffix {
					// The new segment's, renamed already (old files were renamed to
					// .deleted before): the new segment has a .txnindex, empty or not,
					// whenever the old ones had entries, so an old <base>.txnindex would
					// have had a .txnindex.swap beside it.
					continue
				}
				if err := l.fs.Remove(filepath.Join(l.dir, name)); err != nil {
					return true, err
				}
				removed++
			}
		}
		if name, ok := swapTxn[base]; ok {
			if err := l.fs.Rename(filepath.Join(l.dir, name), filepath.Join(l.dir, segmentName(base)+txnIndexSuffix)); err != nil {
				return true, err
			}
		}
		if err := l.fs.Rename(swapPath, filepath.Join(l.dir, segmentName(base)+logSuffix)); err != nil {
			return true, err
		}
		l.logger.Warn("completed an interrupted swap of a cleaned segment", "segment", swapPath,
			"next_offset", next, "files_replaced", removed)
	}
	return true, l.fs.SyncDir(l.dir)
}

// cutSuffix is strings.CutSuffix.
func cutSuffix(s, suffix string) (string, bool) {
	if len(s) < len(suffix) || s[len(s)-len(suffix):] != suffix {
		return s, false
	}
	return s[:len(s)-len(suffix)], true
}

// scanNextOffset returns the offset after the last whole, CRC-valid batch of the .log file at
// path (base when it has none).
func scanNextOffset(fs FS, path string, base int64) (next int64, err error) {
	f, err := fs.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return 0, err
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	next = base
	var hb [batch.HeaderSize]byte
	var data []byte
	for pos := int64(0); pos+batch.HeaderSize <= fi.Size(); {
		if _, err := f.ReadAt(hb[:], pos); err != nil {
			return 0, err
		}
		h, err := batch.ParseHeader(hb[:])
		if err != nil || pos+int64(h.Size()) > fi.Size() {
			break
		}
		if cap(data) < h.Size() {
			data = make([]byte, h.Size())
		}
		b := data[:h.Size()]
		if _, err := f.ReadAt(b, pos); err != nil {
			return 0, err
		}
		if _, err := batch.CheckCRC(b); err != nil || h.LastOffset() < next {
			break
		}
		next = h.LastOffset() + 1
		pos += int64(h.Size())
	}
	return next, nil
}
