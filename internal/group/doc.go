// Package group is the group coordinator: consumer groups (Kafka's classic rebalance
// protocol) and the offsets they commit, kept in the internal compacted topic
// __consumer_offsets.
//
// # Shape
//
// The package has two halves, as etcd's raft does:
//
//   - Shard is a deterministic core, one per __consumer_offsets partition. It holds that
//     partition's groups and committed offsets and runs Kafka's group state machine. It has no
//     goroutines, no clock and no I/O: every input is a method call carrying `now` (Unix
//     milliseconds), and every method returns a Ready: replies to deliver to waiting requests
//     and records to append to the partition. A Write's outcome is fed back with Written,
//     which may release more replies (an offset commit is acknowledged only after its record
//     is appended). Deadlines (session timeouts, rebalance timeouts, the initial rebalance
//     delay, offset expiry) are kept in a timer queue that Tick(now) fires and NextDeadline
//     reports. Replaying the records (Replay, then LoadComplete) rebuilds the state.
//
//   - Coordinator is the edge: it owns a lock per shard, appends the shard's records to the
//     __consumer_offsets partition in the leader epoch it was elected in (so the partition
//     fences a coordinator that lost the leadership), awaits their replication without the
//     lock and reports the outcomes to the core in log order, arms one timer per shard for
//     NextDeadline, replays a partition when it is elected (answering
//     COORDINATOR_LOAD_IN_PROGRESS meanwhile), and blocks JoinGroup and SyncGroup callers on
//     a channel until the core replies. It coordinates only the partitions this broker leads:
//     the broker reports leadership with Elect and Resign (leadership.go), and a group of any
//     other partition is answered NOT_COORDINATOR. A single node (Options.Manual unset)
//     elects every local partition. The partition map, the leader epochs that order Elect
//     and Resign, topic creation, the log replay loop, the append and the shard's timer are
//     internal/coordinator's, shared with the transaction coordinator.
//
// # Group protocols
//
// A Group carries the protocol that runs it (GroupProtocol):
//
//   - ProtocolClassic: JoinGroup/SyncGroup/Heartbeat/LeaveGroup with client-side assignors
//     (join.go, sync.go, heartbeat.go, leave.go, rebalance.go).
//   - ProtocolConsumer: KIP-848's ConsumerGroupHeartbeat with server-side assignors
//     (consumer*.go): group and member epochs, a target assignment per group epoch, and
//     each member reconciled toward its target one heartbeat at a time, a partition only
//     handed over once its previous owner revoked it. Classic members may join a consumer
//     group, and groups convert between the protocols as group.consumer.migration.policy
//     allows (consumer_classic.go).
//
// # Records
//
// Records use Kafka's own __consumer_offsets format (kmsg's OffsetCommitKey/Value and
// GroupMetadataKey/Value), so Kafka's tools can read the topic:
//
//	key version 0, 1  OffsetCommitKey{group, topic, partition} -> OffsetCommitValue (v3, or v1
//	                  when the commit carried an explicit retention), null value = deleted
//	key version 2     GroupMetadataKey{group} -> GroupMetadataValue v3 (generation, protocol
//	                  type and name, leader, members with subscription and assignment),
//	                  null value = group deleted
//	key versions 3-8  the consumer protocol's ConsumerGroup* records (group epoch,
//	                  subscription metadata, member metadata, target assignment epoch and
//	                  members, current member assignments), see consumer_records.go
//
// Batches are plain (producer id -1) but for a TxnOffsetCommit's: its OffsetCommit records go
// in one transactional batch of the request's producer id and epoch, with BaseSequence -1
// (the partition checks the epoch, no sequence). The transaction coordinator's markers end
// them: a control batch of the producer whose one record's key is version int16 = 0 and type
// int16 (0 ABORT, 1 COMMIT), value version int16 = 0 and coordinator epoch int32.
//
// # Transactional offsets
//
// A transaction's offset commits (txn.go) are pending per producer id in the shard
// (Shard.txns, indexed by group in Shard.openTxns) from the moment their batch is written:
// OffsetFetch does not see them and answers UNSTABLE_OFFSET_COMMIT for their partitions
// under require_stable. The broker reports each marker written to the partition with
// Coordinator.CompleteTxn: COMMIT moves the producer's pending offsets of every group of
// the partition to the committed ones, unless the committed offset's record is later in the
// log (each Offset carries its record's place in the log, Offset.order, counted by the
// shard as it replays and writes records); ABORT drops them. Loading replays the same: a
// transactional batch's offsets are pending until a marker of their producer follows, and
// stay pending (until CompleteTxn) if none does. A partition's tombstone drops the pending
// offsets before it (DeleteGroups writes one for each partition that only has pending
// ones); offsets expiry skips a partition with pending offsets and keeps an empty group
// while a transaction that wrote offsets for it is open.
//
// A group's coordinator is partition Utils.abs(groupId.hashCode()) % N of __consumer_offsets,
// with Java's String.hashCode (PartitionFor).
package group
