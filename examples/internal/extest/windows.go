package extest

import (
	"slices"
	"testing"
	"time"
)

// Event is one record as a windowed aggregation sees it: its group key and its event time.
type Event struct {
	Key  string
	Time time.Time
}

// Windows computes, from the documented semantics and independently of the library, which
// windows count each event: the windows of size, one starting every advance from the epoch,
// that hold its time and have not closed, a window closing once the stream time reaches its
// end plus grace. Stream time is the latest event time a task has seen, this event's
// included. events are in the order they were produced, each key's events to one partition.
//
// Which keys share a partition (and so a stream time) is up to the partitioner, so Windows
// decides each event twice: with the stream time of all events before it (the most a task
// can have seen) and with that of its own key's events (the least). The test data must make
// the two agree, or the test fails as ambiguous. The result is the starts of the windows
// counting each event, in events' order.
func Windows(t *testing.T, events []Event, size, advance, grace time.Duration) [][]time.Time {
	t.Helper()
	var all time.Time
	perKey := map[string]time.Time{}
	out := make([][]time.Time, len(events))
	for i, e := range events {
		if e.Time.After(all) {
			all = e.Time
		}
		if e.Time.After(perKey[e.Key]) {
			perKey[e.Key] = e.Time
		}
		// Every window holding e.Time starts on a multiple of advance since the epoch, at or
		// before it and less than size before it.
		ms, adv := e.Time.UnixMilli(), advance.Milliseconds()
		for s := ms - ms%adv; s >= 0 && s+size.Milliseconds() > ms; s -= adv {
			start := time.UnixMilli(s).UTC()
			closes := start.Add(size + grace)
			openMost := closes.After(perKey[e.Key])
			openLeast := closes.After(all)
			if openMost != openLeast {
				t.Fatalf("test data: event %d (%s at %v), window at %v: whether it counts depends on which keys share a partition", i, e.Key, e.Time, start)
			}
			if openLeast {
				out[i] = append(out[i], start)
			}
		}
		slices.Reverse(out[i])
	}
	return out
}
