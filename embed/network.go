package embed

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"syscall"

	"github.com/gregor-project/gregor/internal/wire"
)

// network carries the connections the nodes of a Cluster open to each other, so that
// Isolate can cut one node off: every such connection is dialled through the dialer of the
// node that opens it (broker.Options.Dial), and the node it reaches is known by the port
// dialled (every port of a cluster is bound by it and owned by one node).
//
// A link between two different nodes is cut exactly when one of them is isolated: its open
// connections are closed (each side sees the connection reset, as after a peer's crash) and
// new ones are refused (ECONNREFUSED) until Heal. A node's connections to itself and every
// client connection (never dialled here) are left alone.
//
// Lock rule: mu guards owner, isolated and conns. A connection is added to conns only with
// mu held and its link not cut, so Isolate, which closes the cut ones under mu, never misses
// one.
type network struct {
	mu struct {
		sync.Mutex
		owner    map[int]int // port -> node id
		isolated map[int]bool
		conns    map[*linkConn]struct{}
	}
}

func newNetwork() *network {
	nw := &network{}
	nw.mu.owner = map[int]int{}
	nw.mu.isolated = map[int]bool{}
	nw.mu.conns = map[*linkConn]struct{}{}
	return nw
}

// own records that node id listens on port.
func (nw *network) own(port, id int) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	nw.mu.owner[port] = id
}

// cutLocked reports whether the link from -> to is cut (to < 0: not a node's port).
func (nw *network) cutLocked(from, to int) bool {
	return to >= 0 && from != to && (nw.mu.isolated[from] || nw.mu.isolated[to])
}

func (nw *network) ownerLocked(addr string) int {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return -1
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return -1
	}
	if id, ok := nw.mu.owner[port]; ok {
		return id
	}
	return -1
}

// dialer is node from's way to the others.
func (nw *network) dialer(from int) wire.DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		nw.mu.Lock()
		to := nw.ownerLocked(addr)
		cut := nw.cutLocked(from, to)
		nw.mu.Unlock()
		if cut {
			return nil, refused(network, addr)
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err != nil || to < 0 || to == from {
			return c, err
		}
		lc := &linkConn{Conn: c, nw: nw, from: from, to: to}
		nw.mu.Lock()
		defer nw.mu.Unlock()
		if nw.cutLocked(from, to) { // isolated while dialling
			c.Close()
			return nil, refused(network, addr)
		}
		nw.mu.conns[lc] = struct{}{}
		return lc, nil
	}
}

func refused(network, addr string) error {
	return &net.OpError{Op: "dial", Net: network, Err: fmt.Errorf("%s: %w (node isolated)", addr, syscall.ECONNREFUSED)}
}

// setIsolated isolates or heals node id, closing the connections of the links it cuts.
func (nw *network) setIsolated(id int, isolated bool) {
	nw.mu.Lock()
	if isolated {
		nw.mu.isolated[id] = true
	} else {
		delete(nw.mu.isolated, id)
	}
	var cut []*linkConn
	for c := range nw.mu.conns {
		if nw.cutLocked(c.from, c.to) {
			cut = append(cut, c)
			delete(nw.mu.conns, c)
		}
	}
	nw.mu.Unlock()
	for _, c := range cut {
		c.Conn.Close()
	}
}

// isIsolated reports whether node id is isolated.
func (nw *network) isIsolated(id int) bool {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	return nw.mu.isolated[id]
}

// linkConn is a connection from one node to another, tracked until closed.
type linkConn struct {
	net.Conn
	nw       *network
	from, to int
	once     sync.Once
}

func (c *linkConn) Close() error {
	c.once.Do(func() {
		c.nw.mu.Lock()
		delete(c.nw.mu.conns, c)
		c.nw.mu.Unlock()
	})
	return c.Conn.Close()
}
