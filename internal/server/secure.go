package server

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/security"
)

// The security edge of a connection: TLS before the first byte of the Kafka protocol, and
// SASL before the first request past ApiVersions. A connection's Session (internal/security)
// decides what each request may do; this file carries its decisions out on the socket.
//
// Every failure closes the connection with one log line and never reaches the API handler:
// garbage instead of a TLS ClientHello, a plaintext client on a TLS port (its request bytes
// are not a ClientHello), a request before authentication, an oversized SASL frame, or a
// failed authentication (answered after connection.failed.authentication.delay.ms).

// secure runs the TLS handshake of a TLS listener (or takes the state of the one done before
// the connection reached the server: SetSecurityAfterTLS) and starts the connection's
// Session; false closes the connection.
func (c *conn) secure() bool {
	l := c.srv.sec
	if l == nil {
		return true
	}
	var cs *tls.ConnectionState
	if c.srv.tlsDone {
		st, ok := TLSState(c.nc)
		if !ok {
			c.log.Error("closing connection: it should have arrived over TLS", "listener", c.srv.name)
			return false
		}
		cs = &st
	} else if cfg := l.TLS(); cfg != nil {
		// Over a security.Wire: several TLS records a read system call. Its writes are not
		// corked: gathering a fetch answer's records cost the broker more CPU than the
		// system calls it saved (docs/benchmarks.md, "Security: TLS against plaintext").
		tc := tls.Server(security.NewWire(c.nc), cfg)
		if idle := c.srv.limits.MaxIdle; idle >= 0 {
			if err := c.nc.SetDeadline(time.Now().Add(idle)); err != nil {
				return false
			}
		}
		if err := tc.Handshake(); err != nil {
			c.log.Info("closing connection: TLS handshake failed", "listener", c.srv.name, "err", err)
			return false
		}
		if err := c.nc.SetDeadline(time.Time{}); err != nil {
			return false
		}
		st := tc.ConnectionState()
		cs = &st
		c.nc = tc
	}
	sess, err := l.NewSession(cs)
	if err != nil {
		c.log.Info("closing connection: authentication failed", "listener", c.srv.name, "err", err)
		return false
	}
	c.sess = sess
	c.info.Principal, c.info.TokenAuthenticated = sess.Principal(), sess.TokenAuthenticated()
	return true
}

// maxFrame is the largest request the connection accepts now: sasl.server.max.receive.size
// until it is authenticated, socket.request.max.bytes after.
func (c *conn) maxFrame() int32 {
	if c.sess != nil && !c.sess.Authenticated() {
		return c.sess.MaxReceiveLimit()
	}
	return c.srv.maxRequest()
}

// admit asks the Session what to do with a request; handled true means the request was
// answered here (or the connection must close: keep false).
func (c *conn) admit(h header) (handled, keep bool) {
	if c.sess == nil {
		return false, true
	}
	v, err := c.sess.Admit(h.key, time.Now())
	switch v {
	case security.Serve:
		return false, true
	case security.Reject:
		c.log.Info("closing connection", "listener", c.srv.name, "api", kmsg.NameForKey(h.key), "client_id", h.clientID, "reason", err)
		return true, false
	}
	return true, true
}

// intercept answers a SaslHandshake or SaslAuthenticate the Session took (admit said
// Intercept), decoded at its checked version.
func (c *conn) intercept(ctx context.Context, h header, req kmsg.Request) bool {
	var resp kmsg.Response
	switch r := req.(type) {
	case *kmsg.SASLHandshakeRequest:
		resp = c.sess.Handshake(r)
	case *kmsg.SASLAuthenticateRequest:
		resp = c.sess.Authenticate(r, time.Now())
	default:
		return false
	}
	c.info.Principal, c.info.TokenAuthenticated = c.sess.Principal(), c.sess.TokenAuthenticated()
	if c.sess.Failed() {
		c.log.Info("authentication failed", "listener", c.srv.name, "api", kmsg.NameForKey(h.key), "client_id", h.clientID, "reason", failReason(resp))
		if !c.delayFailure(ctx) {
			return false
		}
		c.writeMsg(h, resp, h.version, req.IsFlexible())
		return false
	}
	if c.sess.Authenticated() && h.key == kmsg.SASLAuthenticate.Int16() {
		c.log.Debug("authenticated", "listener", c.srv.name, "principal", c.info.Principal.String())
	}
	return c.writeMsg(h, resp, h.version, req.IsFlexible())
}

func failReason(resp kmsg.Response) string {
	if r, ok := resp.(*kmsg.SASLAuthenticateResponse); ok && r.ErrorMessage != nil {
		return *r.ErrorMessage
	}
	if r, ok := resp.(*kmsg.SASLHandshakeResponse); ok {
		return "mechanism not enabled or changed at re-authentication (enabled: " + joinComma(r.SupportedMechanisms) + ")"
	}
	return ""
}

func joinComma(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ","
		}
		out += x
	}
	return out
}

// delayFailure holds a failed authentication's answer for
// connection.failed.authentication.delay.ms (Kafka's delayed close, slowing password
// guessing); false when the server stops meanwhile.
func (c *conn) delayFailure(ctx context.Context) bool {
	return c.pause(ctx, c.srv.sec.FailedAuthenticationDelay())
}

// rawToken answers one bare SASL token after SaslHandshake v0 (or a GSSAPI client's first
// frame without a handshake): the answer is a bare token too, size first, when there is one. A failed token closes the connection after the failure delay.
func (c *conn) rawToken(ctx context.Context, frame []byte) bool {
	out, send, err := c.sess.RawToken(frame, time.Now())
	c.info.Principal, c.info.TokenAuthenticated = c.sess.Principal(), c.sess.TokenAuthenticated()
	if err != nil {
		c.log.Info("authentication failed", "listener", c.srv.name, "reason", err)
		c.delayFailure(ctx)
		return false
	}
	if !send {
		return ctx.Err() == nil
	}
	b := binary.BigEndian.AppendUint32(c.out[:0], uint32(len(out)))
	b = append(b, out...)
	werr := c.armWrite()
	if werr == nil {
		_, werr = c.nc.Write(b)
	}
	c.recycle(b)
	if werr != nil {
		if !errors.Is(werr, os.ErrDeadlineExceeded) {
			c.log.Debug("write failed", "err", werr)
		}
		return false
	}
	return ctx.Err() == nil
}
