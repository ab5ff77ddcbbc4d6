package server

import "sync"

// MemoryPool bounds the bytes of requests read and not yet handled (queued.max.request.bytes),
// as Kafka's SimpleMemoryPool in non-strict mode bounds its SocketServer's: a connection
// takes a request's size from the pool after reading its 4-byte length and before reading
// its body, and gives it back once the request's buffer is no longer referenced. While the
// pool is empty a connection waits without reading from its socket, so TCP slows its sender
// instead of the broker allocating.
//
// Non-strict: a request is let in whenever the pool has any bytes left, even if it is larger
// than what is left, so available may go below zero. The bytes held are therefore at most
// size plus one request (socket.request.max.bytes), and a request as large as the whole pool
// is never refused.
//
// Waiters are served in arrival order (Kafka shuffles its ready channels when memory runs
// low for the same reason: no connection starves while others keep getting in).
type MemoryPool struct {
	size int64
	mu   struct {
		sync.Mutex
		available int64 // size minus the bytes held; may be negative (non-strict)
		waiters   []*poolWaiter
	}
}

// poolWaiter is a connection waiting for n bytes; granted is closed once they are taken for it.
type poolWaiter struct {
	n       int64
	granted chan struct{}
}

// NewMemoryPool returns a pool of size bytes, or nil (no limit, Kafka's MemoryPool.NONE) if
// size is not positive.
func NewMemoryPool(size int64) *MemoryPool {
	if size <= 0 {
		return nil
	}
	p := &MemoryPool{size: size}
	p.mu.available = size
	return p
}

// Size is the pool's capacity.
func (p *MemoryPool) Size() int64 { return p.size }

// Available is the pool's capacity minus the bytes held (negative while it is overdrawn).
func (p *MemoryPool) Available() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.available
}

// acquire takes n bytes, waiting while the pool is empty. It reports whether it waited; it
// gives up (ok false, nothing taken) when stop is closed first.
func (p *MemoryPool) acquire(n int64, stop <-chan struct{}) (waited, ok bool) {
	p.mu.Lock()
	if len(p.mu.waiters) == 0 && p.mu.available > 0 {
		p.mu.available -= n
		p.mu.Unlock()
		return false, true
	}
	w := &poolWaiter{n: n, granted: make(chan struct{})}
	p.mu.waiters = append(p.mu.waiters, w)
	p.mu.Unlock()
	select {
	case <-w.granted:
		return true, true
	case <-stop:
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, o := range p.mu.waiters {
		if o == w {
			p.mu.waiters = append(p.mu.waiters[:i], p.mu.waiters[i+1:]...)
			return true, false
		}
	}
	// Granted as stop closed: the bytes are ours, give them back.
	p.releaseLocked(n)
	return true, false
}

// release gives back n bytes taken by acquire and lets waiters in while there is room.
func (p *MemoryPool) release(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.releaseLocked(n)
}

func (p *MemoryPool) releaseLocked(n int64) {
	p.mu.available += n
	for len(p.mu.waiters) > 0 && p.mu.available > 0 {
		w := p.mu.waiters[0]
		p.mu.waiters[0] = nil
		p.mu.waiters = p.mu.waiters[1:]
		p.mu.available -= w.n
		close(w.granted)
	}
}
