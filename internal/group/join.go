package group

import (
	"bytes"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// JoinGroup v0-v9, as Kafka's coordinator handles it:
//
//   - An unknown member (member id "") of a dynamic member gets a member id; from v4 on it is
//     first answered MEMBER_ID_REQUIRED with that id and must join again with it.
//   - A static member (group.instance.id, v5+) joining with an unknown member id replaces
//     the member id of its instance, fencing the old one (FENCED_INSTANCE_ID), without a
//     rebalance if the group is Stable and the selected protocol would not change.
//   - Joining parks the request until the join phase ends: every member rejoined, or the
//     rebalance timeout passed (members that did not rejoin are removed), or, for the first
//     join of an empty group, group.initial.rebalance.delay.ms passed.
//   - The leader's response lists every member with its metadata for the protocol chosen
//     by vote among the protocols every member supports.
//
// The request's byte slices are copied: the core never retains request memory.
func (s *Shard) JoinGroup(now int64, w Waiter, req *kmsg.JoinGroupRequest, c Client) Ready {
	s.begin(now)
	s.joinGroup(w, req, c)
	return s.end()
}

func joinError(memberID string, err *kerr.Error) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.ErrorCode = err.Code
	r.MemberID = memberID
	r.Generation = -1
	return r
}

// joinArgs is a JoinGroup request with its bytes copied and defaults applied.
type joinArgs struct {
	w              Waiter
	memberID       string
	instanceID     *string
	client         Client
	rebalanceMs    int32
	sessionMs      int32
	protocolType   string
	protocols      []MemberProtocol
	requireKnownID bool // v4+
	skipAssignment bool // v9+
}

func (s *Shard) joinGroup(w Waiter, req *kmsg.JoinGroupRequest, c Client) {
	if req.Group == "" {
		s.reply(w, joinError(req.MemberID, kerr.InvalidGroupID))
		return
	}
	a := joinArgs{
		w: w, memberID: req.MemberID, instanceID: req.InstanceID, client: c,
		rebalanceMs: req.RebalanceTimeoutMillis, sessionMs: req.SessionTimeoutMillis,
		protocolType: req.ProtocolType, requireKnownID: req.Version >= 4, skipAssignment: req.Version >= 9,
	}
	if req.Version == 0 || a.rebalanceMs < 0 {
		a.rebalanceMs = a.sessionMs // v0 has no rebalance timeout: the session timeout bounds the join
	}
	for _, p := range req.Protocols {
		a.protocols = append(a.protocols, MemberProtocol{Name: p.Name, Metadata: bytes.Clone(p.Metadata)})
	}
	if a.sessionMs < s.cfg.MinSessionTimeoutMs || a.sessionMs > s.cfg.MaxSessionTimeoutMs {
		s.reply(w, joinError(a.memberID, kerr.InvalidSessionTimeout))
		return
	}
	unknown := a.memberID == ""
	g := s.groups[req.Group]
	if g == nil {
		if !unknown {
			s.reply(w, joinError(a.memberID, kerr.UnknownMemberID))
			return
		}
		g = newGroup(req.Group, s.now)
		s.groups[g.ID] = g
	}
	if g.cons != nil {
		if len(g.cons.members) > 0 {
			s.classicJoinConsumer(g, a) // a classic member of a consumer group
			return
		}
		s.replaceConsumerWithClassic(g)
	}
	switch {
	case !s.acceptJoiningMember(g, a.memberID):
		if m := g.members[a.memberID]; m != nil {
			s.answerParked(g, m, kerr.GroupMaxSizeReached)
			s.cancelHeartbeat(g, m.ID)
		}
		// Kafka also drops the instance's static mapping here, even when the member it maps
		// to stays (a static member restarting into a full group); we keep it consistent.
		g.remove(a.memberID)
		s.reply(w, joinError(a.memberID, kerr.GroupMaxSizeReached))
	case unknown:
		s.joinUnknownMember(g, a)
	default:
		s.joinKnownMember(g, a)
	}
	if g.state == PreparingRebalance {
		s.maybeCompleteJoin(g)
	}
}

// acceptJoiningMember applies group.max.size: while preparing a rebalance, members already
// rejoined count (so the last to rejoin are turned away when the limit was lowered); once
// the group has formed, its size does.
func (s *Shard) acceptJoiningMember(g *Group, memberID string) bool {
	max := int(s.cfg.MaxSize)
	m := g.members[memberID]
	switch g.state {
	case Empty, Dead:
		return true
	case PreparingRebalance:
		return m != nil && m.awaitingJoin() || g.numAwaitingJoin < max
	default:
		return m != nil || len(g.members) < max
	}
}

func (s *Shard) joinUnknownMember(g *Group, a joinArgs) {
	if g.state == Dead {
		s.reply(a.w, joinError("", kerr.CoordinatorNotAvailable))
		return
	}
	if !g.supportsProtocols(a.protocolType, a.protocols) {
		s.reply(a.w, joinError("", kerr.InconsistentGroupProtocol))
		return
	}
	prefix := a.client.ID
	if a.instanceID != nil {
		prefix = *a.instanceID
	}
	newID := prefix + "-" + s.cfg.NewID()
	switch {
	case a.instanceID != nil:
		if old, ok := g.static[*a.instanceID]; ok {
			s.updateStaticMember(g, old, newID, a)
		} else {
			s.addMemberAndRebalance(g, newID, a)
		}
	case a.requireKnownID:
		// KIP-394: hand out the id and wait for the member to come back with it, so a
		// client that never sees this answer leaves no member behind.
		g.pending[newID] = struct{}{}
		s.timers.Set(timerKey{timerPending, g.ID, newID}, s.now+int64(a.sessionMs))
		s.reply(a.w, joinError(newID, kerr.MemberIDRequired))
	default:
		s.addMemberAndRebalance(g, newID, a)
	}
}

func (s *Shard) joinKnownMember(g *Group, a joinArgs) {
	if g.state == Dead {
		s.reply(a.w, joinError(a.memberID, kerr.CoordinatorNotAvailable))
		return
	}
	if !g.supportsProtocols(a.protocolType, a.protocols) {
		s.reply(a.w, joinError(a.memberID, kerr.InconsistentGroupProtocol))
		return
	}
	if _, ok := g.pending[a.memberID]; ok {
		// The second JoinGroup of KIP-394: the member joins now. (Pending ids are only
		// handed to dynamic members; a static one presenting it is simply added.)
		s.timers.Cancel(timerKey{timerPending, g.ID, a.memberID})
		s.addMemberAndRebalance(g, a.memberID, a)
		return
	}
	if err := g.validateMember(a.memberID, a.instanceID); err != nil {
		s.reply(a.w, joinError(a.memberID, err))
		return
	}
	m := g.members[a.memberID]
	switch g.state {
	case PreparingRebalance:
		s.updateMemberAndRebalance(g, m, a)
	case CompletingRebalance:
		if m.matches(a.protocols) {
			// A retry of a JoinGroup whose answer was lost: answer it again.
			s.reply(a.w, s.joinResult(g, m, false))
		} else {
			s.updateMemberAndRebalance(g, m, a)
		}
	case Stable:
		if g.leader == m.ID || !m.matches(a.protocols) {
			// The leader rejoins to force a rebalance (e.g. its topics' metadata changed);
			// any member rejoining with new metadata does too.
			s.updateMemberAndRebalance(g, m, a)
		} else {
			s.reply(a.w, s.joinResult(g, m, false))
		}
	default: // Empty: no members, so validateMember failed already
		s.reply(a.w, joinError(a.memberID, kerr.UnknownMemberID))
	}
}

// validateMember checks a request's member id and group instance id against the group:
// a static member's instance must map to that member id (else FENCED_INSTANCE_ID), and the
// member must exist (else UNKNOWN_MEMBER_ID).
func (g *Group) validateMember(memberID string, instanceID *string) *kerr.Error {
	if instanceID != nil {
		cur, ok := g.static[*instanceID]
		switch {
		case !ok:
			return kerr.UnknownMemberID
		case cur != memberID:
			return kerr.FencedInstanceID
		}
		return nil
	}
	if g.members[memberID] == nil {
		return kerr.UnknownMemberID
	}
	return nil
}

func (s *Shard) addMemberAndRebalance(g *Group, id string, a joinArgs) {
	m := &Member{
		ID: id, InstanceID: a.instanceID, ClientID: a.client.ID, ClientHost: a.client.Host,
		RebalanceTimeoutMs: a.rebalanceMs, SessionTimeoutMs: a.sessionMs,
		ProtocolType: a.protocolType, Protocols: a.protocols, isNew: true,
		join: &joinWait{w: a.w, skipAssignment: a.skipAssignment},
	}
	if g.state == PreparingRebalance && g.generation == 0 {
		g.newMemberAdded = true // extends the initial delay
	}
	g.add(m)
	// A new member cannot heartbeat until it has joined, and its connection is muted while
	// its JoinGroup is parked: bound how long it may sit in the group that way.
	s.scheduleHeartbeat(g, m, s.cfg.NewMemberJoinTimeoutMs)
	s.maybePrepareRebalance(g)
}

func (s *Shard) updateMemberAndRebalance(g *Group, m *Member, a joinArgs) {
	if m.join != nil {
		// The member joined again while an earlier JoinGroup was parked (a client retry
		// on a new connection): the earlier request is superseded.
		s.reply(m.join.w, joinError(m.ID, kerr.RebalanceInProgress))
	}
	g.updateMember(m, a.protocols, a.rebalanceMs, a.sessionMs, &joinWait{w: a.w, skipAssignment: a.skipAssignment})
	s.maybePrepareRebalance(g)
}

// updateStaticMember handles a known group.instance.id joining with an unknown member id:
// the instance gets newID and the old member id is fenced.
func (s *Shard) updateStaticMember(g *Group, oldID, newID string, a joinArgs) {
	oldLeader := g.leader
	m := g.members[oldID]
	oldProtocols, oldRebalance, oldSession := m.Protocols, m.RebalanceTimeoutMs, m.SessionTimeoutMs
	s.replaceStaticMember(g, *a.instanceID, oldID, newID)
	s.scheduleHeartbeat(g, m, int64(m.SessionTimeoutMs))
	g.updateMember(m, a.protocols, a.rebalanceMs, a.sessionMs, &joinWait{w: a.w, skipAssignment: a.skipAssignment})
	switch g.state {
	case Stable:
		if g.selectProtocol() != g.protocolName {
			s.maybePrepareRebalance(g)
			return
		}
		// Nothing the assignment depends on changed: persist the new member id and answer
		// without a rebalance.
		gen := g.generation
		assignment := map[string][]byte{}
		for _, x := range g.order {
			assignment[x.ID] = x.Assignment
		}
		s.storeGroup(g, assignment, func(err error) {
			if s.groups[g.ID] != g || m.join == nil || g.members[newID] != m {
				return // the group moved on (or the request was superseded) meanwhile
			}
			if err != nil {
				// Could not persist the new member id: undo the replacement.
				j := m.join
				g.updateMember(m, oldProtocols, oldRebalance, oldSession, nil)
				s.replaceStaticMember(g, *a.instanceID, newID, oldID)
				s.scheduleHeartbeat(g, m, int64(m.SessionTimeoutMs))
				r := joinError("", groupWriteError(err))
				r.Generation = gen
				r.ProtocolType, r.Protocol, r.LeaderID = strPtr(g.protocolType), strPtr(g.protocolName), oldLeader
				s.reply(j.w, r)
				return
			}
			var r *kmsg.JoinGroupResponse
			if m.join.skipAssignment {
				// v9+: the leader learns it leads, but must not run the assignors.
				r = s.joinResult(g, m, g.leader == m.ID)
			} else {
				// Older clients are told the old leader id, so a static leader rejoining
				// does not assign (a Stable group would ignore its assignment).
				r = s.joinResult(g, m, false)
				r.Members, r.LeaderID = nil, oldLeader
			}
			s.reply(m.join.w, r)
			g.setJoin(m, nil)
		})
	case CompletingRebalance:
		// The leader may be assigning to the old member id: rebalance again.
		s.prepareRebalance(g)
	case PreparingRebalance:
		// The member simply waits for the join phase to end under its new id.
	}
}

// replaceStaticMember moves the member of instance from oldID to newID, fencing any request
// parked under the old id.
func (s *Shard) replaceStaticMember(g *Group, instance, oldID, newID string) {
	m := g.members[oldID]
	s.answerParked(g, m, kerr.FencedInstanceID)
	s.cancelHeartbeat(g, oldID)
	delete(g.members, oldID)
	m.ID = newID
	g.members[newID] = m
	if g.leader == oldID {
		g.leader = newID
	}
	if _, ok := g.pendingSync[oldID]; ok {
		delete(g.pendingSync, oldID)
		g.pendingSync[newID] = struct{}{}
	}
	g.static[instance] = newID
}

// joinResult is a successful JoinGroup answer for m; the leader's lists every member.
func (s *Shard) joinResult(g *Group, m *Member, skipAssignment bool) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.Generation = g.generation
	r.ProtocolType = strPtr(g.protocolType)
	r.Protocol = strPtr(g.protocolName)
	r.LeaderID = g.leader
	r.MemberID = m.ID
	r.SkipAssignment = skipAssignment
	if g.leader == m.ID {
		r.Members = make([]kmsg.JoinGroupResponseMember, 0, len(g.order))
		for _, x := range g.order {
			jm := kmsg.NewJoinGroupResponseMember()
			jm.MemberID = x.ID
			jm.InstanceID = x.InstanceID
			jm.ProtocolMetadata = x.metadata(g.protocolName)
			r.Members = append(r.Members, jm)
		}
	}
	return r
}

func strPtr(s string) *string { return &s }
