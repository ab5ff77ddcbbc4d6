package txn

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Markers is the marker of one ended transaction, to be written to each of its partitions.
type Markers struct {
	ProducerID       int64
	ProducerEpoch    int16
	Commit           bool
	CoordinatorEpoch int32
	TransactionalID  string
	Partitions       []TopicPartition
	// TransactionVersion is the transaction's: 2 for a client of KIP-890 part 2 (its
	// marker's epoch is the one bumped at EndTxn), else 0. WriteTxnMarkers v2 carries it.
	TransactionVersion int16
}

// MarkerSender writes markers to the leaders of their partitions (implemented by the
// broker). It returns the partitions not written and why; the coordinator retries those with
// backoff. A partition whose topic no longer exists counts as written (nil), as Kafka does.
// An error that wraps kerr.InvalidProducerEpoch or kerr.TransactionCoordinatorFenced (a newer
// coordinator or producer epoch is on the partition) ends the attempts: the transaction is
// another coordinator's now. ctx ends when the coordinator resigns.
type MarkerSender interface {
	WriteMarkers(ctx context.Context, m Markers) map[TopicPartition]error
}

// markerPhase is the completion of a transaction in PrepareCommit or PrepareAbort (Kafka's
// TransactionMarkerChannelManager): its markers are sent until every partition has one
// (each written partition leaves Txn.Partitions), then its Complete* record is written.
type markerPhase struct {
	commit    bool
	job       uint64 // the attempt in flight; 0: none (one is scheduled, or the record is being written)
	backoffMs int64  // the wait before the next attempt
	attempts  int
	stopped   bool // fenced: no more attempts by this coordinator
}

// startMarkers begins completing t, in PrepareCommit or PrepareAbort.
func (s *Shard) startMarkers(t *Txn) {
	t.markers = &markerPhase{commit: t.State == PrepareCommit, backoffMs: markerBackoffMinMs}
	if len(t.Partitions) == 0 {
		s.complete(t)
		return
	}
	s.sendMarkers(t)
}

func (s *Shard) sendMarkers(t *Txn) {
	s.jobSeq++
	t.markers.job = s.jobSeq
	t.markers.attempts++
	s.jobs[s.jobSeq] = t.ID
	s.out.Markers = append(s.out.Markers, MarkerJob{ID: s.jobSeq, Markers: Markers{
		ProducerID: t.ProducerID, ProducerEpoch: t.Epoch, Commit: t.markers.commit,
		CoordinatorEpoch: s.coordEpoch, TransactionalID: t.ID, Partitions: t.sortedPartitions(),
		TransactionVersion: t.ClientVersion,
	}})
}

// MarkersWritten reports the outcome of MarkerJob id: the partitions not written and why
// (none: all written).
func (s *Shard) MarkersWritten(now int64, id uint64, failed map[TopicPartition]error) Ready {
	s.begin(now)
	defer func() { delete(s.jobs, id) }()
	t := s.txns[s.jobs[id]]
	if t == nil || t.markers == nil || t.markers.job != id {
		return s.end()
	}
	t.markers.job = 0
	var fenced, first error
	for _, p := range t.sortedPartitions() {
		err, bad := failed[p]
		if !bad || err == nil {
			delete(t.Partitions, p)
			continue
		}
		if first == nil {
			first = fmt.Errorf("%s-%d: %w", p.Topic, p.Partition, err)
		}
		if errors.Is(err, kerr.InvalidProducerEpoch) || errors.Is(err, kerr.TransactionCoordinatorFenced) {
			fenced = fmt.Errorf("%s-%d: %w", p.Topic, p.Partition, err)
		}
	}
	switch {
	case fenced != nil:
		t.markers.stopped = true
		s.warn(fmt.Errorf("txn: %q: markers of producer %d epoch %d fenced, left to the newer coordinator: %w", t.ID, t.ProducerID, t.Epoch, fenced))
	case len(t.Partitions) == 0:
		s.complete(t)
	default:
		if t.markers.attempts == 1 || t.markers.attempts%10 == 0 {
			s.warn(fmt.Errorf("txn: %q: %d markers not written after %d attempts, retrying: %w", t.ID, len(t.Partitions), t.markers.attempts, first))
		}
		s.timers.Set(timerKey{timerMarkers, t.ID}, now+t.markers.backoffMs)
		t.markers.backoffMs = min(2*t.markers.backoffMs, markerBackoffMaxMs)
	}
	return s.end()
}

// complete writes t's Complete* record once every marker is written (Kafka's
// prepareComplete); an append that failed is retried, unless the partition is lost.
func (s *Shard) complete(t *Txn) {
	target := CompleteAbort
	if t.State == PrepareCommit {
		target = CompleteCommit
	}
	n := t.base(target, s.now)
	n.Partitions, n.NextProducerID = nil, -1
	if t.ClientVersion >= 2 && t.NextProducerID >= 0 {
		n.ProducerID, n.Epoch = t.NextProducerID, 0 // the epoch overflowed: the next producer id starts at 0
	}
	s.transition(t, n, func(err *kerr.Error) {
		switch {
		case err == nil:
			t.markers = nil
			t.failedFence = false
		case err == kerr.NotCoordinator:
			s.warn(fmt.Errorf("txn: %q: the %s record was not written, the partition is lost: %w", t.ID, target, err))
		default:
			s.warn(fmt.Errorf("txn: %q: the %s record was not written, retrying: %w", t.ID, target, err))
			s.timers.Set(timerKey{timerComplete, t.ID}, s.now+markerBackoffMinMs)
		}
	})
}

// abortTimedOut aborts, with an epoch bump that fences its producer, every Ongoing
// transaction older than its timeout (Kafka's abortTimedOutTransactions).
func (s *Shard) abortTimedOut() {
	for _, t := range s.sortedTxns() {
		if t.State != Ongoing || t.pending != none || t.StartMs+int64(t.TimeoutMs) >= s.now {
			continue
		}
		id, pid, epoch := t.ID, t.ProducerID, t.Epoch
		s.fenceAndAbort(t, func(err *kerr.Error) {
			if err != nil {
				s.warn(fmt.Errorf("txn: aborting the timed-out transaction of %q (producer %d epoch %d): %w", id, pid, epoch, err))
			}
		})
	}
}

// fenceAndAbort bumps an Ongoing transaction's epoch (Kafka's PrepareEpochFence: the bump is
// never handed to a client, and its producer's next request is fenced) and aborts it with
// the bumped epoch; done gets the outcome of the PrepareAbort record. If an earlier fence's
// write failed, the epoch is not bumped again.
func (s *Shard) fenceAndAbort(t *Txn, done func(*kerr.Error)) {
	if !t.failedFence && t.Epoch < maxEpoch {
		t.Epoch++
	}
	t.LastEpoch = -1
	tv2 := t.ClientVersion >= 2
	n := s.prepareEnd(t, PrepareAbort, tv2, -1, false)
	s.transition(t, n, func(err *kerr.Error) {
		if err != nil {
			t.failedFence = true
			done(err)
			return
		}
		s.startMarkers(t)
		done(nil)
	})
}

// prepareEnd is the PrepareCommit/PrepareAbort transit of t (Kafka's prepareAbortOrCommit):
// with transaction version 2 it bumps the epoch (and carries nextPID, the producer id after
// an overflow), and an abort of no transaction starts now.
func (s *Shard) prepareEnd(t *Txn, target State, tv2 bool, nextPID int64, noPartitions bool) transit {
	n := t.base(target, s.now)
	n.NextProducerID, n.ClientVersion = nextPID, 0
	if tv2 {
		n.ClientVersion = 2
		if t.Epoch < maxEpoch {
			n.Epoch = t.Epoch + 1
		}
		n.LastEpoch = t.Epoch
	}
	if noPartitions {
		n.StartMs = s.now
	}
	return n
}
