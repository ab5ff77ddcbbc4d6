package security

import (
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/authz"
)

// Session is the authentication state of one connection: a deterministic core the server's
// connection loop drives (no goroutines, no clock: the time comes in with each call). Not safe
// for concurrent use; the connection's goroutine owns it.
//
// States and what each admits (Admit):
//
//	handshake      a SASL connection before SaslHandshake: ApiVersions is served, SaslHandshake
//	               intercepted, anything else closes the connection
//	authenticate   after SaslHandshake v1+: SaslAuthenticate is intercepted (ApiVersions still
//	               served), anything else closes the connection
//	raw            after SaslHandshake v0: the next frames are bare SASL tokens (RawToken)
//	authenticated  every request is served, but for SaslHandshake, which starts a
//	               re-authentication (KIP-368) when the session may be renewed; once the
//	               session has expired (connections.max.reauth.ms after it began, or when
//	               the credential expired, whichever is first), any other request closes the
//	               connection
//	failed         the answer to the failed step is sent after connection.failed.
//	               authentication.delay.ms, then the connection is closed
//
// A PLAINTEXT or SSL connection starts authenticated (as ANONYMOUS, or as its client
// certificate's mapped name).
type Session struct {
	l         *Listener
	state     sessionState
	principal authz.Principal
	mech      mechanism
	exch      exchange
	expires   time.Time // zero: never
	renewable bool      // the client authenticated with SaslAuthenticate v1+ (it knows KIP-368)
	token     bool      // authenticated with a delegation token (SCRAM tokenauth=true)
	reauth    bool      // the exchange in progress re-authenticates
}

type sessionState int8

const (
	stateHandshake sessionState = iota
	stateAuthenticate
	stateRaw
	stateAuthenticated
	stateFailed
)

// ErrAuthentication is a connection that cannot be authenticated before any SASL exchange
// (an SSL client certificate no ssl.principal.mapping.rules rule maps).
var ErrAuthentication = errors.New("security: authentication failed")

// NewSession starts the authentication of a connection; cs is its TLS state after the
// handshake (nil without TLS).
func (l *Listener) NewSession(cs *tls.ConnectionState) (*Session, error) {
	s := &Session{l: l, principal: authz.Anonymous}
	if l.SASL() {
		s.state = stateHandshake
		return s, nil
	}
	s.state = stateAuthenticated
	if cs != nil && l.tls != nil {
		name, hasCert, ok := l.tls.peerName(*cs)
		if !ok {
			return nil, fmt.Errorf("%w: no ssl.principal.mapping.rules rule maps the client certificate %q", ErrAuthentication, DistinguishedName(cs.PeerCertificates[0]))
		}
		if hasCert {
			s.principal = authz.User(name)
		}
	}
	return s, nil
}

// Verdict is what the connection does with a request.
type Verdict int8

const (
	Serve     Verdict = iota // hand it to the API handler
	Intercept                // the Session answers it (Handshake, Authenticate)
	Reject                   // close the connection (the error says why)
)

// Admit decides what happens to a request of API key key arriving at now.
func (s *Session) Admit(key int16, now time.Time) (Verdict, error) {
	hs, au, av := kmsg.SASLHandshake.Int16(), kmsg.SASLAuthenticate.Int16(), kmsg.ApiVersions.Int16()
	switch s.state {
	case stateHandshake:
		switch key {
		case hs:
			return Intercept, nil
		case av:
			return Serve, nil
		}
		return Reject, fmt.Errorf("unexpected %s request before SASL authentication", kmsg.NameForKey(key))
	case stateAuthenticate:
		switch key {
		case au:
			return Intercept, nil
		case av:
			if !s.reauth {
				return Serve, nil
			}
		}
		return Reject, fmt.Errorf("unexpected %s request while authenticating with SASL (SaslAuthenticate expected)", kmsg.NameForKey(key))
	case stateRaw:
		return Reject, errors.New("a Kafka request where a SASL token was expected")
	case stateAuthenticated:
		if key == hs && s.l.SASL() && s.renewable && !s.expires.IsZero() {
			return Intercept, nil
		}
		if !s.expires.IsZero() && !now.Before(s.expires) {
			return Reject, fmt.Errorf("the SASL session of %s expired (connections.max.reauth.ms, or its credential's lifetime) and was not re-authenticated", s.principal)
		}
		return Serve, nil
	}
	return Reject, errors.New("the connection failed to authenticate")
}

// Authenticated reports whether requests other than ApiVersions are served.
func (s *Session) Authenticated() bool { return s.state == stateAuthenticated }

// TokenAuthenticated reports whether the connection authenticated with a delegation token,
// which may not ask for, renew or expire tokens (Kafka's KafkaPrincipal.tokenAuthenticated).
func (s *Session) TokenAuthenticated() bool { return s.token }

// Principal is who the connection is (ANONYMOUS until authenticated).
func (s *Session) Principal() authz.Principal { return s.principal }

// Failed reports whether the last step failed: its answer goes out after
// FailedAuthenticationDelay and the connection is then closed.
func (s *Session) Failed() bool { return s.state == stateFailed }

// ExpectRaw reports whether the next frame is a bare SASL token (after SaslHandshake v0).
func (s *Session) ExpectRaw() bool { return s.state == stateRaw }

// Handshake answers a SaslHandshake. An unsupported mechanism fails the session (Kafka
// answers UNSUPPORTED_SASL_MECHANISM with the enabled ones and closes the connection).
func (s *Session) Handshake(req *kmsg.SASLHandshakeRequest) *kmsg.SASLHandshakeResponse {
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.SupportedMechanisms = slices.Clone(s.l.enabled)
	reauth := s.state == stateAuthenticated
	m, ok := s.l.mechanisms[req.Mechanism]
	switch {
	case !ok:
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		s.state = stateFailed
		return resp
	case reauth && m != s.mech:
		// KIP-368: a re-authentication keeps the mechanism.
		resp.ErrorCode = kerr.IllegalSaslState.Code
		s.state = stateFailed
		return resp
	}
	s.mech, s.exch, s.reauth = m, m.start(), reauth
	if req.Version == 0 {
		s.state = stateRaw
	} else {
		s.state = stateAuthenticate
	}
	return resp
}

// Authenticate answers a SaslAuthenticate at now.
func (s *Session) Authenticate(req *kmsg.SASLAuthenticateRequest, now time.Time) *kmsg.SASLAuthenticateResponse {
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	out, err := s.step(req.SASLAuthBytes, now, req.Version >= 1)
	if err != nil {
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		if errors.Is(err, errMalformed) {
			resp.ErrorCode = kerr.IllegalSaslState.Code
		}
		msg := err.Error()
		if u := errors.Unwrap(err); u != nil {
			msg = trimCause(msg)
		}
		resp.ErrorMessage = &msg
		return resp
	}
	resp.SASLAuthBytes = out
	if s.state == stateAuthenticated && !s.expires.IsZero() {
		resp.SessionLifetimeMillis = s.expires.Sub(now).Milliseconds()
	}
	return resp
}

// RawToken takes a bare SASL token (after SaslHandshake v0, or a GSSAPI client's first
// frame, see LegacyGSSAPI) and returns the bare token to send back; send is false when there
// is none to send: GSSAPI's last step, which the JDK's server answers with nothing and which
// clients do not wait for. On failure the connection is closed (there is no error field to
// fill).
func (s *Session) RawToken(in []byte, now time.Time) (out []byte, send bool, err error) {
	out, err = s.step(in, now, false)
	if err != nil {
		return nil, false, err
	}
	if q, ok := s.exch.(interface{ silentLast() bool }); ok && q.silentLast() && s.state == stateAuthenticated {
		return nil, false, nil
	}
	return out, true, nil
}

// LegacyGSSAPI reports whether frame, the first of a connection that has not sent
// SaslHandshake, is a bare GSSAPI token (a GSS-API initial context token starts with 0x60,
// which no Kafka request header does), as Kafka 0.9's clients, and sarama with SaslHandshake
// v0, send one without a handshake; if it is and GSSAPI is enabled, the session starts
// GSSAPI on bare tokens, this frame the first (RawToken), as Kafka's brokers do.
func (s *Session) LegacyGSSAPI(frame []byte) bool {
	m, ok := s.l.mechanisms[GSSAPI]
	if s.state != stateHandshake || !ok || len(frame) == 0 || frame[0] != 0x60 {
		return false
	}
	s.mech, s.exch, s.reauth, s.state = m, m.start(), false, stateRaw
	return true
}

// step runs one token of the exchange.
func (s *Session) step(in []byte, now time.Time, renewable bool) ([]byte, error) {
	out, done, err := s.exch.step(in, now)
	if err != nil {
		s.state = stateFailed
		return nil, err
	}
	if !done {
		return out, nil
	}
	p, token := authz.User(s.exch.user()), false
	if t, ok := s.exch.(interface {
		tokenOwner() (authz.Principal, bool)
	}); ok {
		if owner, yes := t.tokenOwner(); yes {
			p, token = owner, true
		}
	}
	if s.reauth && p != s.principal {
		s.state = stateFailed
		return nil, fmt.Errorf("%w: Cannot change principals during re-authentication from %s to %s", errAuthFailed, s.principal, p)
	}
	s.principal, s.state, s.renewable, s.reauth, s.token = p, stateAuthenticated, renewable, false, token
	s.expires = sessionExpiry(now, s.exch.credentialExpiry(), s.l.reauth)
	return out, nil
}

// sessionExpiry is when a session authenticated at now ends (KIP-368, as Kafka's
// SaslServerAuthenticator computes it): at the credential's expiry (an OAUTHBEARER token's
// exp) or after connections.max.reauth.ms (reauth, 0: unset), whichever comes first; never
// before now (a lifetime of 0). Zero: the session does not expire.
func sessionExpiry(now, credential time.Time, reauth time.Duration) time.Time {
	var end time.Time
	if reauth > 0 {
		end = now.Add(reauth)
	}
	if !credential.IsZero() && (end.IsZero() || credential.Before(end)) {
		end = credential
	}
	if !end.IsZero() && end.Before(now) {
		end = now
	}
	return end
}

// trimCause drops the "security: ...: " prefix of a wrapped error, leaving the message
// meant for the client.
func trimCause(msg string) string {
	for _, p := range []string{errAuthFailed.Error() + ": ", errMalformed.Error() + ": "} {
		if len(msg) > len(p) && msg[:len(p)] == p {
			return msg[len(p):]
		}
	}
	return msg
}

// MaxReceiveLimit is sasl.server.max.receive.size: the largest frame accepted while the
// connection is not authenticated.
func (s *Session) MaxReceiveLimit() int32 { return s.l.maxReceive }
