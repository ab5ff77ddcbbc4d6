package txn

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Config is what the coordinator acts on (Kafka's transaction.* broker configs); zero values
// take Kafka's defaults.
type Config struct {
	MaxTimeoutMs            int64 // transaction.max.timeout.ms (900000)
	AbortTimedOutIntervalMs int64 // transaction.abort.timed.out.transaction.cleanup.interval.ms (10000)
	IDExpirationMs          int64 // transactional.id.expiration.ms (604800000)
	RemoveExpiredIntervalMs int64 // transaction.remove.expired.transaction.cleanup.interval.ms (3600000)
	// CommitTimeoutMs bounds how long the Coordinator waits for the ISR to have an append
	// (DefaultCommitTimeoutMs); the core does not use it.
	CommitTimeoutMs int64
}

// Kafka's defaults.
const (
	DefaultMaxTimeoutMs            = 900_000
	DefaultAbortTimedOutIntervalMs = 10_000
	DefaultIDExpirationMs          = 604_800_000
	DefaultRemoveExpiredIntervalMs = 3_600_000
	DefaultCommitTimeoutMs         = 5_000
)

// Marker retries back off from markerBackoffMinMs, doubling up to markerBackoffMaxMs; a
// Complete* record whose append failed is retried after markerBackoffMinMs.
const (
	markerBackoffMinMs = 100
	markerBackoffMaxMs = 1000
)

func (c *Config) defaults() {
	if c.MaxTimeoutMs <= 0 {
		c.MaxTimeoutMs = DefaultMaxTimeoutMs
	}
	if c.AbortTimedOutIntervalMs <= 0 {
		c.AbortTimedOutIntervalMs = DefaultAbortTimedOutIntervalMs
	}
	if c.IDExpirationMs <= 0 {
		c.IDExpirationMs = DefaultIDExpirationMs
	}
	if c.RemoveExpiredIntervalMs <= 0 {
		c.RemoveExpiredIntervalMs = DefaultRemoveExpiredIntervalMs
	}
	if c.CommitTimeoutMs <= 0 {
		c.CommitTimeoutMs = DefaultCommitTimeoutMs
	}
}

// Waiter identifies a request waiting in the core for its answer; the core only stores it
// and hands it back in a Reply. It must be non-nil.
type Waiter any

// Reply is the answer for a waiting request; Msg is the request's response (see each method).
type Reply struct {
	To  Waiter
	Msg any
}

// Write is records to append, in order, as one batch; its outcome is reported with
// Written(ID, err), the Writes in the order they were appended.
type Write struct {
	ID      uint64
	Records []Record
}

// MarkerJob is one attempt at a transaction's markers; its outcome is reported with
// MarkersWritten(ID, failed).
type MarkerJob struct {
	ID uint64
	Markers
}

// Ready is the output of one step: append the Writes in order (reporting each with Written),
// send the Markers (reporting each with MarkersWritten), deliver the Replies, and log the
// Warnings (failures nobody waits for). NeedProducerID: the request needs a fresh producer id
// it was not given; nothing was done, and the driver asks again with one.
type Ready struct {
	Replies        []Reply
	Writes         []Write
	Markers        []MarkerJob
	Warnings       []error
	NeedProducerID bool
}

// Shard is the deterministic core of one __transaction_state partition: its transactional
// ids and their state machine. It has no goroutines, clock or I/O; the driver serialises
// calls.
type Shard struct {
	cfg        Config
	coordEpoch int32 // the coordinator epoch its markers carry: the partition's leader epoch
	txns       map[string]*Txn
	timers     timers

	writeSeq  uint64
	onWritten map[uint64]func(error)
	jobSeq    uint64
	jobs      map[uint64]string // marker job -> transactional id

	// During a step: its time and its output being assembled.
	now int64
	out Ready
}

// NewShard returns an empty shard for a coordinator in coordinatorEpoch. Call LoadComplete
// (after any Replay) before requests.
func NewShard(cfg Config, coordinatorEpoch int32) *Shard {
	cfg.defaults()
	return &Shard{
		cfg: cfg, coordEpoch: coordinatorEpoch, txns: map[string]*Txn{}, timers: newTimers(),
		onWritten: map[uint64]func(error){}, jobs: map[uint64]string{},
	}
}

// Txn returns a transactional id's state, or nil (for tests and tools; the caller holds the
// driver's lock and must not modify it).
func (s *Shard) Txn(id string) *Txn { return s.txns[id] }

// NumTxns is the number of transactional ids the shard holds.
func (s *Shard) NumTxns() int { return len(s.txns) }

func (s *Shard) begin(now int64) {
	s.now = now
	s.out = Ready{}
}

func (s *Shard) end() Ready {
	r := s.out
	s.out = Ready{}
	return r
}

func (s *Shard) warn(err error) { s.out.Warnings = append(s.out.Warnings, err) }

func (s *Shard) reply(w Waiter, msg any) {
	s.out.Replies = append(s.out.Replies, Reply{To: w, Msg: msg})
}

func (s *Shard) sortedTxns() []*Txn {
	ts := make([]*Txn, 0, len(s.txns))
	for _, t := range s.txns {
		ts = append(ts, t)
	}
	slices.SortFunc(ts, func(a, b *Txn) int { return strings.Compare(a.ID, b.ID) })
	return ts
}

// write queues records for appending; done runs (inside Written) with the outcome.
func (s *Shard) write(recs []Record, done func(err error)) {
	s.writeSeq++
	s.out.Writes = append(s.out.Writes, Write{ID: s.writeSeq, Records: recs})
	s.onWritten[s.writeSeq] = done
}

// transition writes t's move to n: t is pending until the record's outcome, which done gets
// after n is applied (nil) or t left as it was (the failure, mapped as Kafka's
// appendTransactionToLog does).
func (s *Shard) transition(t *Txn, n transit, done func(err *kerr.Error)) {
	t.pending = n.State
	s.write(records(t.ID, n), func(err error) {
		if s.txns[t.ID] != t {
			done(kerr.NotCoordinator) // unloaded meanwhile
			return
		}
		if err != nil {
			t.pending = none
			done(writeError(err))
			return
		}
		t.apply(n)
		done(nil)
	})
}

// Written reports the outcome of appending Write id: nil, or an error, ideally a *kerr.Error
// naming the partition's failure, which the core maps as Kafka does.
func (s *Shard) Written(now int64, id uint64, err error) Ready {
	s.begin(now)
	if done := s.onWritten[id]; done != nil {
		delete(s.onWritten, id)
		done(err)
	}
	return s.end()
}

// writeError maps an append failure as Kafka's TransactionStateManager.appendTransactionToLog.
func writeError(err error) *kerr.Error {
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		return kerr.UnknownServerError
	}
	switch ke {
	case kerr.UnknownTopicOrPartition, kerr.NotEnoughReplicas, kerr.NotEnoughReplicasAfterAppend, kerr.RequestTimedOut:
		return kerr.CoordinatorNotAvailable
	case kerr.NotLeaderForPartition, kerr.KafkaStorageError:
		return kerr.NotCoordinator
	case kerr.MessageTooLarge, kerr.RecordListTooLarge:
		return kerr.UnknownServerError
	}
	return ke
}

// NextDeadline is the earliest time Tick has something to do; ok false if nothing is
// scheduled. It may be early (Tick then does nothing).
func (s *Shard) NextDeadline() (int64, bool) { return s.timers.Next() }

// Tick fires every deadline due at now.
func (s *Shard) Tick(now int64) Ready {
	s.begin(now)
	for {
		k, ok := s.timers.PopDue(now)
		if !ok {
			break
		}
		switch k.kind {
		case timerAbortScan:
			s.abortTimedOut()
			s.timers.Set(timerKey{kind: timerAbortScan}, now+s.cfg.AbortTimedOutIntervalMs)
		case timerExpiryScan:
			s.expireIDs()
			s.timers.Set(timerKey{kind: timerExpiryScan}, now+s.cfg.RemoveExpiredIntervalMs)
		case timerMarkers:
			if t := s.txns[k.id]; t != nil && t.markers != nil && t.markers.job == 0 && !t.markers.stopped {
				s.sendMarkers(t)
			}
		case timerComplete:
			if t := s.txns[k.id]; t != nil && t.markers != nil && t.pending == none && len(t.Partitions) == 0 {
				s.complete(t)
			}
		}
	}
	return s.end()
}

// Replay applies one record of the partition's log (in log order) while loading.
func (s *Shard) Replay(key, value []byte) error {
	id, err := decodeKey(key)
	if err != nil {
		return err
	}
	if value == nil {
		delete(s.txns, id)
		return nil
	}
	t, err := decodeValue(id, value)
	if err != nil {
		return err
	}
	s.txns[id] = t
	return nil
}

// LoadComplete ends loading (after Replay of every record, or for a new partition): the
// periodic checks are scheduled, and every transaction found in PrepareCommit or
// PrepareAbort is completed: its markers are written again, then its Complete* record.
// Ongoing transactions are left to their timeout.
func (s *Shard) LoadComplete(now int64) Ready {
	s.begin(now)
	s.timers.Set(timerKey{kind: timerAbortScan}, now+s.cfg.AbortTimedOutIntervalMs)
	s.timers.Set(timerKey{kind: timerExpiryScan}, now+s.cfg.RemoveExpiredIntervalMs)
	for _, t := range s.sortedTxns() {
		if t.State == PrepareCommit || t.State == PrepareAbort {
			s.startMarkers(t)
		}
	}
	return s.end()
}

// Unload forgets all state (the partition moved away, or the broker is closing): writes in
// flight are failed NOT_COORDINATOR, so their requests are answered so.
func (s *Shard) Unload(now int64) Ready {
	s.begin(now)
	s.txns = map[string]*Txn{}
	s.timers = newTimers()
	s.jobs = map[uint64]string{}
	ids := make([]uint64, 0, len(s.onWritten))
	for id := range s.onWritten {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		done := s.onWritten[id]
		delete(s.onWritten, id)
		done(kerr.NotCoordinator)
	}
	return s.end()
}

// expireIDs removes the ids idle (Empty, CompleteCommit, CompleteAbort) for
// transactional.id.expiration.ms, writing their tombstones as one batch (Kafka's
// removeExpiredTransactionalIds).
func (s *Shard) expireIDs() {
	var expired []*Txn
	for _, t := range s.sortedTxns() {
		switch t.State {
		case Empty, CompleteCommit, CompleteAbort:
		default:
			continue
		}
		if t.pending != none || t.markers != nil || t.UpdateMs > s.now-s.cfg.IDExpirationMs {
			continue
		}
		expired = append(expired, t)
	}
	if len(expired) == 0 {
		return
	}
	recs := make([]Record, len(expired))
	epochs := make([]int16, len(expired))
	for i, t := range expired {
		t.pending = Dead
		recs[i] = Record{Key: keyRecord(t.ID)}
		epochs[i] = t.Epoch
	}
	s.write(recs, func(err error) {
		for i, t := range expired {
			if s.txns[t.ID] != t || t.pending != Dead {
				continue
			}
			t.pending = none
			if err == nil && t.Epoch == epochs[i] {
				delete(s.txns, t.ID)
			}
		}
		if err != nil {
			s.warn(fmt.Errorf("txn: writing the tombstones of %d expired transactional ids: %w", len(expired), err))
		}
	})
}
