package txn

import (
	"context"
	"regexp"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The coordinator's requests: each answers its request whole, for every version kmsg has;
// the api handler only calls them.

// groupTopic is the topic of the partitions AddOffsetsToTxn adds.
const groupTopic = "__consumer_offsets"

// InitProducerID answers InitProducerId for a transactional id (TransactionalID non-nil):
// the same producer id with a bumped epoch each time (a new one once the epochs run out),
// fencing the previous producer; an ongoing transaction of the previous producer is aborted
// first (CONCURRENT_TRANSACTIONS until done, which clients retry).
func (c *Coordinator) InitProducerID(ctx context.Context, req *kmsg.InitProducerIDRequest) *kmsg.InitProducerIDResponse {
	if err := ValidateInit(req, c.cfg.MaxTimeoutMs); err != nil {
		return InitProducerIDResponse(req, err, -1, -1)
	}
	msg, err := c.call(ctx, *req.TransactionalID, func(s *Shard, now int64, w Waiter, fresh int64) Ready {
		return s.InitProducerID(now, w, req, fresh)
	})
	if err != nil {
		return InitProducerIDResponse(req, err, -1, -1)
	}
	return msg.(*kmsg.InitProducerIDResponse)
}

// addPartitions adds (or with verify, checks) partitions of one transaction; the result has
// an entry for each partition asked.
func (c *Coordinator) addPartitions(ctx context.Context, id string, pid int64, epoch int16, parts []TopicPartition, verify, tv2 bool) map[TopicPartition]*kerr.Error {
	all := func(err *kerr.Error) map[TopicPartition]*kerr.Error {
		out := make(map[TopicPartition]*kerr.Error, len(parts))
		for _, p := range parts {
			out[p] = err
		}
		return out
	}
	if id == "" {
		return all(kerr.InvalidRequest)
	}
	if c.exists != nil && !verify {
		var unknown []TopicPartition
		for _, p := range parts {
			if !c.exists(p.Topic, p.Partition) {
				unknown = append(unknown, p)
			}
		}
		if len(unknown) > 0 {
			out := all(kerr.OperationNotAttempted)
			for _, p := range unknown {
				out[p] = kerr.UnknownTopicOrPartition
			}
			return out
		}
	}
	if verify {
		var out map[TopicPartition]*kerr.Error
		if err := c.read(id, func(s *Shard, _ int64) { out = s.VerifyPartitions(id, pid, epoch, parts) }); err != nil {
			return all(err)
		}
		return out
	}
	msg, err := c.call(ctx, id, func(s *Shard, now int64, w Waiter, _ int64) Ready {
		return s.AddPartitions(now, w, id, pid, epoch, parts, tv2)
	})
	if err != nil {
		return all(err)
	}
	return all(msg.(*kerr.Error))
}

// AddPartitionsToTxn answers AddPartitionsToTxn: versions 0-3 from a producer (one
// transaction), versions 4+ batched from partition leaders, each transaction either added to
// or, with VerifyOnly, checked (KIP-890 part 1). Version 5+ without VerifyOnly is the
// leader adding a partition for a client of transaction version 2.
func (c *Coordinator) AddPartitionsToTxn(ctx context.Context, req *kmsg.AddPartitionsToTxnRequest) *kmsg.AddPartitionsToTxnResponse {
	resp := kmsg.NewPtrAddPartitionsToTxnResponse()
	resp.Version = req.Version
	if req.Version <= 3 {
		var parts []TopicPartition
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				parts = append(parts, TopicPartition{t.Topic, p})
			}
		}
		res := c.addPartitions(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, dedup(parts), false, false)
		for _, t := range req.Topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTopic()
			rt.Topic = t.Topic
			for _, p := range slices.Compact(slices.Sorted(slices.Values(t.Partitions))) {
				rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				rp.Partition = p
				rp.ErrorCode = code(fencedFor(res[TopicPartition{t.Topic, p}], req.Version, 2))
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	for _, tx := range req.Transactions {
		var parts []TopicPartition
		for _, t := range tx.Topics {
			for _, p := range t.Partitions {
				parts = append(parts, TopicPartition{t.Topic, p})
			}
		}
		parts = dedup(parts)
		res := c.addPartitions(ctx, tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, parts, tx.VerifyOnly, req.Version >= 5)
		rt := kmsg.NewAddPartitionsToTxnResponseTransaction()
		rt.TransactionalID = tx.TransactionalID
		for _, p := range parts {
			if k := len(rt.Topics); k == 0 || rt.Topics[k-1].Topic != p.Topic {
				t := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
				t.Topic = p.Topic
				rt.Topics = append(rt.Topics, t)
			}
			rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code(res[p])
			last := &rt.Topics[len(rt.Topics)-1]
			last.Partitions = append(last.Partitions, rp)
		}
		resp.Transactions = append(resp.Transactions, rt)
	}
	return resp
}

// dedup sorts partitions and drops repeats.
func dedup(ps []TopicPartition) []TopicPartition {
	slices.SortFunc(ps, comparePartitions)
	return slices.Compact(ps)
}

// AddOffsetsToTxn adds the group's __consumer_offsets partition to the transaction, so that
// its TxnOffsetCommit records get the transaction's marker.
func (c *Coordinator) AddOffsetsToTxn(ctx context.Context, req *kmsg.AddOffsetsToTxnRequest) *kmsg.AddOffsetsToTxnResponse {
	resp := kmsg.NewPtrAddOffsetsToTxnResponse()
	resp.Version = req.Version
	if req.TransactionalID == "" {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	}
	if c.groupPart == nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp
	}
	p, err := c.groupPart(req.Group)
	if err != nil || p < 0 {
		c.log.Warn("transaction coordinator could not find a group's partition", "group", req.Group, "err", err)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp
	}
	tp := TopicPartition{groupTopic, p}
	res := c.addPartitions(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, []TopicPartition{tp}, false, false)
	resp.ErrorCode = code(fencedFor(res[tp], req.Version, 2))
	return resp
}

// EndTxn commits or aborts the transaction: answered once the PrepareCommit/PrepareAbort
// record is replicated, the markers written after.
func (c *Coordinator) EndTxn(ctx context.Context, req *kmsg.EndTxnRequest) *kmsg.EndTxnResponse {
	if req.TransactionalID == "" {
		return EndTxnResponse(req, kerr.InvalidRequest, -1, -1)
	}
	msg, err := c.call(ctx, req.TransactionalID, func(s *Shard, now int64, w Waiter, fresh int64) Ready {
		return s.EndTxn(now, w, req, fresh)
	})
	if err != nil {
		return EndTxnResponse(req, err, -1, -1)
	}
	return msg.(*kmsg.EndTxnResponse)
}

// DescribeTransactions describes each transactional id (NOT_COORDINATOR for one not
// coordinated here, TRANSACTIONAL_ID_NOT_FOUND for an unknown one).
func (c *Coordinator) DescribeTransactions(req *kmsg.DescribeTransactionsRequest) *kmsg.DescribeTransactionsResponse {
	resp := kmsg.NewPtrDescribeTransactionsResponse()
	resp.Version = req.Version
	for _, id := range req.TransactionalIDs {
		var d kmsg.DescribeTransactionsResponseTransactionState
		err := kerr.InvalidRequest
		if id != "" {
			err = c.read(id, func(s *Shard, _ int64) { d = s.Describe(id) })
		}
		if err != nil {
			d = kmsg.NewDescribeTransactionsResponseTransactionState()
			d.TransactionalID, d.ErrorCode = id, err.Code
			d.ProducerID, d.ProducerEpoch, d.StartTimestamp = -1, -1, -1
		}
		resp.TransactionStates = append(resp.TransactionStates, d)
	}
	return resp
}

// ListTransactions lists the transactions of every partition this broker coordinates,
// filtered by state, producer id, duration (v1+) and transactional id pattern (v2+). While
// any partition loads it answers COORDINATOR_LOAD_IN_PROGRESS, as Kafka does.
func (c *Coordinator) ListTransactions(req *kmsg.ListTransactionsRequest) *kmsg.ListTransactionsResponse {
	resp := kmsg.NewPtrListTransactionsResponse()
	resp.Version = req.Version
	f := ListFilter{States: map[State]bool{}, ProducerIDs: map[int64]bool{}, DurationMs: -1}
	for _, name := range req.StateFilters {
		if s, ok := ParseState(name); ok {
			f.States[s] = true
		} else {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
		}
	}
	for _, p := range req.ProducerIDFilters {
		f.ProducerIDs[p] = true
	}
	if req.Version >= 1 {
		f.DurationMs = req.DurationFilterMillis
	}
	if req.Version >= 2 && req.TransactionalIDPattern != nil && *req.TransactionalIDPattern != "" {
		re, err := regexp.Compile("^(?:" + *req.TransactionalIDPattern + ")$")
		if err != nil {
			resp.ErrorCode = kerr.InvalidRegularExpression.Code
			return resp
		}
		f.Pattern = re
	}
	shards, cerr := c.rt.Shards()
	if cerr != nil {
		resp.ErrorCode = cerr.Code
		return resp
	}
	var states []kmsg.ListTransactionsResponseTransactionState
	for _, sh := range shards {
		err := c.step(sh, func(s *Shard, now int64) Ready {
			states = append(states, s.List(now, f)...)
			return Ready{}
		})
		if err == kerr.CoordinatorLoadInProgress {
			resp.ErrorCode = err.Code
			return resp
		}
	}
	resp.TransactionStates = states
	return resp
}
