package group

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// LeaveGroup v0-v5: members leave at once (their partitions move in the rebalance this
// starts) instead of after their session timeout. v3+ carries a batch of members, each by
// member id, or by group instance id alone (administrative removal of a static member);
// v0-v2 name one member and report its error at the top level.
func (s *Shard) LeaveGroup(now int64, w Waiter, req *kmsg.LeaveGroupRequest) Ready {
	s.begin(now)
	if g := s.groups[req.Group]; g != nil && g.cons != nil && g.state != Dead {
		s.classicLeaveConsumer(w, g, req)
		return s.end()
	}
	s.reply(w, s.leaveGroup(req))
	return s.end()
}

func (s *Shard) leaveGroup(req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	resp := kmsg.NewPtrLeaveGroupResponse()
	members := req.Members
	if req.Version < 3 {
		members = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp
	}
	g := s.groups[req.Group]
	if g != nil && g.state == Dead {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp
	}
	for _, lm := range members {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID = lm.MemberID, lm.InstanceID
		if err := s.leaveMember(g, lm); err != nil {
			rm.ErrorCode = err.Code
		}
		resp.Members = append(resp.Members, rm)
	}
	if req.Version < 3 {
		resp.ErrorCode = resp.Members[0].ErrorCode
		resp.Members = nil
	}
	return resp
}

func (s *Shard) leaveMember(g *Group, lm kmsg.LeaveGroupRequestMember) *kerr.Error {
	if g == nil {
		return kerr.UnknownMemberID
	}
	if lm.MemberID == "" {
		if lm.InstanceID == nil {
			return kerr.UnknownMemberID
		}
		id, ok := g.static[*lm.InstanceID]
		if !ok {
			return kerr.UnknownMemberID
		}
		s.removeMemberAndUpdateGroup(g, g.members[id])
		return nil
	}
	if _, ok := g.pending[lm.MemberID]; ok {
		delete(g.pending, lm.MemberID)
		s.timers.Cancel(timerKey{timerPending, g.ID, lm.MemberID})
		s.maybeCompleteJoin(g)
		return nil
	}
	if err := g.validateMember(lm.MemberID, lm.InstanceID); err != nil {
		return err
	}
	s.removeMemberAndUpdateGroup(g, g.members[lm.MemberID])
	return nil
}
