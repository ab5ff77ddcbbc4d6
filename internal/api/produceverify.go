package api

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/replica"
	"github.com/gregor-project/gregor/internal/txn"
)

// Transaction verification of produce (KIP-890 part 1; Kafka's ReplicaManager
// appendRecords with AddPartitionsToTxnManager). A transactional producer's request carries
// its transactional_id. For each partition whose batches are transactional the leader asks
// its producer state whether the batch would start a transaction there
// (Partition.StartVerification); those partitions are checked with the coordinator of the
// transactional id, all in one AddPartitionsToTxn v5 of the broker kind (VerifyOnly, or from
// Produce v12 on, KIP-890 part 2, adding them) sent to the broker leading its
// __transaction_state partition on the inter-broker listener, or handed to the local
// coordinator when that is this broker. Only then is each partition appended with its guard
// (Partition.AppendVerified), which the partition refuses if a marker came in between.
// With transaction.partition.verification.enable=false and a Produce below v12 no check is
// made (and the partitions do not ask for one).
//
// What the client is answered, as Kafka does: a partition the coordinator has not in the
// transaction INVALID_TXN_STATE; a coordinator that cannot be reached, is loading, moved or
// does not exist yet NOT_ENOUGH_REPLICAS (retriable without a metadata refresh, which older
// clients handle); CONCURRENT_TRANSACTIONS the same below v12, and from v12 it is retried
// for up to verifyRetryMaxMs before being answered; PRODUCER_FENCED INVALID_PRODUCER_EPOCH;
// TRANSACTION_ABORTABLE INVALID_TXN_STATE to clients older than Produce v11. Transactional
// batches of more than one producer in one request are INVALID_PRODUCER_ID_MAPPING.

const (
	// verifyTimeout bounds one round trip to a remote coordinator (request.timeout.ms).
	verifyTimeout = 30 * time.Second
	// add.partitions.to.txn.retry.backoff.ms and .max.ms (Kafka's defaults).
	verifyRetryBackoffMs = 20
	verifyRetryMaxMs     = 100
	// verifyAddsFromVersion: from Produce v12 the produce adds its partitions itself.
	verifyAddsFromVersion = 12
)

// appendTransactional verifies and appends the pending partitions of a transactional
// producer's request, filling their answers in resp. It returns waits with the acks=all
// waits of these appends added, and whether any partition failed.
func (h *Handler) appendTransactional(ctx context.Context, req *kmsg.ProduceRequest, resp *kmsg.ProduceResponse, pending []pendingAppend, waits []produceWait, now int64) ([]produceWait, bool) {
	type producer struct {
		id    int64
		epoch int16
	}
	var prod *producer
	mixed := false
	for _, pa := range pending {
		for i := range pa.hdrs {
			hd := &pa.hdrs[i]
			if !hd.IsTransactional() {
				continue
			}
			if prod == nil {
				prod = &producer{hd.ProducerID, hd.ProducerEpoch}
			} else if prod.id != hd.ProducerID || prod.epoch != hd.ProducerEpoch {
				mixed = true
			}
		}
	}
	failed := false
	if mixed {
		for _, pa := range pending {
			st := &resp.Topics[pa.topic]
			h.produceFailed(&st.Partitions[pa.part], st.Topic, errMixedProducers)
		}
		return waits, true
	}
	guards := make([]replica.VerificationGuard, len(pending))
	errs := make([]error, len(pending))
	if prod != nil {
		h.verifyTransactional(ctx, req.Version, *req.TransactionID, prod.id, prod.epoch, pending, guards, errs)
	}
	for i, pa := range pending {
		st := &resp.Topics[pa.topic]
		sp := &st.Partitions[pa.part]
		err := errs[i]
		var res replica.AppendResult
		if err == nil {
			res, err = pa.p.AppendVerified(pa.raw, pa.hdrs, now, -1, req.Acks == -1, int64(req.TimeoutMillis), guards[i])
		}
		tc := h.Topics.For(st.Topic)
		if err != nil {
			failed = true
			h.produceFailed(sp, st.Topic, err)
			tc.ProduceFailed(rejectedBytes(sp.ErrorCode, pa.raw))
			continue
		}
		tc.Produced(recordCount(pa.hdrs), len(pa.raw))
		sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = res.BaseOffset, res.LogAppendTime, res.LogStartOffset
		if res.Wait != nil {
			waits = append(waits, produceWait{topic: pa.topic, part: pa.part, ch: res.Wait})
		}
	}
	return waits, failed
}

func anyTransactional(hdrs []batch.Header) bool {
	for i := range hdrs {
		if hdrs[i].IsTransactional() {
			return true
		}
	}
	return false
}

// verifyTransactional takes the verification guard of each pending partition whose
// batches would start a transaction (guards[i]) and has the coordinator of transactionalID
// confirm them, or from Produce v12 add them, setting errs[i] for each it did not. From v12
// a CONCURRENT_TRANSACTIONS answer (the previous transaction's markers are still being
// written) is asked again every verifyRetryBackoffMs for up to verifyRetryMaxMs, each round
// taking the guards anew, as Kafka's ReplicaManager retries the whole verification: the
// previous transaction's marker, landing meanwhile, clears a guard taken before it, and the
// append would be refused with that one. A ctx that ends meanwhile is NETWORK_EXCEPTION.
func (h *Handler) verifyTransactional(ctx context.Context, version int16, transactionalID string, pid int64, epoch int16, pending []pendingAppend, guards []replica.VerificationGuard, errs []error) {
	add := version >= verifyAddsFromVersion
	start := time.Now()
	for {
		var check []int
		for i, pa := range pending {
			errs[i], guards[i] = nil, 0
			if !anyTransactional(pa.hdrs) || (!pa.p.Settings().TxnVerification && !add) {
				continue
			}
			g, needed := pa.p.StartVerification(pid, epoch)
			guards[i] = g
			if needed {
				check = append(check, i)
			}
		}
		if len(check) == 0 {
			return
		}
		parts := make([]txn.TopicPartition, len(check))
		for j, i := range check {
			parts[j] = txn.TopicPartition{Topic: pending[i].p.Topic, Partition: pending[i].p.Index}
		}
		codes := h.askTxnCoordinator(ctx, transactionalID, pid, epoch, !add, parts)
		for j, i := range check {
			if c := codes[parts[j]]; c != 0 {
				errs[i] = verificationError(c, version)
			}
		}
		if !add || time.Since(start) >= verifyRetryMaxMs*time.Millisecond || !anyCode(codes, kerr.ConcurrentTransactions.Code) {
			return
		}
		t := time.NewTimer(verifyRetryBackoffMs * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			for _, i := range check {
				errs[i] = verificationError(kerr.NetworkException.Code, version)
			}
			return
		}
	}
}

// txnPartitions has the coordinator of transactionalID check (add false) or add (add
// true: KIP-890 part 2) the partitions of the producer's transaction, and returns the error
// code of each partition not confirmed (askTxnCoordinator). An add answered
// CONCURRENT_TRANSACTIONS (the previous transaction's markers are still being written) is
// asked again every verifyRetryBackoffMs for up to verifyRetryMaxMs, as Kafka's
// ReplicaManager does; a ctx that ends meanwhile is NETWORK_EXCEPTION.
func (h *Handler) txnPartitions(ctx context.Context, transactionalID string, pid int64, epoch int16, add bool, parts []txn.TopicPartition) map[txn.TopicPartition]int16 {
	start := time.Now()
	for {
		codes := h.askTxnCoordinator(ctx, transactionalID, pid, epoch, !add, parts)
		if !add || time.Since(start) >= verifyRetryMaxMs*time.Millisecond || !anyCode(codes, kerr.ConcurrentTransactions.Code) {
			return codes
		}
		t := time.NewTimer(verifyRetryBackoffMs * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			for _, p := range parts {
				codes[p] = kerr.NetworkException.Code
			}
			return codes
		}
	}
}

func anyCode(codes map[txn.TopicPartition]int16, c int16) bool {
	for _, v := range codes {
		if v == c {
			return true
		}
	}
	return false
}

// askTxnCoordinator sends one AddPartitionsToTxn (broker kind, v5) for the partitions of
// one transaction and returns the error code of each partition not confirmed, as Kafka's
// AddPartitionsToTxnManager reads the answer (a top-level error is every partition's;
// PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH; an unreachable coordinator
// NETWORK_EXCEPTION or COORDINATOR_NOT_AVAILABLE). With verifyOnly the coordinator only
// checks them (KIP-890 part 1), else it adds them (part 2: Produce v12, TxnOffsetCommit v5).
func (h *Handler) askTxnCoordinator(ctx context.Context, transactionalID string, pid int64, epoch int16, verifyOnly bool, parts []txn.TopicPartition) map[txn.TopicPartition]int16 {
	codes := make(map[txn.TopicPartition]int16, len(parts))
	all := func(c int16) map[txn.TopicPartition]int16 {
		for _, p := range parts {
			codes[p] = c
		}
		return codes
	}
	t := h.Meta.Image().Topic(txn.TopicName)
	if t == nil {
		return all(kerr.CoordinatorNotAvailable.Code)
	}
	pp := t.Partition(txn.PartitionFor(transactionalID, int32(len(t.Parts))))
	if pp == nil || pp.Leader < 0 {
		return all(kerr.CoordinatorNotAvailable.Code)
	}
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.SetVersion(5)
	tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = transactionalID, pid, epoch, verifyOnly
	for _, p := range parts {
		ti := -1
		for j := range tx.Topics {
			if tx.Topics[j].Topic == p.Topic {
				ti = j
			}
		}
		if ti < 0 {
			rt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
			rt.Topic = p.Topic
			tx.Topics = append(tx.Topics, rt)
			ti = len(tx.Topics) - 1
		}
		tx.Topics[ti].Partitions = append(tx.Topics[ti].Partitions, p.Partition)
	}
	req.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{tx}
	var resp *kmsg.AddPartitionsToTxnResponse
	switch {
	case pp.Leader == h.NodeID && h.Txns != nil:
		resp = h.Txns.AddPartitionsToTxn(ctx, req)
	case pp.Leader == h.NodeID || h.Brokers == nil:
		return all(kerr.CoordinatorNotAvailable.Code)
	default:
		rctx, cancel := context.WithTimeout(ctx, verifyTimeout)
		r, err := h.Brokers.Request(rctx, pp.Leader, req)
		cancel()
		if err != nil {
			h.Log.Warn("verifying a transaction with its coordinator failed", "transactional_id", transactionalID, "coordinator", pp.Leader, "err", err)
			return all(kerr.NetworkException.Code)
		}
		resp = r.(*kmsg.AddPartitionsToTxnResponse)
	}
	if resp.ErrorCode != 0 {
		c := resp.ErrorCode
		if c == kerr.ClusterAuthorizationFailed.Code {
			c = kerr.InvalidTxnState.Code // the client is not to see the broker's authorization
		}
		return all(c)
	}
	for _, rt := range resp.Transactions {
		if rt.TransactionalID != transactionalID {
			continue
		}
		for _, st := range rt.Topics {
			for _, sp := range st.Partitions {
				c := sp.ErrorCode
				if c == 0 {
					continue
				}
				if c == kerr.ProducerFenced.Code {
					c = kerr.InvalidProducerEpoch.Code // what producers expect here
				}
				codes[txn.TopicPartition{Topic: st.Topic, Partition: sp.Partition}] = c
			}
		}
	}
	return codes
}

// verificationError is the produce answer for a partition the coordinator did not confirm
// (Kafka's postVerificationCallback).
func verificationError(c int16, version int16) error {
	switch c {
	case kerr.InvalidTxnState.Code:
		return fmt.Errorf("%w: partition was not added to the transaction", kerr.InvalidTxnState)
	case kerr.TransactionAbortable.Code:
		if version <= 10 {
			return fmt.Errorf("%w: partition was not added to the transaction", kerr.InvalidTxnState)
		}
	case kerr.NetworkException.Code, kerr.CoordinatorLoadInProgress.Code, kerr.CoordinatorNotAvailable.Code, kerr.NotCoordinator.Code:
		return fmt.Errorf("%w: unable to verify the partition has been added to the transaction; underlying error: %s", kerr.NotEnoughReplicas, kerr.ErrorForCode(c))
	case kerr.ConcurrentTransactions.Code:
		if version < verifyAddsFromVersion {
			return fmt.Errorf("%w: unable to verify the partition has been added to the transaction; underlying error: %s", kerr.NotEnoughReplicas, kerr.ErrorForCode(c))
		}
	}
	return kerr.ErrorForCode(c)
}
