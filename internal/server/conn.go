package server

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"

	"github.com/gregor-project/gregor/internal/observe"
	"github.com/gregor-project/gregor/internal/security"
)

// conn serves one client connection. Requests are read in the order they arrive and answered
// in that order: a client may pipeline many requests, and each is handled to completion
// before the next (as Kafka does by muting a channel while its request is in flight). One
// goroutine per connection and a small read buffer keep idle connections cheap.
//
// A request's buffer and the bytes it holds in the server's MemoryPool are given back by
// releaseRequest: after the request is answered, or earlier when the handler calls
// Conn.Release because it no longer reads the request's bytes (a Produce before it waits
// for acks=all). Everything runs on the connection's goroutine.
type conn struct {
	srv  *Server
	nc   net.Conn
	br   *bufio.Reader
	out  []byte // response encoding buffer, reused
	info Conn
	log  *slog.Logger
	sess *security.Session // nil on a listener without security (every connection ANONYMOUS)
	slot *ConnSlot         // the connection's place in the connection limits; nil without them

	req  *[]byte // the request being handled, until releaseRequest; nil between requests
	held int64   // the bytes it holds in srv.limits.Pool

	throttle time.Duration // the last reply's Reply.Throttle, waited out by mute
	received time.Time     // when the request being handled was read whole
}

// Reasons a connection is closed while waiting for a request.
var (
	errIdle     = errors.New("server: connection idle")
	errStalled  = errors.New("server: request not received in full")
	errStopping = errors.New("server: stopping")
)

func (c *conn) serve(ctx context.Context) {
	defer c.nc.Close()
	c.info.Release = c.releaseRequest
	for {
		bp, err := c.readRequest()
		if err != nil {
			c.logClose(err)
			return
		}
		var keep bool
		if c.sess != nil && (c.sess.ExpectRaw() || c.sess.LegacyGSSAPI(*bp)) {
			keep = c.rawToken(ctx, *bp)
		} else {
			keep = c.handle(ctx, *bp)
		}
		c.releaseRequest()
		if !keep || !c.mute(ctx) {
			return
		}
	}
}

// readRequest waits for the next request and reads it, holding its size in the memory pool.
//
// connections.max.idle.ms bounds both waits: a connection that sends nothing for that long
// after its last answer is idle and closed, as Kafka's Selector closes it; a request whose
// bytes have not all arrived that long after its first byte is dropped, so a client cannot
// hold a connection (and its buffer) by sending a length and stalling or dribbling the rest.
// Time spent waiting for pool memory is the broker's, not the client's: the bound restarts
// when reading resumes.
func (c *conn) readRequest() (*[]byte, error) {
	idle := c.srv.limits.MaxIdle
	if idle >= 0 && c.br.Buffered() == 0 {
		if err := c.nc.SetReadDeadline(time.Now().Add(idle)); err != nil {
			return nil, err
		}
		if _, err := c.br.Peek(1); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				err = errIdle
			}
			return nil, err
		}
	}
	if idle >= 0 {
		if err := c.nc.SetReadDeadline(time.Now().Add(idle)); err != nil {
			return nil, err
		}
	}
	n, err := readSize(c.br, c.maxFrame())
	if err != nil {
		return nil, stalled(err)
	}
	pool := c.srv.limits.Pool
	if pool != nil {
		waited, ok := pool.acquire(int64(n), c.srv.stopped)
		if !ok {
			return nil, errStopping
		}
		if waited && idle >= 0 {
			if err := c.nc.SetReadDeadline(time.Now().Add(idle)); err != nil {
				pool.release(int64(n))
				return nil, err
			}
		}
	}
	bp, err := readBody(c.br, n)
	if err != nil {
		if pool != nil {
			pool.release(int64(n))
		}
		return nil, stalled(err)
	}
	c.req, c.held = bp, int64(n)
	c.received = time.Now()
	if c.slot != nil {
		c.slot.Touch(c.received)
	}
	return bp, nil
}

// stalled names a read deadline that passed inside a request.
func stalled(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return errStalled
	}
	return err
}

// releaseRequest gives the request's buffer back to its pool and its bytes back to the
// memory pool; after the first call it does nothing. The handler's request must no longer be
// read: its byte slices alias the buffer, which another request may now fill.
func (c *conn) releaseRequest() {
	if c.req == nil {
		return
	}
	putBuf(c.req)
	c.req = nil
	if p := c.srv.limits.Pool; p != nil {
		p.release(c.held)
	}
	c.held = 0
}

// logClose says why the connection is closed, unless the client closed it.
func (c *conn) logClose(err error) {
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, errStopping):
	case errors.Is(err, errIdle):
		c.log.Info("closing idle connection: no request for connections.max.idle.ms", "idle", c.srv.limits.MaxIdle)
	case errors.Is(err, errStalled):
		c.log.Info("closing connection: request not received in full within connections.max.idle.ms of its first byte", "limit", c.srv.limits.MaxIdle)
	default:
		c.log.Info("closing connection", "err", err)
	}
}

// handle decodes and answers one request; false closes the connection.
func (c *conn) handle(ctx context.Context, frame []byte) bool {
	h, body, err := parseHeader(frame)
	if err != nil {
		c.log.Info("closing connection: bad request header", "err", err)
		return false
	}
	req := kmsg.RequestForKey(h.key)
	if req == nil {
		c.log.Info("closing connection: unknown api key", "api_key", h.key, "client_id", h.clientID)
		return false
	}
	min, max, ok := c.srv.handler.Versions(h.key)
	if !ok || h.version < min || h.version > max {
		if h.key == kmsg.ApiVersions.Int16() {
			// KIP-511: answer an ApiVersions of a version we do not know in v0 format, with
			// UNSUPPORTED_VERSION and our ranges, so the client can retry with one we do.
			return c.writeMsg(h, c.srv.handler.UnsupportedApiVersions(), 0, false)
		}
		c.log.Info("closing connection: unsupported api version", "api", kmsg.NameForKey(h.key), "version", h.version, "client_id", h.clientID)
		return false
	}
	intercepted, keep := c.admit(h)
	if !keep {
		return false
	}
	req.SetVersion(h.version)
	if req.IsFlexible() {
		if body, err = skipTags(body); err != nil {
			c.log.Info("closing connection", "api", kmsg.NameForKey(h.key), "err", err)
			return false
		}
	}
	if err := req.ReadFrom(body); err != nil {
		c.log.Info("closing connection: malformed request", "api", kmsg.NameForKey(h.key), "version", h.version, "err", err)
		return false
	}
	if intercepted {
		return c.intercept(ctx, h, req)
	}
	c.info.ClientID, c.info.RequestSize = h.clientID, len(frame)
	// The request's phases, for the request metrics (observe.Requests); not read without.
	m := c.srv.metrics
	var t observe.Timing
	if m != nil {
		t.Received, t.Handling = c.received, time.Now()
	}
	reply := c.srv.handler.Handle(ctx, &c.info, req)
	if m != nil {
		t.Handled, t.Remote, t.Throttle = time.Now(), reply.Remote, reply.Throttle
	}
	c.throttle = reply.Throttle
	var written bool
	switch {
	case reply.None:
		if reply.Close {
			c.log.Info("closing connection: acks=0 produce failed", "client_id", h.clientID)
		}
		written = !reply.Close
	case reply.Raw != nil:
		written = c.writeRaw(h, reply.Raw, req.IsFlexible())
	default:
		// ApiVersions responses always use header v0 (no tagged fields), whatever the version.
		flexHeader := req.IsFlexible() && h.key != kmsg.ApiVersions.Int16()
		written = c.writeMsg(h, reply.Msg, h.version, flexHeader)
	}
	if m != nil {
		t.Sent = time.Now()
		m.Observe(h.key, h.version, &t)
	}
	return written
}

// writeMsg encodes a kmsg response with its frame and header and writes it in one call.
func (c *conn) writeMsg(h header, resp kmsg.Response, version int16, flexHeader bool) bool {
	resp.SetVersion(version)
	b := c.responseHeader(h, flexHeader)
	b = resp.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	err := c.armWrite()
	if err == nil {
		_, err = c.nc.Write(b)
	}
	c.recycle(b)
	if err != nil {
		c.writeFailed("write", err)
		return false
	}
	return true
}

func (c *conn) responseHeader(h header, flex bool) []byte {
	b := append(c.out[:0], 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(h.correlationID))
	if flex {
		b = append(b, 0) // no tagged fields
	}
	return b
}

func (c *conn) recycle(b []byte) {
	if cap(b) <= 1<<20 {
		c.out = b[:0]
	} else {
		c.out = nil
	}
}

// File parts of a raw answer up to gatherMax bytes are read (pread at an explicit offset) into
// the write buffer rather than sent by sendfile: a consumer keeping up with many partitions
// gets a small batch from each, and one pread per part plus one write for the whole answer
// costs a third of the syscalls of a write and a sendfile per part (and sends full segments
// instead of one small packet per syscall). Larger parts go by sendfile. The buffer is pooled
// and flushed before it passes gatherLimit, so a connection's memory stays bounded whatever it
// fetches.
const (
	gatherMax   = 64 << 10
	gatherLimit = 1 << 20
)

// gatherPool holds write buffers of gatherCap bytes: appends flush before passing
// gatherLimit, so they never grow (except by a byte part larger than the limit, whose buffer
// is then dropped).
var gatherPool = sync.Pool{New: func() any { b := make([]byte, 0, gatherCap); return &b }}

const gatherCap = gatherLimit + gatherMax

// writeRaw sends a hand-encoded body: byte parts and small file parts are gathered and
// written together, large file parts go by sendfile from an explicit offset (never the
// file's shared position).
func (c *conn) writeRaw(h header, raw *Raw, flex bool) bool {
	defer func() {
		if raw.Done != nil {
			raw.Done()
		}
	}()
	b := c.responseHeader(h, flex)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4+raw.Size()))
	tc, _ := c.nc.(*net.TCPConn) // nil: no sendfile (tests over pipes), everything is gathered
	gp := gatherPool.Get().(*[]byte)
	pending := append((*gp)[:0], b...)
	c.recycle(b)
	defer func() {
		if cap(pending) <= gatherCap {
			*gp = pending[:0]
			gatherPool.Put(gp)
		}
	}()
	flush := func() bool {
		if len(pending) == 0 {
			return true
		}
		err := c.armWrite()
		if err == nil {
			_, err = c.nc.Write(pending)
		}
		pending = pending[:0]
		if err != nil {
			c.writeFailed("write", err)
		}
		return err == nil
	}
	for i := range raw.Parts {
		p := &raw.Parts[i]
		switch {
		case p.File == nil:
			if len(pending) > 0 && len(pending)+len(p.B) > gatherLimit && !flush() {
				return false
			}
			pending = append(pending, p.B...)
		case p.N <= gatherMax || tc == nil:
			for pos, left := p.Pos, p.N; left > 0; {
				if len(pending) > 0 && len(pending)+min(left, gatherMax) > gatherLimit && !flush() {
					return false
				}
				n := min(left, gatherLimit-len(pending))
				var err error
				if pending, err = readInto(pending, p.File, pos, n); err != nil {
					c.log.Debug("reading records failed", "err", err)
					return false
				}
				pos, left = pos+int64(n), left-n
			}
		default:
			if !flush() {
				return false
			}
			if err := sendFile(tc, p.File, p.Pos, p.N, c.armWrite); err != nil {
				c.writeFailed("sendfile", err)
				return false
			}
		}
	}
	return flush()
}

// readInto appends n bytes of f from pos to b (pread: the file's shared offset is not used).
func readInto(b []byte, f *os.File, pos int64, n int) ([]byte, error) {
	b = slices.Grow(b, n)
	m, err := f.ReadAt(b[len(b):len(b)+n], pos)
	if m < n {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF // file shorter than promised
		}
		return b, err
	}
	return b[:len(b)+n], nil
}

// armWrite bounds the next write of an answer: a client that takes none of its bytes for
// connections.max.idle.ms is idle (Kafka's Selector counts a connection idle when no bytes
// move either way) and the write fails, closing the connection. It is called before each
// write and again whenever a sendfile makes progress, so a slow reader is never cut off, only
// one that stopped reading. Once the server stops, Close's shutdownWriteGrace bounds writes
// instead: a deadline set here after Close's is set back to it.
func (c *conn) armWrite() error {
	idle := c.srv.limits.MaxIdle
	if idle < 0 {
		return nil
	}
	if err := c.nc.SetWriteDeadline(time.Now().Add(idle)); err != nil {
		return err
	}
	if grace := c.srv.grace.Load(); grace != 0 {
		return c.nc.SetWriteDeadline(time.Unix(0, grace))
	}
	return nil
}

// writeFailed logs why an answer could not be written; the connection is then closed.
func (c *conn) writeFailed(what string, err error) {
	if errors.Is(err, os.ErrDeadlineExceeded) && c.srv.grace.Load() == 0 {
		c.log.Info("closing connection: the client read nothing of an answer for connections.max.idle.ms", "limit", c.srv.limits.MaxIdle)
		return
	}
	c.log.Debug(what+" failed", "err", err)
}

// sendFile copies n bytes of f from pos to the socket with sendfile(2) at an explicit offset,
// so concurrent fetches of one segment never race on the file position. progress (armWrite)
// is called before the first write and after every write that moved bytes.
func sendFile(tc *net.TCPConn, f *os.File, pos int64, n int, progress func() error) error {
	rc, err := tc.SyscallConn()
	if err != nil {
		return err
	}
	src := int(f.Fd())
	off := pos
	remain := n
	var serr error
	for remain > 0 && serr == nil {
		if err := progress(); err != nil {
			return err
		}
		werr := rc.Write(func(fd uintptr) bool {
			moved := false
			for remain > 0 {
				w, err := unix.Sendfile(int(fd), src, &off, remain)
				if w > 0 {
					remain -= w
					moved = true
				}
				if err == unix.EAGAIN {
					// Wait until writable, under a deadline renewed after progress.
					return moved
				}
				if err == unix.EINTR {
					continue
				}
				if err != nil {
					serr = err
					return true
				}
				if w == 0 {
					serr = io.ErrUnexpectedEOF // file shorter than promised
					return true
				}
			}
			return true
		})
		if werr != nil {
			return werr
		}
	}
	return serr
}
