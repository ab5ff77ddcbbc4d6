package storage

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/gregor-project/gregor/internal/batch"
)

// The leader epoch cache (Kafka's LeaderEpochFileCache): for every leader epoch that wrote to
// this partition, the offset of its first record. It answers OffsetForLeaderEpoch (KIP-101,
// KIP-279) and the diverging-epoch check of a follower's fetch (KIP-320), which is how a
// follower or a returning old leader finds where its log parts from the leader's.
//
// File: <partition dir>/leader-epoch-checkpoint, Kafka's format:
//
//	0                       version
//	<n>                     number of entries
//	<epoch> <startOffset>   n lines, epochs and start offsets increasing
//
// Invariants: epochs and start offsets both strictly increase from one entry to the next; every epoch is >= 0 and every start offset >= 0. The file is written whole and
// atomically (WriteFileAtomic) after every change, before the change is visible to readers.
//
// Keeping the cache in step with the log is the caller's duty (the replica layer):
//   - Assign (or AssignBatches) BEFORE appending the batches of a new epoch: then the cache on
//     disk is never behind the log, only possibly ahead of it after a crash, which Open repairs
//     by cutting the entries past the log end offset;
//   - TruncateFromEnd(offset) after Log.TruncateTo(offset);
//   - Clear after Log.TruncateFullyAndStartAt;
//   - TruncateFromStart(logStartOffset) after the log start offset moves (retention,
//     DeleteRecords, a follower adopting its leader's log start).
//
// Readers take no lock: the entries are an immutable slice behind an atomic pointer, replaced
// whole on every change. mu serializes the changes (and the file writes).

// LeaderEpochCheckpointFile is the cache's file name in a partition directory.
const LeaderEpochCheckpointFile = "leader-epoch-checkpoint"

// UndefinedEpoch and UndefinedEpochOffset are OffsetForLeaderEpoch's "unknown" answer
// (Kafka's UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET).
const (
	UndefinedEpoch       int32 = -1
	UndefinedEpochOffset int64 = -1
)

// ErrInvalidEpochEntry: Assign with a negative epoch or start offset.
var ErrInvalidEpochEntry = errors.New("storage: invalid leader epoch entry")

// EpochEntry is one leader epoch and the offset of its first record.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// LeaderEpochCache is one partition's leader epoch cache. Safe for concurrent use.
type LeaderEpochCache struct {
	fs     FS
	dir    string
	logger *slog.Logger

	entries atomic.Pointer[[]EpochEntry] // immutable once stored

	mu sync.Mutex // serializes changes and file writes
}

// OpenLeaderEpochCache loads the cache of log l from its leader-epoch-checkpoint and makes it
// agree with the log:
//   - a missing or unreadable file is rebuilt from the partitionLeaderEpoch of the log's
//     batches (a corrupt one is logged);
//   - entries at or past the log end offset are dropped (the cache was written ahead of an
//     append that a crash lost, or a truncation's file write was lost);
//   - entries wholly below the log start offset are dropped and the first kept epoch starts
//     at the log start offset;
//   - if the last batch in the log carries an epoch newer than the cache's latest (its Assign
//     never reached the disk), the batches from the latest entry on are scanned and assigned.
//
// The file is rewritten when any of this changed it. logger may be nil (slog.Default()).
func OpenLeaderEpochCache(fs FS, l *Log, logger *slog.Logger) (*LeaderEpochCache, error) {
	if logger == nil {
		logger = slog.Default()
	}
	c := &LeaderEpochCache{fs: fs, dir: l.Dir(), logger: logger.With("log", l.Dir())}
	path := filepath.Join(c.dir, LeaderEpochCheckpointFile)
	entries, err := readEpochCheckpoint(fs, path)
	rebuild := false
	switch {
	case errors.Is(err, os.ErrNotExist):
		rebuild = true
	case errors.Is(err, errMalformedEpochCheckpoint):
		c.logger.Warn("leader epoch checkpoint is malformed; rebuilding it from the log", "err", err)
		rebuild = true
	case err != nil:
		return nil, err
	}
	lso, leo := l.LogStartOffset(), l.LogEndOffset()
	orig := entries
	if rebuild {
		entries = nil
		if err := scanEpochs(l, lso, &entries); err != nil {
			return nil, err
		}
	} else {
		entries = truncateEpochsFromEnd(entries, leo)
		entries = truncateEpochsFromStart(entries, lso)
		// The tail check: is the last batch's epoch known?
		last, err := lastBatchEpoch(l)
		if err != nil {
			return nil, err
		}
		if latest := latestEpochOf(entries); last > latest {
			from := lso
			if len(entries) > 0 {
				from = max(from, entries[len(entries)-1].StartOffset)
			}
			c.logger.Warn("leader epoch checkpoint is behind the log; scanning the tail", "latest_epoch", latest, "last_batch_epoch", last, "from_offset", from)
			if err := scanEpochs(l, from, &entries); err != nil {
				return nil, err
			}
		}
	}
	// A new partition (nothing to record) writes no file; a changed cache is written
	// durably, since dropping entries is a truncation (see publishLocked).
	if (rebuild && len(entries) > 0) || (!rebuild && !slices.Equal(entries, orig)) {
		if err := c.writeLocked(entries, true); err != nil {
			return nil, err
		}
	}
	c.entries.Store(&entries)
	return c, nil
}

// scanEpochs assigns the epoch of every batch of l whose last offset is >= from; the batch
// holding from counts as starting there (from may be a log start offset inside it).
func scanEpochs(l *Log, from int64, entries *[]EpochEntry) error {
	return l.ScanBatches(from, func(h batch.Header) error {
		if h.PartitionLeaderEpoch >= 0 {
			*entries, _ = assignEpoch(*entries, EpochEntry{h.PartitionLeaderEpoch, max(h.BaseOffset, from)})
		}
		return nil
	})
}

// lastBatchEpoch is the partitionLeaderEpoch of the log's last batch (UndefinedEpoch for an
// empty log). The offset index makes finding it cheap.
func lastBatchEpoch(l *Log) (int32, error) {
	leo := l.LogEndOffset()
	epoch := UndefinedEpoch
	if leo <= l.LogStartOffset() {
		return epoch, nil
	}
	err := l.ScanBatches(leo-1, func(h batch.Header) error {
		epoch = h.PartitionLeaderEpoch
		return nil
	})
	return epoch, err
}

// load returns the current entries (immutable).
func (c *LeaderEpochCache) load() []EpochEntry {
	if p := c.entries.Load(); p != nil {
		return *p
	}
	return nil
}

// Entries returns a copy of the entries, oldest first.
func (c *LeaderEpochCache) Entries() []EpochEntry { return slices.Clone(c.load()) }

// LatestEpoch is the newest epoch, or UndefinedEpoch when the cache is empty.
func (c *LeaderEpochCache) LatestEpoch() int32 { return latestEpochOf(c.load()) }

// LatestEntry is the newest entry; ok is false when the cache is empty.
func (c *LeaderEpochCache) LatestEntry() (e EpochEntry, ok bool) {
	es := c.load()
	if len(es) == 0 {
		return EpochEntry{}, false
	}
	return es[len(es)-1], true
}

// EpochForOffset is the epoch of the record at offset: the epoch of the last entry starting at
// or before it; UndefinedEpoch when offset is before the first entry or the cache is empty.
func (c *LeaderEpochCache) EpochForOffset(offset int64) int32 {
	es := c.load()
	i, _ := slices.BinarySearchFunc(es, offset+1, func(e EpochEntry, off int64) int { return cmp.Compare(e.StartOffset, off) })
	if i == 0 {
		return UndefinedEpoch
	}
	return es[i-1].Epoch
}

// EndOffsetFor answers OffsetForLeaderEpoch for requested, given the log end offset leo
// (KIP-101 as amended by KIP-279): the largest epoch <= requested and the offset where it
// ended, which is the start offset of the next epoch in the cache, or leo when requested is the
// latest epoch. Special cases, as Kafka's LeaderEpochFileCache:
//   - requested is UndefinedEpoch, newer than the latest epoch, or the cache is empty:
//     (UndefinedEpoch, UndefinedEpochOffset);
//   - requested is older than the first entry (retention removed its records):
//     (requested, start offset of the first entry), so the asker truncates there.
func (c *LeaderEpochCache) EndOffsetFor(requested int32, leo int64) (int32, int64) {
	return endOffsetFor(c.load(), requested, leo)
}

func endOffsetFor(es []EpochEntry, requested int32, leo int64) (int32, int64) {
	if requested == UndefinedEpoch || len(es) == 0 {
		return UndefinedEpoch, UndefinedEpochOffset
	}
	if es[len(es)-1].Epoch == requested {
		return requested, leo
	}
	// higher: the first entry with an epoch > requested.
	higher, _ := slices.BinarySearchFunc(es, requested+1, func(e EpochEntry, ep int32) int { return cmp.Compare(e.Epoch, ep) })
	switch {
	case higher == len(es):
		return UndefinedEpoch, UndefinedEpochOffset
	case higher == 0:
		return requested, es[0].StartOffset
	default:
		return es[higher-1].Epoch, es[higher].StartOffset
	}
}

// Assign records that epoch starts at startOffset (a leader taking over at its log end offset,
// or the first batch of a new epoch appended). Nothing changes when epoch is already the
// latest with a start offset <= startOffset. Entries that would break monotonicity (an epoch
// >= epoch, or a start offset >= startOffset) are removed first, as Kafka does; doing so
// beyond the trivial case is logged.
func (c *LeaderEpochCache) Assign(epoch int32, startOffset int64) error {
	if epoch < 0 || startOffset < 0 {
		return fmt.Errorf("%w: epoch %d at offset %d", ErrInvalidEpochEntry, epoch, startOffset)
	}
	if !assignNeeded(c.load(), EpochEntry{epoch, startOffset}) {
		return nil // the common case, without the lock
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !assignNeeded(c.load(), EpochEntry{epoch, startOffset}) {
		return nil // assigned meanwhile
	}
	es, removed := assignEpoch(c.load(), EpochEntry{epoch, startOffset})
	c.warnRemoved(EpochEntry{epoch, startOffset}, removed)
	return c.publishLocked(es, len(removed) > 0)
}

// AssignBatches assigns the epoch of every batch in raw (whole v2 batches with their offsets,
// as a follower appends them), with one file write. Batches without an epoch (-1) are skipped.
// Call it before appending raw.
func (c *LeaderEpochCache) AssignBatches(raw []byte) error {
	es := c.load()
	var changed []EpochEntry
	for off := 0; off < len(raw); {
		h, err := batch.ParseHeader(raw[off:])
		if err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidBatch, err)
		}
		if h.PartitionLeaderEpoch >= 0 {
			e := EpochEntry{h.PartitionLeaderEpoch, h.BaseOffset}
			if assignNeeded(es, e) {
				changed = append(changed, e)
				es = append(slices.Clip(es), e) // only to keep assignNeeded's view current
			}
		}
		off += h.Size()
	}
	if len(changed) == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.load()
	es = cur
	durable := false
	for _, e := range changed {
		var removed []EpochEntry
		es, removed = assignEpoch(es, e)
		c.warnRemoved(e, removed)
		durable = durable || len(removed) > 0
	}
	if slices.Equal(es, cur) {
		return nil // assigned meanwhile
	}
	return c.publishLocked(es, durable)
}

func (c *LeaderEpochCache) warnRemoved(e EpochEntry, removed []EpochEntry) {
	// Replacing an entry at the same start offset is expected (a leader that wrote nothing in
	// its epoch); anything else is a real conflict.
	if len(removed) > 1 || (len(removed) == 1 && removed[0].StartOffset != e.StartOffset) {
		c.logger.Warn("new leader epoch entry removed conflicting entries", "epoch", e.Epoch, "start_offset", e.StartOffset, "removed", removed)
	}
}

// TruncateFromEnd removes the entries starting at or after endOffset (the log was truncated
// to endOffset). A negative endOffset changes nothing.
func (c *LeaderEpochCache) TruncateFromEnd(endOffset int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	es := c.load()
	if next := truncateEpochsFromEnd(es, endOffset); len(next) != len(es) {
		return c.publishLocked(next, true)
	}
	return nil
}

// TruncateFromStart drops the entries wholly before startOffset (the log start offset moved
// there): the last entry starting at or before it is kept and now starts at startOffset.
func (c *LeaderEpochCache) TruncateFromStart(startOffset int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	es := c.load()
	if next := truncateEpochsFromStart(es, startOffset); !slices.Equal(next, es) {
		return c.publishLocked(next, true)
	}
	return nil
}

// Clear removes every entry (the log was truncated fully).
func (c *LeaderEpochCache) Clear() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.publishLocked(nil, true)
}

// publishLocked writes es to the file and then makes it visible. On a write error nothing
// changes. Holding mu.
//
// Durability: a change that only adds entries at the end (Assign, AssignBatches) is written
// without fsync, as Kafka does since KAFKA-15046: if a crash loses it, opening the cache finds
// the log's last batch newer than the file's latest epoch and scans the tail back in (an
// epoch assigned at an empty log end has no batch to lose). A change that removes entries
// (truncation, clearing) is fsynced before it is visible: a stale file would keep an epoch
// the log no longer has, which no scan can detect.
func (c *LeaderEpochCache) publishLocked(es []EpochEntry, durable bool) error {
	if err := c.writeLocked(es, durable); err != nil {
		return err
	}
	es = slices.Clip(es)
	c.entries.Store(&es)
	return nil
}

func (c *LeaderEpochCache) writeLocked(es []EpochEntry, durable bool) error {
	if !durable {
		return replaceFile(c.fs, c.dir, LeaderEpochCheckpointFile, formatEpochCheckpoint(es))
	}
	return WriteFileAtomic(c.fs, c.dir, LeaderEpochCheckpointFile, formatEpochCheckpoint(es))
}

// assignNeeded reports whether e changes es (Kafka's isUpdateNeeded): true unless e's epoch is
// the latest and it does not start earlier.
func assignNeeded(es []EpochEntry, e EpochEntry) bool {
	if len(es) == 0 {
		return true
	}
	last := es[len(es)-1]
	return e.Epoch != last.Epoch || e.StartOffset < last.StartOffset
}

// assignEpoch returns es with e appended, after removing from the end every entry whose epoch
// is >= e's or whose start offset is >= e's, and the removed entries. es is not modified.
func assignEpoch(es []EpochEntry, e EpochEntry) (next, removed []EpochEntry) {
	if !assignNeeded(es, e) {
		return es, nil
	}
	n := len(es)
	for n > 0 && (es[n-1].Epoch >= e.Epoch || es[n-1].StartOffset >= e.StartOffset) {
		n--
	}
	next = make([]EpochEntry, n, n+1)
	copy(next, es[:n])
	return append(next, e), es[n:]
}

// truncateEpochsFromEnd returns es without the entries starting at or after end.
func truncateEpochsFromEnd(es []EpochEntry, end int64) []EpochEntry {
	if end < 0 {
		return es
	}
	n := len(es)
	for n > 0 && es[n-1].StartOffset >= end {
		n--
	}
	return es[:n:n]
}

// truncateEpochsFromStart returns es without the entries wholly before start: the last entry
// starting at or before start survives with start as its start offset. es is not modified.
func truncateEpochsFromStart(es []EpochEntry, start int64) []EpochEntry {
	i := 0
	for i < len(es) && es[i].StartOffset <= start {
		i++
	}
	if i == 0 {
		return es
	}
	next := make([]EpochEntry, 0, len(es)-i+1)
	next = append(next, EpochEntry{es[i-1].Epoch, start})
	return append(next, es[i:]...)
}

func latestEpochOf(es []EpochEntry) int32 {
	if len(es) == 0 {
		return UndefinedEpoch
	}
	return es[len(es)-1].Epoch
}

// errMalformedEpochCheckpoint marks a leader-epoch-checkpoint that does not parse.
var errMalformedEpochCheckpoint = errors.New("storage: malformed leader epoch checkpoint")

// readEpochCheckpoint reads a leader-epoch-checkpoint file (os.ErrNotExist when missing).
func readEpochCheckpoint(fs FS, path string) ([]EpochEntry, error) {
	f, err := fs.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	data, err := readAll(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return parseEpochCheckpoint(data)
}

// parseEpochCheckpoint parses the file format in the package comment above, checking that
// the entries are well ordered.
func parseEpochCheckpoint(data []byte) ([]EpochEntry, error) {
	var es []EpochEntry
	err := scanCheckpoint(data, 2, func(n int) { es = make([]EpochEntry, 0, min(n, 1024)) }, func(f []string) error {
		ep, err1 := strconv.ParseInt(f[0], 10, 32)
		off, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || ep < 0 || off < 0 {
			return errBadEntry
		}
		e := EpochEntry{int32(ep), off}
		if k := len(es); k > 0 && (e.Epoch <= es[k-1].Epoch || e.StartOffset <= es[k-1].StartOffset) {
			return fmt.Errorf("does not follow %d %d", es[k-1].Epoch, es[k-1].StartOffset)
		}
		es = append(es, e)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errMalformedEpochCheckpoint, err)
	}
	return es, nil
}

// formatEpochCheckpoint renders es in the file format.
func formatEpochCheckpoint(es []EpochEntry) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", len(es))
	for _, e := range es {
		fmt.Fprintf(&b, "%d %d\n", e.Epoch, e.StartOffset)
	}
	return b.Bytes()
}
