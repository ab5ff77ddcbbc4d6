package storage

import (
	"encoding/binary"
	"slices"

	"github.com/gregor-project/gregor/internal/batch"
)

// Transactions while cleaning, after Kafka's CleanedTransactionMetadata (KIP-98's notes on
// compaction). A pass reads the log in offset order, and txnTracker follows, from the
// transaction index (Log.AbortedTxns: never a scan of the log), which batches belong to an
// aborted transaction and which markers may go:
//
//   - A transactional data batch of producer P at offsets [b, e] is aborted when the index
//     has an entry of P with FirstOffset <= e whose ABORT marker has not been read yet (a
//     producer has at most one transaction open on a partition, so its batches between the
//     first offset and the marker are that transaction's). Its records are removed, and are
//     never put in the offset map: an aborted value never displaces a committed one. The
//     batch itself goes, unless kept empty (its producer's last, or its group's).
//   - A marker stays while a batch of its transaction was read in the same pass before it
//     (a COMMIT: any transactional batch of P since P's last marker; an ABORT: one of its
//     aborted batches, or one the index does not name). Rebuilding producer state from the
//     log needs it then: a batch left without its marker would reopen the transaction.
//   - Once a pass finds none, the marker is removable, and is stamped with a delete horizon
//     (now + delete.retention.ms, the batch's delete horizon as for tombstones, KIP-534); the
//     first pass at or after the horizon removes it (unless it is the last batch of its group,
//     which is kept whole). A consumer that read the data has the marker's retention to read
//     the marker too.
//   - An index entry goes with its ABORT marker: the cleaned segment keeps exactly the
//     entries whose markers it keeps.
//
// Every segment from the log's first is rewritten in a pass (cleaner.go, step 3), so every
// batch of a transaction whose marker a pass reads was read before it by that pass. Control
// records of other types than COMMIT and ABORT are kept.

// Control record types of a marker's key: version int16 | type int16.
const (
	controlTypeAbort  = 0
	controlTypeCommit = 1
)

// txnTracker follows the transactions of one pass (or of the offset map's building).
type txnTracker struct {
	pending   []AbortedTxn    // the entries not yet begun, by FirstOffset
	aborted   map[int64]bool  // producer -> in an aborted transaction; true once a batch of it was read
	committed map[int64]bool  // producers with a transactional batch read, not aborted, since their last marker
	keptAbort map[int64]int64 // offset -> producer of the ABORT markers kept
}

func newTxnTracker(entries []AbortedTxn) *txnTracker {
	t := &txnTracker{
		pending:   slices.Clone(entries),
		aborted:   map[int64]bool{},
		committed: map[int64]bool{},
		keptAbort: map[int64]int64{},
	}
	slices.SortStableFunc(t.pending, func(a, b AbortedTxn) int { return compareInt64(a.FirstOffset, b.FirstOffset) })
	return t
}

func compareInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// begin starts the aborted transactions that began at or before offset.
func (t *txnTracker) begin(offset int64) {
	for len(t.pending) > 0 && t.pending[0].FirstOffset <= offset {
		if _, ok := t.aborted[t.pending[0].ProducerID]; !ok {
			t.aborted[t.pending[0].ProducerID] = false
		}
		t.pending = t.pending[1:]
	}
}

// onData is told of a data batch; it reports whether the batch is aborted.
func (t *txnTracker) onData(h *batch.Header) bool {
	t.begin(h.LastOffset())
	if !h.IsTransactional() || h.ProducerID < 0 {
		return false
	}
	if _, ok := t.aborted[h.ProducerID]; ok {
		t.aborted[h.ProducerID] = true
		return true
	}
	t.committed[h.ProducerID] = true
	return false
}

// onControl is told of a control batch (its records recs); it reports whether the batch is
// removable: a COMMIT or ABORT marker with no batch of its transaction read before it. An
// empty control batch (kept for its offsets) is removable too.
func (t *txnTracker) onControl(h *batch.Header, recs []batch.Record) bool {
	t.begin(h.LastOffset())
	if len(recs) == 0 {
		return true
	}
	if len(recs[0].Key) < 4 || h.ProducerID < 0 {
		return false
	}
	pid := h.ProducerID
	switch int16(binary.BigEndian.Uint16(recs[0].Key[2:])) {
	case controlTypeAbort:
		read := t.aborted[pid]
		delete(t.aborted, pid)
		// A transactional batch the index did not name as aborted: keep the marker too.
		read = read || t.committed[pid]
		delete(t.committed, pid)
		return !read
	case controlTypeCommit:
		read := t.committed[pid]
		delete(t.committed, pid)
		return !read
	}
	return false
}

// keptMarker records that the control batch h was kept.
func (t *txnTracker) keptMarker(h *batch.Header, recs []batch.Record) {
	if len(recs) > 0 && len(recs[0].Key) >= 4 && int16(binary.BigEndian.Uint16(recs[0].Key[2:])) == controlTypeAbort {
		t.keptAbort[h.BaseOffset] = h.ProducerID
	}
}

// keptEntries returns the entries of old whose ABORT markers were kept, in order.
func (t *txnTracker) keptEntries(old []AbortedTxn) []AbortedTxn {
	var out []AbortedTxn
	for _, e := range old {
		if pid, ok := t.keptAbort[e.LastOffset]; ok && pid == e.ProducerID {
			out = append(out, e)
		}
	}
	return out
}
