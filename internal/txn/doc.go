// Package txn is the transaction coordinator (KIP-98, KIP-447, KIP-890): it hands out
// producer ids and epochs to transactional ids, tracks each id's transaction and the
// partitions in it, and ends transactions by writing COMMIT or ABORT markers to those
// partitions. Its state is kept in the internal compacted topic __transaction_state.
//
// # Shape
//
// The package has two halves, as internal/group does:
//
//   - Shard is a deterministic core, one per __transaction_state partition. It holds that
//     partition's transactional ids (Txn) and runs Kafka's transaction state machine. It has
//     no goroutines, no clock and no I/O: every input is a method call carrying `now` (Unix
//     milliseconds), and every method returns a Ready: replies to deliver, records to append
//     (Writes, whose outcomes come back with Written) and marker attempts to make (Markers,
//     whose outcomes come back with MarkersWritten). A request that needs a fresh producer
//     id it was not given returns Ready.NeedProducerID and is asked again with one. A
//     transition is applied only once its record is written (Kafka's pending state: while a
//     write of an id is in flight its other requests answer CONCURRENT_TRANSACTIONS).
//     Deadlines (the timed-out transaction check, the id expiry check, marker retries with
//     backoff) are in a timer queue that Tick(now) fires and NextDeadline reports. Replaying
//     the records (Replay, then LoadComplete) rebuilds the state.
//
//   - Coordinator is the edge (coordinator.go, leadership.go, load.go, api.go): a lock per
//     shard, appends to the __transaction_state partition in the leader epoch the shard was
//     elected in with acks=all (a request is answered once its record is on the ISR, and a
//     coordinator that lost the partition cannot write), a committer goroutine per shard
//     reporting append outcomes in log order, one timer per shard for NextDeadline, loading by
//     replaying the partition when elected (COORDINATOR_LOAD_IN_PROGRESS meanwhile), one
//     goroutine per marker attempt through Options.Markers, and fresh producer ids from
//     Options.ProducerIDs fetched outside any lock. The broker reports leadership with Elect
//     and Resign; a single node (Options.Manual unset) elects every local partition. The
//     coordinator epoch of the markers is the shard's leader epoch. The partition map and
//     its epochs, topic creation, the replay loop, the append and the shard's timer are
//     internal/coordinator's, shared with the group coordinator.
//
// # State machine
//
// As Kafka's TransactionMetadata, each arrow one record:
//
//	Empty, CompleteCommit, CompleteAbort --AddPartitionsToTxn--> Ongoing
//	Ongoing --EndTxn(commit)--> PrepareCommit --every marker written--> CompleteCommit
//	Ongoing --EndTxn(abort), timeout, fencing InitProducerId--> PrepareAbort --markers--> CompleteAbort
//	Empty, CompleteCommit, CompleteAbort --InitProducerId--> Empty (epoch bumped)
//	Empty, CompleteCommit, CompleteAbort --idle past the expiry--> removed (tombstone)
//
// In detail:
//
//   - InitProducerId: a new id gets a fresh producer id at epoch 0; a known one its epoch
//     bumped (a new producer id at epoch 0 once the epoch is exhausted, Short.MaxValue-1);
//     from v3 a given producer id and epoch (KIP-360) must be the id's current ones, or its
//     last epoch (a retry), else PRODUCER_FENCED. With a transaction Ongoing it fences the
//     previous producer: the epoch is bumped (PrepareEpochFence, a pending state never
//     written), the transaction aborted with the bumped epoch, and the caller answered
//     CONCURRENT_TRANSACTIONS until the abort is complete; it then gets the next epoch.
//   - EndTxn is answered once PrepareCommit/PrepareAbort is written; the markers go to every
//     partition of the transaction, retried with backoff for those not written, each written
//     partition leaving the transaction (DescribeTransactions shows those left); then the
//     Complete* record. A partition fencing the markers (INVALID_PRODUCER_EPOCH,
//     TRANSACTION_COORDINATOR_FENCED) ends the attempts. A retried EndTxn of the same result
//     answers CONCURRENT_TRANSACTIONS while Prepare*, NONE once Complete*, and the other
//     result INVALID_TXN_STATE.
//   - EndTxn v5 is transaction version 2 (KIP-890 part 2): every end bumps the epoch (the
//     answer carries the next one; past the last epoch a new producer id, carried in the
//     Prepare record's next producer id and taken at Complete*), a retry is recognised by the
//     bumped epoch, and an abort with nothing ongoing is allowed.
//   - A transaction Ongoing past its timeout is aborted at the next
//     transaction.abort.timed.out.transaction.cleanup.interval.ms check with the fence's
//     epoch bump, so its producer's next request is fenced. An id idle (Empty or Complete*)
//     for transactional.id.expiration.ms is removed with a tombstone at the next
//     transaction.remove.expired.transaction.cleanup.interval.ms check (Dead is its pending
//     state).
//   - After a load, transactions in Prepare* are completed (markers again, in the new
//     coordinator epoch); Ongoing ones are left to their timeout.
//
// Errors are Kafka's: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE
// (a failed append, the coordinator closing), CONCURRENT_TRANSACTIONS, PRODUCER_FENCED
// (INVALID_PRODUCER_EPOCH for versions before KIP-588), INVALID_PRODUCER_ID_MAPPING,
// INVALID_TXN_STATE, INVALID_TRANSACTION_TIMEOUT.
//
// # Records
//
// Kafka's own __transaction_state format (kmsg's TxnMetadataKey and TxnMetadataValue), so
// Kafka's tools read the topic: key version 0 {transactional id} → value version 0 {producer
// id, epoch, timeout, state, topics and partitions (null when Empty), last update time,
// start time}, written in version 1 (flexible, with previous and next producer id and the
// client's transaction version, 0 or 2, as tagged fields) as Kafka writes it once
// transaction.version is finalized at 1 or more (TransactionVersion, which brokers finalize
// at 2); version 0 values are still read. A null value is a removed id. Markers carry the
// transaction's version (WriteTxnMarkers v2). Each transition is one record, appended as one batch.
//
// # Lock rules
//
// Coordinator.mu guards the partition count, the shard map and the epochs; each shard's mu
// guards its core, timer and pending appends. They are never held together, and no lock is
// held while a reply is delivered, a producer id fetched, markers sent or an append's
// replication awaited.
//
// A transactional id's coordinator is partition Utils.abs(id.hashCode()) % N of
// __transaction_state (PartitionFor, the hash of group.PartitionFor).
package txn
