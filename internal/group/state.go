package group

import "fmt"

// State is a classic group's state, with Kafka's names and transitions:
//
//	Empty ──join──▶ PreparingRebalance ──all joined / rebalance timeout──▶ CompletingRebalance
//	  ▲                 │   ▲                                                     │
//	  └──no members─────┘   └──member joins, leaves or fails──── Stable ◀──leader's SyncGroup
//
// Dead is final: the group was deleted (DeleteGroups, or expired with no offsets) or its
// shard unloaded.
type State int8

const (
	Empty State = iota
	PreparingRebalance
	CompletingRebalance
	Stable
	Dead
)

var stateNames = [...]string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"}

// String is the name Kafka reports in DescribeGroups and ListGroups.
func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", int8(s))
}

// validPrevious lists, for each state, the states it may be entered from (Kafka's
// GroupState.validPreviousStates).
var validPrevious = [...][]State{
	Empty:               {PreparingRebalance},
	PreparingRebalance:  {Stable, CompletingRebalance, Empty},
	CompletingRebalance: {PreparingRebalance},
	Stable:              {CompletingRebalance},
	Dead:                {Stable, PreparingRebalance, CompletingRebalance, Empty, Dead},
}

// canTransition reports whether from -> to is a legal transition.
func canTransition(from, to State) bool {
	for _, p := range validPrevious[to] {
		if p == from {
			return true
		}
	}
	return false
}
