package txn

import "github.com/gregor-project/gregor/internal/group"

// TopicName is the internal compacted topic holding the transactional ids' state.
const TopicName = "__transaction_state"

// PartitionFor is the __transaction_state partition that coordinates transactionalID:
// Utils.abs(transactionalId.hashCode()) % partitions, the same hash as a group's
// __consumer_offsets partition (group.PartitionFor).
func PartitionFor(transactionalID string, partitions int32) int32 {
	return group.PartitionFor(transactionalID, partitions)
}
