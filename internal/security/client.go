package security

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/xdg-go/scram"
)

// Client is how the broker's own connections (to other brokers on the inter-broker
// listener) encrypt and authenticate: TLS when TLS is set, then SASL when Mechanism is.
type Client struct {
	TLS       *tls.Config // nil: no TLS
	Mechanism string      // "": no SASL
	Username  string
	Password  string
	// Kerberos is GSSAPI's login: the broker's principal and keytab, its service name.
	Kerberos *kerberosLogin
}

// NewInterBrokerClient builds the client side of a listener for the broker's own
// connections: its protocol, the TLS client settings of its configuration, and for SASL the
// mechanism (sasl.mechanism.inter.broker.protocol) with the username and password of that
// mechanism's JAAS configuration on the listener.
func NewInterBrokerClient(protocol string, values, setKey map[string]string, mechanismKey string) (*Client, error) {
	c := &Client{}
	setKey = withDefaults(setKey, values)
	if protocol == ProtocolSSL || protocol == ProtocolSASLSSL {
		cfg, err := ClientTLS(values, setKey)
		if err != nil {
			return nil, err
		}
		if cfg.RootCAs == nil {
			return nil, fmt.Errorf("the inter-broker listener is %s but has no trust store to verify the other brokers with: set %s", protocol, setKey["ssl.truststore.location"])
		}
		if len(cfg.Certificates) == 0 && values["ssl.client.auth"] == "required" {
			return nil, fmt.Errorf("the inter-broker listener requires client certificates but the broker has no key store: set %s", setKey["ssl.keystore.location"])
		}
		c.TLS = cfg
	}
	if protocol == ProtocolSASLPlaintext || protocol == ProtocolSASLSSL {
		m := values[mechanismKey]
		jaasKey := strings.ToLower(m) + ".sasl.jaas.config"
		text, ok := values[jaasKey]
		if !ok && m == GSSAPI {
			return nil, fmt.Errorf("%s is GSSAPI but the inter-broker listener has no %s with the broker's principal and keytab", mechanismKey, jaasKey)
		}
		if !ok {
			return nil, fmt.Errorf("%s is %s but the inter-broker listener has no %s with the broker's username and password", mechanismKey, m, jaasKey)
		}
		switch m {
		case GSSAPI, Plain, ScramSHA256, ScramSHA512:
		default:
			return nil, fmt.Errorf("%s: mechanism %q is not served by Gregor yet (GSSAPI, PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 are)", mechanismKey, m)
		}
		j, err := ParseJAAS(text)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", jaasKey, err)
		}
		if m == GSSAPI {
			k, err := parseKerberosLogin(j, values["sasl.kerberos.service.name"], Krb5ConfigPath())
			if err != nil {
				return nil, fmt.Errorf("%s is GSSAPI: %s, %s: %w", mechanismKey, jaasKey, setKey["sasl.kerberos.service.name"], err)
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

// Wrap runs the TLS handshake on nc (when the client has TLS); host is what the server's
// certificate must name.
func (c *Client) Wrap(ctx context.Context, nc net.Conn, host string) (net.Conn, error) {
	if c == nil || c.TLS == nil {
		return nc, nil
	}
	cfg := c.TLS.Clone()
	if cfg.ServerName == "" && !cfg.InsecureSkipVerify {
		cfg.ServerName = host
	}
	tc := tls.Client(nc, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, fmt.Errorf("TLS handshake with %s: %w", nc.RemoteAddr(), err)
	}
	return tc, nil
}

// RoundTrip sends one request on a connection being authenticated and returns its answer.
type RoundTrip func(ctx context.Context, req kmsg.Request) (kmsg.Response, error)

// Authenticate runs the SASL exchange (SaslHandshake v1, then SaslAuthenticate v1 tokens)
// when the client has a mechanism; host is the server's host as dialled (GSSAPI asks a
// ticket for <service name>/<host>).
func (c *Client) Authenticate(ctx context.Context, host string, rt RoundTrip) error {
	if c == nil || c.Mechanism == "" {
		return nil
	}
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
		return resp.SASLAuthBytes, nil
	}
	if c.Mechanism == GSSAPI {
		return c.authenticateGSSAPI(host, step)
	}
	if c.Mechanism == Plain {
		_, err := step([]byte("\x00" + c.Username + "\x00" + c.Password))
		return err
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
