package replica

import (
	"errors"
	"math"

	"github.com/gregor-project/gregor/internal/batch"
)

// Idempotent producer state of one partition (Kafka's ProducerStateManager).
//
// For every producer id the leader remembers the epoch and the last five batches appended
// (their first/last sequence and offsets). A batch repeating one of them exactly is a retry:
// it is not appended again and is answered with the original offsets. A batch whose first
// sequence does not follow the last one is a gap (OUT_OF_ORDER_SEQUENCE_NUMBER); an older
// epoch is a fenced producer (INVALID_PRODUCER_EPOCH). A producer id with no state accepts any
// sequence (its state may have been removed by retention), as Kafka does.
//
// ProducerState is not safe for concurrent use: the Partition lock guards it.

// maxBatchesPerProducer is how many recent batches per producer are kept for duplicate checks.
const maxBatchesPerProducer = 5

// Sentinel errors, translated to Kafka codes at the api boundary.
var (
	ErrOutOfOrderSequence = errors.New("replica: out of order sequence number")
	ErrInvalidEpoch       = errors.New("replica: invalid producer epoch")
)

// BatchMeta identifies one appended batch of a producer.
type BatchMeta struct {
	FirstSeq, LastSeq       int32
	FirstOffset, LastOffset int64
}

type producerEntry struct {
	epoch         int16
	lastTimestamp int64
	batches       []BatchMeta // oldest first, at most maxBatchesPerProducer
}

// ProducerState maps producer ids to their recent batches.
type ProducerState struct {
	m map[int64]*producerEntry
}

// NewProducerState returns empty state.
func NewProducerState() *ProducerState { return &ProducerState{m: map[int64]*producerEntry{}} }

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
	switch {
	case h.ProducerEpoch < e.epoch:
		return nil, ErrInvalidEpoch
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
	if len(e.batches) > 0 && !inSequence(e.batches[len(e.batches)-1].LastSeq, h.BaseSequence) {
		return nil, ErrOutOfOrderSequence
	}
	return nil, nil
}

// Update records an appended batch whose base offset is h.BaseOffset.
func (s *ProducerState) Update(h *batch.Header) {
	if h.ProducerID < 0 {
		return
	}
	e := s.m[h.ProducerID]
	if e == nil {
		e = &producerEntry{epoch: h.ProducerEpoch}
		s.m[h.ProducerID] = e
	}
	if h.ProducerEpoch != e.epoch {
		e.epoch = h.ProducerEpoch
		e.batches = e.batches[:0]
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
