package testutil

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy is a TCP forwarder from a loopback port to one target address, put
// between the nodes of a test cluster so a test can cut a link and heal it
// (a network partition) without touching the processes.
//
// Every accepted connection is paired with a new connection to the target,
// and bytes flow both ways until either side closes; closing one side closes
// the other. Cut closes every open pair and makes the proxy refuse new
// connections (accepted and closed at once: the dialer sees a reset or EOF, as
// after a peer crash) until Heal. CutPeer does the same for the connections
// that one peer opened, as told by ProxyOptions.Identify.
//
// Lock rule: mu guards the cut state and the set of open pairs. A pair is
// added to the set only while mu is held and the proxy is not cut for its
// peer, so Cut, which closes the set under mu, never misses a pair.
type Proxy struct {
	ln       net.Listener
	target   string
	identify func(c net.Conn) string
	wg       sync.WaitGroup // the accept loop and the copy goroutines

	mu struct {
		sync.Mutex
		cut    bool            // all connections refused
		peers  map[string]bool // peers whose connections are refused
		closed bool
		pairs  map[*proxyPair]struct{}
	}
}

// ProxyOptions are optional settings of NewProxy.
type ProxyOptions struct {
	// Identify names the peer that opened an accepted connection ("" =
	// unknown), e.g. from its remote address. CutPeer cuts the connections
	// of one name. It is called once per connection, before any forwarding.
	Identify func(c net.Conn) string
}

// proxyPair is one forwarded connection: the accepted side and the target side.
type proxyPair struct {
	peer      string
	in, out   net.Conn
	closeOnce sync.Once
	proxy     *Proxy
}

// close closes both sides and removes the pair from its proxy.
func (c *proxyPair) close() {
	c.closeOnce.Do(func() {
		c.in.Close()
		c.out.Close()
		p := c.proxy
		p.mu.Lock()
		delete(p.mu.pairs, c)
		p.mu.Unlock()
	})
}

// proxyDialTimeout bounds the dial of the target for one accepted connection.
const proxyDialTimeout = 5 * time.Second

// NewProxy starts a proxy on 127.0.0.1:0 forwarding to target (host:port).
// The target need not be listening yet: a connection accepted while it is not
// is closed.
func NewProxy(target string, opt ProxyOptions) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, identify: opt.Identify}
	p.mu.peers = map[string]bool{}
	p.mu.pairs = map[*proxyPair]struct{}{}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// StartProxy is NewProxy that fails the test on error and closes the proxy
// when the test ends.
func StartProxy(t testing.TB, target string, opt ProxyOptions) *Proxy {
	t.Helper()
	p, err := NewProxy(target, opt)
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// Addr is the proxy's host:port; dial it instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target is the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Cut closes every open connection and refuses new ones until Heal.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.mu.cut = true
	pairs := p.pairsLocked("", true)
	p.mu.Unlock()
	closePairs(pairs)
}

// Heal undoes Cut: new connections are forwarded again (peers cut with
// CutPeer stay cut).
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.mu.cut = false
	p.mu.Unlock()
}

// CutPeer closes the open connections that peer opened (as named by
// ProxyOptions.Identify) and refuses its new ones until HealPeer.
func (p *Proxy) CutPeer(peer string) {
	p.mu.Lock()
	p.mu.peers[peer] = true
	pairs := p.pairsLocked(peer, false)
	p.mu.Unlock()
	closePairs(pairs)
}

// HealPeer undoes CutPeer.
func (p *Proxy) HealPeer(peer string) {
	p.mu.Lock()
	delete(p.mu.peers, peer)
	p.mu.Unlock()
}

// Conns is the number of open forwarded connections.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.mu.pairs)
}

// Close stops accepting, closes every connection and waits for the proxy's
// goroutines to end.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		return nil
	}
	p.mu.closed = true
	pairs := p.pairsLocked("", true)
	p.mu.Unlock()
	err := p.ln.Close()
	closePairs(pairs)
	p.wg.Wait()
	return err
}

// pairsLocked returns the open pairs of peer (every pair with all).
func (p *Proxy) pairsLocked(peer string, all bool) []*proxyPair {
	var out []*proxyPair
	for c := range p.mu.pairs {
		if all || c.peer == peer {
			out = append(out, c)
		}
	}
	return out
}

func closePairs(pairs []*proxyPair) {
	for _, c := range pairs {
		c.close()
	}
}

// refusedLocked reports whether a new connection of peer must be refused.
func (p *Proxy) refusedLocked(peer string) bool {
	return p.mu.closed || p.mu.cut || (peer != "" && p.mu.peers[peer])
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// A transient accept error (e.g. out of file descriptors): keep serving.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		p.wg.Add(1)
		go p.serve(in)
	}
}

// serve forwards one accepted connection, or closes it when refused.
func (p *Proxy) serve(in net.Conn) {
	defer p.wg.Done()
	peer := ""
	if p.identify != nil {
		peer = p.identify(in)
	}
	p.mu.Lock()
	refused := p.refusedLocked(peer)
	p.mu.Unlock()
	if refused {
		in.Close()
		return
	}
	out, err := net.DialTimeout("tcp", p.target, proxyDialTimeout)
	if err != nil {
		in.Close()
		return
	}
	c := &proxyPair{peer: peer, in: in, out: out, proxy: p}
	p.mu.Lock()
	if p.refusedLocked(peer) {
		// Cut while we dialled.
		p.mu.Unlock()
		in.Close()
		out.Close()
		return
	}
	p.mu.pairs[c] = struct{}{}
	p.mu.Unlock()

	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		// Errors end the copy; either way both sides are closed.
		_, _ = io.Copy(out, in)
		c.close()
	}()
	_, _ = io.Copy(in, out)
	c.close()
}
