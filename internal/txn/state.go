package txn

import (
	"maps"
	"slices"
	"strings"
)

// State is a transactional id's state, numbered as Kafka's TransactionState ids (the
// TxnMetadataValue's State field).
type State int8

const (
	Empty          State = 0 // no transaction; after InitProducerId
	Ongoing        State = 1 // partitions added, neither committed nor aborted yet
	PrepareCommit  State = 2 // EndTxn(commit) written; COMMIT markers being written
	PrepareAbort   State = 3 // EndTxn(abort) or an abort by the coordinator written; ABORT markers being written
	CompleteCommit State = 4 // every COMMIT marker written
	CompleteAbort  State = 5 // every ABORT marker written
	// Dead is the pending state of an expiring id: its tombstone is being written. It is
	// never written as a value and never seen as a state.
	Dead State = 6
	// PrepareEpochFence is Kafka's pending state of an Ongoing transaction whose epoch the
	// coordinator bumps to abort it (InitProducerId of a new producer, a timeout). It is
	// never written: the abort's PrepareAbort record carries the bumped epoch.
	PrepareEpochFence State = 7

	none State = -1 // no pending transition
)

var stateNames = map[State]string{
	Empty: "Empty", Ongoing: "Ongoing", PrepareCommit: "PrepareCommit", PrepareAbort: "PrepareAbort",
	CompleteCommit: "CompleteCommit", CompleteAbort: "CompleteAbort", Dead: "Dead", PrepareEpochFence: "PrepareEpochFence",
}

// String is Kafka's name of the state, as DescribeTransactions and ListTransactions report it.
func (s State) String() string {
	if n, ok := stateNames[s]; ok {
		return n
	}
	return "Unknown"
}

// ParseState is the state named name (Kafka's names, case-sensitive, as ListTransactions'
// state filters are matched).
func ParseState(name string) (State, bool) {
	for s, n := range stateNames {
		if n == name {
			return s, true
		}
	}
	return 0, false
}

// TopicPartition names one partition of a transaction.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func comparePartitions(a, b TopicPartition) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return int(a.Partition) - int(b.Partition)
}

// Txn is the state of one transactional id (Kafka's TransactionMetadata).
//
// Invariants: ProducerID >= 0; Epoch >= 0 once the id's first InitProducerId is written (-1
// before); Partitions is empty in Empty, CompleteCommit and CompleteAbort; StartMs is -1 in
// Empty; in PrepareCommit/PrepareAbort Partitions holds the partitions whose markers are not
// yet written; pending is set while a write of this id is in flight (its target state), and
// then every request but reads is answered CONCURRENT_TRANSACTIONS.
type Txn struct {
	ID             string
	ProducerID     int64
	PrevProducerID int64 // the producer id before the last transition; -1 none
	NextProducerID int64 // transaction version 2: the producer id after an epoch overflow; -1 none
	Epoch          int16
	LastEpoch      int16 // the epoch before the last bump (KIP-360 retries); not persisted, as in Kafka
	TimeoutMs      int32
	State          State
	Partitions     map[TopicPartition]struct{}
	StartMs        int64 // when the transaction's first partition was added; -1 none
	UpdateMs       int64 // the last transition (id expiry counts from it)
	ClientVersion  int16 // the transaction version of the last transition: 2 is KIP-890 part 2

	pending     State // the state a write in flight moves to; none if no write is in flight
	failedFence bool  // an epoch fence's write failed: the next fence does not bump again
	markers     *markerPhase
}

// sortedPartitions returns the transaction's partitions in order.
func (t *Txn) sortedPartitions() []TopicPartition {
	ps := slices.Collect(maps.Keys(t.Partitions))
	slices.SortFunc(ps, comparePartitions)
	return ps
}

// Pending is the state a write in flight moves the id to, and whether one is in flight.
func (t *Txn) Pending() (State, bool) { return t.pending, t.pending != none }

// epochExhausted: no more epochs may be handed out for the producer id (Kafka keeps
// Short.MaxValue so that it can always fence the last producer).
func epochExhausted(e int16) bool { return e >= maxEpoch-1 }

const maxEpoch = int16(32767)

// transit is the target of one transition (Kafka's TxnTransitMetadata): the whole state the
// record carries, applied to the Txn once the record is written.
type transit struct {
	ProducerID, PrevProducerID, NextProducerID int64
	Epoch, LastEpoch                           int16
	TimeoutMs                                  int32
	State                                      State
	Partitions                                 []TopicPartition // sorted
	StartMs, UpdateMs                          int64
	ClientVersion                              int16
}

// base is a transit to state s that changes nothing else but the update time.
func (t *Txn) base(s State, now int64) transit {
	return transit{
		ProducerID: t.ProducerID, PrevProducerID: t.ProducerID, NextProducerID: -1,
		Epoch: t.Epoch, LastEpoch: t.LastEpoch, TimeoutMs: t.TimeoutMs, State: s,
		Partitions: t.sortedPartitions(), StartMs: t.StartMs, UpdateMs: now, ClientVersion: t.ClientVersion,
	}
}

// apply completes a transition whose record was written.
func (t *Txn) apply(n transit) {
	t.ProducerID, t.PrevProducerID, t.NextProducerID = n.ProducerID, n.PrevProducerID, n.NextProducerID
	t.Epoch, t.LastEpoch, t.TimeoutMs, t.State = n.Epoch, n.LastEpoch, n.TimeoutMs, n.State
	t.Partitions = make(map[TopicPartition]struct{}, len(n.Partitions))
	for _, p := range n.Partitions {
		t.Partitions[p] = struct{}{}
	}
	t.StartMs, t.UpdateMs, t.ClientVersion = n.StartMs, n.UpdateMs, n.ClientVersion
	t.pending = none
}
