package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
)

// The transaction index, Kafka's TransactionIndex: `<base>.txnindex` beside a segment's .log
// lists the aborted transactions whose ABORT marker lies in that segment, in marker offset
// order. A read_committed fetch asks it (AbortedTxns) which aborted transactions overlap the
// range it returns, so the consumer can drop their records without the broker scanning the
// log.
//
// File format (big endian), Kafka's: entries back to back, no header, 34 bytes each:
//
//	version int16 (0) | producerId int64 | firstOffset int64 | lastOffset int64 | lastStableOffset int64
//
// firstOffset is the transaction's first offset on the partition, lastOffset the offset of
// its ABORT marker, lastStableOffset the partition's last stable offset once the abort
// completed (the first offset of the earliest other ongoing transaction, or lastOffset+1):
// a lookup for offsets below it need not look at later entries.
//
// Invariants: lastOffset increases strictly across the entries of a segment and of the whole
// log, and lies in the segment ([base, nextOffset)). A missing file is an empty index (most
// segments never see an abort, and the file is created with its first entry). A trailing
// partial entry (a torn write) is ignored and overwritten by the next one.
//
// Lifecycle. The replica layer adds an entry when it writes or copies an ABORT marker
// (Log.AppendAbortedTxn) and re-adds missing ones when it replays the log to rebuild its
// producer state: the storage layer cannot build entries itself (it would need each
// producer's transaction start). The file goes where its segment goes: renamed to .deleted
// and removed with it (retention, the log start offset, truncation, recovery's deletions,
// Log.Delete); truncation and recovery cut the entries at or past the new end; the cleaner's
// new segment holds the entries of the segments it replaces whose ABORT markers it keeps
// (an entry goes with its marker, once the transaction's batches are gone: cleanertxn.go).
//
// The file holds no descriptor: it is read whole into memory the first time the segment is
// asked (a fetch, an append, a truncation), and each change opens it, writes and closes it;
// Flush fsyncs it when it changed. mu guards the fields: taken holding Log.mu (read or write)
// or Log.writeMu, after them.

const (
	txnIndexSuffix    = ".txnindex"
	txnIndexEntrySize = 34
)

// AbortedTxn is one entry of a segment's transaction index (.txnindex, Kafka's format:
// version int16 = 0 | producerId int64 | firstOffset int64 | lastOffset int64 | lastStableOffset int64).
type AbortedTxn struct{ ProducerID, FirstOffset, LastOffset, LastStableOffset int64 }

// errCorruptTxnIndex reports an entry that cannot be (an unknown version, offsets backwards).
var errCorruptTxnIndex = errors.New("storage: corrupt transaction index")

// txnIndex is one segment's .txnindex.
type txnIndex struct {
	fs   FS
	path string

	mu      sync.Mutex
	loaded  bool
	entries []AbortedTxn
	dirty   bool // written since its last fsync
}

func (x *txnIndex) init(fs FS, prefix string) { x.fs, x.path = fs, prefix+txnIndexSuffix }

func encodeAbortedTxn(b []byte, t AbortedTxn) []byte {
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint64(b, uint64(t.ProducerID))
	b = binary.BigEndian.AppendUint64(b, uint64(t.FirstOffset))
	b = binary.BigEndian.AppendUint64(b, uint64(t.LastOffset))
	return binary.BigEndian.AppendUint64(b, uint64(t.LastStableOffset))
}

// parseTxnIndex decodes the whole entries of b.
func parseTxnIndex(b []byte, path string) ([]AbortedTxn, error) {
	var out []AbortedTxn
	for ; len(b) >= txnIndexEntrySize; b = b[txnIndexEntrySize:] {
		if v := int16(binary.BigEndian.Uint16(b)); v != 0 {
			return nil, fmt.Errorf("%w: %s: entry %d has version %d", errCorruptTxnIndex, path, len(out), v)
		}
		t := AbortedTxn{
			ProducerID:       int64(binary.BigEndian.Uint64(b[2:])),
			FirstOffset:      int64(binary.BigEndian.Uint64(b[10:])),
			LastOffset:       int64(binary.BigEndian.Uint64(b[18:])),
			LastStableOffset: int64(binary.BigEndian.Uint64(b[26:])),
		}
		if n := len(out); n > 0 && t.LastOffset <= out[n-1].LastOffset {
			return nil, fmt.Errorf("%w: %s: entry %d ends at %d, after %d", errCorruptTxnIndex, path, n, t.LastOffset, out[n-1].LastOffset)
		}
		out = append(out, t)
	}
	return out, nil
}

// loadLocked reads the file once. Holding x.mu.
func (x *txnIndex) loadLocked() error {
	if x.loaded {
		return nil
	}
	f, err := x.fs.OpenFile(x.path, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		x.loaded = true
		return nil
	} else if err != nil {
		return err
	}
	data, err := readAll(f)
	err = errors.Join(err, f.Close())
	if err != nil {
		return err
	}
	es, err := parseTxnIndex(data, x.path)
	if err != nil {
		return err
	}
	x.entries, x.loaded = es, true
	return nil
}

// last is the last entry's LastOffset, or -1.
func (x *txnIndex) last() (int64, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.loadLocked(); err != nil {
		return 0, err
	}
	if n := len(x.entries); n > 0 {
		return x.entries[n-1].LastOffset, nil
	}
	return -1, nil
}

// append adds t (LastOffset past every entry). Holding Log.writeMu.
func (x *txnIndex) append(t AbortedTxn) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.loadLocked(); err != nil {
		return err
	}
	if n := len(x.entries); n > 0 && t.LastOffset <= x.entries[n-1].LastOffset {
		return fmt.Errorf("%w: %s: entry ends at %d, after %d", errCorruptTxnIndex, x.path, t.LastOffset, x.entries[n-1].LastOffset)
	}
	f, err := x.fs.OpenFile(x.path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(encodeAbortedTxn(nil, t), int64(len(x.entries))*txnIndexEntrySize)
	if err = errors.Join(err, f.Close()); err != nil {
		return err
	}
	x.entries = append(x.entries, t)
	x.dirty = true
	return nil
}

// truncateTo removes the entries whose LastOffset is >= offset. Holding Log.writeMu (or
// before the Log is shared).
func (x *txnIndex) truncateTo(offset int64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.loadLocked(); err != nil {
		return err
	}
	keep := len(x.entries)
	for keep > 0 && x.entries[keep-1].LastOffset >= offset {
		keep--
	}
	if keep == len(x.entries) {
		return nil
	}
	f, err := x.fs.OpenFile(x.path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = f.Truncate(int64(keep) * txnIndexEntrySize)
	if err = errors.Join(err, f.Close()); err != nil {
		return err
	}
	x.entries = x.entries[:keep]
	x.dirty = true
	return nil
}

// collect returns the entries with LastOffset >= from and FirstOffset < upper, and whether
// no later segment can hold one (an entry's LastStableOffset reached upper: every
// transaction starting below upper had ended by then), as Kafka's collectAbortedTxns.
func (x *txnIndex) collect(from, upper int64, out []AbortedTxn) ([]AbortedTxn, bool, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.loadLocked(); err != nil {
		return out, false, err
	}
	for _, t := range x.entries {
		if t.LastOffset >= from && t.FirstOffset < upper {
			out = append(out, t)
		}
		if t.LastStableOffset >= upper {
			return out, true, nil
		}
	}
	return out, false, nil
}

// all returns a copy of the entries.
func (x *txnIndex) all() ([]AbortedTxn, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.loadLocked(); err != nil {
		return nil, err
	}
	return append([]AbortedTxn(nil), x.entries...), nil
}

// syncFile opens the file for an fsync when it changed since the last one, clearing the
// flag (restore sets it again if the fsync does not happen); nil when there is nothing to
// sync. Holding Log.writeMu.
func (x *txnIndex) syncFile() (File, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.dirty {
		return nil, nil
	}
	f, err := x.fs.OpenFile(x.path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		x.dirty = false // truncated to nothing before it was ever synced: nothing to keep
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	x.dirty = false
	return f, nil
}

// isDirty reports whether the index changed since its last fsync.
func (x *txnIndex) isDirty() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.dirty
}

// restoreDirty marks the index changed again after a sync that did not run.
func (x *txnIndex) restoreDirty() {
	x.mu.Lock()
	x.dirty = true
	x.mu.Unlock()
}

// writeTxnIndexFile writes entries as a whole new file at path (the cleaner's output; empty
// when there are none). It returns the file, not yet synced nor closed.
func writeTxnIndexFile(fs FS, path string, entries []AbortedTxn) (File, error) {
	b := make([]byte, 0, len(entries)*txnIndexEntrySize)
	for _, t := range entries {
		b = encodeAbortedTxn(b, t)
	}
	f, err := fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return f, nil
}

// AppendAbortedTxn records an aborted transaction whose ABORT marker is at t.LastOffset, in
// the segment holding that offset (the active segment when written live; a replay after
// recovery may re-add one to an older segment). Idempotent: ignored when t.LastOffset is not
// past that segment's last entry. t.LastOffset must be in the log
// (ErrOffsetOutOfRange). A write error other than running out of descriptors takes the log
// offline.
func (l *Log) AppendAbortedTxn(t AbortedTxn) error {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if err := l.usableLocked(); err != nil {
		return err
	}
	if t.LastOffset < l.mu.segments[0].baseOffset || t.LastOffset >= l.mu.logEndOffset || t.FirstOffset > t.LastOffset {
		return fmt.Errorf("%w: aborted transaction %d..%d, log %d..%d", ErrOffsetOutOfRange, t.FirstOffset, t.LastOffset, l.mu.segments[0].baseOffset, l.mu.logEndOffset)
	}
	s := l.mu.segments[l.floorSegmentLocked(t.LastOffset)]
	last, err := s.txn.last()
	if err != nil {
		return l.txnIndexFailed(s, err)
	}
	if last >= t.LastOffset {
		return nil // already there
	}
	if err := s.txn.append(t); err != nil {
		return l.txnIndexFailed(s, err)
	}
	// Not fsynced until the next flush. A crash before it may lose the entry, but only past
	// the last clean shutdown, where the producer state snapshot was taken: the replica
	// layer replays the log from there and adds it again.
	return nil
}

// txnIndexFailed is the error of a failed transaction index read or write of s. Holding
// writeMu.
func (l *Log) txnIndexFailed(s *segment, err error) error {
	err = fmt.Errorf("transaction index %s: %w", s.txn.path, err)
	if outOfFiles(err) || errors.Is(err, errCorruptTxnIndex) {
		return err
	}
	return l.fail(err)
}

// AbortedTxns returns the entries with LastOffset >= from and FirstOffset < upper, reading
// the transaction indexes of the segments from the one holding `from` on (never the log
// itself), in marker order.
func (l *Log) AbortedTxns(from, upper int64) ([]AbortedTxn, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.usableLocked(); err != nil {
		return nil, err
	}
	var out []AbortedTxn
	segs := l.mu.segments
	for _, s := range segs[l.floorSegmentLocked(from):] {
		var done bool
		var err error
		if out, done, err = s.txn.collect(from, upper, out); err != nil {
			return nil, fmt.Errorf("transaction index %s: %w", s.txn.path, err)
		}
		if done {
			break
		}
	}
	return out, nil
}
