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
// Manager (manager.go) holds both behind one mutex for the API layer (internal/api
// sharegroupheartbeat.go, sharefetch.go, shareacknowledge.go) and keeps share sessions.
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
// Durability. State lives in memory on the partition leader and on the coordinator; a
// broker restart or leadership change starts a share-partition afresh from
// share.auto.offset.reset. The persistence design is Kafka's: the leader writes
// WriteShareGroupState (start offset, leader epoch, and the state batches of the non-
// Available in-flight records: first/last offset, delivery state, delivery count) to the
// share coordinator, which appends ShareSnapshot / ShareUpdate records keyed by
// (group, topic id, partition) to the compacted topic __share_group_state and answers
// ReadShareGroupState to a new leader, which rebuilds its Partition from that state (every
// record that was Acquired becomes Available again, its delivery count kept). An
// acknowledgement is answered only after its write is durable.
package share
