package group

import (
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ConsumerGroupHeartbeat v0-v1 (KIP-848), as Kafka's GroupMetadataManager handles it:
//
//   - MemberEpoch 0 joins (or rejoins, keeping the member's state) with the full
//     subscription and an empty owned-partitions list; v1 members bring their own member
//     id, v0 members get one. A static member (InstanceID) may only take over its instance
//     once the previous holder left with epoch -2 (else UNRELEASED_INSTANCE_ID), and then
//     inherits its partitions.
//   - A regular heartbeat carries the member's epoch: one ahead of the coordinator's, or
//     behind it other than by the one epoch whose answer may have been lost, is
//     FENCED_MEMBER_EPOCH. Fields left null are unchanged since the last heartbeat.
//   - A changed subscription (topic names, or an RE2 regular expression matched against
//     whole topic names), a new member, or a change in the subscribed topics' partitions
//     bumps the group epoch; the next heartbeat then computes a new target assignment with
//     the preferred server assignor (the one most members ask for, else the first of
//     group.consumer.assignors).
//   - Each heartbeat reconciles the member toward its target (reconcile.go) and answers with
//     its epoch, group.consumer.heartbeat.interval.ms, and its assignment when the request
//     was full or the assignment changed.
//   - MemberEpoch -1 leaves; -2 leaves for now (a static member keeps its partitions for
//     its session timeout, group.consumer.session.timeout.ms).
//
// Records are written before the answer; the group's state changes at once.
func (s *Shard) ConsumerGroupHeartbeat(now int64, w Waiter, req *kmsg.ConsumerGroupHeartbeatRequest, c Client, topics Topics) Ready {
	s.begin(now)
	s.setTopics(topics)
	s.consumerHeartbeat(w, req, c)
	return s.end()
}

// hbError is a failed heartbeat's code and message.
type hbError struct {
	err *kerr.Error
	msg string
}

func hbErr(err *kerr.Error, format string, args ...any) *hbError {
	return &hbError{err, fmt.Sprintf(format, args...)}
}

// hbResponse is a heartbeat answer for group, carrying its heartbeat interval.
func (s *Shard) hbResponse(group string, e *hbError) *kmsg.ConsumerGroupHeartbeatResponse {
	r := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	_, r.HeartbeatIntervalMillis = s.cfg.consumerTimes(group)
	if e != nil {
		r.ErrorCode = e.err.Code
		if e.msg != "" {
			r.ErrorMessage = &e.msg
		}
	}
	return r
}

// validateHeartbeat applies Kafka's request checks (INVALID_REQUEST, UNSUPPORTED_ASSIGNOR,
// INVALID_REGULAR_EXPRESSION).
func (s *Shard) validateHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest) *hbError {
	blank := func(p *string) bool { return p != nil && strings.TrimSpace(*p) == "" }
	switch {
	case strings.TrimSpace(req.Group) == "":
		return hbErr(kerr.InvalidRequest, "GroupId can't be empty.")
	case blank(req.InstanceID):
		return hbErr(kerr.InvalidRequest, "InstanceId can't be empty.")
	case blank(req.RackID):
		return hbErr(kerr.InvalidRequest, "RackId can't be empty.")
	}
	noID := strings.TrimSpace(req.MemberID) == ""
	switch e := req.MemberEpoch; {
	case e > 0 || e == leaveEpoch:
		if noID {
			return hbErr(kerr.InvalidRequest, "MemberId can't be empty.")
		}
	case e == 0:
		switch {
		case noID && req.Version >= 1:
			return hbErr(kerr.InvalidRequest, "MemberId can't be empty.")
		case req.RebalanceTimeoutMillis == -1:
			return hbErr(kerr.InvalidRequest, "RebalanceTimeoutMs must be provided in first request.")
		case req.Topics == nil || len(req.Topics) > 0:
			return hbErr(kerr.InvalidRequest, "TopicPartitions must be empty when (re-)joining.")
		case req.SubscribedTopicNames == nil && req.SubscribedTopicRegex == nil:
			return hbErr(kerr.InvalidRequest, "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
		}
	case e == staticLeaveEpoch:
		if noID {
			return hbErr(kerr.InvalidRequest, "MemberId can't be empty.")
		}
		if req.InstanceID == nil {
			return hbErr(kerr.InvalidRequest, "InstanceId can't be null.")
		}
	default:
		return hbErr(kerr.InvalidRequest, "MemberEpoch is invalid.")
	}
	if req.ServerAssignor != nil && !slices.Contains(s.cfg.ConsumerAssignors, *req.ServerAssignor) {
		return hbErr(kerr.UnsupportedAssignor, "ServerAssignor %s is not supported. Supported assignors: %s.",
			*req.ServerAssignor, strings.Join(s.cfg.ConsumerAssignors, ", "))
	}
	if req.SubscribedTopicRegex != nil {
		if _, err := compileRegex(*req.SubscribedTopicRegex); err != nil {
			return hbErr(kerr.InvalidRegularExpression, "SubscribedTopicRegex %q is not a valid regular expression: %v", *req.SubscribedTopicRegex, err)
		}
	}
	return nil
}

func (s *Shard) consumerHeartbeat(w Waiter, req *kmsg.ConsumerGroupHeartbeatRequest, c Client) {
	if e := s.validateHeartbeat(req); e != nil {
		s.reply(w, s.hbResponse(req.Group, e))
		return
	}
	var recs []Record
	var resp *kmsg.ConsumerGroupHeartbeatResponse
	var e *hbError
	if req.MemberEpoch == leaveEpoch || req.MemberEpoch == staticLeaveEpoch {
		resp, e = s.consumerLeave(req, &recs)
	} else {
		resp, e = s.consumerRegularHeartbeat(req, c, &recs)
	}
	if e != nil {
		resp = s.hbResponse(req.Group, e)
	}
	s.writeThenReply(recs, w, resp, func(err *kerr.Error) any { return s.hbResponse(req.Group, &hbError{err: err}) })
}

// writeThenReply appends recs (if any) and then answers w with resp, or with failed(err)
// if the append failed.
func (s *Shard) writeThenReply(recs []Record, w Waiter, resp any, failed func(*kerr.Error) any) {
	if len(recs) == 0 {
		s.reply(w, resp)
		return
	}
	s.write(recs, func(err error) {
		if err != nil {
			s.reply(w, failed(groupWriteError(err)))
			return
		}
		s.reply(w, resp)
	})
}

// writeUnanswered appends records nobody waits for (timeouts), warning on failure.
func (s *Shard) writeUnanswered(what string, recs []Record) {
	if len(recs) == 0 {
		return
	}
	s.write(recs, func(err error) {
		if err != nil {
			s.warn(fmt.Errorf("writing %s: %w", what, err))
		}
	})
}

// consumerGroupFor finds the consumer group a heartbeat is for; a joining member creates it,
// replaces an empty classic group, or upgrades a classic group of consumers (as
// group.consumer.migration.policy allows).
func (s *Shard) consumerGroupFor(id, memberID string, join bool, recs *[]Record) (*Group, *hbError) {
	g := s.groups[id]
	switch {
	case g == nil && !join:
		return nil, hbErr(kerr.GroupIDNotFound, "Consumer group %s not found.", id)
	case g == nil:
		g = newGroup(id, s.now)
		newConsumerGroupFor(g, s.now)
		s.groups[id] = g
		return g, nil
	case g.state == Dead:
		return nil, hbErr(kerr.CoordinatorNotAvailable, "")
	case g.cons != nil:
		return g, nil
	case !join:
		return nil, hbErr(kerr.GroupIDNotFound, "Group %s is not a consumer group.", id)
	case len(g.members) == 0:
		// An empty classic group (or one only holding offsets) is replaced, offsets kept.
		*recs = append(*recs, Record{Key: groupKey(id)})
		for pid := range g.pending {
			s.timers.Cancel(timerKey{timerPending, id, pid})
		}
		s.timers.Cancel(timerKey{kind: timerJoin, group: id})
		s.timers.Cancel(timerKey{kind: timerSync, group: id})
		newConsumerGroupFor(g, s.now)
		return g, nil
	}
	if err := s.validateUpgrade(g, memberID); err != nil {
		return nil, err
	}
	s.upgradeClassic(g, recs)
	return g, nil
}

// consumerFull applies group.consumer.max.size to a member that is not in the group yet.
func (s *Shard) consumerFull(cg *consumerGroup, memberID string) *hbError {
	if len(cg.members) >= int(s.cfg.ConsumerMaxSize) && (memberID == "" || cg.members[memberID] == nil) {
		return hbErr(kerr.GroupMaxSizeReached, "The consumer group has reached its maximum capacity of %d members.", s.cfg.ConsumerMaxSize)
	}
	return nil
}

// checkEpoch fences a heartbeat whose epoch is not the member's, unless it is the previous
// epoch and the member owns only partitions still assigned to it (the answer that moved it
// on was lost). Epoch 0 always passes: the member rejoins.
func checkEpoch(m *ConsumerMember, epoch int32, owned Assignment) *hbError {
	if epoch == 0 {
		return nil
	}
	if epoch > m.MemberEpoch || epoch < m.MemberEpoch && (epoch != m.PreviousMemberEpoch || !isSubset(owned, m.Assigned)) {
		return hbErr(kerr.FencedMemberEpoch, "The consumer group member has a member epoch (%d) other than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", epoch, m.MemberEpoch)
	}
	return nil
}

func isSubset(owned, a Assignment) bool {
	if owned == nil {
		return false
	}
	for id, ps := range owned {
		if len(subtract(ps, a[id])) > 0 {
			return false
		}
	}
	return true
}

// ownedFrom is the owned partitions a heartbeat reports (nil if it reports none).
func ownedFrom(ts []kmsg.ConsumerGroupHeartbeatRequestTopic) Assignment {
	if ts == nil {
		return nil
	}
	a := Assignment{}
	for _, t := range ts {
		if ps := normalized(t.Partitions); len(ps) > 0 {
			a[t.TopicID] = union(a[t.TopicID], ps)
		}
	}
	return a
}

func newConsumerMember(id string) *ConsumerMember {
	return &ConsumerMember{ID: id, SubscribedTopics: []string{}, Assigned: Assignment{}, PendingRevocation: Assignment{}}
}

// memberFor finds (or, joining, creates) the heartbeat's member, replacing a static
// member's previous incarnation.
func (s *Shard) memberFor(g *Group, req *kmsg.ConsumerGroupHeartbeatRequest, memberID string, owned Assignment, recs *[]Record) (*ConsumerMember, *hbError) {
	cg := g.cons
	join := req.MemberEpoch == 0
	if req.InstanceID == nil {
		m := cg.members[memberID]
		if m == nil {
			if !join {
				return nil, hbErr(kerr.UnknownMemberID, "Member %s is not a member of group %s.", memberID, g.ID)
			}
			return newConsumerMember(memberID), nil
		}
		return m, checkEpoch(m, req.MemberEpoch, owned)
	}
	existing := cg.staticMember(req.InstanceID)
	if !join {
		switch {
		case existing == nil:
			return nil, hbErr(kerr.UnknownMemberID, "Instance id %s is unknown.", *req.InstanceID)
		case existing.ID != memberID:
			return nil, hbErr(kerr.FencedInstanceID, "Static member %s with instance id %s was fenced by member %s.", memberID, *req.InstanceID, existing.ID)
		}
		return existing, checkEpoch(existing, req.MemberEpoch, owned)
	}
	if existing == nil {
		if m := cg.members[memberID]; m != nil {
			return m, nil
		}
		return newConsumerMember(memberID), nil
	}
	if !existing.usesClassic() && existing.MemberEpoch != staticLeaveEpoch {
		return nil, hbErr(kerr.UnreleasedInstanceID, "Static member %s with instance id %s cannot join the group because the instance id is owned by member %s.", memberID, *req.InstanceID, existing.ID)
	}
	return s.replaceStatic(g, existing, memberID, recs), nil
}

// replaceStatic hands a static member's instance (partitions and target) to a new member
// id, at epoch 0.
func (s *Shard) replaceStatic(g *Group, old *ConsumerMember, newID string, recs *[]Record) *ConsumerMember {
	cg := g.cons
	m := old.clone()
	m.ID = newID
	m.MemberEpoch, m.PreviousMemberEpoch = 0, 0
	target := cg.target[old.ID]
	*recs = append(*recs, cgMemberTombstones(g.ID, old.ID)...)
	*recs = append(*recs, cgMemberRecord(g.ID, m), cgTargetRecord(g.ID, m.ID, target), cgCurrentRecord(g.ID, m))
	s.cancelConsumerTimers(g, old.ID)
	cg.put(old, nil)
	delete(cg.target, old.ID)
	cg.put(nil, m)
	cg.target[m.ID] = target
	return m
}

func (s *Shard) consumerRegularHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest, c Client, recs *[]Record) (*kmsg.ConsumerGroupHeartbeatResponse, *hbError) {
	join := req.MemberEpoch == 0
	memberID := req.MemberID
	g, e := s.consumerGroupFor(req.Group, memberID, join, recs)
	if e != nil {
		return nil, e
	}
	cg := g.cons
	if e := s.consumerFull(cg, memberID); e != nil {
		return nil, e
	}
	if memberID == "" {
		memberID = s.cfg.NewID() // v0: the coordinator names the member
	}
	owned := ownedFrom(req.Topics)
	m, e := s.memberFor(g, req, memberID, owned, recs)
	if e != nil {
		return nil, e
	}

	// 1. The member's metadata and subscription; a change in what the group subscribes to
	// bumps the group epoch.
	nm := m.clone()
	if req.InstanceID != nil {
		nm.InstanceID = req.InstanceID
	}
	if req.RackID != nil {
		nm.RackID = req.RackID
	}
	if req.RebalanceTimeoutMillis != -1 {
		nm.RebalanceTimeoutMs = req.RebalanceTimeoutMillis
	}
	if req.ServerAssignor != nil {
		nm.ServerAssignor = *req.ServerAssignor
	}
	if req.SubscribedTopicNames != nil {
		nm.SubscribedTopics = sortedStrings(req.SubscribedTopicNames)
	}
	if req.SubscribedTopicRegex != nil {
		nm.SubscribedRegex = *req.SubscribedTopicRegex
	}
	nm.ClientID, nm.ClientHost = c.ID, c.Host
	nm.Classic = nil
	subChanged := s.updateMember(g, m, nm, recs)

	// 2. A new target assignment when the group epoch moved past it.
	if cg.epoch > cg.assignmentEpoch {
		s.updateTarget(g, recs)
	}

	// 3. The member's next step toward its target.
	final := s.reconcileMember(g, nm, owned, subChanged, recs)
	sessionMs, _ := s.cfg.consumerTimes(g.ID)
	s.timers.Set(timerKey{timerConsumerSession, g.ID, final.ID}, s.now+int64(sessionMs))

	resp := s.hbResponse(g.ID, nil)
	resp.MemberID = &final.ID
	resp.MemberEpoch = final.MemberEpoch
	full := req.RebalanceTimeoutMillis != -1 && (req.SubscribedTopicNames != nil || req.SubscribedTopicRegex != nil) && req.Topics != nil
	if join || full || !final.Assigned.equal(m.Assigned) {
		resp.Assignment = heartbeatAssignment(final.Assigned)
	}
	return resp, nil
}

// updateMember puts nm in place of m (not necessarily in the group yet), writing its
// metadata if it changed, and the subscription metadata and group epoch if what the group
// subscribes to changed. It reports whether the member's subscription changed.
func (s *Shard) updateMember(g *Group, m, nm *ConsumerMember, recs *[]Record) bool {
	cg := g.cons
	if !nm.sameMetadata(m) || cg.members[m.ID] != m {
		*recs = append(*recs, cgMemberRecord(g.ID, nm))
	}
	subChanged := !slices.Equal(nm.SubscribedTopics, m.SubscribedTopics) || nm.SubscribedRegex != m.SubscribedRegex
	bump := cg.epoch == 0 || subChanged
	// The subscription metadata only changes with a subscription or the topics (Kafka
	// recomputes it on the same occasions, its metadata refresh).
	if subChanged || cg.metaView != s.topics {
		cg.metaView = s.topics
		if meta := s.computeSubMeta(cg, m, nm); !sameSubMeta(meta, cg.subMeta) {
			cg.subMeta = meta
			g.updateSubscribed()
			*recs = append(*recs, cgSubMetaRecord(g.ID, meta))
			bump = true
		}
	}
	if bump {
		cg.epoch++
		*recs = append(*recs, cgEpochRecord(g.ID, cg.epoch))
	}
	var old *ConsumerMember
	if cg.members[m.ID] == m {
		old = m
	}
	cg.put(old, nm)
	g.syncConsumerState(s.now)
	return subChanged
}

// reconcileMember moves m toward its target and writes its new assignment state; the
// revocation deadline (rebalance timeout) runs while it has partitions to give up.
func (s *Shard) reconcileMember(g *Group, m *ConsumerMember, owned Assignment, enforce bool, recs *[]Record) *ConsumerMember {
	cg := g.cons
	if m.reconciledTo(cg.assignmentEpoch) && !enforce {
		return m
	}
	n := cg.reconcile(m, cg.assignmentEpoch, cg.target[m.ID], owned, s.subscribedIDs(cg, m), enforce)
	if n == m || n.sameAssignmentState(m) {
		return m
	}
	*recs = append(*recs, cgCurrentRecord(g.ID, n))
	key := timerKey{timerConsumerRebalance, g.ID, n.ID}
	if !n.usesClassic() {
		if n.State == MemberUnrevokedPartitions {
			n.revokeEpoch = n.MemberEpoch
			s.timers.Set(key, s.now+int64(n.RebalanceTimeoutMs))
		} else {
			s.timers.Cancel(key)
		}
	}
	cg.put(m, n)
	return n
}

// updateTarget computes the target assignment for the group epoch with the preferred
// assignor and writes the members' changed targets and the new assignment epoch.
func (s *Shard) updateTarget(g *Group, recs *[]Record) {
	cg := g.cons
	name := s.preferredAssignor(cg)
	order := cg.sortedTopicNames()
	in := assignInput{partitions: map[TopicID]int32{}}
	for _, n := range order {
		t := cg.subMeta[n]
		in.partitions[t.ID] = t.Partitions
		in.order = append(in.order, t.ID)
	}
	for _, m := range cg.sortedMembers() {
		subs := s.subscribedIDs(cg, m)
		am := assignMember{id: m.ID, instance: m.InstanceID, prev: cg.target[m.ID]}
		for _, id := range in.order {
			if subs[id] {
				am.topics = append(am.topics, id)
			}
		}
		in.members = append(in.members, am)
	}
	result := assignorByName(name).assign(in)
	for _, am := range in.members {
		a := result[am.id]
		if a == nil {
			a = Assignment{}
		}
		if old, ok := cg.target[am.id]; !ok || !old.equal(a) {
			cg.target[am.id] = a
			*recs = append(*recs, cgTargetRecord(g.ID, am.id, a))
		}
	}
	cg.assignmentEpoch = cg.epoch
	*recs = append(*recs, cgTargetEpochRecord(g.ID, cg.epoch))
}

// preferredAssignor is the server assignor most members ask for (ties: the earlier in
// group.consumer.assignors), else the first configured.
func (s *Shard) preferredAssignor(cg *consumerGroup) string {
	counts := map[string]int{}
	for _, m := range cg.members {
		if m.ServerAssignor != "" {
			counts[m.ServerAssignor]++
		}
	}
	best, n := s.cfg.ConsumerAssignors[0], 0
	for _, a := range s.cfg.ConsumerAssignors {
		if counts[a] > n {
			best, n = a, counts[a]
		}
	}
	return best
}

func heartbeatAssignment(a Assignment) *kmsg.ConsumerGroupHeartbeatResponseAssignment {
	r := &kmsg.ConsumerGroupHeartbeatResponseAssignment{}
	r.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
	for _, id := range a.sortedIDs() {
		t := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
		t.TopicID, t.Partitions = id, slices.Clone(a[id])
		r.Topics = append(r.Topics, t)
	}
	return r
}

// consumerLeave handles MemberEpoch -1 and -2.
func (s *Shard) consumerLeave(req *kmsg.ConsumerGroupHeartbeatRequest, recs *[]Record) (*kmsg.ConsumerGroupHeartbeatResponse, *hbError) {
	g := s.groups[req.Group]
	if g == nil || g.cons == nil || g.state == Dead {
		return nil, hbErr(kerr.GroupIDNotFound, "Consumer group %s not found.", req.Group)
	}
	cg := g.cons
	var m *ConsumerMember
	if req.InstanceID == nil {
		if m = cg.members[req.MemberID]; m == nil {
			return nil, hbErr(kerr.UnknownMemberID, "Member %s is not a member of group %s.", req.MemberID, g.ID)
		}
	} else {
		switch m = cg.staticMember(req.InstanceID); {
		case m == nil:
			return nil, hbErr(kerr.UnknownMemberID, "Instance id %s is unknown.", *req.InstanceID)
		case m.ID != req.MemberID:
			return nil, hbErr(kerr.FencedInstanceID, "Static member %s with instance id %s was fenced by member %s.", req.MemberID, *req.InstanceID, m.ID)
		}
	}
	resp := s.hbResponse(g.ID, nil)
	resp.MemberID = &req.MemberID
	resp.MemberEpoch = req.MemberEpoch
	if req.MemberEpoch == staticLeaveEpoch {
		// The static member keeps its partitions (at epoch -2, so nobody else takes them)
		// until it comes back or its session times out.
		n := m.clone()
		n.PreviousMemberEpoch = m.MemberEpoch
		n.MemberEpoch = staticLeaveEpoch
		n.PendingRevocation = Assignment{}
		s.timers.Cancel(timerKey{timerConsumerRebalance, g.ID, m.ID})
		*recs = append(*recs, cgCurrentRecord(g.ID, n))
		cg.put(m, n)
		resp.MemberEpoch = staticLeaveEpoch
		return resp, nil
	}
	*recs = append(*recs, s.fenceMember(g, m)...)
	return resp, nil
}

// fenceMember removes a member that left or timed out: its partitions are free and the
// group epoch bumps, so the next heartbeat reassigns them. If only classic members remain
// and group.consumer.migration.policy allows, the group becomes a classic group again.
func (s *Shard) fenceMember(g *Group, m *ConsumerMember) []Record {
	cg := g.cons
	if s.canDowngrade(g, m) {
		return s.downgrade(g, m)
	}
	recs := cgMemberTombstones(g.ID, m.ID)
	s.cancelConsumerTimers(g, m.ID)
	cg.put(m, nil)
	delete(cg.target, m.ID)
	if meta := s.computeSubMeta(cg, nil, nil); !sameSubMeta(meta, cg.subMeta) {
		cg.subMeta = meta
		g.updateSubscribed()
		recs = append(recs, cgSubMetaRecord(g.ID, meta))
	}
	cg.epoch++
	recs = append(recs, cgEpochRecord(g.ID, cg.epoch))
	g.syncConsumerState(s.now)
	return recs
}

func (s *Shard) cancelConsumerTimers(g *Group, memberID string) {
	for _, k := range []timerKind{timerConsumerSession, timerConsumerRebalance, timerClassicJoin, timerClassicSync} {
		s.timers.Cancel(timerKey{k, g.ID, memberID})
	}
}

// syncConsumerState keeps the classic state the shared code reads: Empty without members,
// else Stable.
func (g *Group) syncConsumerState(now int64) {
	st := Stable
	if len(g.cons.members) == 0 {
		st = Empty
	}
	if g.state != st {
		g.state, g.stateTime = st, now
	}
}

// ConsumerState is a consumer group's KIP-848 state (ConsumerEmpty for other groups).
func (g *Group) ConsumerState() ConsumerState {
	if g.cons == nil {
		return ConsumerEmpty
	}
	if g.state == Dead {
		return ConsumerDead
	}
	return g.cons.state()
}

// ConsumerMembers returns a consumer group's members by id (nil for classic groups).
func (g *Group) ConsumerMembers() []*ConsumerMember {
	if g.cons == nil {
		return nil
	}
	return g.cons.sortedMembers()
}

// onConsumerSessionExpired: a member stopped heartbeating.
func (s *Shard) onConsumerSessionExpired(g *Group, memberID string) {
	if g.cons == nil || g.state == Dead {
		return
	}
	if m := g.cons.members[memberID]; m != nil {
		s.writeUnanswered("fenced member "+memberID+" of "+g.ID, s.fenceMember(g, m))
	}
}

// onConsumerRebalanceExpired: a member did not revoke its partitions within its rebalance
// timeout.
func (s *Shard) onConsumerRebalanceExpired(g *Group, memberID string) {
	if g.cons == nil || g.state == Dead {
		return
	}
	m := g.cons.members[memberID]
	if m == nil || m.State != MemberUnrevokedPartitions || m.MemberEpoch != m.revokeEpoch {
		return
	}
	s.writeUnanswered("fenced member "+memberID+" of "+g.ID, s.fenceMember(g, m))
}
