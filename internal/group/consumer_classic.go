package group

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Classic and consumer-protocol members in one group, as Kafka 4 serves them
// (group.consumer.migration.policy, default bidirectional):
//
//   - A JoinGroup to a consumer group with members joins it as a classic member: the
//     coordinator computes its assignment with the server assignor from the subscription
//     in its JoinGroup metadata, hands it out (as a consumer protocol assignment) in
//     SyncGroup, and tells it to rejoin (REBALANCE_IN_PROGRESS on Heartbeat) whenever the
//     group epoch moves or it must revoke partitions or may take new ones. A JoinGroup to
//     an empty consumer group replaces it with a classic group (offsets kept).
//   - A ConsumerGroupHeartbeat joining an empty classic group replaces it with a consumer
//     group; joining a classic group of consumers with members upgrades it (policy upgrade
//     or bidirectional): its members become classic members of the consumer group, keeping
//     their partitions, and are told to rejoin.
//   - When the last consumer-protocol member leaves a group whose other members are all
//     classic, the group becomes a classic group again (policy downgrade or bidirectional)
//     and rebalances.

func (c *Config) consumerDefaults() {
	if c.ConsumerSessionTimeoutMs <= 0 {
		c.ConsumerSessionTimeoutMs = 45000
	}
	if c.ConsumerHeartbeatIntervalMs <= 0 {
		c.ConsumerHeartbeatIntervalMs = 5000
	}
	if c.ConsumerMaxSize <= 0 {
		c.ConsumerMaxSize = 1<<31 - 1
	}
	var names []string
	for _, a := range c.ConsumerAssignors {
		if n := assignorName(a); n != "" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		names = []string{"uniform", "range"}
	}
	c.ConsumerAssignors = names
	if c.ConsumerMigrationPolicy == "" {
		c.ConsumerMigrationPolicy = "bidirectional"
	}
}

func (c *Config) upgradeEnabled() bool {
	return c.ConsumerMigrationPolicy == "bidirectional" || c.ConsumerMigrationPolicy == "upgrade"
}

func (c *Config) downgradeEnabled() bool {
	return c.ConsumerMigrationPolicy == "bidirectional" || c.ConsumerMigrationPolicy == "downgrade"
}

// subscriptionOf parses a classic member's consumer protocol subscription.
func subscriptionOf(metadata []byte) (*kmsg.ConsumerMemberMetadata, bool) {
	var sub kmsg.ConsumerMemberMetadata
	if err := sub.ReadFrom(metadata); err != nil {
		return nil, false
	}
	return &sub, true
}

// protocolMetadata is m's metadata for the group's protocol, or for its first one if the
// group has not chosen.
func (g *Group) protocolMetadata(m *Member) []byte {
	if g.protocolName != "" {
		return m.metadata(g.protocolName)
	}
	if len(m.Protocols) > 0 {
		return m.Protocols[0].Metadata
	}
	return nil
}

// validateUpgrade checks that a classic group with members may become a consumer group for
// a joining consumer-protocol member.
func (s *Shard) validateUpgrade(g *Group, memberID string) *hbError {
	switch {
	case !s.cfg.upgradeEnabled():
		return hbErr(kerr.GroupIDNotFound, "Cannot upgrade classic group %s to consumer group because online upgrade is disabled.", g.ID)
	case g.protocolType != consumerProtocolType:
		return hbErr(kerr.GroupIDNotFound, "Cannot upgrade classic group %s to consumer group because the group does not use the consumer embedded protocol.", g.ID)
	case len(g.members) > int(s.cfg.ConsumerMaxSize):
		return hbErr(kerr.GroupIDNotFound, "Cannot upgrade classic group %s to consumer group because the group size exceeds the consumer group maximum size.", g.ID)
	}
	for _, m := range g.order {
		if _, ok := subscriptionOf(g.protocolMetadata(m)); !ok {
			return hbErr(kerr.GroupIDNotFound, "Cannot upgrade classic group %s to consumer group because the embedded consumer protocol is malformed.", g.ID)
		}
		if len(m.Assignment) > 0 {
			var a kmsg.ConsumerMemberAssignment
			if err := a.ReadFrom(m.Assignment); err != nil {
				return hbErr(kerr.GroupIDNotFound, "Cannot upgrade classic group %s to consumer group because the embedded consumer protocol is malformed.", g.ID)
			}
		}
	}
	if len(g.members) >= int(s.cfg.ConsumerMaxSize) && g.members[memberID] == nil {
		return hbErr(kerr.GroupMaxSizeReached, "The consumer group has reached its maximum capacity of %d members.", s.cfg.ConsumerMaxSize)
	}
	return nil
}

// upgradeClassic turns a classic group of consumers into a consumer group whose members are
// classic members keeping their current partitions, at the classic generation.
func (s *Shard) upgradeClassic(g *Group, recs *[]Record) {
	members := g.Members()
	gen, protocol := g.generation, g.protocolName
	for _, m := range members {
		s.answerParked(g, m, kerr.RebalanceInProgress)
		s.cancelHeartbeat(g, m.ID)
	}
	for pid := range g.pending {
		s.timers.Cancel(timerKey{timerPending, g.ID, pid})
	}
	s.timers.Cancel(timerKey{kind: timerJoin, group: g.ID})
	s.timers.Cancel(timerKey{kind: timerSync, group: g.ID})
	*recs = append(*recs, Record{Key: groupKey(g.ID)})

	metadata := func(m *Member) []byte {
		if protocol != "" {
			return m.metadata(protocol)
		}
		return m.Protocols[0].Metadata
	}
	offsets, pendingCommits := g.offsets, g.pendingCommits
	newConsumerGroupFor(g, s.now)
	g.offsets, g.pendingCommits = offsets, pendingCommits
	cg := g.cons
	cg.epoch, cg.assignmentEpoch = gen, gen
	for _, m := range members {
		sub, _ := subscriptionOf(metadata(m))
		assigned := Assignment{}
		var a kmsg.ConsumerMemberAssignment
		if len(m.Assignment) > 0 && a.ReadFrom(m.Assignment) == nil {
			assigned = s.assignmentFromNames(cg, a.Topics)
		}
		cm := &ConsumerMember{
			ID: m.ID, InstanceID: m.InstanceID, RackID: sub.Rack, ClientID: m.ClientID, ClientHost: m.ClientHost,
			SubscribedTopics: sortedStrings(append([]string{}, sub.Topics...)), RebalanceTimeoutMs: m.RebalanceTimeoutMs,
			MemberEpoch: gen, PreviousMemberEpoch: gen, State: MemberStable,
			Assigned: assigned, PendingRevocation: Assignment{},
			Classic: &ClassicMemberMetadata{SessionTimeoutMs: m.SessionTimeoutMs, Protocols: m.Protocols},
		}
		cg.put(nil, cm)
		cg.target[cm.ID] = assigned
		s.timers.Set(timerKey{timerConsumerSession, g.ID, cm.ID}, s.now+int64(cm.Classic.SessionTimeoutMs))
	}
	g.syncConsumerState(s.now)
	*recs = append(*recs, consumerGroupRecords(g)...)
}

// assignmentFromNames maps a consumer protocol assignment to topic ids, dropping topics
// that do not exist and partitions another member of cg already owns.
func (s *Shard) assignmentFromNames(cg *consumerGroup, ts []kmsg.ConsumerMemberAssignmentTopic) Assignment {
	a := Assignment{}
	for _, t := range ts {
		id, n, ok := s.topics.Topic(t.Topic)
		if !ok {
			continue
		}
		var ps []int32
		for _, p := range normalized(t.Partitions) {
			if p < n && cg.partitionEpoch(id, p) == -1 {
				ps = append(ps, p)
			}
		}
		if len(ps) > 0 {
			a[id] = union(a[id], ps)
		}
	}
	return a
}

// ownedFromSubscription is what a classic member reports owning (consumer protocol v1+).
func (s *Shard) ownedFromSubscription(sub *kmsg.ConsumerMemberMetadata) Assignment {
	a := Assignment{}
	for _, t := range sub.OwnedPartitions {
		if id, _, ok := s.topics.Topic(t.Topic); ok {
			if ps := normalized(t.Partitions); len(ps) > 0 {
				a[id] = union(a[id], ps)
			}
		}
	}
	return a
}

// classicAssignment encodes partitions as a consumer protocol assignment of the version the
// member's subscription uses.
func (s *Shard) classicAssignment(a Assignment, metadata []byte) []byte {
	var out kmsg.ConsumerMemberAssignment
	if len(metadata) >= 2 {
		out.Version = min(int16(metadata[0])<<8|int16(metadata[1]), 3)
	}
	type named struct {
		name string
		ps   []int32
	}
	var ts []named
	for id, ps := range a {
		if name, _, ok := s.topics.TopicByID(id); ok {
			ts = append(ts, named{name, ps})
		}
	}
	slices.SortFunc(ts, func(x, y named) int { return compareStrings(x.name, y.name) })
	out.Topics = []kmsg.ConsumerMemberAssignmentTopic{}
	for _, t := range ts {
		out.Topics = append(out.Topics, kmsg.ConsumerMemberAssignmentTopic{Topic: t.name, Partitions: slices.Clone(t.ps)})
	}
	return out.AppendTo(nil)
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// canDowngrade reports whether removing the consumer-protocol member m leaves only classic
// members that may form a classic group.
func (s *Shard) canDowngrade(g *Group, m *ConsumerMember) bool {
	cg := g.cons
	return !m.usesClassic() && len(cg.members) > 1 && cg.numClassic() == len(cg.members)-1 &&
		s.cfg.downgradeEnabled() && len(cg.members)-1 <= int(s.cfg.MaxSize)
}

// downgrade turns g, without the leaving member, into a classic group of its classic
// members (each keeping its target assignment) and starts a rebalance.
func (s *Shard) downgrade(g *Group, leaving *ConsumerMember) []Record {
	cg := g.cons
	recs := consumerTombstones(g)
	members := cg.sortedMembers()
	for _, m := range members {
		s.cancelConsumerTimers(g, m.ID)
	}
	offsets, pendingCommits, epoch := g.offsets, g.pendingCommits, cg.epoch
	ng := newGroup(g.ID, s.now)
	*g = *ng
	g.offsets, g.pendingCommits = offsets, pendingCommits
	g.protocolType = consumerProtocolType
	g.generation = epoch
	for _, m := range members {
		if m.ID == leaving.ID {
			continue
		}
		g.add(&Member{
			ID: m.ID, InstanceID: m.InstanceID, ClientID: m.ClientID, ClientHost: m.ClientHost,
			RebalanceTimeoutMs: m.RebalanceTimeoutMs, SessionTimeoutMs: m.Classic.SessionTimeoutMs,
			ProtocolType: consumerProtocolType, Protocols: m.Classic.Protocols,
		})
	}
	g.protocolName = g.selectProtocol()
	g.computeSubscribed()
	for _, m := range g.order {
		m.Assignment = s.classicAssignment(cg.target[m.ID], m.metadata(g.protocolName))
		s.scheduleHeartbeat(g, m, int64(m.SessionTimeoutMs))
	}
	g.state, g.stateTime = Stable, s.now
	recs = append(recs, Record{Key: groupKey(g.ID), Value: groupValue(g, nil)})
	s.prepareRebalance(g)
	return recs
}

// supportsClassic reports whether a classic member with these protocols may join: consumer
// protocol type, and a protocol every classic member supports.
func (cg *consumerGroup) supportsClassic(protocolType string, ps []MemberProtocol) bool {
	if protocolType != consumerProtocolType || len(ps) == 0 {
		return false
	}
	classic := 0
	counts := map[string]int{}
	for _, m := range cg.members {
		if m.Classic == nil {
			continue
		}
		classic++
		for _, p := range m.Classic.Protocols {
			counts[p.Name]++
		}
	}
	for _, p := range ps {
		if counts[p.Name] == classic {
			return true
		}
	}
	return false
}

// replaceConsumerWithClassic turns an empty consumer group into a classic one for a
// JoinGroup (Kafka's maybeDeleteEmptyConsumerGroup), keeping the offsets.
func (s *Shard) replaceConsumerWithClassic(g *Group) {
	recs := consumerTombstones(g)
	offsets, pendingCommits := g.offsets, g.pendingCommits
	*g = *newGroup(g.ID, s.now)
	g.offsets, g.pendingCommits = offsets, pendingCommits
	s.writeUnanswered("tombstones of consumer group "+g.ID, recs)
}

// classicJoinConsumer handles a JoinGroup to a consumer group with members.
func (s *Shard) classicJoinConsumer(g *Group, a joinArgs) {
	cg := g.cons
	memberID := a.memberID
	unknown := memberID == ""
	if unknown {
		memberID = s.cfg.NewID()
	}
	if e := s.consumerFull(cg, memberID); e != nil {
		s.reply(a.w, joinError(a.memberID, kerr.GroupMaxSizeReached))
		return
	}
	if !cg.supportsClassic(a.protocolType, a.protocols) {
		s.reply(a.w, joinError(a.memberID, kerr.InconsistentGroupProtocol))
		return
	}
	if unknown && a.requireKnownID && a.instanceID == nil {
		s.reply(a.w, joinError(memberID, kerr.MemberIDRequired))
		return
	}
	sub, ok := subscriptionOf(a.protocols[0].Metadata)
	if !ok {
		s.reply(a.w, joinError(a.memberID, kerr.InconsistentGroupProtocol))
		return
	}
	var recs []Record
	var m *ConsumerMember
	if existing := cg.staticMember(a.instanceID); a.instanceID != nil && existing != nil {
		switch {
		case unknown:
			m = s.replaceStatic(g, existing, memberID, &recs)
		case existing.ID != memberID:
			s.reply(a.w, joinError(a.memberID, kerr.FencedInstanceID))
			return
		default:
			m = existing
		}
	} else if a.instanceID != nil && !unknown && cg.members[memberID] == nil {
		s.reply(a.w, joinError(a.memberID, kerr.UnknownMemberID))
		return
	} else if m = cg.members[memberID]; m == nil {
		m = newConsumerMember(memberID)
	}

	nm := m.clone()
	if a.instanceID != nil {
		nm.InstanceID = a.instanceID
	}
	if sub.Rack != nil {
		nm.RackID = sub.Rack
	}
	nm.RebalanceTimeoutMs = a.rebalanceMs
	nm.SubscribedTopics = sortedStrings(append([]string{}, sub.Topics...))
	nm.SubscribedRegex = ""
	nm.ClientID, nm.ClientHost = a.client.ID, a.client.Host
	nm.Classic = &ClassicMemberMetadata{SessionTimeoutMs: a.sessionMs, Protocols: a.protocols}
	subChanged := s.updateMember(g, m, nm, &recs)
	if cg.epoch > cg.assignmentEpoch {
		s.updateTarget(g, &recs)
	}
	final := s.reconcileMember(g, nm, s.ownedFromSubscription(sub), subChanged, &recs)

	r := kmsg.NewPtrJoinGroupResponse()
	r.MemberID = final.ID
	r.Generation = final.MemberEpoch
	r.ProtocolType = strPtr(consumerProtocolType)
	r.Protocol = strPtr(a.protocols[0].Name)
	id, session, rebalance := final.ID, int64(a.sessionMs), int64(a.rebalanceMs)
	done := func() {
		s.timers.Cancel(timerKey{timerClassicJoin, g.ID, id})
		s.timers.Set(timerKey{timerConsumerSession, g.ID, id}, s.now+session)
		s.timers.Set(timerKey{timerClassicSync, g.ID, id}, s.now+rebalance)
	}
	if len(recs) == 0 {
		done()
		s.reply(a.w, r)
		return
	}
	s.write(recs, func(err error) {
		if err != nil {
			s.reply(a.w, joinError(a.memberID, groupWriteError(err)))
			return
		}
		done()
		s.reply(a.w, r)
	})
}

// classicMember finds the classic member a SyncGroup, Heartbeat or LeaveGroup names.
func (cg *consumerGroup) classicMember(memberID string, instanceID *string) (*ConsumerMember, *kerr.Error) {
	var m *ConsumerMember
	if instanceID == nil {
		m = cg.members[memberID]
	} else {
		m = cg.staticMember(instanceID)
		if m != nil && m.ID != memberID {
			return nil, kerr.FencedInstanceID
		}
	}
	if m == nil || !m.usesClassic() {
		return nil, kerr.UnknownMemberID
	}
	return m, nil
}

// classicRebalancing: the member must rejoin (the group epoch moved past it, it must revoke
// partitions, or partitions it waits for are free now); the join deadline starts.
func (s *Shard) classicRebalancing(g *Group, m *ConsumerMember, forHeartbeat bool) bool {
	cg := g.cons
	rejoin := m.MemberEpoch < cg.epoch && m.State != MemberUnrevokedPartitions
	if forHeartbeat {
		rejoin = m.MemberEpoch < cg.epoch || m.State == MemberUnrevokedPartitions ||
			m.State == MemberUnreleasedPartitions && !cg.waitingOnUnreleased(m)
	}
	if rejoin {
		key := timerKey{timerClassicJoin, g.ID, m.ID}
		if !s.timers.Has(key) {
			s.timers.Set(key, s.now+int64(m.RebalanceTimeoutMs))
		}
	}
	return rejoin
}

// waitingOnUnreleased reports whether some partition of m's target is still owned by
// another member.
func (cg *consumerGroup) waitingOnUnreleased(m *ConsumerMember) bool {
	if m.State != MemberUnreleasedPartitions {
		return false
	}
	for id, ps := range cg.target[m.ID] {
		for _, p := range ps {
			if !m.Assigned.has(id, p) && cg.partitionEpoch(id, p) != -1 {
				return true
			}
		}
	}
	return false
}

// classicSyncConsumer answers a classic member's SyncGroup with its current assignment.
func (s *Shard) classicSyncConsumer(g *Group, w Waiter, req *kmsg.SyncGroupRequest) {
	cg := g.cons
	m, err := cg.classicMember(req.MemberID, req.InstanceID)
	switch {
	case err != nil:
	case req.Generation != m.MemberEpoch:
		err = kerr.IllegalGeneration
	case req.ProtocolType != nil && *req.ProtocolType != consumerProtocolType,
		req.Protocol != nil && *req.Protocol != m.Classic.Protocols[0].Name:
		err = kerr.InconsistentGroupProtocol
	case s.classicRebalancing(g, m, false):
		err = kerr.RebalanceInProgress
	}
	if err != nil {
		s.reply(w, syncError(err))
		return
	}
	s.timers.Cancel(timerKey{timerClassicSync, g.ID, m.ID})
	s.timers.Set(timerKey{timerConsumerSession, g.ID, m.ID}, s.now+int64(m.Classic.SessionTimeoutMs))
	r := kmsg.NewPtrSyncGroupResponse()
	r.ProtocolType, r.Protocol = req.ProtocolType, req.Protocol
	r.MemberAssignment = s.classicAssignment(m.Assigned, m.Classic.Protocols[0].Metadata)
	s.reply(w, r)
}

// classicHeartbeatConsumer answers a classic member's Heartbeat.
func (s *Shard) classicHeartbeatConsumer(g *Group, req *kmsg.HeartbeatRequest) *kerr.Error {
	m, err := g.cons.classicMember(req.MemberID, req.InstanceID)
	if err != nil {
		return err
	}
	if req.Generation != m.MemberEpoch {
		return kerr.IllegalGeneration
	}
	s.timers.Set(timerKey{timerConsumerSession, g.ID, m.ID}, s.now+int64(m.Classic.SessionTimeoutMs))
	if s.classicRebalancing(g, m, true) {
		return kerr.RebalanceInProgress
	}
	return nil
}

// classicLeaveConsumer removes classic members of a consumer group (LeaveGroup).
func (s *Shard) classicLeaveConsumer(w Waiter, g *Group, req *kmsg.LeaveGroupRequest) {
	cg := g.cons
	members := req.Members
	if req.Version < 3 {
		members = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	resp := kmsg.NewPtrLeaveGroupResponse()
	var recs []Record
	left := false
	for _, lm := range members {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID = lm.MemberID, lm.InstanceID
		var m *ConsumerMember
		var err *kerr.Error
		if lm.InstanceID == nil {
			m, err = cg.classicMember(lm.MemberID, nil)
		} else if m = cg.staticMember(lm.InstanceID); m == nil {
			err = kerr.UnknownMemberID
		} else if lm.MemberID != "" && m.ID != lm.MemberID {
			err = kerr.FencedInstanceID
		} else if !m.usesClassic() {
			err = kerr.UnknownMemberID
		}
		if err != nil {
			rm.ErrorCode = err.Code
		} else {
			rm.MemberID = m.ID
			recs = append(recs, cgMemberTombstones(g.ID, m.ID)...)
			s.cancelConsumerTimers(g, m.ID)
			cg.put(m, nil)
			delete(cg.target, m.ID)
			left = true
		}
		resp.Members = append(resp.Members, rm)
	}
	if left {
		if meta := s.computeSubMeta(cg, nil, nil); !sameSubMeta(meta, cg.subMeta) {
			cg.subMeta = meta
			g.updateSubscribed()
			recs = append(recs, cgSubMetaRecord(g.ID, meta))
		}
		cg.epoch++
		recs = append(recs, cgEpochRecord(g.ID, cg.epoch))
		g.syncConsumerState(s.now)
	}
	if req.Version < 3 {
		resp.ErrorCode = resp.Members[0].ErrorCode
		resp.Members = nil
	}
	s.writeThenReply(recs, w, resp, func(err *kerr.Error) any {
		r := kmsg.NewPtrLeaveGroupResponse()
		r.ErrorCode = err.Code
		return r
	})
}

// onClassicMemberExpired: a classic member did not rejoin or sync in time.
func (s *Shard) onClassicMemberExpired(g *Group, memberID string) {
	if g.cons == nil || g.state == Dead {
		return
	}
	if m := g.cons.members[memberID]; m != nil && m.usesClassic() {
		s.writeUnanswered("fenced member "+memberID+" of "+g.ID, s.fenceMember(g, m))
	}
}
