package txn

import (
	"regexp"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The requests of the core. Each takes now and, if it waits for a write, a Waiter; answers
// come back as Replies. InitProducerID and EndTxn may need a fresh producer id: given one
// (fresh >= 0) they use it, else they return Ready.NeedProducerID and do nothing.

// fencedFor is PRODUCER_FENCED as a client of version v understands it: versions before
// KIP-588's (InitProducerId v4, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn v2) know only
// INVALID_PRODUCER_EPOCH, as Kafka's handlers answer them.
func fencedFor(err *kerr.Error, v, since int16) *kerr.Error {
	if err == kerr.ProducerFenced && v < since {
		return kerr.InvalidProducerEpoch
	}
	return err
}

func code(err *kerr.Error) int16 {
	if err == nil {
		return 0
	}
	return err.Code
}

// ValidateInit checks an InitProducerId request with a transactional id before it reaches a
// coordinator, as Kafka does: INVALID_REQUEST for an empty (or null) id or a producer id and
// epoch of which only one is -1, INVALID_TRANSACTION_TIMEOUT for a timeout outside
// (0, transaction.max.timeout.ms].
func ValidateInit(req *kmsg.InitProducerIDRequest, maxTimeoutMs int64) *kerr.Error {
	switch {
	case req.TransactionalID == nil || *req.TransactionalID == "":
		return kerr.InvalidRequest
	case req.TransactionTimeoutMillis <= 0 || int64(req.TransactionTimeoutMillis) > maxTimeoutMs:
		return kerr.InvalidTransactionTimeout
	case req.Version >= 3 && (req.ProducerID < 0) != (req.ProducerEpoch < 0):
		return kerr.InvalidRequest
	}
	return nil
}

// InitProducerIDResponse is the answer carrying err (and no producer id).
func InitProducerIDResponse(req *kmsg.InitProducerIDRequest, err *kerr.Error, pid int64, epoch int16) *kmsg.InitProducerIDResponse {
	r := kmsg.NewPtrInitProducerIDResponse()
	r.Version = req.Version
	r.ErrorCode = code(fencedFor(err, req.Version, 4))
	r.ProducerID, r.ProducerEpoch = -1, -1
	if err == nil {
		r.ProducerID, r.ProducerEpoch = pid, epoch
	}
	return r
}

// InitProducerID is Kafka's handleInitProducerId for a transactional id; the reply is a
// *kmsg.InitProducerIDResponse.
func (s *Shard) InitProducerID(now int64, w Waiter, req *kmsg.InitProducerIDRequest, fresh int64) Ready {
	s.begin(now)
	answer := func(err *kerr.Error, pid int64, epoch int16) { s.reply(w, InitProducerIDResponse(req, err, pid, epoch)) }
	if err := ValidateInit(req, s.cfg.MaxTimeoutMs); err != nil {
		answer(err, -1, -1)
		return s.end()
	}
	id := *req.TransactionalID
	expected := req.Version >= 3 && req.ProducerID >= 0
	t := s.txns[id]
	if t == nil {
		if fresh < 0 {
			return Ready{NeedProducerID: true}
		}
		t = &Txn{ID: id, ProducerID: fresh, PrevProducerID: -1, NextProducerID: -1, Epoch: -1, LastEpoch: -1,
			TimeoutMs: req.TransactionTimeoutMillis, State: Empty, Partitions: map[TopicPartition]struct{}{},
			StartMs: -1, UpdateMs: now, pending: none}
		s.txns[id] = t
		fresh = -1
	}
	if t.pending != none {
		answer(kerr.ConcurrentTransactions, -1, -1)
		return s.end()
	}
	// KIP-360: a producer id and epoch in the request are those of a producer recovering; it
	// is fenced unless the id is new, the producer id is the current one (its epoch is
	// checked below), or the previous one with an exhausted epoch (a retry of a rotation).
	if expected && t.Epoch >= 0 && req.ProducerID != t.ProducerID &&
		(req.ProducerID != t.PrevProducerID || !epochExhausted(req.ProducerEpoch)) {
		answer(kerr.ProducerFenced, -1, -1)
		return s.end()
	}
	switch t.State {
	case PrepareCommit, PrepareAbort:
		answer(kerr.ConcurrentTransactions, -1, -1)
		return s.end()
	case Ongoing:
		// Abort the previous producer's transaction first, fencing it; the client retries
		// (CONCURRENT_TRANSACTIONS) until the abort is complete, and then gets the epoch
		// bumped once more.
		s.fenceAndAbort(t, func(err *kerr.Error) {
			if err == nil {
				err = kerr.ConcurrentTransactions
			}
			answer(err, -1, -1)
		})
		return s.end()
	}
	// Empty, CompleteCommit, CompleteAbort.
	var n transit
	if epochExhausted(t.Epoch) && (!expected || req.ProducerEpoch == t.Epoch) {
		if fresh < 0 {
			s.out = Ready{}
			return Ready{NeedProducerID: true}
		}
		n = t.base(Empty, now)
		n.ProducerID, n.Epoch, n.LastEpoch = fresh, 0, -1
		if expected {
			n.LastEpoch = t.Epoch
		}
	} else {
		n = t.base(Empty, now)
		switch {
		case !expected:
			n.Epoch, n.LastEpoch = t.Epoch+1, -1
		case t.Epoch < 0 || req.ProducerEpoch == t.Epoch:
			n.Epoch, n.LastEpoch = t.Epoch+1, t.Epoch
		case req.ProducerEpoch == t.LastEpoch:
			n.Epoch, n.LastEpoch = t.Epoch, t.LastEpoch // a retry of a bump whose answer was lost
		default:
			answer(kerr.ProducerFenced, -1, -1)
			return s.end()
		}
	}
	n.TimeoutMs, n.Partitions, n.StartMs = req.TransactionTimeoutMillis, nil, -1
	s.transition(t, n, func(err *kerr.Error) { answer(err, t.ProducerID, t.Epoch) })
	return s.end()
}

// AddPartitions is Kafka's handleAddPartitionsToTransaction: it adds partitions to the
// producer's transaction, starting one if none is ongoing. tv2: the partition leader adds
// them for a client of transaction version 2 (AddPartitionsToTxn v5+). The reply is a
// *kerr.Error, nil for success.
func (s *Shard) AddPartitions(now int64, w Waiter, id string, pid int64, epoch int16, parts []TopicPartition, tv2 bool) Ready {
	s.begin(now)
	t := s.txns[id]
	var err *kerr.Error
	switch {
	case id == "":
		err = kerr.InvalidRequest
	case t == nil || t.ProducerID != pid:
		err = kerr.InvalidProducerIDMapping
	case t.Epoch != epoch:
		err = kerr.ProducerFenced
	case t.pending != none, t.State == PrepareCommit, t.State == PrepareAbort:
		err = kerr.ConcurrentTransactions
	case t.State == Ongoing && t.hasAll(parts):
		err = nil
	default:
		n := t.base(Ongoing, now)
		if t.State != Ongoing {
			n.StartMs = now
		}
		merged := map[TopicPartition]struct{}{}
		for _, p := range n.Partitions {
			merged[p] = struct{}{}
		}
		for _, p := range parts {
			merged[p] = struct{}{}
		}
		n.Partitions = n.Partitions[:0]
		for p := range merged {
			n.Partitions = append(n.Partitions, p)
		}
		slices.SortFunc(n.Partitions, comparePartitions)
		if tv2 {
			n.ClientVersion = 2
		}
		s.transition(t, n, func(err *kerr.Error) { s.reply(w, err) })
		return s.end()
	}
	s.reply(w, err)
	return s.end()
}

func (t *Txn) hasAll(parts []TopicPartition) bool {
	for _, p := range parts {
		if _, ok := t.Partitions[p]; !ok {
			return false
		}
	}
	return true
}

// VerifyPartitions is Kafka's handleVerifyPartitionsInTransaction (KIP-890 part 1, a
// partition leader asking before it appends a batch that would start a transaction): nil for
// each partition in the producer's ongoing transaction, INVALID_TXN_STATE for the others, or
// the one error of the whole transaction.
func (s *Shard) VerifyPartitions(id string, pid int64, epoch int16, parts []TopicPartition) map[TopicPartition]*kerr.Error {
	t := s.txns[id]
	var all *kerr.Error
	switch {
	case id == "":
		all = kerr.InvalidRequest
	case t == nil || t.ProducerID != pid:
		all = kerr.InvalidProducerIDMapping
	case t.Epoch != epoch:
		all = kerr.ProducerFenced
	case t.State == PrepareCommit || t.State == PrepareAbort:
		all = kerr.ConcurrentTransactions
	}
	out := make(map[TopicPartition]*kerr.Error, len(parts))
	for _, p := range parts {
		switch _, in := t.partition(p); {
		case all != nil:
			out[p] = all
		case in:
			out[p] = nil
		default:
			out[p] = kerr.InvalidTxnState
		}
	}
	return out
}

func (t *Txn) partition(p TopicPartition) (struct{}, bool) {
	if t == nil {
		return struct{}{}, false
	}
	v, ok := t.Partitions[p]
	return v, ok
}

// EndTxnResponse is the answer carrying err, and for version 5 the producer id and epoch the
// client goes on with.
func EndTxnResponse(req *kmsg.EndTxnRequest, err *kerr.Error, pid int64, epoch int16) *kmsg.EndTxnResponse {
	r := kmsg.NewPtrEndTxnResponse()
	r.Version = req.Version
	r.ErrorCode = code(fencedFor(err, req.Version, 2))
	r.ProducerID, r.ProducerEpoch = -1, -1
	if err == nil && req.Version >= 5 {
		r.ProducerID, r.ProducerEpoch = pid, epoch
	}
	return r
}

// EndTxn is Kafka's handleEndTransaction: the reply (a *kmsg.EndTxnResponse) comes once the
// PrepareCommit/PrepareAbort record is written; the markers follow. Version 5 is transaction
// version 2 (KIP-890 part 2): the epoch is bumped at every end, a retry of an end already
// done is recognised by the bumped epoch, and an abort with no transaction is allowed.
func (s *Shard) EndTxn(now int64, w Waiter, req *kmsg.EndTxnRequest, fresh int64) Ready {
	s.begin(now)
	answer := func(err *kerr.Error, pid int64, epoch int16) { s.reply(w, EndTxnResponse(req, err, pid, epoch)) }
	id, pid, epoch, commit := req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit
	t := s.txns[id]
	if id == "" {
		answer(kerr.InvalidRequest, -1, -1)
		return s.end()
	}
	if t == nil {
		answer(kerr.InvalidProducerIDMapping, -1, -1)
		return s.end()
	}
	target := PrepareAbort
	if commit {
		target = PrepareCommit
	}
	tv2 := req.Version >= 5
	var (
		err          *kerr.Error
		end          bool // write target
		noPartitions bool
	)
	if !tv2 {
		switch {
		case t.ProducerID != pid:
			err = kerr.InvalidProducerIDMapping
		case epoch != t.Epoch:
			err = kerr.ProducerFenced
		case t.pending != none:
			err = kerr.ConcurrentTransactions
		default:
			switch t.State {
			case Ongoing:
				end = true
			case CompleteCommit, CompleteAbort:
				if (t.State == CompleteCommit) != commit {
					err = kerr.InvalidTxnState
				} // else a retry of the end already done: NONE
			case PrepareCommit, PrepareAbort:
				err = kerr.ConcurrentTransactions
				if (t.State == PrepareCommit) != commit {
					err = kerr.InvalidTxnState
				}
			default: // Empty
				err = kerr.InvalidTxnState
			}
		}
		if err != nil || !end {
			answer(err, -1, -1)
			return s.end()
		}
	} else {
		retryOnOverflow := t.PrevProducerID == pid && epoch == maxEpoch-1 && t.Epoch == 0
		retryOnBump := t.Epoch == epoch+1
		retry := retryOnOverflow || retryOnBump
		var valid bool
		switch t.State {
		case Ongoing, Empty:
			valid = epoch == t.Epoch
		case PrepareCommit, PrepareAbort:
			valid = retryOnBump
		default: // CompleteCommit, CompleteAbort
			valid = retry || epoch == t.Epoch
		}
		switch {
		case t.ProducerID != pid && !retryOnOverflow:
			err = kerr.InvalidProducerIDMapping
		case !valid:
			err = kerr.ProducerFenced
		case t.pending != none:
			err = kerr.ConcurrentTransactions
		default:
			switch t.State {
			case Ongoing:
				end = true
			case CompleteCommit:
				switch {
				case commit && !retry, !commit && retry:
					err = kerr.InvalidTxnState
				case !commit:
					end, noPartitions = true, true
				}
			case CompleteAbort:
				switch {
				case commit:
					err = kerr.InvalidTxnState
				case !retry:
					end, noPartitions = true, true
				}
			case PrepareCommit, PrepareAbort:
				err = kerr.ConcurrentTransactions
				if (t.State == PrepareCommit) != commit {
					err = kerr.InvalidTxnState
				}
			default: // Empty
				if commit {
					err = kerr.InvalidTxnState
				} else {
					end, noPartitions = true, true
				}
			}
		}
		if err != nil || !end {
			answer(err, t.ProducerID, t.Epoch)
			return s.end()
		}
	}
	nextPID := int64(-1)
	if tv2 && epochExhausted(t.Epoch) {
		if fresh < 0 {
			s.out = Ready{}
			return Ready{NeedProducerID: true}
		}
		nextPID = fresh
	}
	n := s.prepareEnd(t, target, tv2, nextPID, noPartitions)
	s.transition(t, n, func(err *kerr.Error) {
		if err != nil {
			answer(err, -1, -1)
			return
		}
		rpid, repoch := t.ProducerID, t.Epoch
		if t.NextProducerID >= 0 {
			rpid, repoch = t.NextProducerID, 0
		}
		answer(nil, rpid, repoch)
		s.startMarkers(t)
	})
	return s.end()
}

// Describe is one transactional id as DescribeTransactions answers it.
func (s *Shard) Describe(id string) kmsg.DescribeTransactionsResponseTransactionState {
	d := kmsg.NewDescribeTransactionsResponseTransactionState()
	d.TransactionalID = id
	t := s.txns[id]
	if t == nil {
		d.ErrorCode = kerr.TransactionalIDNotFound.Code
		return d
	}
	d.State, d.TimeoutMillis, d.StartTimestamp = t.State.String(), t.TimeoutMs, t.StartMs
	d.ProducerID, d.ProducerEpoch = t.ProducerID, t.Epoch
	for _, p := range t.sortedPartitions() {
		if k := len(d.Topics); k > 0 && d.Topics[k-1].Topic == p.Topic {
			d.Topics[k-1].Partitions = append(d.Topics[k-1].Partitions, p.Partition)
			continue
		}
		tp := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
		tp.Topic, tp.Partitions = p.Topic, []int32{p.Partition}
		d.Topics = append(d.Topics, tp)
	}
	return d
}

// ListFilter selects transactions for ListTransactions; empty sets select all.
type ListFilter struct {
	States      map[State]bool
	ProducerIDs map[int64]bool
	DurationMs  int64          // < 0: any; else only those started more than DurationMs before now
	Pattern     *regexp.Regexp // nil: any; else the whole transactional id must match
}

// List is the shard's transactions as ListTransactions answers them, ordered by id.
func (s *Shard) List(now int64, f ListFilter) []kmsg.ListTransactionsResponseTransactionState {
	var out []kmsg.ListTransactionsResponseTransactionState
	for _, t := range s.sortedTxns() {
		switch {
		case t.pending == Dead: // being removed
		case len(f.ProducerIDs) > 0 && !f.ProducerIDs[t.ProducerID]:
		case len(f.States) > 0 && !f.States[t.State]:
		case f.DurationMs >= 0 && now-t.StartMs <= f.DurationMs:
		case f.Pattern != nil && !f.Pattern.MatchString(t.ID):
		default:
			l := kmsg.NewListTransactionsResponseTransactionState()
			l.TransactionalID, l.ProducerID, l.TransactionState = t.ID, t.ProducerID, t.State.String()
			out = append(out, l)
		}
	}
	return out
}
