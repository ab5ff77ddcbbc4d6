package quorum

import (
	"slices"
	"strconv"

	"github.com/gregor-project/gregor/internal/controller/state"
)

// Automatic leader rebalance (auto.leader.rebalance.enable).
//
// A partition's preferred leader is its first replica; placement spreads first replicas
// evenly, so leadership is balanced while every partition is led by its preferred replica.
// Failures and controlled shutdowns move leadership away, and nothing moves it back by
// itself: a broker that restarts rejoins the ISRs as a follower. Every
// ImbalanceCheckInterval the active controller measures each broker's imbalance, the share
// of the partitions it prefers to lead that another broker leads, and if any broker's share
// is above ImbalancePct percent it runs a preferred election over every partition
// (state.Controller.ElectLeaders with Partitions nil), which moves leadership back wherever
// the preferred replica is an active ISR member, and commits the records like any command.
//
// The check runs on the loop's tick path (propose, after session expiry) and only on the
// active controller; a newly active controller waits a whole interval before its first
// check, as Kafka's does. Partitions being reassigned are not counted: their first replica
// is about to change.

// rebalancer schedules the checks. Owned by the run loop.
type rebalancer struct {
	term uint64 // raft term in which next was scheduled; another term starts afresh
	next int64  // ms: when the next check is due
}

// due reports whether a check is due at now in term, scheduling the next one when it is;
// the first call in a term only schedules.
func (r *rebalancer) due(now int64, term uint64, intervalMs int64) bool {
	if r.term != term || r.next == 0 {
		r.term, r.next = term, now+intervalMs
		return false
	}
	if now < r.next {
		return false
	}
	r.next = now + intervalMs
	return true
}

// BrokerImbalance is one broker's leadership balance: of the Preferred partitions whose
// first replica it is (not counting partitions being reassigned), NotLeading are led by
// another broker or have no leader.
type BrokerImbalance struct {
	Broker     int32
	Preferred  int
	NotLeading int
}

// Exceeds reports whether NotLeading is more than pct percent of Preferred.
func (b BrokerImbalance) Exceeds(pct int) bool {
	return b.Preferred > 0 && b.NotLeading*100 > pct*b.Preferred
}

// LeaderImbalance returns the imbalance of every broker that is the preferred leader of a
// partition, by broker id.
func LeaderImbalance(im *state.Image) []BrokerImbalance {
	by := map[int32]*BrokerImbalance{}
	for _, name := range im.TopicNames() {
		for _, p := range im.Topic(name).Partitions {
			if p.Reassigning() || len(p.Replicas) == 0 {
				continue
			}
			pref := p.Replicas[0]
			b := by[pref]
			if b == nil {
				b = &BrokerImbalance{Broker: pref}
				by[pref] = b
			}
			b.Preferred++
			if p.Leader != pref {
				b.NotLeading++
			}
		}
	}
	out := make([]BrokerImbalance, 0, len(by))
	for _, b := range by {
		out = append(out, *b)
	}
	slices.SortFunc(out, func(a, b BrokerImbalance) int { return int(a.Broker) - int(b.Broker) })
	return out
}

// rebalanceLeaders is the tick path's check: when auto leader rebalance is on and a check is
// due, and some broker's imbalance exceeds ImbalancePct, it returns the records of a
// preferred election over every partition (nil when nothing is to be done).
func (n *Node) rebalanceLeaders(now int64) []state.Record {
	if !n.cfg.AutoLeaderRebalance {
		return nil
	}
	term := n.rn.BasicStatus().HardState.GetTerm()
	if !n.rb.due(now, term, n.cfg.ImbalanceCheckInterval.Milliseconds()) {
		return nil
	}
	var over []int32
	for _, b := range LeaderImbalance(n.ctrl.Image()) {
		if b.Exceeds(n.cfg.ImbalancePct) {
			over = append(over, b.Broker)
		}
	}
	if len(over) == 0 {
		return nil
	}
	recs, results := n.ctrl.ElectLeaders(state.ElectLeadersRequest{Type: state.ElectPreferred})
	if len(recs) > 0 {
		moved := make([]string, 0, len(results))
		for _, r := range results {
			moved = append(moved, r.Topic+"-"+strconv.Itoa(int(r.Partition)))
		}
		n.log.Info("leader imbalance: moving leadership back to preferred replicas",
			"imbalanced_brokers", over, "threshold_pct", n.cfg.ImbalancePct, "partitions", moved)
	}
	return recs
}
