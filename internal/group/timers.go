package group

import "container/heap"

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

// timers is a deadline queue with cheap postponement: a heartbeat moves a member's deadline
// later without touching the heap.
//
// Invariant: for every key in at, the heap holds an entry for that key whose time is <=
// at[key]. Entries can be stale (key cancelled, or its deadline moved later); they are
// dropped or re-pushed when they reach the top.
type timers struct {
	at map[timerKey]int64
	h  timerHeap
}

type timerEntry struct {
	at  int64
	key timerKey
}

type timerHeap []timerEntry

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h timerHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)        { *h = append(*h, x.(timerEntry)) }
func (h *timerHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

func newTimers() timers { return timers{at: map[timerKey]int64{}} }

// set (re)schedules key at time at.
func (t *timers) set(key timerKey, at int64) {
	old, ok := t.at[key]
	t.at[key] = at
	if !ok || at < old {
		heap.Push(&t.h, timerEntry{at, key})
	}
}

// cancel removes key's deadline.
func (t *timers) cancel(key timerKey) { delete(t.at, key) }

// next is the earliest time anything may be due (possibly a stale entry); ok false if none.
func (t *timers) next() (int64, bool) {
	for len(t.h) > 0 {
		e := t.h[0]
		if at, ok := t.at[e.key]; ok && at >= e.at {
			return e.at, true
		}
		heap.Pop(&t.h) // cancelled, or rescheduled earlier (its earlier entry is queued)
	}
	return 0, false
}

// popDue removes and returns one key due at now, or ok false if none is.
func (t *timers) popDue(now int64) (timerKey, bool) {
	for len(t.h) > 0 && t.h[0].at <= now {
		e := heap.Pop(&t.h).(timerEntry)
		at, ok := t.at[e.key]
		switch {
		case !ok:
		case at > now:
			heap.Push(&t.h, timerEntry{at, e.key}) // postponed: requeue at its deadline
		default:
			delete(t.at, e.key)
			return e.key, true
		}
	}
	return timerKey{}, false
}
