package server

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Mux splits one listener in two by the first bytes of each accepted connection: a
// connection that starts with the magic goes to Matched, any other to Other. Both see the
// connection from its first byte (the peeked bytes are replayed).
//
// The controller uses it to serve raft peer traffic (which starts with the quorum's hello
// magic) and the Kafka protocol (a request size first) on the one CONTROLLER port.
//
// Over TLS: ln may be a TLS listener (tls.NewListener), whose connections handshake on
// their first read. The peek is that read, so the handshake runs in the peek's goroutine
// under the same deadline, and the halves split the decrypted stream; TLSState gives the
// state of a connection either half hands out. A failed handshake is logged and closes the
// connection.
//
// The accept loop never reads: each accepted connection is peeked in its own goroutine
// with a read deadline (PeekTimeout), so a client that connects and sends nothing holds up
// no one and is closed when the deadline passes. Closing the parent listener (or the Mux)
// closes both halves; closing one half refuses its later connections and leaves the other
// working; once both halves are closed the parent is closed too.
type Mux struct {
	ln      net.Listener
	magic   []byte
	timeout time.Duration
	log     *slog.Logger
	matched *muxListener
	other   *muxListener
	done    chan struct{} // closed when the accept loop ends

	mu struct {
		sync.Mutex
		peeking map[net.Conn]struct{} // connections being peeked, closed by Close
		closed  bool
	}
	wg sync.WaitGroup
}

// PeekTimeout is how long a new connection has to send its first bytes.
const PeekTimeout = 5 * time.Second

// NewMux starts splitting ln by magic (which must not be empty).
func NewMux(ln net.Listener, magic string, log *slog.Logger) *Mux {
	return newMux(ln, magic, PeekTimeout, log)
}

func newMux(ln net.Listener, magic string, timeout time.Duration, log *slog.Logger) *Mux {
	if log == nil {
		log = slog.Default()
	}
	m := &Mux{ln: ln, magic: []byte(magic), timeout: timeout, log: log, done: make(chan struct{})}
	m.mu.peeking = map[net.Conn]struct{}{}
	m.matched = newMuxListener(m)
	m.other = newMuxListener(m)
	go m.acceptLoop()
	return m
}

// Matched is the listener of connections that start with the magic.
func (m *Mux) Matched() net.Listener { return m.matched }

// Other is the listener of every other connection.
func (m *Mux) Other() net.Listener { return m.other }

// Addr is the parent listener's address.
func (m *Mux) Addr() net.Addr { return m.ln.Addr() }

// Close closes the parent listener, both halves and every connection still being peeked,
// and waits for the accept loop and the peeks to end. Connections already handed out are
// their acceptors' to close.
func (m *Mux) Close() error {
	err := m.ln.Close()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	<-m.done
	m.wg.Wait()
	return err
}

func (m *Mux) acceptLoop() {
	defer close(m.done)
	defer func() {
		m.mu.Lock()
		m.mu.closed = true
		for c := range m.mu.peeking {
			c.Close()
		}
		m.mu.Unlock()
		m.matched.close()
		m.other.close()
	}()
	retry := acceptRetry{log: m.log}
	for {
		c, err := m.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(retry.failed(err))
			continue
		}
		retry.succeeded()
		m.mu.Lock()
		if m.mu.closed {
			m.mu.Unlock()
			c.Close()
			return
		}
		m.mu.peeking[c] = struct{}{}
		m.wg.Add(1)
		m.mu.Unlock()
		go m.peek(c)
	}
}

// peek reads the first len(magic) bytes of c and hands it to the half they select.
func (m *Mux) peek(c net.Conn) {
	defer m.wg.Done()
	head := make([]byte, len(m.magic))
	err := c.SetReadDeadline(time.Now().Add(m.timeout))
	if err == nil {
		_, err = io.ReadFull(c, head)
	}
	if err == nil {
		err = c.SetReadDeadline(time.Time{})
	}
	m.mu.Lock()
	delete(m.mu.peeking, c)
	m.mu.Unlock()
	if err != nil {
		if tc, ok := c.(*tls.Conn); ok && !tc.ConnectionState().HandshakeComplete {
			m.log.Info("closing connection: TLS handshake failed", "remote", c.RemoteAddr().String(), "err", err)
		} else {
			m.log.Debug("closing connection that sent no protocol header", "remote", c.RemoteAddr().String(), "err", err)
		}
		c.Close()
		return
	}
	pc := &peekedConn{Conn: c, head: head}
	if bytes.Equal(head, m.magic) {
		m.matched.deliver(pc)
	} else {
		m.other.deliver(pc)
	}
}

// childClosed closes the parent once both halves are closed.
func (m *Mux) childClosed() {
	if m.matched.isClosed() && m.other.isClosed() {
		m.ln.Close()
	}
}

// muxListener is one half of a Mux. Connections wait in an unbuffered hand-off for Accept;
// one delivered to a closed half is closed.
type muxListener struct {
	m     *Mux
	connc chan net.Conn
	once  sync.Once
	donec chan struct{}
}

func newMuxListener(m *Mux) *muxListener {
	return &muxListener{m: m, connc: make(chan net.Conn), donec: make(chan struct{})}
}

func (l *muxListener) deliver(c net.Conn) {
	select {
	case l.connc <- c:
	case <-l.donec:
		c.Close()
	}
}

func (l *muxListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.connc:
		return c, nil
	case <-l.donec:
		return nil, net.ErrClosed
	}
}

func (l *muxListener) close() { l.once.Do(func() { close(l.donec) }) }

func (l *muxListener) isClosed() bool {
	select {
	case <-l.donec:
		return true
	default:
		return false
	}
}

// Close refuses later connections of this half; the other half keeps working.
func (l *muxListener) Close() error {
	l.close()
	l.m.childClosed()
	return nil
}

func (l *muxListener) Addr() net.Addr { return l.m.ln.Addr() }

// peekedConn replays the peeked bytes before reading on from the connection. CloseRead
// and CloseWrite reach the TCP connection underneath, so Server.Close can still close only
// the read side; there is no sendfile through it (the server then gathers file parts).
type peekedConn struct {
	net.Conn
	head []byte // peeked bytes not yet read again
}

func (c *peekedConn) Read(b []byte) (int, error) {
	if len(c.head) > 0 {
		n := copy(b, c.head)
		c.head = c.head[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}

// CloseRead closes the read side of the TCP connection, underneath TLS too: the TLS
// reader then sees the end of the stream, and answers can still be written.
func (c *peekedConn) CloseRead() error {
	nc := c.Conn
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	if cr, ok := nc.(interface{ CloseRead() error }); ok {
		return cr.CloseRead()
	}
	return c.Conn.Close()
}

// TLSState is the state of a connection a Mux over a TLS listener handed out (or of a
// *tls.Conn), with its handshake done; ok is false for a connection without TLS or whose
// handshake is not done.
func TLSState(c net.Conn) (tls.ConnectionState, bool) {
	if pc, ok := c.(*peekedConn); ok {
		c = pc.Conn
	}
	tc, ok := c.(*tls.Conn)
	if !ok {
		return tls.ConnectionState{}, false
	}
	st := tc.ConnectionState()
	return st, st.HandshakeComplete
}

func (c *peekedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}
