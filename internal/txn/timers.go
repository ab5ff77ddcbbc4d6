package txn

import "container/heap"

// timerKind is what a deadline of a shard is for.
type timerKind uint8

const (
	timerAbortScan   timerKind = iota // the periodic check for timed-out transactions
	timerExpiryScan                   // the periodic check for expired transactional ids
	timerMarkers                      // a transaction's next attempt at its markers
	timerComplete                     // a transaction's next attempt at its Complete* record
)

type timerKey struct {
	kind timerKind
	id   string // the transactional id; "" for the scans
}

// timers is a deadline queue. Invariant: for every key in at the heap holds an entry for it
// at a time <= at[key]; other entries are stale and dropped or requeued when they surface.
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

func (t *timers) cancel(key timerKey) { delete(t.at, key) }

// next is the earliest time anything may be due; ok false if nothing is scheduled.
func (t *timers) next() (int64, bool) {
	for len(t.h) > 0 {
		e := t.h[0]
		if at, ok := t.at[e.key]; ok && at >= e.at {
			return e.at, true
		}
		heap.Pop(&t.h)
	}
	return 0, false
}

// popDue removes and returns one key due at now; ok false if none is.
func (t *timers) popDue(now int64) (timerKey, bool) {
	for len(t.h) > 0 && t.h[0].at <= now {
		e := heap.Pop(&t.h).(timerEntry)
		at, ok := t.at[e.key]
		switch {
		case !ok:
		case at > now:
			heap.Push(&t.h, timerEntry{at, e.key})
		default:
			delete(t.at, e.key)
			return e.key, true
		}
	}
	return timerKey{}, false
}
