package coordinator

import "container/heap"

// Deadlines is a core's deadline queue, keyed by what each deadline is for, with cheap
// postponement: moving a key's deadline later does not touch the heap. It has no clock: the
// core asks Next for the earliest deadline (the edge arms its Timer for it) and pops what
// is due at the time its Tick carries. The zero value is not usable: see NewDeadlines.
//
// Invariant: for every key in at, the heap holds an entry for that key whose time is <=
// at[key]. Entries can be stale (key cancelled, or its deadline moved later); they are
// dropped or re-pushed when they reach the top.
type Deadlines[K comparable] struct {
	at map[K]int64
	h  deadlineHeap[K]
}

type deadlineEntry[K comparable] struct {
	at  int64
	key K
}

type deadlineHeap[K comparable] []deadlineEntry[K]

func (h deadlineHeap[K]) Len() int           { return len(h) }
func (h deadlineHeap[K]) Less(i, j int) bool { return h[i].at < h[j].at }
func (h deadlineHeap[K]) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *deadlineHeap[K]) Push(x any)        { *h = append(*h, x.(deadlineEntry[K])) }
func (h *deadlineHeap[K]) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// NewDeadlines returns an empty queue.
func NewDeadlines[K comparable]() Deadlines[K] { return Deadlines[K]{at: map[K]int64{}} }

// Set (re)schedules key at time at.
func (t *Deadlines[K]) Set(key K, at int64) {
	old, ok := t.at[key]
	t.at[key] = at
	if !ok || at < old {
		heap.Push(&t.h, deadlineEntry[K]{at, key})
	}
}

// Cancel removes key's deadline.
func (t *Deadlines[K]) Cancel(key K) { delete(t.at, key) }

// Has reports whether key has a deadline.
func (t *Deadlines[K]) Has(key K) bool {
	_, ok := t.at[key]
	return ok
}

// Next is the earliest time anything may be due (possibly a stale entry); ok false if none.
func (t *Deadlines[K]) Next() (int64, bool) {
	for len(t.h) > 0 {
		e := t.h[0]
		if at, ok := t.at[e.key]; ok && at >= e.at {
			return e.at, true
		}
		heap.Pop(&t.h) // cancelled, or rescheduled earlier (its earlier entry is queued)
	}
	return 0, false
}

// PopDue removes and returns one key due at now, or ok false if none is.
func (t *Deadlines[K]) PopDue(now int64) (K, bool) {
	for len(t.h) > 0 && t.h[0].at <= now {
		e := heap.Pop(&t.h).(deadlineEntry[K])
		at, ok := t.at[e.key]
		switch {
		case !ok:
		case at > now:
			heap.Push(&t.h, deadlineEntry[K]{at, e.key}) // postponed: requeue at its deadline
		default:
			delete(t.at, e.key)
			return e.key, true
		}
	}
	var zero K
	return zero, false
}
