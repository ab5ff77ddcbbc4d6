package storage

import (
	"errors"
	"fmt"
	"math"

	"github.com/gregor-project/gregor/internal/batch"
)

// Log compaction, after Kafka's Cleaner (one pass of LogCleaner's work on one log). The
// caller (a cleaner thread: not in this package) picks the log and its cleaning window (see
// dirtiness.go), owns an OffsetMap and keeps each log's first dirty offset in
// cleaner-offset-checkpoint; Clean does one pass:
//
//  1. The window. The dirty part starts at CleanOptions.FirstDirtyOffset (below the log start
//     offset or past the log end offset: the log start offset, as Kafka resets it) and ends
//     at the first uncleanable offset: the caller's bound (the min.compaction.lag.ms
//     segment), the active segment's base offset, the high watermark and the last stable
//     offset the replica layer published (Log.SetLastStableOffset), whichever is lowest, rounded down to a segment boundary (the segment holding
//     it is not cleaned). Only sealed segments are ever read or replaced.
//  2. The map. The keyed records of the dirty part, in offset order, go into the OffsetMap
//     (key → its last offset), but for those of aborted transactions (cleanertxn.go). When a new key finds the map full, mapping stops before that
//     record: the map then covers the dirty part up to LatestOffset, and the pass cleans only
//     up to there, so the next pass (starting at CleanResult.EndOffset) takes the rest: a
//     log with more distinct keys than fit is cleaned in several passes, never with more
//     memory.
//  3. The rewrite. Every segment from the first up to the one holding LatestOffset is
//     rewritten, the clean part too (its keys may have newer values in the dirty part). A
//     record is kept when its offset is past LatestOffset, or it is the last of its key (its
//     offset is at least the map's) and either has a value or is a tombstone whose batch's
//     delete horizon has not passed. Records without a key are dropped (a compacted topic
//     refuses them; Kafka drops those it finds). The records of aborted transactions are
//     dropped, and a marker (a control batch) is kept until its transaction's batches are
//     gone and the delete horizon stamped on it then has passed (cleanertxn.go). Offsets
//     never change: compaction leaves gaps.
//  4. Batches (as Kafka's MemoryRecords.filterTo). A batch keeping all its records, and not
//     needing a delete horizon, is copied byte for byte. Otherwise it is rebuilt with the
//     records kept, the same base offset and last offset delta (so the last sequence of an
//     idempotent producer survives), producer id, epoch, base sequence, partition leader
//     epoch, attributes and codec (recompressed), a fresh CRC, and maxTimestamp recomputed
//     from the records kept (a LogAppendTime batch keeps its own). A batch left with no
//     record is dropped, except that it is kept empty (header only, no records) when it is
//     the last batch of a producer in CleanOptions.ActiveProducers (its sequence and epoch
//     fence the producer) or the last batch of its group (so the cleaned segment ends at the
//     offset the segments it replaces ended at; recovery relies on it, below).
//  5. Tombstones (KIP-534, Kafka 3.1 and later, the only way in Kafka 4): the first pass that
//     keeps a tombstone stamps its batch with a delete horizon, now + delete.retention.ms:
//     attribute bit 6 (batch.AttrDeleteHorizon) set and baseTimestamp = the horizon, the
//     records' timestamp deltas rewritten so their timestamps do not change. A later pass
//     after the horizon drops the tombstone. A stamped batch keeps its horizon.
//  6. Groups (Kafka's groupSegmentsBySize). Consecutive segments are cleaned into one new
//     segment while their sizes add up to at most segment.bytes, their offset and time
//     index entries each to at most segment.index.bytes, and their offsets stay within an
//     int32 of the first base offset. The new segment has the group's first base offset.
//  7. The swap, one group at a time and in order (as Kafka's replaceSegments), described
//     with the files below. A group's finishing and swap (fsyncs, renames) run on a goroutine
//     of their own while the next group is rewritten; at most one is in flight, and the next
//     swap starts only once it is done (cleanGroups). A group whose segments changed meanwhile (retention, truncation, Close) is
//     given up: ErrCleaningAborted, its files removed, and the segments swapped before it
//     stay.
//
// Files. The new segment is written as <base>.log.cleaned, <base>.index.cleaned and
// <base>.timeindex.cleaned (the indexes built as the batches are written, with the rules of
// an append: see segment.indexBatch), and <base>.txnindex.cleaned holding the entries of
// the replaced segments' transaction indexes whose ABORT markers are kept (written, empty
// if need be, whenever the replaced segments had entries), all fsynced. Then,
// holding writeMu: the index files are renamed to .swap, then the .log; that rename, once the directory is fsynced, is the
// commit point. Then the old segments' files are renamed to .deleted (removed after
// file.delete.delay.ms, as retention's), the three .swap files renamed to their final names,
// and the new segment replaces the old ones in the Log. Open (recovery.go) undoes an
// uncommitted swap and completes a committed one:
//   - every *.cleaned file is removed, as is every .swap index file whose .log.swap is
//     missing (a swap not committed, or one whose final renames had begun);
//   - a <base>.log.swap holds the new segment, which ends at the offset the old ones ended
//     at (step 4): every segment whose base offset lies in [base, its next offset) is removed,
//     its .swap indexes too (they are rebuilt from the .log like any missing index), and the
//     .log.swap is renamed to <base>.log. The transaction index cannot be rebuilt from the
//     .log: a <base>.txnindex.swap is renamed to <base>.txnindex, and without one a
//     <base>.txnindex is the new segment's, already renamed, and stays.
//
// So after a crash at any step the log holds either the old segments or the new one, never
// both and never neither.
//
// Invariants: the active segment, and every segment from the first uncleanable offset on,
// are never read nor replaced; a batch's offsets, producer fields and leader epoch never
// change; the log start offset, the log end offset and the recovery point do not move (the
// new segment is fsynced before it enters the Log).
//
// Locking. cleanMu serializes Clean on a log (lock order: cleanMu, then flushMu, writeMu,
// mu). The window is read holding mu.RLock, with a reference taken on each segment so that
// its files stay open whatever happens to it; the map and the new files are built holding no
// lock (appends, reads and flushes go on; the swap goroutine touches only its own group's
// files and the Log, never the cleaning's reader or counters); each swap holds writeMu, and mu (write) to change
// the segment list. Readers holding a Slice of a replaced segment read on from its .deleted
// file (segment.keepForReaders).

// CleanOptions are the inputs of one cleaning pass.
type CleanOptions struct {
	// FirstDirtyOffset is where the previous pass stopped (from cleaner-offset-checkpoint);
	// below the log start offset or past the log end offset: the log start offset.
	FirstDirtyOffset int64
	// FirstUncleanableOffset is the caller's upper bound (exclusive): the last stable
	// offset, the first segment younger than min.compaction.lag.ms. Clean also stops at the
	// active segment and the high watermark. 0 or less: no bound of the caller's.
	FirstUncleanableOffset int64
	// NowMs is the time the pass runs at: delete horizons are measured against it.
	NowMs int64
	// DeleteRetentionMs is delete.retention.ms: how long a tombstone stays after the first
	// pass that kept it.
	DeleteRetentionMs int64
	// ActiveProducers maps each producer whose state must survive to the last offset of its
	// last data batch (Kafka's lastRecordsOfActiveProducers); that batch is kept, empty if
	// need be.
	ActiveProducers map[int64]int64
	// IOBufferSize is the size of the read and of the write buffer (log.cleaner.io.buffer.size
	// halved, as Kafka splits it); 0: 256 KiB. A batch larger than it is read whole anyway.
	IOBufferSize int
	// Throttle, when set, is told the bytes of every read and write the pass makes (the
	// caller's log.cleaner.io.max.bytes.per.second), and may wait. An error from it (the
	// cleaner shutting down) ends the pass at once: the group being written is discarded, the
	// groups swapped before it stay, and Clean returns the error.
	Throttle func(bytes int) error
}

// CleanResult describes a pass.
type CleanResult struct {
	FirstDirtyOffset int64 // where the dirty part began
	EndOffset        int64 // the first offset not cleaned: the next pass's FirstDirtyOffset
	MapFull          bool  // the map filled: the dirty part was cleaned only up to EndOffset

	SegmentsCleaned  int // old segments replaced
	SegmentsWritten  int // new segments swapped in
	BatchesRead      int64
	RecordsRead      int64
	RecordsRetained  int64
	BytesRead        int64
	BytesWritten     int64
	TombstonesPurged int64 // tombstones dropped because their horizon had passed
	AbortedPurged    int64 // records of aborted transactions dropped
	MarkersPurged    int64 // transaction markers dropped because their horizon had passed
	// DeleteHorizonMs is the latest delete horizon of the tombstones and markers the pass
	// kept (0: none): a pass at or after it drops them even if nothing is dirty.
	DeleteHorizonMs int64
}

const defaultCleanerIOBuffer = 256 << 10

// cleanSeg is a segment as the window saw it.
type cleanSeg struct {
	s          *segment
	base       int64
	nextBase   int64 // the next segment's base offset
	size       int64
	indexBytes int64
	timeBytes  int64
}

// cleaning is the state of one pass.
type cleaning struct {
	l      *Log
	m      *OffsetMap
	opt    CleanOptions
	cfg    Config
	segs   []cleanSeg // the sealed segments below the first uncleanable offset
	res    CleanResult
	rd     batchReader
	txn    *txnTracker    // the transactions of the rewrite (cleanertxn.go)
	recs   []batch.Record // the records of the batch being mapped or filtered, reused
	hashes []keyHash      // their keys' hashes (OffsetMap: Speed), reused
	kept   []batch.Record
	deltas []int64
}

// Clean runs one cleaning pass over the log with m (see the top of this file). It returns
// what it did; on an error the segments already swapped stay swapped, and
// CleanResult.EndOffset is where the next pass should start (the FirstDirtyOffset given).
// An I/O error after a swap's commit point takes the log offline; one before it leaves the
// log as it was.
func (l *Log) Clean(m *OffsetMap, opt CleanOptions) (CleanResult, error) {
	l.cleanMu.Lock()
	defer l.cleanMu.Unlock()
	if opt.IOBufferSize <= 0 {
		opt.IOBufferSize = defaultCleanerIOBuffer
	}
	c := &cleaning{l: l, m: m, opt: opt}
	firstDirty, upper, err := c.window()
	defer func() {
		for _, cs := range c.segs {
			cs.s.decRef()
		}
	}()
	c.res.FirstDirtyOffset, c.res.EndOffset = firstDirty, firstDirty
	if err != nil || len(c.segs) == 0 {
		return c.res, err
	}
	c.rd.ioSize, c.rd.throttle = opt.IOBufferSize, opt.Throttle
	mapTxns, err := l.AbortedTxns(firstDirty, upper)
	if err != nil {
		return c.res, err
	}
	if err := c.buildOffsetMap(firstDirty, upper, newTxnTracker(mapTxns)); err != nil {
		return c.res, err
	}
	txns, err := l.AbortedTxns(c.segs[0].base, upper)
	if err != nil {
		return c.res, err
	}
	c.txn = newTxnTracker(txns)
	end := m.LatestOffset() + 1
	var todo []cleanSeg
	for _, cs := range c.segs {
		if cs.base < end {
			todo = append(todo, cs)
		}
	}
	if len(todo) == 0 {
		return c.res, nil
	}
	if err := c.cleanGroups(groupSegments(todo, c.cfg.SegmentBytes, int64(c.cfg.SegmentIndexBytes), upper)); err != nil {
		return c.res, err
	}
	c.res.EndOffset = end
	return c.res, nil
}

// window takes references on the sealed segments below the first uncleanable offset and
// returns the first dirty offset and that (segment-aligned) offset.
func (c *cleaning) window() (firstDirty, upper int64, err error) {
	l := c.l
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.usableLocked(); err != nil {
		return 0, 0, err
	}
	c.cfg = l.mu.cfg
	segs := l.mu.segments
	bound := min(segs[len(segs)-1].baseOffset, l.cleanableEndLocked())
	if c.opt.FirstUncleanableOffset > 0 {
		bound = min(bound, c.opt.FirstUncleanableOffset)
	}
	firstDirty = c.opt.FirstDirtyOffset
	if firstDirty < l.mu.logStartOffset || firstDirty > l.mu.logEndOffset {
		firstDirty = l.mu.logStartOffset
	}
	upper = segs[0].baseOffset
	for i := 0; i+1 < len(segs) && segs[i+1].baseOffset <= bound; i++ {
		s := segs[i]
		s.incRef()
		c.segs = append(c.segs, cleanSeg{s: s, base: s.baseOffset, nextBase: segs[i+1].baseOffset, size: s.size,
			indexBytes: int64(s.index.entries() * offsetIndexEntrySize), timeBytes: int64(s.timeIndex.entries() * timeIndexEntrySize)})
		upper = segs[i+1].baseOffset
	}
	return firstDirty, upper, nil
}

// buildOffsetMap maps the keyed records of the dirty part [firstDirty, upper) (Kafka's
// buildOffsetMap), but for those of aborted transactions (tm follows them). The map covers
// at least up to firstDirty-1 (nothing there is dirty): a pass with no dirty part still
// rewrites the clean part, dropping the tombstones and markers whose horizon has passed.
func (c *cleaning) buildOffsetMap(firstDirty, upper int64, tm *txnTracker) error {
	m := c.m
	m.clear()
	m.setLatest(firstDirty - 1)
	for _, cs := range c.segs {
		if cs.nextBase <= firstDirty || cs.base >= upper {
			continue
		}
		buf := headerPool.Get().(*headerBuf)
		pos, _, found, err := cs.s.translateOffset(firstDirty, 0, cs.size, buf)
		headerPool.Put(buf)
		if err != nil {
			return err
		}
		if found {
			c.rd.reset(cs.s, pos, cs.size)
			for {
				b, h, _, ok, err := c.rd.next()
				if err != nil {
					return err
				}
				if !ok {
					break
				}
				if h.LastOffset() < firstDirty || (!h.IsControl() && tm.onData(&h)) {
					m.setLatest(h.LastOffset())
					continue
				}
				recs, err := batch.AppendRecords(c.recs[:0], b)
				c.recs = recs[:0]
				if err != nil {
					return fmt.Errorf("%w: %s: batch at offset %d: %w", ErrCorruptLog, cs.s.logPath(), h.BaseOffset, err)
				}
				if h.IsControl() {
					tm.onControl(&h, recs)
					m.setLatest(h.LastOffset())
					continue
				}
				hs := c.hashKeys(recs, h.BaseOffset, firstDirty, math.MaxInt64)
				for i := range recs {
					off := h.BaseOffset + int64(recs[i].OffsetDelta)
					if off < firstDirty || recs[i].Key == nil {
						continue
					}
					if !m.putHash(hs[i], off) {
						m.setLatest(off - 1)
						c.res.MapFull = true
						return nil
					}
				}
				m.setLatest(h.LastOffset())
			}
		}
		// Offsets between the segment's last batch and the next segment hold nothing.
		m.setLatest(cs.nextBase - 1)
	}
	return nil
}

// groupSegments splits segs into runs to clean into one segment each (Kafka's
// groupSegmentsBySize): at most maxSize bytes of log and maxIndexSize bytes of each index a
// run, and offsets within an int32 of the run's base offset (the last segment's offsets
// reach up to upper-1). Every run has at least one segment.
func groupSegments(segs []cleanSeg, maxSize, maxIndexSize, upper int64) [][]cleanSeg {
	var groups [][]cleanSeg
	for len(segs) > 0 {
		g := segs[:1]
		size, ix, tx := segs[0].size, segs[0].indexBytes, segs[0].timeBytes
		segs = segs[1:]
		for len(segs) > 0 {
			n := segs[0]
			last := n.nextBase - 1
			if len(segs) == 1 {
				last = upper - 1
			}
			if size+n.size > maxSize || ix+n.indexBytes > maxIndexSize || tx+n.timeBytes > maxIndexSize ||
				(n.size > 0 && last-g[0].base > math.MaxInt32) {
				break
			}
			size, ix, tx = size+n.size, ix+n.indexBytes, tx+n.timeBytes
			g = g[:len(g)+1]
			segs = segs[1:]
		}
		groups = append(groups, g)
	}
	return groups
}

// cleanGroups cleans each group into one new segment and swaps it in, in order. While a
// group's new segment is finished and swapped in (file creations, fsyncs, renames: mostly
// waiting for the disk), the next group is rewritten on the calling goroutine; at most one
// swap is in flight, and a group is swapped in only after the one before it. So the log goes
// through the same states as with one group after another: on an error the groups swapped
// before stay swapped, the group being written is discarded, and every error met is
// returned.
func (c *cleaning) cleanGroups(groups [][]cleanSeg) error {
	type swapped struct {
		w   *cleanedSegment
		n   int // segments replaced
		err error
	}
	var inflight chan swapped
	wait := func() error {
		if inflight == nil {
			return nil
		}
		r := <-inflight
		inflight = nil
		if r.err == nil && r.w != nil {
			c.res.SegmentsCleaned += r.n
			c.res.SegmentsWritten++
			c.res.BytesWritten += r.w.size
		}
		return r.err
	}
	for _, g := range groups {
		w, err := c.writeGroup(g)
		if serr := wait(); serr != nil || err != nil {
			if err == nil && w != nil {
				err = w.remove()
			}
			return errors.Join(serr, err)
		}
		if w == nil {
			continue
		}
		inflight = make(chan swapped, 1)
		go func(ch chan<- swapped) { ch <- swapped{w, len(g), c.swapGroup(w, g)} }(inflight)
	}
	return wait()
}

// cleanGroup cleans the segments of g into one new segment and swaps it in.
func (c *cleaning) cleanGroup(g []cleanSeg) error {
	w, err := c.writeGroup(g)
	if err != nil || w == nil {
		return err
	}
	if err := c.swapGroup(w, g); err != nil {
		return err
	}
	c.res.SegmentsCleaned += len(g)
	c.res.SegmentsWritten++
	c.res.BytesWritten += w.size
	return nil
}

// writeGroup writes the new segment of g's batches, filtered, to its .cleaned file; nil when
// g holds nothing to rewrite. On an error its files are removed.
func (c *cleaning) writeGroup(g []cleanSeg) (*cleanedSegment, error) {
	lastNonEmpty := -1
	for i, cs := range g {
		if cs.size > 0 {
			lastNonEmpty = i
		}
	}
	if lastNonEmpty < 0 {
		return nil, nil // nothing to rewrite
	}
	w, err := createCleaned(c.l.fs, c.l.dir, g[0].base, c.cfg, c.opt.IOBufferSize)
	if err != nil {
		return nil, err
	}
	old, err := groupTxnEntries(g)
	if err != nil {
		return nil, errors.Join(err, w.remove())
	}
	if err := c.rewrite(g, lastNonEmpty, w); err != nil {
		return nil, errors.Join(err, w.remove())
	}
	w.txn, w.srcTxn = c.txn.keptEntries(old), len(old)
	return w, nil
}

// swapGroup finishes w (the rest of its writes, its indexes, the fsyncs) and swaps it in for
// the segments of g. It touches neither c.res nor the reader, so that it may run while the
// next group is written.
func (c *cleaning) swapGroup(w *cleanedSegment, g []cleanSeg) error {
	if err := w.finish(); err != nil {
		return errors.Join(err, w.remove())
	}
	return c.l.swapCleaned(w, g)
}

// rewrite writes the batches of g, filtered, to w.
func (c *cleaning) rewrite(g []cleanSeg, lastNonEmpty int, w *cleanedSegment) error {
	for i, cs := range g[:lastNonEmpty+1] {
		c.rd.reset(cs.s, 0, cs.size)
		for {
			b, h, pos, ok, err := c.rd.next()
			if err != nil {
				return err
			}
			if !ok {
				break
			}
			if _, err := batch.CheckCRC(b); err != nil {
				return fmt.Errorf("%w: %s at position %d: %w", ErrCorruptLog, cs.s.logPath(), pos, err)
			}
			c.res.BatchesRead++
			c.res.BytesRead += int64(len(b))
			last := i == lastNonEmpty && pos+int64(len(b)) == cs.size
			out, err := c.filterBatch(b, &h, last)
			if err != nil {
				return fmt.Errorf("%s: batch at offset %d: %w", cs.s.logPath(), h.BaseOffset, err)
			}
			if out != nil {
				if err := w.append(out); err != nil {
					return err
				}
				if c.opt.Throttle != nil {
					if err := c.opt.Throttle(len(out)); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// filterBatch returns what is left of batch b (header h): b itself, a rebuilt batch, an
// empty one, or nil when nothing is kept (see the top of this file, steps 3 to 5).
func (c *cleaning) filterBatch(b []byte, h *batch.Header, lastOfGroup bool) ([]byte, error) {
	if h.IsControl() {
		return c.filterControl(b, h, lastOfGroup)
	}
	if c.txn.onData(h) {
		// Aborted: every record goes, the batch too unless kept empty below.
		c.res.RecordsRead += int64(h.RecordCount)
		c.res.AbortedPurged += int64(h.RecordCount)
		return c.emptyOrNil(h, lastOfGroup)
	}
	recs, err := batch.AppendRecords(c.recs[:0], b)
	c.recs = recs[:0]
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorruptLog, err)
	}
	c.res.RecordsRead += int64(len(recs))
	horizon, hasHorizon := h.DeleteHorizonMs()
	kept := c.kept[:0]
	tombstones := false
	hs := c.hashKeys(recs, h.BaseOffset, math.MinInt64, c.m.LatestOffset())
	for i := range recs {
		r := &recs[i]
		off := h.BaseOffset + int64(r.OffsetDelta)
		keep := off > c.m.LatestOffset()
		if !keep && r.Key != nil && off >= c.m.getHash(hs[i]) {
			keep = r.Value != nil || !hasHorizon || c.opt.NowMs < horizon
			if !keep {
				c.res.TombstonesPurged++
			}
		}
		if keep {
			kept = append(kept, *r)
			tombstones = tombstones || r.Value == nil
		}
	}
	c.kept = kept[:0]
	c.res.RecordsRetained += int64(len(kept))
	stamp := tombstones && !hasHorizon
	if tombstones {
		if !hasHorizon {
			horizon = c.horizon()
		}
		c.res.DeleteHorizonMs = max(c.res.DeleteHorizonMs, horizon)
	}
	switch {
	case len(kept) == len(recs) && !stamp:
		return b, nil
	case len(kept) > 0:
		return c.rebuild(h, kept, stamp)
	}
	return c.emptyOrNil(h, lastOfGroup)
}

// hashKeys returns the hashes of recs' keys (index for index; a record without a key, or
// whose offset is outside [from, to], gets none) and prefetches their slots (OffsetMap:
// Speed). The slice is reused by the next call.
func (c *cleaning) hashKeys(recs []batch.Record, base, from, to int64) []keyHash {
	hs := c.hashes[:0]
	for i := range recs {
		var h keyHash
		if off := base + int64(recs[i].OffsetDelta); recs[i].Key != nil && off >= from && off <= to {
			h = c.m.hashKey(recs[i].Key)
		}
		hs = append(hs, h)
	}
	c.hashes = hs
	c.m.prefetch(hs)
	return hs
}

// emptyOrNil is what is left of data batch h once none of its records is kept: the batch
// empty when it is the last of its group or of an active producer, else nothing.
func (c *cleaning) emptyOrNil(h *batch.Header, lastOfGroup bool) ([]byte, error) {
	if !lastOfGroup && !(h.ProducerID >= 0 && c.opt.ActiveProducers != nil && c.lastOfProducer(h)) {
		return nil, nil
	}
	e := *h
	e.Attributes &^= batch.AttrCodecMask | batch.AttrDeleteHorizon
	e.BaseTimestamp = h.MaxTimestamp
	return batch.Build(e, nil, batch.CodecNone)
}

// filterControl returns what is left of control batch b (see cleanertxn.go): b itself
// while its transaction's batches may be in the log, b stamped with a delete horizon the
// first time it is found removable, nothing once that horizon has passed (b whole when it
// is the last batch of its group).
func (c *cleaning) filterControl(b []byte, h *batch.Header, lastOfGroup bool) ([]byte, error) {
	recs, err := batch.AppendRecords(c.recs[:0], b)
	c.recs = recs[:0]
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorruptLog, err)
	}
	c.res.RecordsRead += int64(len(recs))
	removable := c.txn.onControl(h, recs)
	horizon, hasHorizon := h.DeleteHorizonMs()
	if removable && hasHorizon && c.opt.NowMs >= horizon && !lastOfGroup {
		c.res.MarkersPurged++
		return nil, nil
	}
	c.txn.keptMarker(h, recs)
	c.res.RecordsRetained += int64(len(recs))
	switch {
	case !removable || len(recs) == 0:
		return b, nil
	case !hasHorizon:
		out, err := c.rebuild(h, recs, true)
		if err == nil {
			c.res.DeleteHorizonMs = max(c.res.DeleteHorizonMs, c.horizon())
		}
		return out, err
	case c.opt.NowMs < horizon:
		c.res.DeleteHorizonMs = max(c.res.DeleteHorizonMs, horizon)
	}
	return b, nil
}

// horizon is the delete horizon a pass stamps: now + delete.retention.ms.
func (c *cleaning) horizon() int64 {
	if c.opt.DeleteRetentionMs > math.MaxInt64-c.opt.NowMs {
		return math.MaxInt64
	}
	return c.opt.NowMs + c.opt.DeleteRetentionMs
}

func (c *cleaning) lastOfProducer(h *batch.Header) bool {
	last, ok := c.opt.ActiveProducers[h.ProducerID]
	return ok && last == h.LastOffset()
}

// rebuild builds a batch of the records kept from h's batch, stamping a delete horizon when
// stamp is set.
func (c *cleaning) rebuild(h *batch.Header, kept []batch.Record, stamp bool) ([]byte, error) {
	nh := *h
	base := h.BaseTimestamp
	if stamp {
		nh.Attributes |= batch.AttrDeleteHorizon
		base = c.horizon()
	}
	maxTs := int64(-1)
	for i := range kept {
		ts := h.BaseTimestamp + kept[i].TimestampDelta
		maxTs = max(maxTs, ts)
		kept[i].TimestampDelta = ts - base
	}
	nh.BaseTimestamp = base
	if h.Attributes&batch.AttrLogAppendTime == 0 {
		nh.MaxTimestamp = maxTs
	}
	return batch.Build(nh, kept, h.Codec())
}

// batchReader reads the whole batches of a segment's [pos, end) through a buffer of ioSize
// bytes (larger for a larger batch). What next returns aliases the buffer until the next call.
type batchReader struct {
	ioSize   int
	throttle func(bytes int) error // told of every read; nil: none
	s        *segment
	pos      int64
	end      int64
	buf      []byte
	bufPos   int64 // file position of buf[0]
}

func (r *batchReader) reset(s *segment, pos, end int64) {
	r.s, r.pos, r.end, r.buf, r.bufPos = s, pos, end, r.buf[:0], 0
}

// fill reads at least want bytes (at most the rest of the range) from pos into the buffer.
func (r *batchReader) fill(pos int64, want int) error {
	n := int(min(int64(max(want, r.ioSize)), r.end-pos))
	if cap(r.buf) < n {
		r.buf = make([]byte, n)
	}
	r.buf = r.buf[:n]
	if _, err := r.s.log.ReadAt(r.buf, pos); err != nil {
		return fmt.Errorf("reading %s at %d: %w", r.s.logPath(), pos, err)
	}
	r.bufPos = pos
	if r.throttle != nil {
		return r.throttle(n)
	}
	return nil
}

// next returns the next batch, its header and position; ok is false at the end.
func (r *batchReader) next() (b []byte, h batch.Header, pos int64, ok bool, err error) {
	pos = r.pos
	if pos >= r.end {
		return nil, h, pos, false, nil
	}
	if r.end-pos < batch.HeaderSize {
		return nil, h, pos, false, fmt.Errorf("%w: %s: %d bytes at position %d are too few for a batch", ErrCorruptLog, r.s.logPath(), r.end-pos, pos)
	}
	if pos < r.bufPos || pos+batch.HeaderSize > r.bufPos+int64(len(r.buf)) {
		if err := r.fill(pos, batch.HeaderSize); err != nil {
			return nil, h, pos, false, err
		}
	}
	h, err = batch.ParseHeader(r.buf[pos-r.bufPos:])
	if err != nil {
		return nil, h, pos, false, fmt.Errorf("%w: %s at position %d: %w", ErrCorruptLog, r.s.logPath(), pos, err)
	}
	size := int64(h.Size())
	if pos+size > r.end {
		return nil, h, pos, false, fmt.Errorf("%w: %s: batch at position %d (%d bytes) runs past the end at %d", ErrCorruptLog, r.s.logPath(), pos, size, r.end)
	}
	if pos+size > r.bufPos+int64(len(r.buf)) {
		if err := r.fill(pos, int(size)); err != nil {
			return nil, h, pos, false, err
		}
	}
	r.pos = pos + size
	off := pos - r.bufPos
	return r.buf[off : off+size], h, pos, true, nil
}
