package group

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Heartbeat v0-v4: restarts the member's session timeout. REBALANCE_IN_PROGRESS tells a
// member of a group preparing a rebalance to rejoin; ILLEGAL_GENERATION and
// UNKNOWN_MEMBER_ID tell a fenced member to rejoin from scratch.
func (s *Shard) Heartbeat(now int64, w Waiter, req *kmsg.HeartbeatRequest) Ready {
	s.begin(now)
	s.reply(w, heartbeatResponse(s.heartbeat(req)))
	return s.end()
}

func heartbeatResponse(err *kerr.Error) *kmsg.HeartbeatResponse {
	r := kmsg.NewPtrHeartbeatResponse()
	if err != nil {
		r.ErrorCode = err.Code
	}
	return r
}

func (s *Shard) heartbeat(req *kmsg.HeartbeatRequest) *kerr.Error {
	if req.Group == "" {
		return kerr.InvalidGroupID
	}
	g := s.groups[req.Group]
	switch {
	case g == nil:
		return kerr.UnknownMemberID
	case g.state == Dead:
		return kerr.CoordinatorNotAvailable
	case g.cons != nil:
		return s.classicHeartbeatConsumer(g, req)
	}
	if err := g.validateMember(req.MemberID, req.InstanceID); err != nil {
		return err
	}
	if req.Generation != g.generation {
		return kerr.IllegalGeneration
	}
	m := g.members[req.MemberID]
	switch g.state {
	case Empty:
		return kerr.UnknownMemberID
	case PreparingRebalance:
		s.scheduleHeartbeat(g, m, int64(m.SessionTimeoutMs))
		return kerr.RebalanceInProgress
	default: // CompletingRebalance (a member may heartbeat before it syncs) or Stable
		s.scheduleHeartbeat(g, m, int64(m.SessionTimeoutMs))
		return nil
	}
}
