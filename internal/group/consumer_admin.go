package group

import (
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Consumer groups in the other group APIs: loading, offset commit and fetch checks,
// ConsumerGroupDescribe, DescribeGroups and ListGroups.

// loadConsumerGroup finishes a replayed consumer group: every member gets a full session
// timeout from now, and members that were revoking partitions a full rebalance timeout.
func (s *Shard) loadConsumerGroup(g *Group) {
	cg := g.cons
	g.state = Stable
	if len(cg.members) == 0 {
		g.state = Empty
	}
	g.updateSubscribed()
	for _, m := range cg.sortedMembers() {
		sessionMs, _ := s.cfg.consumerTimes(g.ID)
		session := int64(sessionMs)
		if m.Classic != nil {
			session = int64(m.Classic.SessionTimeoutMs)
		}
		s.timers.Set(timerKey{timerConsumerSession, g.ID, m.ID}, s.now+session)
		if m.Classic == nil && m.State == MemberUnrevokedPartitions {
			n := m.clone()
			n.revokeEpoch = n.MemberEpoch
			cg.members[m.ID] = n
			s.timers.Set(timerKey{timerConsumerRebalance, g.ID, m.ID}, s.now+int64(m.RebalanceTimeoutMs))
		}
	}
}

// validateCommit applies the group's rules for who may commit offsets.
func (g *Group) validateCommit(req *kmsg.OffsetCommitRequest) *kerr.Error {
	if g.cons == nil {
		return g.validateOffsetCommit(req.MemberID, req.InstanceID, req.Generation, false)
	}
	// Kafka's ConsumerGroup.validateOffsetCommit: without a member epoch an empty group
	// takes commits (admin tools); otherwise the member must exist, commit with its current
	// epoch (STALE_MEMBER_EPOCH; a classic member: ILLEGAL_GENERATION), and a
	// consumer-protocol member must use OffsetCommit v9+.
	if g.state == Dead {
		return kerr.CoordinatorNotAvailable
	}
	if req.Generation < 0 && len(g.cons.members) == 0 {
		return nil
	}
	m := g.cons.members[req.MemberID]
	switch {
	case m == nil:
		return kerr.UnknownMemberID
	case !m.usesClassic() && req.Version < 9:
		return kerr.UnsupportedVersion
	case req.Generation != m.MemberEpoch && m.usesClassic():
		return kerr.IllegalGeneration
	case req.Generation != m.MemberEpoch:
		return kerr.StaleMemberEpoch
	}
	return nil
}

// validateFetch applies OffsetFetch v9's member checks to a consumer group: a request naming
// a member must come from a current member at its current epoch.
func (g *Group) validateFetch(req *kmsg.OffsetFetchRequestGroup) *kerr.Error {
	if g.cons == nil || req.MemberID == nil && req.MemberEpoch < 0 {
		return nil
	}
	var id string
	if req.MemberID != nil {
		id = *req.MemberID
	}
	m := g.cons.members[id]
	switch {
	case m == nil:
		return kerr.UnknownMemberID
	case req.MemberEpoch != m.MemberEpoch && m.usesClassic():
		return kerr.IllegalGeneration
	case req.MemberEpoch != m.MemberEpoch:
		return kerr.StaleMemberEpoch
	}
	return nil
}

// DescribeConsumerGroup answers ConsumerGroupDescribe for one group (GROUP_ID_NOT_FOUND for
// unknown and classic groups, as Kafka answers).
func (s *Shard) DescribeConsumerGroup(id string, version int16, topics Topics) kmsg.ConsumerGroupDescribeResponseGroup {
	s.setTopics(topics)
	d := kmsg.NewConsumerGroupDescribeResponseGroup()
	d.Group = id
	d.AuthorizedOperations = math.MinInt32
	g := s.groups[id]
	switch {
	case g == nil || g.state == Dead:
		d.ErrorCode = kerr.GroupIDNotFound.Code
		d.ErrorMessage = strPtr(fmt.Sprintf("Group %s not found.", id))
		return d
	case g.cons == nil:
		d.ErrorCode = kerr.GroupIDNotFound.Code
		d.ErrorMessage = strPtr(fmt.Sprintf("Group %s is not a consumer group.", id))
		return d
	}
	cg := g.cons
	d.State = cg.state().String()
	d.Epoch = cg.epoch
	d.AssignmentEpoch = cg.assignmentEpoch
	d.AssignorName = s.preferredAssignor(cg)
	for _, m := range cg.sortedMembers() {
		dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
		dm.MemberID, dm.InstanceID, dm.RackID = m.ID, m.InstanceID, m.RackID
		dm.MemberEpoch = m.MemberEpoch
		dm.ClientID, dm.ClientHost = m.ClientID, m.ClientHost
		dm.SubscribedTopics = append([]string{}, m.SubscribedTopics...)
		dm.SubscribedTopicRegex = nilIfEmpty(m.SubscribedRegex)
		dm.Assignment = s.describeAssignment(m.Assigned)
		dm.TargetAssignment = s.describeAssignment(cg.target[m.ID])
		dm.MemberType = 1
		if m.usesClassic() {
			dm.MemberType = 0
		}
		d.Members = append(d.Members, dm)
	}
	return d
}

func (s *Shard) describeAssignment(a Assignment) kmsg.Assignment {
	out := kmsg.NewAssignment()
	out.TopicPartitions = []kmsg.AssignmentTopicPartition{}
	for _, id := range a.sortedIDs() {
		t := kmsg.NewAssignmentTopicPartition()
		t.TopicID, t.Partitions = id, append([]int32{}, a[id]...)
		t.Topic, _, _ = s.topics.TopicByID(id)
		out.TopicPartitions = append(out.TopicPartitions, t)
	}
	return out
}

// describeConsumerClassic shows a consumer group in DescribeGroups: its KIP-848 state,
// protocol type "consumer" with the server assignor as the protocol, and when Stable each
// member's subscription and assignment in the consumer protocol's formats. This differs
// from Kafka 4, which answers DescribeGroups for a consumer group as for an unknown one
// (Dead; GROUP_ID_NOT_FOUND from v6) and leaves it to ConsumerGroupDescribe: tools that
// only speak DescribeGroups (kadm.DescribeGroups, gregor group describe and
// reset-offsets' "has members" check) see the group and its members here.
func (s *Shard) describeConsumerClassic(g *Group, d *kmsg.DescribeGroupsResponseGroup) {
	cg := g.cons
	st := cg.state()
	d.State = st.String()
	d.ProtocolType = consumerProtocolType
	stable := st == ConsumerStable
	if stable {
		d.Protocol = s.preferredAssignor(cg)
	}
	for _, m := range cg.sortedMembers() {
		dm := kmsg.NewDescribeGroupsResponseGroupMember()
		dm.MemberID, dm.InstanceID = m.ID, m.InstanceID
		dm.ClientID, dm.ClientHost = m.ClientID, m.ClientHost
		dm.ProtocolMetadata, dm.MemberAssignment = []byte{}, []byte{}
		if stable {
			sub := kmsg.ConsumerMemberMetadata{Version: 0, Topics: s.memberTopics(m)}
			if sub.Topics == nil {
				sub.Topics = []string{}
			}
			dm.ProtocolMetadata = sub.AppendTo(nil)
			dm.MemberAssignment = s.classicAssignment(m.Assigned, nil)
		}
		d.Members = append(d.Members, dm)
	}
}

// stateName is the state ListGroups reports.
func (g *Group) stateName() string {
	if g.cons != nil && g.state != Dead {
		return g.cons.state().String()
	}
	return g.state.String()
}
