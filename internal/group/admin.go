package group

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeGroup answers DescribeGroups for one group: its state, protocol and members (with
// their subscription and assignment only when Stable, as Kafka does). An unknown group is
// reported Dead with no error (describegroups.go adds v6's GROUP_ID_NOT_FOUND).
func (s *Shard) DescribeGroup(id string) kmsg.DescribeGroupsResponseGroup {
	d := kmsg.NewDescribeGroupsResponseGroup()
	d.Group = id
	g := s.groups[id]
	if g == nil {
		d.State = Dead.String()
		return d
	}
	if g.cons != nil && g.state != Dead {
		s.describeConsumerClassic(g, &d)
		return d
	}
	d.State = g.state.String()
	d.ProtocolType = g.protocolType
	stable := g.state == Stable
	if stable {
		d.Protocol = g.protocolName
	}
	for _, m := range g.order {
		dm := kmsg.NewDescribeGroupsResponseGroupMember()
		dm.MemberID, dm.InstanceID = m.ID, m.InstanceID
		dm.ClientID, dm.ClientHost = m.ClientID, m.ClientHost
		dm.ProtocolMetadata, dm.MemberAssignment = []byte{}, []byte{}
		if stable {
			dm.ProtocolMetadata, dm.MemberAssignment = m.metadata(g.protocolName), m.Assignment
		}
		d.Members = append(d.Members, dm)
	}
	return d
}

// ListGroups lists the shard's live groups whose state is in states and type in types
// (case-insensitive; empty filters match everything), ordered by id.
func (s *Shard) ListGroups(states, types []string) []kmsg.ListGroupsResponseGroup {
	match := func(filter []string, v string) bool {
		if len(filter) == 0 {
			return true
		}
		for _, f := range filter {
			if strings.EqualFold(f, v) {
				return true
			}
		}
		return false
	}
	var out []kmsg.ListGroupsResponseGroup
	for _, g := range s.sortedGroups() {
		if g.state == Dead || !match(states, g.stateName()) || !match(types, g.protocol.String()) {
			continue
		}
		l := kmsg.NewListGroupsResponseGroup()
		l.Group, l.ProtocolType = g.ID, g.protocolType
		l.GroupState, l.GroupType = g.stateName(), g.protocol.String()
		out = append(out, l)
	}
	return out
}

// DeleteGroups deletes the given groups of this shard with their offsets, pending
// transactional ones included: only groups with no members (NON_EMPTY_GROUP otherwise; GROUP_ID_NOT_FOUND for unknown ones). The reply is
// a *kmsg.DeleteGroupsResponse listing these groups.
func (s *Shard) DeleteGroups(now int64, w Waiter, ids []string) Ready {
	s.begin(now)
	resp := kmsg.NewPtrDeleteGroupsResponse()
	var recs []Record
	var deleting []*Group
	for _, id := range ids {
		r := kmsg.NewDeleteGroupsResponseGroup()
		r.Group = id
		g := s.groups[id]
		switch {
		case g == nil || g.state == Dead:
			r.ErrorCode = kerr.GroupIDNotFound.Code
		case g.state != Empty:
			r.ErrorCode = kerr.NonEmptyGroup.Code
		default:
			// Dead at once, as Kafka does: requests meanwhile are told to retry elsewhere.
			g.transition(Dead, s.now)
			deleting = append(deleting, g)
			for _, tp := range g.sortedOffsets() {
				recs = append(recs, Record{Key: offsetKey(g.ID, tp)})
			}
			// Pending transactional commits get a tombstone too (one per partition, none
			// where a committed offset has one already), so that replaying the log drops
			// them; they are dropped now, as the tombstones follow them in the log.
			for _, tp := range s.pendingTxnPartitions(g.ID) {
				if g.offsets[tp] == nil {
					recs = append(recs, Record{Key: offsetKey(g.ID, tp)})
				}
			}
			s.dropGroupTxns(g.ID)
			recs = append(recs, g.tombstones()...)
		}
		resp.Groups = append(resp.Groups, r)
	}
	if len(recs) == 0 {
		s.reply(w, resp)
		return s.end()
	}
	s.write(recs, func(err error) {
		for _, g := range deleting {
			if s.groups[g.ID] == g {
				delete(s.groups, g.ID)
			}
		}
		if err != nil {
			// Like Kafka, the groups are gone from memory either way; the client learns
			// the tombstones may not have been written.
			for i := range resp.Groups {
				for _, g := range deleting {
					if resp.Groups[i].Group == g.ID {
						resp.Groups[i].ErrorCode = offsetWriteError(err).Code
					}
				}
			}
		}
		s.reply(w, resp)
	})
	return s.end()
}
