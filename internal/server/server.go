// Package server owns the listeners and connection loops: it frames requests, decodes them
// with kmsg after checking the API key and version, hands them to the api handler and writes
// the replies back in order.
//
// It also holds the contract between the loop and the handlers (a broker's internal/api and
// a controller's internal/controller/rpc): Handler, Reply and Conn (reply.go), and the table
// type each handler lists its API keys in (APIs, apis.go). It imports nothing above it.
package server

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/authz"
	"github.com/gregor-project/gregor/internal/observe"
	"github.com/gregor-project/gregor/internal/quota"
	"github.com/gregor-project/gregor/internal/security"
)

// Handler is what the connection loop dispatches to (api.Handler implements it).
type Handler interface {
	// Versions is the [min, max] version range served for an API key; ok false if unserved.
	Versions(key int16) (min, max int16, ok bool)
	// Handle answers one decoded request.
	Handle(ctx context.Context, c *Conn, req kmsg.Request) Reply
	// UnsupportedApiVersions is the KIP-511 answer to an ApiVersions of unknown version.
	UnsupportedApiVersions() kmsg.Response
	// MaxRequestBytes is socket.request.max.bytes.
	MaxRequestBytes() int32
}

// Limits are a server's resource limits, from the broker's configuration.
type Limits struct {
	// Pool bounds the bytes of requests read and not yet handled (queued.max.request.bytes);
	// nil for no bound. A broker's listeners share one pool, as Kafka's SocketServer does.
	Pool *MemoryPool
	// MaxIdle is connections.max.idle.ms: a connection with no request for that long after
	// its last answer is closed, and so is one whose request has not arrived whole that long
	// after its first byte. Negative: neither.
	MaxIdle time.Duration
	// Conns are the connection limits (max.connections and friends, the ip
	// connection_creation_rate quota), shared by a broker's listeners; nil for none.
	Conns *ConnQuotas
	// IPQuotas returns the client quotas in force (the metadata image's), for the ip
	// connection_creation_rate quota; nil for none.
	IPQuotas func() quota.Table
}

// Server accepts connections on one listener.
type Server struct {
	handler Handler
	log     *slog.Logger
	name    string
	limits  Limits             // set before Serve, read-only after
	sec     *security.Listener // set before Serve, read-only after; nil: PLAINTEXT
	tlsDone bool               // set before Serve, read-only after: connections arrive with TLS done
	metrics *observe.Requests  // set before Serve, read-only after; nil: requests are not timed

	stopped chan struct{} // closed by StopAccepting
	grace   atomic.Int64  // UnixNano of Close's write deadline for every connection; 0 until Close

	mu struct {
		sync.Mutex
		ln      net.Listener
		conns   map[net.Conn]struct{}
		stopped bool
	}
	wg sync.WaitGroup
}

// New creates a server for the named listener (e.g. PLAINTEXT).
func New(name string, h Handler, log *slog.Logger) *Server {
	s := &Server{handler: h, log: log, name: name, stopped: make(chan struct{}), limits: Limits{MaxIdle: -1}}
	s.mu.conns = make(map[net.Conn]struct{})
	return s
}

// SetLimits sets the server's limits; it must be called before Serve. Without it a server
// has none.
func (s *Server) SetLimits(l Limits) { s.limits = l }

// SetSecurity sets how the listener's connections are encrypted and authenticated; it must be
// called before Serve. Without it a server is PLAINTEXT: every connection is ANONYMOUS.
func (s *Server) SetSecurity(l *security.Listener) { s.sec = l }

// SetSecurityAfterTLS is SetSecurity for a server whose connections arrive with TLS
// already done: it accepts on a Mux over a TLS listener (the controller listener, where
// TLS comes before the split between raft and the Kafka protocol). The server does not
// handshake again; it takes each connection's TLS state (TLSState), closes one that has
// none, and goes on with the listener's SASL. It must be called before Serve, and l must
// be a TLS listener.
func (s *Server) SetSecurityAfterTLS(l *security.Listener) { s.sec, s.tlsDone = l, true }

// SetMetrics makes the server time every request it answers into m (Kafka's RequestMetrics);
// it must be called before Serve.
func (s *Server) SetMetrics(m *observe.Requests) { s.metrics = m }

// Connections is the number of connections open on the listener now.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.conns)
}

// Name is the listener's name.
func (s *Server) Name() string { return s.name }

func (s *Server) maxRequest() int32 { return s.handler.MaxRequestBytes() }

// Listen binds addr; Serve must be called next.
func (s *Server) Listen(addr string) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.mu.ln = ln
	s.mu.Unlock()
	return ln.Addr(), nil
}

// Use makes the server accept on an already-bound listener (for example a Mux half) instead
// of one Listen binds; Serve must be called next.
func (s *Server) Use(ln net.Listener) {
	s.mu.Lock()
	s.mu.ln = ln
	s.mu.Unlock()
}

// Serve accepts connections until Close.
func (s *Server) Serve(ctx context.Context) error {
	s.mu.Lock()
	ln := s.mu.ln
	s.mu.Unlock()
	retry := acceptRetry{log: s.log.With("listener", s.name)}
	for {
		nc, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			select {
			case <-time.After(retry.failed(err)):
			case <-s.stopped:
			}
			continue
		}
		retry.succeeded()
		slot, delay, ok := s.admit(nc)
		if !ok {
			continue
		}
		// Register under the lock that StopAccepting takes: a connection accepted as the
		// server stops is closed here, never missed by Close nor added to wg after Wait.
		s.mu.Lock()
		if s.mu.stopped {
			s.mu.Unlock()
			nc.Close()
			if slot != nil {
				slot.Release()
			}
			return nil
		}
		s.mu.conns[nc] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			if delay > 0 {
				s.closeLater(nc, delay)
			} else {
				s.serveConn(ctx, nc, slot)
			}
			s.mu.Lock()
			delete(s.mu.conns, nc)
			s.mu.Unlock()
		}()
	}
}

// serveConn serves one admitted connection until it closes, then gives its slot back.
func (s *Server) serveConn(ctx context.Context, nc net.Conn, slot *ConnSlot) {
	if slot != nil {
		defer slot.Release()
	}
	c := &conn{
		srv:  s,
		nc:   nc,
		slot: slot,
		info: Conn{RemoteAddr: nc.RemoteAddr().String(), Listener: s.name, Principal: authz.Anonymous},
		log:  s.log.With("remote", nc.RemoteAddr().String()),
	}
	if c.secure() {
		c.br = bufio.NewReaderSize(c.nc, 4096)
		c.serve(ctx)
	} else {
		nc.Close()
	}
}

// admit applies the connection limits to a connection just accepted (ConnQuotas): it waits
// out the listener's creation-rate throttle and, while the listener or the broker holds its
// max.connections, for a connection to close; meanwhile this listener accepts nothing more.
// Then it either admits the connection (slot, nil without limits), or refuses it: at once
// (ok false, the connection closed) or, over its address's connection_creation_rate, after
// delay (the connection is to be closed then, never served). ok is false too when the server
// stops while waiting.
func (s *Server) admit(nc net.Conn) (slot *ConnSlot, delay time.Duration, ok bool) {
	q := s.limits.Conns
	if q == nil {
		return nil, 0, true
	}
	ip := remoteIP(nc)
	if d := q.Throttle(s.name, time.Now()); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-s.stopped:
			t.Stop()
			nc.Close()
			return nil, 0, false
		}
	}
	for {
		var quotas quota.Table
		if s.limits.IPQuotas != nil {
			quotas = s.limits.IPQuotas()
		}
		a := q.Admit(s.name, ip, quotas, func() { nc.Close() }, time.Now())
		for _, v := range a.Evict {
			s.log.Info("closing the least recently active connection: the broker is over max.connections", "listener", v.Listener(), "remote", v.IP().String())
			v.Close()
		}
		var tooMany *TooManyConnectionsError
		var throttled *ConnectionThrottledError
		switch {
		case a.Slot != nil:
			return a.Slot, 0, true
		case errors.As(a.Refused, &tooMany):
			s.log.Info("rejected connection: max.connections.per.ip", "listener", s.name, "remote", nc.RemoteAddr().String(), "err", a.Refused)
			nc.Close()
			return nil, 0, false
		case errors.As(a.Refused, &throttled):
			s.log.Debug("delaying the close of a connection over its connection_creation_rate quota", "listener", s.name, "remote", nc.RemoteAddr().String(), "throttle", throttled.Throttle)
			return nil, throttled.Throttle, true
		}
		select {
		case <-a.Wait:
		case <-s.stopped:
			nc.Close()
			return nil, 0, false
		}
	}
}

// closeLater closes a refused connection after delay, or sooner when the server stops.
func (s *Server) closeLater(nc net.Conn, delay time.Duration) {
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.stopped:
	}
	nc.Close()
}

// remoteIP is the address nc comes from (the zero Addr if it is not an IP address).
func remoteIP(nc net.Conn) netip.Addr {
	if ta, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		return ta.AddrPort().Addr().Unmap()
	}
	ap, err := netip.ParseAddrPort(nc.RemoteAddr().String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// StopAccepting closes the listener; connections stay open.
func (s *Server) StopAccepting() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.ln != nil {
		s.mu.ln.Close()
	}
	if !s.mu.stopped {
		s.mu.stopped = true
		close(s.stopped)
	}
}

// shutdownWriteGrace is how long Close lets an in-flight answer take to be written: a client
// that stopped reading its socket would otherwise block the write, and so shutdown, forever.
const shutdownWriteGrace = 5 * time.Second

// Close stops accepting, closes every connection's read side so in-flight requests finish
// and are answered (within shutdownWriteGrace), then waits for the connection goroutines.
func (s *Server) Close() {
	s.StopAccepting()
	grace := time.Now().Add(shutdownWriteGrace)
	s.grace.Store(grace.UnixNano())
	s.mu.Lock()
	for nc := range s.mu.conns {
		if err := nc.SetWriteDeadline(grace); err != nil {
			nc.Close()
			continue
		}
		// Closing the read side ends the loop after the in-flight request is answered.
		if cr, ok := nc.(interface{ CloseRead() error }); ok { // *net.TCPConn, or a Mux's conn
			if err := cr.CloseRead(); err != nil {
				nc.Close()
			}
		} else {
			nc.Close()
		}
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// acceptLogEvery is how often a listener whose Accept keeps failing logs it.
const acceptLogEvery = 10 * time.Second

// acceptRetry paces an accept loop whose Accept fails, typically because the process is out of
// file descriptors (EMFILE, ENFILE): the listener stays readable, so retrying at once would
// spin a core and flood the log. Kafka's acceptor logs the error and goes on selecting; here
// the loop waits 5 ms doubling to 1 s between attempts (as net/http does), so it accepts again
// within a second once descriptors are free, and logs the first failure, then at most one line
// every acceptLogEvery with the count of failures since, and one line when accepting works again.
type acceptRetry struct {
	log      *slog.Logger
	backoff  time.Duration // wait before the next attempt; 0 while Accept works
	failures int           // failed attempts not yet logged
	logged   time.Time     // when the last failure line was written
}

// failed records a failed Accept and returns how long to wait before the next one.
func (r *acceptRetry) failed(err error) time.Duration {
	first := r.backoff == 0
	r.backoff = min(max(2*r.backoff, 5*time.Millisecond), time.Second)
	r.failures++
	if now := time.Now(); first || now.Sub(r.logged) >= acceptLogEvery {
		r.log.Warn("accept failed", "err", err, "failures", r.failures, "retry_in", r.backoff)
		r.failures, r.logged = 0, now
	}
	return r.backoff
}

// succeeded records a working Accept.
func (r *acceptRetry) succeeded() {
	if r.backoff == 0 {
		return
	}
	r.log.Info("accepting connections again", "failures_not_logged", r.failures)
	r.backoff, r.failures = 0, 0
}
