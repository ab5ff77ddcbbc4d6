// Package share serves share groups (KIP-932): many consumers read one partition, each
// record is acquired by one member at a time, acknowledged, released or rejected, and
// redelivered when its acquisition lock expires.
//
// Two deterministic cores, driven by inputs and a time in milliseconds, no goroutines:
//
//   - Partition (partition.go) is the state of one share-partition on the partition's
//     leader: the in-flight window [start, end) of records, each Available, Acquired (by one
//     member, with a lock deadline and a delivery count), Acknowledged or Archived.
//   - Group (group.go) is the membership of one share group on its coordinator: members,
//     their epochs, subscriptions, session deadlines and assignments (every member is
//     assigned every partition of the topics it subscribes to, as Kafka's simple assignor
//     does when members share a subscription).
//
// Manager (manager.go) holds both for the API layer (internal/api sharegroupheartbeat.go,
// sharefetch.go, shareacknowledge.go and the share offset APIs): groups and share sessions
// under its mutex, each share-partition behind its own lock (Part), taken for one fetch's log
// read and acquisition or one request's acknowledgements, and waking fetches parked on it when
// an acknowledgement or release frees records. state.go is a share-partition's state as it is
// persisted, records.go its records in __share_group_state, statecoord.go the share
// coordinator that keeps them.
//
// Invariants of a Partition (checked by its property test):
//   - start <= end; every offset below start is Acknowledged or Archived (and forgotten);
//     the record at start, if start < end, is neither.
//   - end - start <= MaxLocks (group.share.partition.max.record.locks): the window is what
//     bounds memory, as in Kafka.
//   - An Acquired record has exactly one owner; an offset is delivered to at most one
//     member at a time.
//   - A record's delivery count only grows; once it reaches DeliveryLimit
//     (group.share.delivery.count.limit) a release or a lock expiry archives it instead of
//     making it Available again.
//
// Durability. A share-partition's state is kept in the compacted internal topic
// __share_group_state by the share coordinator (StateCoordinator, statecoord.go), the third
// user of internal/coordinator's Runtime after the group and transaction coordinators:
//
//   - The topic: share.coordinator.state.topic.num.partitions (50) partitions,
//     .replication.factor (3, capped by the brokers registered when it is created),
//     min.insync.replicas .min.isr (2, capped by the replicas), compacted, uncompressed,
//     internal; created on the first fetch of a share-partition (internal/api sharestate.go).
//   - Routing: the key "group:topic-id:partition" (StateKey; the topic id in Kafka's base64
//     form) goes to partition StatePartitionFor (Java's String.hashCode, abs, mod n); the
//     partition's leader owns the state. FindCoordinator v6 key type 2 (SHARE) answers it
//     (ParseStateKey); partition leaders find it in the metadata image themselves.
//   - Records (records.go), as Kafka writes them: key = int16 record type (0 ShareSnapshot,
//     1 ShareUpdate) then, not flexible, {GroupId string, TopicId uuid, Partition int32};
//     ShareSnapshotValue v0 (flexible) {SnapshotEpoch uint16, StateEpoch int32, LeaderEpoch
//     int32, StartOffset int64, StateBatches [{FirstOffset int64, LastOffset int64,
//     DeliveryState int8 (0 Available, 2 Acknowledged, 4 Archived), DeliveryCount int16}]};
//     ShareUpdateValue v0 {SnapshotEpoch int32, LeaderEpoch int32, StartOffset int64 (-1:
//     unchanged), StateBatches}. A nil value (DeleteShareGroupState) ends the key.
//   - Every Write appends one ShareSnapshot (the whole state) and answers once it is on the
//     ISR (acks=all, in the shard's leader epoch, so a coordinator whose term is over writes
//     nothing). Replay on election keeps the latest snapshot per key and merges the
//     ShareUpdates after it (applyUpdate), so logs written with updates, as Kafka writes
//     them, load too. Writing updates between snapshots (bounded by
//     share.coordinator.snapshot.update.records.per.snapshot) is not done: compaction keeps
//     only the latest ShareUpdate of a key, so an update would have to carry every change
//     since its snapshot; with snapshots only, compaction keeps exactly the latest state
//     of each share-partition, at the cost of writing the whole window (at most
//     group.share.partition.max.record.locks records, as runs) on each acknowledgement.
//   - Fencing: a Write or Read in a leader epoch older than the stored one is
//     FENCED_LEADER_EPOCH; a Write of another state epoch is FENCED_STATE_EPOCH.
//
// The partition leader's side (internal/api sharefetch.go, sharestate.go): on its first fetch
// of a share-partition in a leader epoch it reads the state back (in process when it leads
// the state partition, else ReadShareGroupState to the broker that does) and rebuilds the
// Partition with Restore: acknowledged and archived records never come back, records that
// were Acquired are Available again with their delivery count kept (an acquisition is not
// written, as in Kafka). A share-partition with no state starts where its group's
// share.auto.offset.reset group config says (internal/config group.go; latest, the high
// watermark, by default; earliest, the log start; by_duration:D, the first record at most D
// old), decided then and not moved by a later change of the config; that start is written at
// once, so records acquired before a crash and never acknowledged are not skipped. The
// group's share.record.lock.duration.ms is read on every fetch (Partition.SetConfig), and
// its share.isolation.level: read_committed reads up to the last stable offset and archives
// the records of aborted transactions instead of acquiring them (AcquireSkipping). Each request's acknowledgements of
// a partition are applied and the resulting state written (WriteShareGroupState) before the
// answer, under the share-partition's lock; if the write fails the share-partition is put
// back as it was (Partition.Clone) and the acknowledgement answered with the error, so an
// answered ACCEPT is never lost.
//
// Offsets admin, on the group's coordinator, for share-partitions led anywhere, as Kafka's
// group coordinator works through its persister: AlterShareGroupOffsets initializes each
// share-partition's state on its share coordinator at the new start in the next state epoch
// (InitializeShareGroupState); DeleteShareGroupOffsets deletes the state of every partition
// of the topics named, and deleting a share group that of every partition of the topics its
// members subscribed to (Group.Subscribed) (DeleteShareGroupState); DescribeShareGroupOffsets
// reads the summaries (ReadShareGroupStateSummary) of the partitions it does not hold. A
// leader holding a share-partition in memory learns of a reset or deletion when a member
// opens a share session (ShareFetch epoch 0): it compares its state epoch with the
// persisted one and, if they differ or the state is gone, drops what it holds
// (Manager.Drop) and reads the state back, or starts afresh. While the state cannot be read (the state partition being
// elected or loaded) a fetch answers the partition NOT_LEADER_OR_FOLLOWER, which Kafka's
// share consumer retries.
//
// Not persisted yet: releases and lock expiries (their records are Available after a restart
// anyway; only their delivery counts may be lower), share group membership on the group
// coordinator (members rejoin after it moves; the topics a group subscribed to, which
// deleting it uses, too). The share coordinator serves InitializeShareGroupState
// (Initialize: a start offset in a state epoch, no batches, an older state epoch fenced) and
// ReadShareGroupStateSummary (Read without the batches) between brokers;
// DescribeShareGroupOffsets gives no lag (-1) for a share-partition it does not hold, and
// the first fetch of a new share-partition still writes its start with
// WriteShareGroupState. Two first fetches racing on a new
// share-partition may persist different high watermarks as its start; the one installed
// wins in memory, and the first acknowledgement writes its state.
package share
