package txn

import "github.com/gregor-project/gregor/internal/coordinator"

// timerKind is what a deadline of a shard is for.
type timerKind uint8

const (
	timerAbortScan  timerKind = iota // the periodic check for timed-out transactions
	timerExpiryScan                  // the periodic check for expired transactional ids
	timerMarkers                     // a transaction's next attempt at its markers
	timerComplete                    // a transaction's next attempt at its Complete* record
)

type timerKey struct {
	kind timerKind
	id   string // the transactional id; "" for the scans
}

// timers is the shard's deadline queue (coordinator.Deadlines), keyed by what each deadline
// is for.
type timers = coordinator.Deadlines[timerKey]

func newTimers() timers { return coordinator.NewDeadlines[timerKey]() }
