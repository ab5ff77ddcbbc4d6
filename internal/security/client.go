package security

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/xdg-go/scram"
)

// Client is how the broker's own connections encrypt and authenticate, towards other
// brokers on the inter-broker listener and towards the controllers on the controller
// listener: TLS when TLS is set, then SASL when Mechanism is.
type Client struct {
	TLS       *tls.Config // nil: no TLS
	Mechanism string      // "": no SASL
	Username  string      // for OAUTHBEARER, the token's principal
	Password  string
	login     oauthLogin // OAUTHBEARER: its tokens, unsecured or from an identity provider
	// Kerberos is GSSAPI's login: the broker's principal and keytab, its service name.
	Kerberos *kerberosLogin
}

// NewClient builds the client side of listener for the broker's own connections: its
// protocol, the TLS client settings of its configuration, and for SASL the mechanism
// (values[mechanismKey]: sasl.mechanism.inter.broker.protocol towards brokers,
// sasl.mechanism.controller.protocol towards controllers) with the username and password of
// that mechanism's JAAS configuration on the listener; for OAUTHBEARER, an unsecured token
// made from that JAAS line's unsecuredLogin* options, as Kafka's unsecured login does, or
// with sasl.login.callback.handler.class tokens from an identity provider
// (oauth_login.go). Errors name the key at fault.
func NewClient(listener, protocol string, values, setKey map[string]string, mechanismKey string) (*Client, error) {
	c := &Client{}
	setKey = withDefaults(setKey, values)
	if protocol == ProtocolSSL || protocol == ProtocolSASLSSL {
		cfg, err := ClientTLS(values, setKey)
		if err != nil {
			return nil, err
		}
		if cfg.RootCAs == nil {
			return nil, fmt.Errorf("the listener %s is %s but has no trust store to verify the servers it connects to with: set %s", listener, protocol, setKey["ssl.truststore.location"])
		}
		if len(cfg.Certificates) == 0 && values["ssl.client.auth"] == "required" {
			return nil, fmt.Errorf("the listener %s requires client certificates but the broker has no key store: set %s", listener, setKey["ssl.keystore.location"])
		}
		c.TLS = cfg
	}
	if protocol == ProtocolSASLPlaintext || protocol == ProtocolSASLSSL {
		m := values[mechanismKey]
		jaasKey := strings.ToLower(m) + ".sasl.jaas.config"
		if k := setKey[jaasKey]; k != "" && k != jaasKey {
			jaasKey = k
		}
		switch m {
		case GSSAPI, Plain, ScramSHA256, ScramSHA512, OAuthBearer:
		default:
			return nil, fmt.Errorf("%s: mechanism %q is not served by Gregor yet (GSSAPI, PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER are)", setKey[mechanismKey], m)
		}
		text, ok := values[strings.ToLower(m)+".sasl.jaas.config"]
		if !ok {
			what := "username and password"
			if m == GSSAPI {
				what = "principal and keytab"
			}
			return nil, fmt.Errorf("%s is %s but the listener %s has no %s with the broker's %s", setKey[mechanismKey], m, listener,
				"listener.name."+strings.ToLower(listener)+"."+strings.ToLower(m)+".sasl.jaas.config", what)
		}
		j, err := ParseJAAS(text)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", jaasKey, err)
		}
		if m == OAuthBearer {
			if c.login, err = newOAuthLogin(values, setKey, j, jaasKey); err != nil {
				return nil, fmt.Errorf("%s: %w", jaasKey, err)
			}
			c.Mechanism, c.Username = m, c.login.principal()
			return c, nil
		}
		if m == GSSAPI {
			k, err := parseKerberosLogin(j, values["sasl.kerberos.service.name"], Krb5ConfigPath())
			if err != nil {
				return nil, fmt.Errorf("%s is GSSAPI: %s, %s: %w", setKey[mechanismKey], jaasKey, setKey["sasl.kerberos.service.name"], err)
			}
			c.Mechanism, c.Kerberos = m, k
			return c, nil
		}
		c.Mechanism, c.Username, c.Password = m, j.Options["username"], j.Options["password"]
		if c.Username == "" {
			return nil, fmt.Errorf("%s: the broker's own username (username=\"...\") and password are not set", jaasKey)
		}
	}
	return c, nil
}

// Wrap runs the TLS handshake on nc (when the client has TLS) over a Wire; host is what the
// server's certificate must name.
func (c *Client) Wrap(ctx context.Context, nc net.Conn, host string) (net.Conn, error) {
	if c == nil || c.TLS == nil {
		return nc, nil
	}
	cfg := c.TLS.Clone()
	if cfg.ServerName == "" && !cfg.InsecureSkipVerify {
		cfg.ServerName = host
	}
	w := NewWire(nc) // records batched per system call (replication fetches are large)
	tc := tls.Client(w, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, fmt.Errorf("TLS handshake with %s: %w", nc.RemoteAddr(), err)
	}
	return &WireConn{Conn: tc, wire: w}, nil
}

// RoundTrip sends one request on a connection being authenticated and returns its answer.
type RoundTrip func(ctx context.Context, req kmsg.Request) (kmsg.Response, error)

// Authenticate runs the SASL exchange (SaslHandshake v1, then SaslAuthenticate v1 tokens)
// when the client has a mechanism, and returns the session's lifetime as the server gave it
// (KIP-368: 0 when the session does not expire). It serves a first authentication and a
// re-authentication alike. host is the server's host as dialled (GSSAPI asks a ticket for
// <service name>/<host>).
func (c *Client) Authenticate(ctx context.Context, host string, rt RoundTrip) (time.Duration, error) {
	if c == nil || c.Mechanism == "" {
		return 0, nil
	}
	var lifetime time.Duration
	err := c.exchange(ctx, host, rt, &lifetime)
	return lifetime, err
}

// exchange runs the handshake and the mechanism's tokens, recording the session lifetime of
// the last SaslAuthenticate answer in lifetime.
func (c *Client) exchange(ctx context.Context, host string, rt RoundTrip, lifetime *time.Duration) error {
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, c.Mechanism
	r, err := rt(ctx, hs)
	if err != nil {
		return err
	}
	if e := kerr.ErrorForCode(r.(*kmsg.SASLHandshakeResponse).ErrorCode); e != nil {
		return fmt.Errorf("SASL handshake for %s: %w", c.Mechanism, e)
	}
	step := func(tok []byte) ([]byte, error) {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version, req.SASLAuthBytes = 1, tok
		r, err := rt(ctx, req)
		if err != nil {
			return nil, err
		}
		resp := r.(*kmsg.SASLAuthenticateResponse)
		if e := kerr.ErrorForCode(resp.ErrorCode); e != nil {
			msg := ""
			if resp.ErrorMessage != nil {
				msg = ": " + *resp.ErrorMessage
			}
			who := c.Username
			if c.Kerberos != nil {
				who = c.Kerberos.principal.PrincipalNameString() + "@" + c.Kerberos.realm
			}
			return nil, fmt.Errorf("SASL %s authentication as %s: %w%s", c.Mechanism, who, e, msg)
		}
		*lifetime = time.Duration(resp.SessionLifetimeMillis) * time.Millisecond
		return resp.SASLAuthBytes, nil
	}
	return c.tokens(host, step)
}

// tokens runs the mechanism's dialogue, whatever carries it: step sends one token and
// returns the server's answer (SaslAuthenticate on the broker's connections; a franz-go
// session in the tools, Mechanism).
func (c *Client) tokens(host string, step func([]byte) ([]byte, error)) error {
	if c.Mechanism == GSSAPI {
		return c.authenticateGSSAPI(host, step)
	}
	if c.Mechanism == Plain {
		_, err := step([]byte("\x00" + c.Username + "\x00" + c.Password))
		return err
	}
	if c.Mechanism == OAuthBearer {
		msg, err := c.login.clientMessage(time.Now())
		if err != nil {
			return err
		}
		out, err := step(msg)
		if err != nil || len(out) == 0 {
			return err
		}
		// RFC 7628: a refused token is answered with a JSON error, acknowledged with \x01.
		if _, err := step([]byte{1}); err != nil {
			return err
		}
		return fmt.Errorf("SASL %s authentication as %s: the server refused the token: %s", c.Mechanism, c.Username, out)
	}
	h := scram.SHA256
	if c.Mechanism == ScramSHA512 {
		h = scram.SHA512
	}
	cl, err := h.NewClient(c.Username, c.Password, "")
	if err != nil {
		return fmt.Errorf("SASL %s: %w", c.Mechanism, err)
	}
	conv := cl.NewConversation()
	var in string
	for !conv.Done() {
		out, err := conv.Step(in)
		if err != nil {
			return fmt.Errorf("SASL %s authentication as %s: %w", c.Mechanism, c.Username, err)
		}
		if conv.Done() && out == "" {
			break
		}
		tok, err := step([]byte(out))
		if err != nil {
			return err
		}
		in = string(tok)
		if conv.Done() {
			break
		}
	}
	if !conv.Valid() {
		return fmt.Errorf("SASL %s: the server's signature did not verify", c.Mechanism)
	}
	return nil
}
