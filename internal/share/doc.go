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
// to be persisted.
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
// Durability (not built yet). State lives in memory on the partition leader and on the group
// coordinator: a broker restart or a change of the partition's leader starts a
// share-partition afresh at the high watermark (share.auto.offset.reset=latest), and state
// kept from an earlier leader epoch is dropped (Manager.Partition). The design that closes
// this gap is Kafka's:
//
//   - A share coordinator, the third user of internal/coordinator's Runtime (after the group
//     and transaction coordinators), over the compacted internal topic __share_group_state
//     (share.coordinator.state.topic.num.partitions 50, .replication.factor 3, .min.isr 2;
//     the last two are refused at start-up until then). The key "group:topic-id:partition"
//     routes a share-partition to a state partition; FindCoordinator key type 2 (SHARE) finds
//     its leader.
//   - Its records, as Kafka writes them: key = int16 record type (0 ShareSnapshot,
//     1 ShareUpdate) then {GroupId string, TopicId uuid, Partition int32}; ShareSnapshot value
//     (flexible) {SnapshotEpoch uint16, StateEpoch int32, LeaderEpoch int32, StartOffset int64,
//     StateBatches [{FirstOffset int64, LastOffset int64, DeliveryState int8 (0 Available,
//     2 Acknowledged, 4 Archived), DeliveryCount int16}]}; a ShareUpdate carries only the
//     batches that changed, and a new snapshot is written every
//     share.coordinator.snapshot.update.records.per.snapshot updates. Replay keeps the latest
//     snapshot per key with the updates after it; a tombstone (DeleteShareGroupState) ends
//     the key.
//   - The partition leader reads a share-partition's state (ReadShareGroupState) before its
//     first fetch, InitializeShareGroupState having been sent by the group coordinator when
//     the partition was first assigned (start offset from share.auto.offset.reset), and writes
//     each change (WriteShareGroupState: start offset, leader epoch, changed batches) before it
//     answers the acknowledgement that caused it, so an answered ACCEPT is never lost. An
//     acquisition is not written: after a restart or a leader change the records that were
//     Acquired are Available again with their delivery count kept (Kafka does the same).
//     ReadShareGroupStateSummary answers DescribeShareGroupOffsets across brokers.
//   - In this package: Partition.Snapshot (the state batches: runs of equal state and
//     delivery count, Acquired written as Available) and Restore (a Partition rebuilt from
//     them, equal to the original with every Acquired record Available again) are built
//     (state.go) and checked at every step of the property test; still to come are the
//     batches changed since the last write (for ShareUpdate) and the coordinator itself.
package share
