package replica

import (
	"errors"
	"slices"
	"testing"
)

func tokens(cs []ProduceCompletion, err error) []int {
	var out []int
	for _, c := range cs {
		if errors.Is(c.Err, err) || (err == nil && c.Err == nil) {
			out = append(out, c.Token.(int))
		}
	}
	return out
}

func TestProducePurgatory(t *testing.T) {
	var p ProducePurgatory
	if _, ok := p.NextDeadline(); ok || p.Len() != 0 {
		t.Fatal("empty purgatory")
	}
	p.Add(ProduceWaiter{RequiredOffset: 5, MinISR: 2, DeadlineMs: 300, Token: 1})
	p.Add(ProduceWaiter{RequiredOffset: 8, MinISR: 2, DeadlineMs: 100, Token: 2})
	p.Add(ProduceWaiter{RequiredOffset: 12, MinISR: 3, DeadlineMs: 200, Token: 3})
	p.Add(ProduceWaiter{RequiredOffset: 7, MinISR: 1, DeadlineMs: 400, Token: 4}) // out of order
	if d, ok := p.NextDeadline(); !ok || d != 100 || p.Len() != 4 {
		t.Fatalf("next deadline %d %v, len %d", d, ok, p.Len())
	}
	if cs := p.Complete(4, 3, nil); len(cs) != 0 {
		t.Fatalf("completed below the required offsets: %v", cs)
	}
	cs := p.Complete(7, 3, nil)
	if got := tokens(cs, nil); !slices.Equal(got, []int{1, 4}) || len(cs) != 2 {
		t.Fatalf("hw 7 completed %v", cs)
	}
	// Waiter 2 times out before the high watermark reaches it.
	cs = p.Expire(150, nil)
	if got := tokens(cs, ErrRequestTimedOut); !slices.Equal(got, []int{2}) || len(cs) != 1 {
		t.Fatalf("expire at 150: %v", cs)
	}
	if d, _ := p.NextDeadline(); d != 200 || p.Len() != 1 {
		t.Fatalf("after expiry: next deadline %d, len %d", d, p.Len())
	}
	// The ISR shrank to 2 below waiter 3's min.insync.replicas 3 before the hw passed it.
	cs = p.Complete(20, 2, nil)
	if got := tokens(cs, ErrNotEnoughReplicasAfterAppend); !slices.Equal(got, []int{3}) || len(cs) != 1 {
		t.Fatalf("hw 20 with a small ISR: %v", cs)
	}
	if p.Len() != 0 {
		t.Fatal(p.Len())
	}
	if cs := p.Expire(1000, nil); len(cs) != 0 {
		t.Fatalf("completed waiters expired again: %v", cs)
	}

	p.Add(ProduceWaiter{RequiredOffset: 30, DeadlineMs: 5000, Token: 5})
	p.Add(ProduceWaiter{RequiredOffset: 31, DeadlineMs: 5000, Token: 6})
	cs = p.FailAll(ErrNotLeaderOrFollower, nil)
	if got := tokens(cs, ErrNotLeaderOrFollower); !slices.Equal(got, []int{5, 6}) || p.Len() != 0 {
		t.Fatalf("FailAll: %v", cs)
	}
}

// Many waiters, completed and expired in interleaved steps: each completes exactly once and
// the structures stay small.
func TestProducePurgatoryMany(t *testing.T) {
	var p ProducePurgatory
	done := map[int]bool{}
	collect := func(cs []ProduceCompletion) {
		for _, c := range cs {
			tok := c.Token.(int)
			if done[tok] {
				t.Fatalf("waiter %d completed twice", tok)
			}
			done[tok] = true
		}
	}
	const n = 5000
	for i := range n {
		// Every third waiter has a short deadline.
		dl := int64(1_000_000)
		if i%3 == 0 {
			dl = int64(i)
		}
		p.Add(ProduceWaiter{RequiredOffset: int64(i + 1), MinISR: 1, DeadlineMs: dl, Token: i})
		if i%100 == 99 {
			collect(p.Expire(int64(i-50), nil))
			collect(p.Complete(int64(i-200), 1, nil))
		}
	}
	collect(p.Complete(n, 1, nil))
	if len(done) != n || p.Len() != 0 || len(p.byDeadline) != 0 || len(p.byOffset) != 0 {
		t.Fatalf("done %d, len %d, heap %d, queue %d", len(done), p.Len(), len(p.byDeadline), len(p.byOffset))
	}
}
