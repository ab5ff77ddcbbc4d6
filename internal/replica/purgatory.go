package replica

import (
	"container/heap"
	"errors"
	"slices"
)

// The acks=all produce purgatory of one partition (Kafka's DelayedProduce, per partition): a
// produce that appended as the leader waits here until the high watermark reaches the offset
// after its last record, then answers. A deterministic core: no goroutines, no clock of its
// own; the caller feeds it the high watermark, the ISR size and the time.
//
// A waiter completes exactly once:
//   - the high watermark passes it: success when the (maximal) ISR still has at least the
//     waiter's min.insync.replicas members, else ErrNotEnoughReplicasAfterAppend (the ISR
//     shrank while it waited: the records are committed, but on fewer replicas than asked);
//   - its deadline (the request's timeout) passes first: ErrRequestTimedOut;
//   - the partition stops being led here: FailAll with ErrNotLeaderOrFollower.
//
// A produce request spanning several partitions has one waiter in each; joining them into one
// answer is the caller's business.
//
// The same purgatory holds a leader's waiting DeleteRecords requests (Kafka's
// DelayedDeleteRecords, lowwatermark.go): there the watermark is the low watermark, not the
// high watermark, and MinISR is 0 (no ISR size condition).
//
// Not safe for concurrent use; the partition's lock guards it.

// ErrRequestTimedOut: an acks=all produce whose records did not reach every ISR member within
// the request's timeout. REQUEST_TIMED_OUT.
var ErrRequestTimedOut = errors.New("replica: timed out waiting for the in-sync replicas")

// ProduceWaiter is one acks=all append waiting for replication.
type ProduceWaiter struct {
	RequiredOffset int64 // the log end offset right after the append: done when the high watermark >= it
	MinISR         int32 // min.insync.replicas at the time of the append
	DeadlineMs     int64 // when the produce request times out
	Token          any   // the caller's handle, given back in the completion
}

// ProduceCompletion is a waiter's answer: Err nil is success.
type ProduceCompletion struct {
	Token     any
	Err       error
	Watermark int64 // the watermark Complete passed it at (-1 when Err is set by Expire or FailAll)
}

type waiter struct {
	ProduceWaiter
	done      bool
	heapIndex int // position in byDeadline; -1 once removed
}

// ProducePurgatory holds a partition's waiting acks=all produces.
//
// byOffset is ordered by RequiredOffset (appends come in offset order, so Add is an append in
// the usual case); completion pops from its front. byDeadline is a min-heap on DeadlineMs;
// expiry pops from it. A waiter leaves byDeadline when it completes; one that expired stays in
// byOffset, marked done, until it reaches the front.
type ProducePurgatory struct {
	byOffset   []*waiter
	head       int // byOffset[:head] are gone
	byDeadline deadlineHeap
	pending    int
}

// Len is how many waiters have not completed.
func (p *ProducePurgatory) Len() int { return p.pending }

// NextDeadline is the earliest deadline of a waiting produce; ok is false when none waits.
func (p *ProducePurgatory) NextDeadline() (ms int64, ok bool) {
	if len(p.byDeadline) == 0 {
		return 0, false
	}
	return p.byDeadline[0].DeadlineMs, true
}

// Add parks w.
func (p *ProducePurgatory) Add(w ProduceWaiter) {
	x := &waiter{ProduceWaiter: w}
	q := p.byOffset[p.head:]
	if n := len(q); n == 0 || q[n-1].RequiredOffset <= w.RequiredOffset {
		p.byOffset = append(p.byOffset, x)
	} else {
		// Out of order (two produces racing to park): insert after every waiter with a
		// RequiredOffset <= w's.
		i, _ := slices.BinarySearchFunc(q, w.RequiredOffset+1, func(a *waiter, off int64) int {
			if a.RequiredOffset < off {
				return -1
			}
			return 1
		})
		p.byOffset = slices.Insert(p.byOffset, p.head+i, x)
	}
	heap.Push(&p.byDeadline, x)
	p.pending++
}

// Complete answers every waiter whose RequiredOffset is <= hw, appending to out. isrSize is
// the size of the ISR the leader computes the high watermark over (Kafka's maximal ISR).
func (p *ProducePurgatory) Complete(hw int64, isrSize int, out []ProduceCompletion) []ProduceCompletion {
	for p.head < len(p.byOffset) {
		w := p.byOffset[p.head]
		if !w.done && w.RequiredOffset > hw {
			break
		}
		p.byOffset[p.head] = nil
		p.head++
		if w.done {
			continue
		}
		var err error
		if int32(isrSize) < w.MinISR {
			err = ErrNotEnoughReplicasAfterAppend
		}
		out = p.finish(w, err, hw, out)
	}
	p.compact()
	return out
}

// Expire answers every waiter whose deadline is <= nowMs with ErrRequestTimedOut.
func (p *ProducePurgatory) Expire(nowMs int64, out []ProduceCompletion) []ProduceCompletion {
	for len(p.byDeadline) > 0 && p.byDeadline[0].DeadlineMs <= nowMs {
		out = p.finish(p.byDeadline[0], ErrRequestTimedOut, -1, out)
	}
	// Expired waiters at the front of byOffset can go now.
	for p.head < len(p.byOffset) && p.byOffset[p.head].done {
		p.byOffset[p.head] = nil
		p.head++
	}
	p.compact()
	return out
}

// FailAll answers every waiter with err (leadership moved, the partition was removed).
func (p *ProducePurgatory) FailAll(err error, out []ProduceCompletion) []ProduceCompletion {
	for _, w := range p.byOffset[p.head:] {
		if !w.done {
			out = p.finish(w, err, -1, out)
		}
	}
	*p = ProducePurgatory{}
	return out
}

// finish completes w (which is not done) with err at watermark.
func (p *ProducePurgatory) finish(w *waiter, err error, watermark int64, out []ProduceCompletion) []ProduceCompletion {
	w.done = true
	if w.heapIndex >= 0 {
		heap.Remove(&p.byDeadline, w.heapIndex)
	}
	p.pending--
	out = append(out, ProduceCompletion{Token: w.Token, Err: err, Watermark: watermark})
	w.Token = nil
	return out
}

// compact drops the consumed front of byOffset once it is most of the slice.
func (p *ProducePurgatory) compact() {
	if p.head == len(p.byOffset) {
		p.byOffset, p.head = p.byOffset[:0], 0
		return
	}
	if p.head > 64 && p.head*2 > len(p.byOffset) {
		n := copy(p.byOffset, p.byOffset[p.head:])
		clear(p.byOffset[n:])
		p.byOffset, p.head = p.byOffset[:n], 0
	}
}

// deadlineHeap is a min-heap of waiters by DeadlineMs that keeps each waiter's index.
type deadlineHeap []*waiter

func (h deadlineHeap) Len() int           { return len(h) }
func (h deadlineHeap) Less(i, j int) bool { return h[i].DeadlineMs < h[j].DeadlineMs }
func (h deadlineHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIndex = i
	h[j].heapIndex = j
}

func (h *deadlineHeap) Push(x any) {
	w := x.(*waiter)
	w.heapIndex = len(*h)
	*h = append(*h, w)
}

func (h *deadlineHeap) Pop() any {
	old := *h
	n := len(old)
	w := old[n-1]
	old[n-1] = nil
	w.heapIndex = -1
	*h = old[:n-1]
	return w
}
