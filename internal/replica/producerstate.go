package replica

import (
	"cmp"
	"errors"
	"math"
	"slices"

	"github.com/gregor-project/gregor/internal/batch"
)

// Idempotent and transactional producer state of one partition (Kafka's
// ProducerStateManager).
//
// For every producer id the leader remembers the epoch and the last five batches appended
// (their first/last sequence and offsets). A batch repeating one of them exactly is a retry:
// it is not appended again and is answered with the original offsets. A batch whose first
// sequence does not follow the last one is a gap (OUT_OF_ORDER_SEQUENCE_NUMBER); an older
// epoch is a fenced producer (INVALID_PRODUCER_EPOCH). A producer id with no state accepts any
// sequence (its state may have been removed by retention), as Kafka does. A batch with base
// sequence -1 (written by a coordinator: a TxnOffsetCommit into __consumer_offsets) skips the
// sequence checks, not the epoch check.
//
// Transactions (KIP-98). A transactional batch of a producer with no ongoing transaction here
// starts one at its base offset; a non-transactional batch while one is ongoing is
// INVALID_TXN_STATE. A control batch (a COMMIT or ABORT marker, ApplyMarker) ends it: the
// producer's epoch becomes the marker's, its coordinator epoch the marker's, and the
// transaction stays "unreplicated" until the high watermark passes the marker
// (OnHighWatermark), as Kafka's unreplicatedTxns: the last stable offset may not pass a
// transaction whose outcome is not committed yet. A marker with an older producer epoch is
// INVALID_PRODUCER_EPOCH, one with an older coordinator epoch than the last seen
// TRANSACTION_COORDINATOR_FENCED (CheckMarker; the leader checks, a follower replays).
// FirstUnstableOffset is the smallest first offset of an ongoing or unreplicated transaction.
//
// Verification (KIP-890 part 1). Before a transactional batch that would start a transaction
// is appended, the leader asks the coordinator whether the partition is in the producer's
// transaction; StartVerification stores a guard for the producer that the append must carry
// (CheckVerification). A marker clears it, so an append verified before the transaction ended
// and arriving after its marker is refused instead of opening a hanging transaction. Starting
// the transaction clears it too (later batches need no check). Guards are not snapshotted: a
// restart makes a verification in flight fail, and the client retries.
//
// Expiry (producer.id.expiration.ms, Kafka's removeExpiredProducers): RemoveExpired forgets a
// producer whose last batch's timestamp is that old, unless one of its transactions is
// ongoing here, and a guard that has stayed unused that long (a verification the
// coordinator refused leaves its guard behind), so the state does not grow with every
// producer id ever seen.
//
// ProducerState is not safe for concurrent use: the Partition lock guards it. It takes no
// clock and does no I/O: the Partition applies its results (aborted transactions to the
// transaction index, the last stable offset).

// maxBatchesPerProducer is how many recent batches per producer are kept for duplicate checks.
const maxBatchesPerProducer = 5

// Sentinel errors, translated to Kafka codes at the api boundary.
var (
	ErrOutOfOrderSequence           = errors.New("replica: out of order sequence number")
	ErrInvalidEpoch                 = errors.New("replica: invalid producer epoch")
	ErrTransactionCoordinatorFenced = errors.New("replica: transaction coordinator fenced")
	ErrInvalidTxnState              = errors.New("replica: invalid transaction state")
)

// BatchMeta identifies one appended batch of a producer.
type BatchMeta struct {
	FirstSeq, LastSeq       int32
	FirstOffset, LastOffset int64
}

type producerEntry struct {
	epoch            int16
	lastTimestamp    int64
	batches          []BatchMeta // oldest first, at most maxBatchesPerProducer
	coordinatorEpoch int32       // of the last marker; -1 none
	txnFirstOffset   int64       // first offset of the ongoing transaction; -1 none
}

// CompletedTxn is a transaction a marker ended (Kafka's CompletedTxn). LastStableOffset is
// the transaction index's: the first offset of the earliest other ongoing transaction, or
// LastOffset+1.
type CompletedTxn struct {
	ProducerID       int64
	FirstOffset      int64 // the transaction's first offset; the marker's when none was ongoing
	LastOffset       int64 // the marker's offset
	Aborted          bool
	LastStableOffset int64
}

// VerificationGuard is a verification in flight (StartVerification); 0 is none.
type VerificationGuard uint64

type verification struct {
	guard VerificationGuard
	epoch int16
	seen  int64 // the time of the first RemoveExpired sweep that found it (0: none yet)
}

// ProducerState maps producer ids to their recent batches and transactions.
//
// Invariants: ongoing[pid] == m[pid].txnFirstOffset for every producer with an ongoing
// transaction, and only those; firstOngoing is the smallest of them (math.MaxInt64 when
// none); unreplicated is in marker offset order.
type ProducerState struct {
	m            map[int64]*producerEntry
	ongoing      map[int64]int64 // producer id -> its transaction's first offset
	firstOngoing int64
	unreplicated []CompletedTxn // ended, marker not yet below the high watermark
	guards       map[int64]verification
	lastGuard    VerificationGuard
}

// NewProducerState returns empty state.
func NewProducerState() *ProducerState {
	return &ProducerState{m: map[int64]*producerEntry{}, ongoing: map[int64]int64{}, firstOngoing: math.MaxInt64, guards: map[int64]verification{}}
}

func newProducerEntry(epoch int16) *producerEntry {
	return &producerEntry{epoch: epoch, coordinatorEpoch: -1, txnFirstOffset: -1}
}

// Len is the number of producers tracked.
func (s *ProducerState) Len() int { return len(s.m) }

// Check decides what to do with a batch before it is appended: (dup, nil) when it repeats a
// batch already in the log, (nil, nil) when it may be appended, or an error.
func (s *ProducerState) Check(h *batch.Header) (*BatchMeta, error) {
	if h.ProducerID < 0 {
		return nil, nil
	}
	e := s.m[h.ProducerID]
	if e == nil {
		return nil, nil
	}
	if h.ProducerEpoch < e.epoch {
		return nil, ErrInvalidEpoch
	}
	if !h.IsTransactional() && e.txnFirstOffset >= 0 {
		return nil, ErrInvalidTxnState
	}
	if h.BaseSequence < 0 {
		return nil, nil // a coordinator's batch: no sequence
	}
	switch {
	case h.ProducerEpoch > e.epoch:
		if h.BaseSequence != 0 {
			return nil, ErrOutOfOrderSequence
		}
		return nil, nil
	}
	last := h.LastSequence()
	for i := range e.batches {
		if b := &e.batches[i]; b.FirstSeq == h.BaseSequence && b.LastSeq == last {
			dup := *b
			return &dup, nil
		}
	}
	if n := len(e.batches); n > 0 && e.batches[n-1].LastSeq >= 0 && !inSequence(e.batches[n-1].LastSeq, h.BaseSequence) {
		return nil, ErrOutOfOrderSequence
	}
	return nil, nil
}

// Update records an appended data batch whose base offset is h.BaseOffset (a control batch
// goes to ApplyMarker). A transactional one starts the producer's transaction if none is
// ongoing.
func (s *ProducerState) Update(h *batch.Header) {
	if h.ProducerID < 0 || h.IsControl() {
		return
	}
	e := s.entry(h.ProducerID, h.ProducerEpoch)
	if h.IsTransactional() && e.txnFirstOffset < 0 {
		s.startTxn(h.ProducerID, e, h.BaseOffset)
	}
	if len(e.batches) == maxBatchesPerProducer {
		copy(e.batches, e.batches[1:])
		e.batches = e.batches[:maxBatchesPerProducer-1]
	}
	e.batches = append(e.batches, BatchMeta{
		FirstSeq: h.BaseSequence, LastSeq: h.LastSequence(),
		FirstOffset: h.BaseOffset, LastOffset: h.LastOffset(),
	})
	e.lastTimestamp = h.MaxTimestamp
}

// entry returns the producer's entry, created or moved to epoch (a new epoch forgets the
// batches of the old one).
func (s *ProducerState) entry(pid int64, epoch int16) *producerEntry {
	e := s.m[pid]
	if e == nil {
		e = newProducerEntry(epoch)
		s.m[pid] = e
	}
	if epoch != e.epoch {
		e.epoch = epoch
		e.batches = e.batches[:0]
	}
	return e
}

func (s *ProducerState) startTxn(pid int64, e *producerEntry, first int64) {
	e.txnFirstOffset = first
	s.ongoing[pid] = first
	s.firstOngoing = min(s.firstOngoing, first)
	delete(s.guards, pid)
}

// CheckMarker decides whether a marker of producer pid in epoch, written by a coordinator in
// coordinatorEpoch, may be appended: ErrInvalidEpoch for an epoch older than the producer's,
// ErrTransactionCoordinatorFenced for a coordinator epoch older than the last marker's.
func (s *ProducerState) CheckMarker(pid int64, epoch int16, coordinatorEpoch int32) error {
	e := s.m[pid]
	if e == nil {
		return nil
	}
	if epoch < e.epoch {
		return ErrInvalidEpoch
	}
	if coordinatorEpoch < e.coordinatorEpoch {
		return ErrTransactionCoordinatorFenced
	}
	return nil
}

// ApplyMarker records an appended marker (a control batch h, COMMIT when commit) and returns
// the transaction it ended. A marker with no ongoing transaction ends an empty one at its own
// offset, as Kafka's.
func (s *ProducerState) ApplyMarker(h *batch.Header, commit bool, coordinatorEpoch int32) CompletedTxn {
	pid := h.ProducerID
	e := s.entry(pid, h.ProducerEpoch)
	c := CompletedTxn{ProducerID: pid, FirstOffset: h.BaseOffset, LastOffset: h.LastOffset(), Aborted: !commit, LastStableOffset: h.LastOffset() + 1}
	for other, first := range s.ongoing {
		if other != pid && first < c.LastStableOffset {
			c.LastStableOffset = first
		}
	}
	if e.txnFirstOffset >= 0 {
		c.FirstOffset = e.txnFirstOffset
		delete(s.ongoing, pid)
		if e.txnFirstOffset == s.firstOngoing {
			s.firstOngoing = math.MaxInt64
			for _, f := range s.ongoing {
				s.firstOngoing = min(s.firstOngoing, f)
			}
		}
		e.txnFirstOffset = -1
		s.unreplicated = append(s.unreplicated, c)
	}
	e.coordinatorEpoch = coordinatorEpoch
	e.lastTimestamp = h.MaxTimestamp
	delete(s.guards, pid)
	return c
}

// OnHighWatermark forgets the ended transactions whose markers are below hw: committed, they
// no longer hold the last stable offset back.
func (s *ProducerState) OnHighWatermark(hw int64) {
	n := 0
	for n < len(s.unreplicated) && s.unreplicated[n].LastOffset < hw {
		n++
	}
	if n > 0 {
		s.unreplicated = append(s.unreplicated[:0], s.unreplicated[n:]...)
	}
}

// FirstUnstableOffset is the smallest first offset of an ongoing or unreplicated
// transaction, or math.MaxInt64.
func (s *ProducerState) FirstUnstableOffset() int64 {
	first := s.firstOngoing
	for _, c := range s.unreplicated {
		first = min(first, c.FirstOffset)
	}
	return first
}

// Ongoing reports the first offset of the producer's ongoing transaction (-1: none).
func (s *ProducerState) Ongoing(pid int64) int64 {
	if e := s.m[pid]; e != nil {
		return e.txnFirstOffset
	}
	return -1
}

// StartVerification returns the guard an append of producer pid in epoch must carry to start
// a transaction, and whether one is needed at all (not when the producer's transaction is
// ongoing here in that epoch). A verification already in flight keeps its guard.
func (s *ProducerState) StartVerification(pid int64, epoch int16) (VerificationGuard, bool) {
	if e := s.m[pid]; e != nil && e.txnFirstOffset >= 0 && e.epoch == epoch {
		return 0, false
	}
	if v, ok := s.guards[pid]; ok {
		v.epoch = max(v.epoch, epoch)
		s.guards[pid] = v
		return v.guard, true
	}
	s.lastGuard++
	s.guards[pid] = verification{guard: s.lastGuard, epoch: epoch}
	return s.lastGuard, true
}

// CheckVerification refuses (ErrInvalidTxnState) a transactional batch that would start a
// transaction unless guard is the one StartVerification stored for its producer, in an epoch
// not newer than the batch's, and no marker cleared it since.
func (s *ProducerState) CheckVerification(h *batch.Header, guard VerificationGuard) error {
	if !h.IsTransactional() || h.ProducerID < 0 || s.Ongoing(h.ProducerID) >= 0 {
		return nil
	}
	v, ok := s.guards[h.ProducerID]
	if !ok || guard == 0 || v.guard != guard || h.ProducerEpoch < v.epoch {
		return ErrInvalidTxnState
	}
	return nil
}

// RemoveExpired forgets the producers with no ongoing transaction whose last batch's
// timestamp is expirationMs or more before nowMs, and the guards unused for expirationMs
// (measured from the first sweep that found them: a guard carries no time), and returns how
// many producers it removed.
func (s *ProducerState) RemoveExpired(nowMs, expirationMs int64) int {
	n := 0
	for id, e := range s.m {
		if e.txnFirstOffset < 0 && nowMs-e.lastTimestamp >= expirationMs {
			delete(s.m, id)
			n++
		}
	}
	for id, v := range s.guards {
		switch {
		case v.seen == 0:
			v.seen = nowMs
			s.guards[id] = v
		case nowMs-v.seen >= expirationMs:
			delete(s.guards, id)
		}
	}
	return n
}

// ProducerInfo describes one producer (DescribeProducers).
type ProducerInfo struct {
	ProducerID       int64
	Epoch            int16
	LastSequence     int32
	LastTimestamp    int64
	CoordinatorEpoch int32
	TxnStartOffset   int64 // -1: no ongoing transaction
}

// Producers lists the producers, by id.
func (s *ProducerState) Producers() []ProducerInfo {
	out := make([]ProducerInfo, 0, len(s.m))
	for id, e := range s.m {
		pi := ProducerInfo{ProducerID: id, Epoch: e.epoch, LastSequence: -1, LastTimestamp: e.lastTimestamp, CoordinatorEpoch: e.coordinatorEpoch, TxnStartOffset: e.txnFirstOffset}
		if n := len(e.batches); n > 0 {
			pi.LastSequence = e.batches[n-1].LastSeq
		}
		out = append(out, pi)
	}
	slices.SortFunc(out, func(a, b ProducerInfo) int { return cmp.Compare(a.ProducerID, b.ProducerID) })
	return out
}

// rebuildIndexes recomputes ongoing and firstOngoing from the entries (after a snapshot load).
func (s *ProducerState) rebuildIndexes() {
	clear(s.ongoing)
	s.firstOngoing = math.MaxInt64
	for id, e := range s.m {
		if e.txnFirstOffset >= 0 {
			s.ongoing[id] = e.txnFirstOffset
			s.firstOngoing = min(s.firstOngoing, e.txnFirstOffset)
		}
	}
}

func inSequence(last, next int32) bool {
	return next == last+1 || (last == math.MaxInt32 && next == 0)
}

// LastOffsets maps each producer to the last offset of its last batch (Kafka's
// lastRecordsOfActiveProducers): the log cleaner keeps that batch, empty if need be, so the
// producer's epoch and sequence survive compaction.
func (s *ProducerState) LastOffsets() map[int64]int64 {
	out := make(map[int64]int64, len(s.m))
	for id, e := range s.m {
		if n := len(e.batches); n > 0 {
			out[id] = e.batches[n-1].LastOffset
		}
	}
	return out
}
