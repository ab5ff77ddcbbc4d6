package security

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
)

// Wire is the TCP connection under a TLS connection's crypto/tls.Conn. crypto/tls moves
// one record (at most 16 KiB of data) per system call each way: it reads the socket into
// its record buffer about a record at a time, and writes each record it seals with its own
// write. A 1 MiB request was thus 64 writes, each waking the reader, which read about one
// record per system call. Wire batches both ways:
//
//   - Reads: once a read fills the caller's slice (more bytes are likely waiting), reads
//     are served from a buffer filled by reads of up to wireChunk, so one system call brings
//     several records. The buffer is taken from wirePool then and given back once a read
//     drains it wanting more, so a connection waiting for its next request holds none: idle
//     connections stay as cheap as without TLS. The broker's listeners read through a Wire.
//   - Writes: between Cork and Uncork (around one tls.Conn.Write: a request), the records
//     crypto/tls writes are gathered, up to corkMax, and Uncork writes them with one system
//     call: a producer's request of 1 MiB leaves whole, as it would in plaintext. Clients
//     cork (WireConn: the command-line tools, the broker's own connections), which costs
//     the client one more copy of its records and saves the broker most of its wake-ups
//     and short reads: a request written in pieces wakes the broker for each and is read
//     in whatever part has arrived. The broker does not cork its answers: for a fetch
//     that cost it more than the system calls it saved. Writes outside a cork (the
//     handshake, which crypto/tls gathers itself) go straight to the socket; a close_notify
//     alert a Close on another goroutine writes during a cork leaves with the gathered
//     records, or not at all once the socket is closed.
//
// Reads come from crypto/tls under its input lock, so the read side needs no lock of its
// own. Writes come from the writer's goroutine and from a Close on another one (its alert),
// so the write side is under mu.
type Wire struct {
	net.Conn

	rbuf *[]byte // buffered read bytes are (*rbuf)[r:w]; nil while none
	r, w int

	mu     sync.Mutex
	corked bool
	wbuf   *[]byte // records gathered while corked; nil while not corked
}

// wireChunk is the most one read system call of a Wire moves, and the size of its pooled
// buffers: eight TLS records of the largest size a peer may send (RFC 8446: 2^14 bytes of
// data and 256 of expansion; TLS 1.2 allows 2048).
const wireChunk = 8 * (5 + 1<<14 + 2048)

var wirePool = sync.Pool{New: func() any { b := make([]byte, wireChunk); return &b }}

// corkMax is the most a cork gathers before it writes: the records of a whole request of
// 1 MiB (Kafka's default max.request.size, the tools' batch size). Measured with `gregor
// bench produce` over TLS (docs/benchmarks.md), writing a request whole instead of eight
// records at a time cut the broker's CPU per GiB produced by a tenth (0.97 to 0.86 s) and
// brought produce from 67% to 71% of plaintext throughput (medians of 8 paired rounds).
const corkMax = 64 * (5 + 1<<14 + 2048)

// corkPool holds the buffers corks gather in; one grows up to corkMax as a request needs.
var corkPool = sync.Pool{New: func() any { b := make([]byte, 0, wireChunk); return &b }}

func (t *Wire) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if t.rbuf == nil {
		if len(p) >= wireChunk {
			return t.Conn.Read(p)
		}
		n, err := t.Conn.Read(p)
		if n < len(p) || err != nil {
			return n, err
		}
		// The caller's slice is full: more is likely waiting, so buffer from now on.
		t.rbuf = wirePool.Get().(*[]byte)
		t.r, t.w = 0, 0
		return n, nil
	}
	if t.r == t.w {
		m, err := t.Conn.Read((*t.rbuf)[:wireChunk])
		t.r, t.w = 0, m
		if m == 0 {
			t.release()
			return 0, err
		}
		// An error with bytes is returned by the next read, which finds none.
	}
	n := copy(p, (*t.rbuf)[t.r:t.w])
	t.r += n
	if t.r == t.w && n < len(p) {
		// Drained by a read that wanted more: the caller is about to wait for the socket,
		// and waits without a buffer.
		t.release()
	}
	return n, nil
}

func (t *Wire) release() {
	wirePool.Put(t.rbuf)
	t.rbuf = nil
}

// NewWire wraps the TCP connection a tls.Server or tls.Client is to run over.
func NewWire(nc net.Conn) *Wire { return &Wire{Conn: nc} }

// Cork starts gathering writes until Uncork.
func (t *Wire) Cork() {
	t.mu.Lock()
	t.corked = true
	t.mu.Unlock()
}

// Uncork writes what Cork gathered and stops gathering.
func (t *Wire) Uncork() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.corked = false
	return t.flushLocked()
}

func (t *Wire) flushLocked() error {
	if t.wbuf == nil {
		return nil
	}
	b := *t.wbuf
	_, err := t.Conn.Write(b)
	*t.wbuf = b[:0]
	corkPool.Put(t.wbuf)
	t.wbuf = nil
	return err
}

func (t *Wire) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.corked {
		if err := t.flushLocked(); err != nil {
			return 0, err
		}
		return t.Conn.Write(p)
	}
	if t.wbuf != nil && len(*t.wbuf)+len(p) > corkMax {
		if err := t.flushLocked(); err != nil {
			return 0, err
		}
	}
	if len(p) > corkMax {
		return t.Conn.Write(p)
	}
	if t.wbuf == nil {
		t.wbuf = corkPool.Get().(*[]byte)
		*t.wbuf = (*t.wbuf)[:0]
	}
	*t.wbuf = append(*t.wbuf, p...)
	return len(p), nil
}

// WireConn is a TLS connection over a Wire whose every Write is corked: a request of
// 1 MiB leaves in one write instead of 64 of one record each. Clients use
// it (the command-line tools' franz-go dialer, Client.Wrap); the server does not cork. Writes
// may come from several goroutines: every byte passes through the Wire under its lock in
// the order crypto/tls sealed it, so a Write that ends another's cork early costs batching,
// never order.
type WireConn struct {
	*tls.Conn
	wire *Wire
}

// Write seals b into records and writes them together, corkMax at a time.
func (c *WireConn) Write(b []byte) (int, error) {
	c.wire.Cork()
	n, err := c.Conn.Write(b)
	if ferr := c.wire.Uncork(); err == nil {
		err = ferr
	}
	return n, err
}

// DialWire dials addr over TCP and runs a TLS client handshake over a Wire (cfg's
// ServerName defaults to the host of addr, as crypto/tls's own Dial does).
func DialWire(ctx context.Context, d *net.Dialer, network, addr string, cfg *tls.Config) (*WireConn, error) {
	nc, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			nc.Close()
			return nil, err
		}
		cfg = cfg.Clone()
		cfg.ServerName = host
	}
	w := NewWire(nc)
	tc := tls.Client(w, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	return &WireConn{Conn: tc, wire: w}, nil
}
