package replica

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/storage"
)

// Transactions on a partition (KIP-98, Kafka's Partition / UnifiedLog side): the producer
// state's transaction rules (producerstate.go), the markers the transaction coordinator has
// the leader write (WriteTxnMarker), the last stable offset, the aborted transactions in the
// transaction index (storage/txnindex.go) and KIP-890's verification guard.
//
// A marker is a control batch: attributes control|transactional, the producer's id and
// epoch, base sequence -1, one record (Kafka's EndTransactionMarker), big endian:
//
//	key:   version int16 (0) | type int16 (0 ABORT, 1 COMMIT)
//	value: version int16 (0) | coordinatorEpoch int32
//
// Every path that puts a batch in the log applies it to the producer state the same way
// (applyBatch): the leader's appends, a follower's copies (ApplyFollower) and the replay
// after a restart or truncation (rebuildProducersLocked). An ABORT adds its
// storage.AbortedTxn to the transaction index there (idempotent by marker offset, so a replay
// re-adds only what a crash lost).
//
// The last stable offset (LSO) is min(high watermark, max(first unstable offset, log start
// offset)), the first unstable offset being the smallest first offset of a transaction that
// is ongoing or whose marker is not yet below the high watermark. It is recomputed holding
// mu whenever the high watermark or the producer state changes (publishLSOLocked) and
// published in lso, which readers load without a lock, as hw, and to the log
// (storage.Log.SetLastStableOffset), whose cleaner must not clean at or past it.

// Control record types of a marker's key.
const (
	controlTypeAbort  = 0
	controlTypeCommit = 1
)

// A control batch (COMMIT or ABORT marker) for one producer, written by the leader.
type TxnMarker struct {
	ProducerID       int64
	ProducerEpoch    int16
	Commit           bool  // COMMIT (true) or ABORT (false)
	CoordinatorEpoch int32 // the writing coordinator's epoch; an older one than the last seen for the producer is fenced
	// TransactionVersion is the ended transaction's (WriteTxnMarkers v2): 2 for KIP-890
	// part 2, whose marker carries the epoch the coordinator bumped at EndTxn.
	TransactionVersion int8
}

// buildMarker encodes m as a control batch at offset 0 (the append assigns it).
func buildMarker(m TxnMarker, nowMs int64) ([]byte, error) {
	typ := int16(controlTypeAbort)
	if m.Commit {
		typ = controlTypeCommit
	}
	key := binary.BigEndian.AppendUint16(make([]byte, 0, 4), 0)
	key = binary.BigEndian.AppendUint16(key, uint16(typ))
	val := binary.BigEndian.AppendUint16(make([]byte, 0, 6), 0)
	val = binary.BigEndian.AppendUint32(val, uint32(m.CoordinatorEpoch))
	h := batch.Header{
		PartitionLeaderEpoch: -1,
		Attributes:           batch.AttrControl | batch.AttrTransactional,
		BaseTimestamp:        nowMs,
		MaxTimestamp:         nowMs,
		ProducerID:           m.ProducerID,
		ProducerEpoch:        m.ProducerEpoch,
		BaseSequence:         -1,
	}
	return batch.Build(h, []batch.Record{{Key: key, Value: val}}, batch.CodecNone)
}

// errBadMarker: a control batch whose record is not a marker we can read.
var errBadMarker = errors.New("replica: unreadable transaction marker")

// parseMarker reads the marker of control batch b. ok is false for a control record of
// another type (Kafka has others, none of them transactional).
func parseMarker(b []byte) (commit bool, coordinatorEpoch int32, ok bool, err error) {
	recs, err := batch.Records(b)
	if err != nil {
		return false, 0, false, fmt.Errorf("%w: %w", errBadMarker, err)
	}
	if len(recs) != 1 || len(recs[0].Key) < 4 {
		return false, 0, false, fmt.Errorf("%w: %d records", errBadMarker, len(recs))
	}
	typ := int16(binary.BigEndian.Uint16(recs[0].Key[2:]))
	if typ != controlTypeAbort && typ != controlTypeCommit {
		return false, 0, false, nil
	}
	if v := recs[0].Value; len(v) >= 6 {
		coordinatorEpoch = int32(binary.BigEndian.Uint32(v[2:]))
	} else {
		return false, 0, false, fmt.Errorf("%w: value of %d bytes", errBadMarker, len(v))
	}
	return typ == controlTypeCommit, coordinatorEpoch, true, nil
}

// applyBatch applies one batch put in the log (b its bytes, h its header with its offsets) to
// ps: a data batch updates the producer, a marker ends its transaction, and an ABORT is added
// to the transaction index. An unreadable marker is logged and skipped (its bytes passed
// their CRC: a producer state without it is the best there is). Holding mu (or p not yet
// published).
func (p *Partition) applyBatch(ps *ProducerState, h *batch.Header, b []byte) error {
	if !h.IsControl() {
		ps.Update(h)
		return nil
	}
	if h.ProducerID < 0 {
		return nil
	}
	commit, coordinatorEpoch, ok, err := parseMarker(b)
	if err != nil {
		p.m.log.Warn("skipping a control batch", "topic", p.Topic, "partition", p.Index, "offset", h.BaseOffset, "err", err)
		return nil
	}
	if !ok {
		return nil
	}
	c := ps.ApplyMarker(h, commit, coordinatorEpoch)
	if !c.Aborted {
		return nil
	}
	err = p.Log().AppendAbortedTxn(storage.AbortedTxn{ProducerID: c.ProducerID, FirstOffset: c.FirstOffset, LastOffset: c.LastOffset, LastStableOffset: c.LastStableOffset})
	if err != nil {
		p.mu.txnIndexBehind = true // a rebuild's replay adds it again (snapshotProducers)
	}
	return err
}

// WriteTxnMarker appends the marker as the leader (any current leader epoch), as one control
// batch: ends the producer's ongoing transaction on this partition (an ABORT adds its
// storage.AbortedTxn), may advance the LSO, clears the producer's verification guard. With
// followers it waits like an acks=all append (res.Wait). Errors: ErrNotLeaderOrFollower,
// ErrNotEnoughReplicas, ErrInvalidEpoch (marker epoch older than the producer's),
// ErrTransactionCoordinatorFenced. A marker for a producer with no ongoing transaction here
// is still written (Kafka does).
func (p *Partition) WriteTxnMarker(m TxnMarker, nowMs, timeoutMs int64) (AppendResult, error) {
	raw, err := buildMarker(m, nowMs)
	if err != nil {
		return AppendResult{}, err
	}
	h, err := batch.ParseHeader(raw)
	if err != nil {
		return AppendResult{}, err
	}
	s := p.Settings()
	p.mu.Lock()
	defer p.mu.Unlock()
	v := p.role.Load()
	ls := p.mu.leader
	if err := p.checkAppendLocked(v, ls, s, true); err != nil {
		return AppendResult{}, err
	}
	if err := p.mu.producers.CheckMarker(m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch); err != nil {
		return AppendResult{}, fmt.Errorf("%w: marker of producer %d epoch %d, coordinator epoch %d, on %s-%d", err, m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch, p.Topic, p.Index)
	}
	// A transaction of version 2 ends with its marker in the bumped epoch, the epoch the
	// producer's next transaction runs in: a guard taken for that next transaction (its first
	// produce may race the marker; the coordinator adds the partition once the marker is
	// written) stays. Any other guard goes with the marker: a late write of the ended
	// transaction can never start one.
	g, kept := p.mu.producers.guards[m.ProducerID]
	kept = kept && m.TransactionVersion >= 2 && g.epoch >= m.ProducerEpoch
	res, err := p.appendLocked(raw, []batch.Header{h}, nowMs, v, ls, s, true, timeoutMs)
	if err == nil && kept {
		p.mu.producers.guards[m.ProducerID] = g
	}
	return res, err
}

// LastStableOffset: the smallest first offset of an ongoing transaction, or the high
// watermark if smaller or none (never above it). Atomic like HighWatermark; a follower keeps
// its own from the batches it copies. Never below the log start offset: retention moves that
// in the storage layer, without the partition republishing lso (an open transaction's first
// segment may be deleted, and its LSO follows the log start as Kafka's does).
func (p *Partition) LastStableOffset() int64 {
	return min(p.hw.Load(), max(p.lso.Load(), p.Log().LogStartOffset()))
}

// publishLSOLocked recomputes the last stable offset after the high watermark or the
// producer state changed, and reports whether it moved. Holding mu.
func (p *Partition) publishLSOLocked() bool {
	hw := p.hw.Load()
	ps := p.mu.producers
	ps.OnHighWatermark(hw)
	lso := min(hw, max(ps.FirstUnstableOffset(), p.Log().LogStartOffset()))
	p.Log().SetLastStableOffset(lso) // the log cleaner never cleans at or past it
	return p.lso.Swap(lso) != lso
}

// StartVerification returns the guard to carry through the coordinator's check and into the
// append, and whether a check is needed at all (false: the producer already has an ongoing
// transaction here in this epoch, append without one). KIP-890 part 1.
func (p *Partition) StartVerification(producerID int64, epoch int16) (g VerificationGuard, needed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.producers.StartVerification(producerID, epoch)
}

// ActiveProducers lists the partition's producers (DescribeProducers), by id.
func (p *Partition) ActiveProducers() []ProducerInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.producers.Producers()
}

// ExpireProducers applies producer.id.expiration.ms at nowMs (ProducerState.RemoveExpired)
// and returns how many producers it forgot.
func (p *Partition) ExpireProducers(nowMs, expirationMs int64) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.producers == nil {
		return 0
	}
	n := p.mu.producers.RemoveExpired(nowMs, expirationMs)
	if n > 0 {
		p.mu.snapshotAt = -1 // the newest snapshot still has them
	}
	return n
}
