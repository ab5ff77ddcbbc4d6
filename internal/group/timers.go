package group

import "github.com/gregor-project/gregor/internal/coordinator"

// timerKind is what a deadline is for.
type timerKind uint8

const (
	timerHeartbeat timerKind = iota // a member's session (or new-member join) timeout
	timerPending                    // a member id handed out with MEMBER_ID_REQUIRED
	timerJoin                       // the join phase: rebalance timeout or initial delay
	timerSync                       // members of a new generation that have not synced
	timerExpiry                     // the periodic offset expiry check

	// Consumer groups (KIP-848).
	timerConsumerSession   // a member's session timeout
	timerConsumerRebalance // a member's deadline to revoke partitions (its rebalance timeout)
	timerClassicJoin       // a classic member of a consumer group told to rejoin
	timerClassicSync       // a classic member of a consumer group that joined but has not synced
)

type timerKey struct {
	kind   timerKind
	group  string
	member string
}

// timers is the shard's deadline queue (coordinator.Deadlines), keyed by what each deadline
// is for.
type timers = coordinator.Deadlines[timerKey]

func newTimers() timers { return coordinator.NewDeadlines[timerKey]() }
