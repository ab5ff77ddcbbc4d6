package quorum

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/gregor-project/gregor/internal/config"
)

// HelloMagic is the first four bytes of every raft peer connection (see transport.go). A
// listener shared with the Kafka protocol sends connections starting with it to the
// quorum and the rest to the Kafka-protocol server.
const HelloMagic = helloMagic

// appliedSignal tells waiters that the node's applied offset moved. The run loop calls set
// after every step (publishStatus); ch is made lazily, so nobody waiting costs nothing.
type appliedSignal struct {
	mu struct {
		sync.Mutex
		offset int64
		ch     chan struct{} // closed and cleared when offset changes; nil until asked for
	}
}

func (s *appliedSignal) set(offset int64) {
	s.mu.Lock()
	if offset != s.mu.offset {
		s.mu.offset = offset
		if s.mu.ch != nil {
			close(s.mu.ch)
			s.mu.ch = nil
		}
	}
	s.mu.Unlock()
}

// Applied returns the node's applied offset and a channel closed when it next changes (a
// new entry applied, or a snapshot from the leader installed). Safe from any goroutine.
func (n *Node) Applied() (offset int64, changed <-chan struct{}) {
	s := &n.appliedSig
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.ch == nil {
		s.mu.ch = make(chan struct{})
	}
	return s.mu.offset, s.mu.ch
}

// WaitActive waits until this node is the active controller (it leads and has applied the
// first entry of its term), ctx ends, or the node stops (ErrStopped).
func (n *Node) WaitActive(ctx context.Context) error {
	for {
		_, changed := n.Applied() // before the status: a change in between still wakes us
		if n.Status().Active {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		case <-n.Done():
			return ErrStopped
		}
	}
}

// WaitCommitted is ReadCommitted that waits: it returns up to max entries with records at or
// after from, waiting up to maxWait (or until ctx ends) for one to apply. Entries without
// records (a new leader's empty entry) are passed over while waiting. An empty answer after
// maxWait is not an error; ErrCompacted is returned as ReadCommitted does, ErrStopped if the
// node stops.
func (n *Node) WaitCommitted(ctx context.Context, from int64, max int, maxWait time.Duration) ([]Committed, error) {
	if from < 1 {
		from = 1
	}
	if max <= 0 {
		return nil, nil
	}
	var timeout <-chan time.Time
	for {
		applied, changed := n.Applied()
		if applied >= from {
			out, err := n.ReadCommitted(from, max)
			if err != nil || len(out) > 0 {
				return out, err
			}
			// The entries read carried no records: read on past them, or wait for more.
			if applied-from+1 > int64(max) {
				from += int64(max)
				continue
			}
			from = applied + 1
		}
		if maxWait <= 0 {
			return nil, nil
		}
		if timeout == nil {
			t := time.NewTimer(maxWait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-changed:
		case <-timeout:
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-n.donec:
			return nil, ErrStopped
		}
	}
}

// Voters is controller.quorum.voters as the node was started with.
func (n *Node) Voters() []config.Voter { return slices.Clone(n.cfg.Voters) }

// ClusterID is the cluster id the node was started with.
func (n *Node) ClusterID() string { return n.cfg.ClusterID }
