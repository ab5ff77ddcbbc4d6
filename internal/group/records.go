package group

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Record formats of __consumer_offsets, as Kafka writes them (see the package comment).
const (
	offsetKeyVersion   = 1 // OffsetCommitKey (0 and 1 are the same layout)
	groupKeyVersion    = 2 // GroupMetadataKey
	groupValueVersion  = 3 // GroupMetadataValue with instance ids and the state timestamp
	offsetValueVersion = 3 // OffsetCommitValue with leader epoch, no expire timestamp
	offsetValueExpire  = 1 // OffsetCommitValue with an explicit expire timestamp
)

func groupKey(group string) []byte {
	k := kmsg.GroupMetadataKey{Version: groupKeyVersion, Group: group}
	return k.AppendTo(nil)
}

func offsetKey(group string, tp TopicPartition) []byte {
	k := kmsg.OffsetCommitKey{Version: offsetKeyVersion, Group: group, Topic: tp.Topic, Partition: tp.Partition}
	return k.AppendTo(nil)
}

func offsetValue(o *Offset) []byte {
	v := kmsg.NewOffsetCommitValue()
	v.Version = offsetValueVersion
	if o.ExpireTimestamp >= 0 {
		v.Version = offsetValueExpire
	}
	v.Offset, v.LeaderEpoch, v.Metadata = o.Offset, o.LeaderEpoch, o.Metadata
	v.CommitTimestamp, v.ExpireTimestamp = o.CommitTimestamp, o.ExpireTimestamp
	return v.AppendTo(nil)
}

// groupValue encodes the group's current generation with the given assignment (nil: the
// members' current assignments).
func groupValue(g *Group, assignment map[string][]byte) []byte {
	v := kmsg.NewGroupMetadataValue()
	v.Version = groupValueVersion
	v.ProtocolType = g.protocolType
	v.Generation = g.generation
	if g.protocolName != "" {
		v.Protocol = strPtr(g.protocolName)
	}
	if g.leader != "" {
		v.Leader = strPtr(g.leader)
	}
	v.CurrentStateTimestamp = g.stateTime
	for _, m := range g.order {
		vm := kmsg.NewGroupMetadataValueMember()
		vm.MemberID, vm.InstanceID = m.ID, m.InstanceID
		vm.ClientID, vm.ClientHost = m.ClientID, m.ClientHost
		vm.RebalanceTimeoutMillis, vm.SessionTimeoutMillis = m.RebalanceTimeoutMs, m.SessionTimeoutMs
		vm.Subscription = m.metadata(g.protocolName)
		if vm.Subscription == nil {
			vm.Subscription = []byte{}
		}
		if a, ok := assignment[m.ID]; ok || assignment != nil {
			vm.Assignment = a
		} else {
			vm.Assignment = m.Assignment
		}
		if vm.Assignment == nil {
			vm.Assignment = []byte{}
		}
		v.Members = append(v.Members, vm)
	}
	return v.AppendTo(nil)
}

// storeGroup persists the group's generation (Kafka's storeGroup); done runs with the
// append's outcome.
func (s *Shard) storeGroup(g *Group, assignment map[string][]byte, done func(error)) {
	s.write([]Record{{Key: groupKey(g.ID), Value: groupValue(g, assignment)}}, done)
}
