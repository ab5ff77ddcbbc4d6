// Package wire is the broker's own Kafka-protocol client connection: what a broker uses to
// talk to the controller quorum (registration, heartbeats, AlterPartition, forwarded admin
// requests, the metadata log) and to other brokers (follower fetches). It speaks the
// protocol with franz-go's kmsg types and nothing more: no version negotiation, no
// retries, no metadata; callers pick versions and handle errors.
//
// A Conn pipelines: several goroutines may send requests at once; each waits for the
// answer with its correlation id (Kafka answers a connection's requests in order). The
// first read or write failure fails every waiting request and the connection is dead
// (Err returns the cause); callers dial a new one.
package wire

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/security"
)

// MaxResponseBytes bounds a response frame; anything larger kills the connection.
const MaxResponseBytes = 256 << 20

// ErrClosed is returned for requests on a closed or failed connection.
var ErrClosed = errors.New("wire: connection closed")

// Conn is one client connection. Safe for concurrent use.
type Conn struct {
	nc  net.Conn
	fmt *kmsg.RequestFormatter

	wmu sync.Mutex // serialises writes; also guards corr
	buf []byte

	mu      sync.Mutex // guards pending and err
	corr    int32
	pending map[int32]*call
	err     error
	done    chan struct{}

	// Session renewal (KIP-368). A server that limits the session's lifetime closes the
	// connection at its first request past it, so before that point (renewalShare of the
	// lifetime) the next Request re-authenticates on the same connection first. The server
	// takes requests in order, so requests already sent are answered before the handshake;
	// renewMu keeps other requests from being sent between its frames: each send holds it
	// shared, a re-authentication exclusively. Lock order: renewMu, then wmu, then mu.
	sec     *security.Client
	host    string // the host dialled, which GSSAPI's ticket names
	renewMu sync.RWMutex
	renewAt atomic.Int64 // UnixNano when the session must be renewed; 0: never
}

// renewalShare is the share of a session's lifetime after which it is renewed (Kafka's
// clients pick a point between 85% and 95%).
const renewalShare = 0.85

type call struct {
	req  kmsg.Request
	resp chan result
}

type result struct {
	body []byte
	err  error
}

// Dial connects to addr.
func Dial(ctx context.Context, addr, clientID string) (*Conn, error) {
	return DialSecure(ctx, addr, clientID, nil)
}

// DialSecure connects to addr, running sec's TLS handshake and SASL authentication (nil:
// neither) before the connection is handed out.
func DialSecure(ctx context.Context, addr, clientID string, sec *security.Client) (*Conn, error) {
	return DialVia(ctx, nil, addr, clientID, sec)
}

// DialFunc opens a TCP connection to addr ("tcp" network), as net.Dialer.DialContext does.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// DialVia is DialSecure opening the TCP connection with dial (nil: a net.Dialer): an
// embedding process routes a node's connections to the others through it (embed's
// Isolate cuts them there).
func DialVia(ctx context.Context, dial DialFunc, addr, clientID string, sec *security.Client) (*Conn, error) {
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	nc, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	host, _, _ := net.SplitHostPort(addr)
	if nc, err = sec.Wrap(ctx, nc, host); err != nil {
		return nil, err
	}
	c := newConn(nc, clientID)
	c.sec, c.host = sec, host
	lifetime, err := sec.Authenticate(ctx, host, c.roundTrip)
	if err != nil {
		c.Close()
		return nil, err
	}
	c.renewAfter(lifetime)
	return c, nil
}

// renewAfter arms the session's renewal for a session of the given lifetime (0: none).
func (c *Conn) renewAfter(lifetime time.Duration) {
	if lifetime <= 0 {
		c.renewAt.Store(0)
		return
	}
	c.renewAt.Store(time.Now().Add(time.Duration(float64(lifetime) * renewalShare)).UnixNano())
}

// renew re-authenticates the connection when its session is due (see Conn).
func (c *Conn) renew(ctx context.Context) error {
	c.renewMu.Lock()
	defer c.renewMu.Unlock()
	at := c.renewAt.Load()
	if at == 0 || time.Now().UnixNano() < at {
		return nil // renewed by another request meanwhile
	}
	lifetime, err := c.sec.Authenticate(ctx, c.host, c.roundTrip)
	if err != nil {
		err = fmt.Errorf("wire: re-authenticating: %w", err)
		c.fail(err)
		return err
	}
	c.renewAfter(lifetime)
	return nil
}

func newConn(nc net.Conn, clientID string) *Conn {
	c := &Conn{
		nc:      nc,
		fmt:     kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID)),
		pending: map[int32]*call{},
		done:    make(chan struct{}),
	}
	go c.readLoop()
	return c
}

// Addr is the remote address.
func (c *Conn) Addr() string { return c.nc.RemoteAddr().String() }

// Err is the reason the connection failed, nil while it is usable.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close closes the connection; waiting requests fail with ErrClosed.
func (c *Conn) Close() error {
	c.fail(ErrClosed)
	return nil
}

// Request sends req (at the version set on it) and waits for its answer. When ctx ends
// first the connection is closed (its answer would otherwise arrive for nobody and a later
// request could not tell), and ctx's error returned.
func (c *Conn) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	if at := c.renewAt.Load(); at != 0 && time.Now().UnixNano() >= at {
		if err := c.renew(ctx); err != nil {
			return nil, err
		}
	}
	c.renewMu.RLock()
	cl, err := c.send(ctx, req)
	c.renewMu.RUnlock()
	if err != nil {
		return nil, err
	}
	return c.wait(ctx, req, cl)
}

// roundTrip sends req and waits for its answer, without renewMu: the authentication's own
// requests (it holds renewMu, or nothing else uses the connection yet).
func (c *Conn) roundTrip(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	cl, err := c.send(ctx, req)
	if err != nil {
		return nil, err
	}
	return c.wait(ctx, req, cl)
}

// send writes req and registers the call its answer goes to.
func (c *Conn) send(ctx context.Context, req kmsg.Request) (*call, error) {
	cl := &call{req: req, resp: make(chan result, 1)}
	c.wmu.Lock()
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		c.wmu.Unlock()
		return nil, err
	}
	corr := c.corr
	c.corr++
	c.pending[corr] = cl
	c.mu.Unlock()
	c.buf = c.fmt.AppendRequest(c.buf[:0], req, corr)
	if dl, ok := ctx.Deadline(); ok {
		c.nc.SetWriteDeadline(dl)
	} else {
		c.nc.SetWriteDeadline(time.Time{})
	}
	_, err := c.nc.Write(c.buf)
	if cap(c.buf) > 1<<20 {
		c.buf = nil
	}
	c.wmu.Unlock()
	if err != nil {
		c.fail(err)
		return nil, err
	}
	return cl, nil
}

// wait waits for the answer to a sent call.
func (c *Conn) wait(ctx context.Context, req kmsg.Request, cl *call) (kmsg.Response, error) {
	select {
	case r := <-cl.resp:
		if r.err != nil {
			return nil, r.err
		}
		resp := req.ResponseKind()
		resp.SetVersion(req.GetVersion())
		if err := resp.ReadFrom(r.body); err != nil {
			return nil, fmt.Errorf("wire: decoding %s response v%d: %w", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
		}
		return resp, nil
	case <-ctx.Done():
		c.fail(ctx.Err())
		return nil, ctx.Err()
	}
}

// fail marks the connection dead with err and answers every waiting request.
func (c *Conn) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
		if err != ErrClosed {
			c.err = fmt.Errorf("wire: connection to %s: %w", c.nc.RemoteAddr(), err)
		}
		close(c.done)
		c.nc.Close()
	}
	for k, cl := range c.pending {
		cl.resp <- result{err: c.err}
		delete(c.pending, k)
	}
	c.mu.Unlock()
}

func (c *Conn) readLoop() {
	br := bufio.NewReaderSize(c.nc, 64<<10)
	var hdr [8]byte
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			c.fail(err)
			return
		}
		size := int32(binary.BigEndian.Uint32(hdr[:4]))
		corr := int32(binary.BigEndian.Uint32(hdr[4:]))
		if size < 4 || size > MaxResponseBytes {
			c.fail(fmt.Errorf("response frame of %d bytes", size))
			return
		}
		c.mu.Lock()
		cl := c.pending[corr]
		delete(c.pending, corr)
		c.mu.Unlock()
		if cl == nil {
			c.fail(fmt.Errorf("response with unknown correlation id %d", corr))
			return
		}
		body := make([]byte, size-4)
		if _, err := io.ReadFull(br, body); err != nil {
			cl.resp <- result{err: err}
			c.fail(err)
			return
		}
		// Flexible responses (except ApiVersions, whose header stays v0) carry a tag buffer
		// after the correlation id.
		if cl.req.IsFlexible() && cl.req.Key() != kmsg.ApiVersions.Int16() {
			rest, err := skipTags(body)
			if err != nil {
				cl.resp <- result{err: err}
				c.fail(err)
				return
			}
			body = rest
		}
		cl.resp <- result{body: body}
	}
}

func skipTags(b []byte) ([]byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, errors.New("wire: bad response header tags")
	}
	b = b[k:]
	for range n {
		_, k = binary.Uvarint(b)
		if k <= 0 {
			return nil, errors.New("wire: bad response header tag")
		}
		b = b[k:]
		size, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < size {
			return nil, errors.New("wire: bad response header tag size")
		}
		b = b[k+int(size):]
	}
	return b, nil
}
