package state

import (
	"github.com/twmb/franz-go/pkg/kerr"
)

// ElectionType is Kafka's ElectLeaders election type.
type ElectionType int8

const (
	ElectPreferred ElectionType = 0 // move leadership to the first replica
	ElectUnclean   ElectionType = 1 // give leaderless partitions a leader, from outside the ISR if need be
)

// ElectLeadersRequest elects leaders for Partitions (every partition when nil).
type ElectLeadersRequest struct {
	Type       ElectionType
	Partitions []TopicPartition
}

// ElectLeadersResult is the outcome for one partition.
type ElectLeadersResult struct {
	TopicPartition
	Err error
}

// ElectLeaders runs preferred or unclean elections.
//
// Preferred: the first replica becomes leader if it is an active ISR member; otherwise
// PREFERRED_LEADER_NOT_AVAILABLE, and ELECTION_NOT_NEEDED if it leads already. Unclean: a
// partition without a leader gets the first active ISR member or, failing that, any active
// replica (ISR = just that replica, losing what only the ISR had); ELECTION_NOT_NEEDED if it
// has a leader, ELIGIBLE_LEADERS_NOT_AVAILABLE if no replica is active.
//
// With Partitions nil every partition is considered and only the elected ones are reported
// (auto.leader.rebalance.enable runs a preferred election this way).
func (c *Controller) ElectLeaders(req ElectLeadersRequest) ([]Record, []ElectLeadersResult) {
	var recs []Record
	var results []ElectLeadersResult
	live := c.liveness()
	elect := func(t *Topic, i int32, p *Partition, all bool) {
		var np *Partition
		var err error
		switch req.Type {
		case ElectPreferred:
			pref := p.Replicas[0]
			switch {
			case p.Leader == pref:
				err = errf(kerr.ElectionNotNeeded, "%s-%d: broker %d leads already", t.Name, i, pref)
			case !contains(p.ISR, pref) || !live.active(pref):
				err = errf(kerr.PreferredLeaderNotAvailable, "%s-%d: preferred broker %d is not an active ISR member", t.Name, i, pref)
			default:
				cp := *p
				cp.Leader = pref
				np = &cp
			}
		case ElectUnclean:
			if p.Leader != NoLeader {
				err = errf(kerr.ElectionNotNeeded, "%s-%d: broker %d leads", t.Name, i, p.Leader)
				break
			}
			np, _ = reconcile(p, live, true)
			if np == nil || np.Leader == NoLeader {
				np, err = nil, errf(kerr.EligibleLeadersNotAvailable, "%s-%d: no replica is active", t.Name, i)
			}
		default:
			err = errf(kerr.InvalidRequest, "election type %d", req.Type)
		}
		if np != nil {
			recs = append(recs, diff(t.ID, i, p, np))
		}
		if !all || err == nil {
			results = append(results, ElectLeadersResult{TopicPartition{t.Name, i}, err})
		}
	}
	if req.Partitions == nil {
		for _, t := range c.im.sortedTopics() {
			for i, p := range t.Partitions {
				elect(t, int32(i), p, true)
			}
		}
		return recs, results
	}
	seen := map[TopicPartition]bool{}
	for _, tp := range req.Partitions {
		t := c.im.topicsByName[tp.Topic]
		p := (*Partition)(nil)
		if t != nil {
			p = c.im.Partition(t.ID, tp.Partition)
		}
		switch {
		case p == nil:
			results = append(results, ElectLeadersResult{tp, errf(kerr.UnknownTopicOrPartition, "%s-%d does not exist", tp.Topic, tp.Partition)})
		case seen[tp]:
			results = append(results, ElectLeadersResult{tp, errf(kerr.InvalidRequest, "%s-%d appears more than once", tp.Topic, tp.Partition)})
		default:
			seen[tp] = true
			elect(t, tp.Partition, p, false)
		}
	}
	return recs, results
}
