package group

import (
	"bytes"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SyncGroup v0-v5: in CompletingRebalance every member parks its SyncGroup until the
// leader's arrives with the assignment; the coordinator persists the group with it, then
// answers each member with its part and the group becomes Stable. In Stable a SyncGroup is
// answered at once with the member's current assignment.
func (s *Shard) SyncGroup(now int64, w Waiter, req *kmsg.SyncGroupRequest) Ready {
	s.begin(now)
	s.syncGroup(w, req)
	return s.end()
}

func syncError(err *kerr.Error) *kmsg.SyncGroupResponse {
	r := kmsg.NewPtrSyncGroupResponse()
	r.ErrorCode = err.Code
	return r
}

func (s *Shard) syncGroup(w Waiter, req *kmsg.SyncGroupRequest) {
	if req.Group == "" {
		s.reply(w, syncError(kerr.InvalidGroupID))
		return
	}
	g := s.groups[req.Group]
	if g == nil {
		s.reply(w, syncError(kerr.UnknownMemberID))
		return
	}
	if g.cons != nil && g.state != Dead {
		s.classicSyncConsumer(g, w, req)
		return
	}
	if err := s.validateSync(g, req); err != nil {
		s.reply(w, syncError(err))
		return
	}
	m := g.members[req.MemberID]
	switch g.state {
	case Empty:
		s.reply(w, syncError(kerr.UnknownMemberID))
	case PreparingRebalance:
		s.reply(w, syncError(kerr.RebalanceInProgress))
	case CompletingRebalance:
		if m.sync != nil {
			s.reply(m.sync, syncError(kerr.RebalanceInProgress)) // superseded by this retry
		}
		m.sync = w
		delete(g.pendingSync, m.ID)
		if g.leader != m.ID {
			return
		}
		assignment := make(map[string][]byte, len(g.members))
		for _, a := range req.GroupAssignment {
			if g.members[a.MemberID] != nil {
				assignment[a.MemberID] = bytes.Clone(a.MemberAssignment)
			}
		}
		for _, x := range g.order {
			if _, ok := assignment[x.ID]; !ok {
				assignment[x.ID] = []byte{} // members the leader left out get nothing
			}
		}
		gen := g.generation
		s.storeGroup(g, assignment, func(err error) {
			if s.groups[g.ID] != g || g.state != CompletingRebalance || g.generation != gen {
				return // the group moved on while the write was in flight
			}
			if err != nil {
				s.resetAndPropagateAssignmentError(g, groupWriteError(err))
				s.maybePrepareRebalance(g)
				return
			}
			for _, x := range g.order {
				x.Assignment = assignment[x.ID]
			}
			s.propagateAssignment(g, nil)
			g.transition(Stable, s.now)
		})
	case Stable:
		delete(g.pendingSync, m.ID)
		r := kmsg.NewPtrSyncGroupResponse()
		r.ProtocolType, r.Protocol = strPtr(g.protocolType), strPtr(g.protocolName)
		r.MemberAssignment = m.Assignment
		s.reply(w, r)
		s.scheduleHeartbeat(g, m, int64(m.SessionTimeoutMs))
	}
}

func (s *Shard) validateSync(g *Group, req *kmsg.SyncGroupRequest) *kerr.Error {
	if g.state == Dead {
		return kerr.CoordinatorNotAvailable
	}
	if err := g.validateMember(req.MemberID, req.InstanceID); err != nil {
		return err
	}
	switch {
	case req.Generation != g.generation:
		return kerr.IllegalGeneration
	case req.ProtocolType != nil && *req.ProtocolType != g.protocolType:
		return kerr.InconsistentGroupProtocol
	case req.Protocol != nil && *req.Protocol != g.protocolName:
		return kerr.InconsistentGroupProtocol
	}
	return nil
}

// resetAndPropagateAssignmentError clears the assignments and fails every parked SyncGroup.
func (s *Shard) resetAndPropagateAssignmentError(g *Group, err *kerr.Error) {
	for _, m := range g.order {
		m.Assignment = nil
	}
	s.propagateAssignment(g, err)
}

// propagateAssignment answers every parked SyncGroup with the member's assignment (or err),
// restarting its session timeout: its expiry was excused while it was parked.
func (s *Shard) propagateAssignment(g *Group, err *kerr.Error) {
	for _, m := range g.order {
		if m.sync == nil {
			continue
		}
		r := kmsg.NewPtrSyncGroupResponse()
		if err != nil {
			r.ErrorCode = err.Code
		} else {
			r.ProtocolType, r.Protocol = strPtr(g.protocolType), strPtr(g.protocolName)
			r.MemberAssignment = m.Assignment
		}
		s.reply(m.sync, r)
		m.sync = nil
		s.scheduleHeartbeat(g, m, int64(m.SessionTimeoutMs))
	}
}
