package security

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"

	"github.com/gregor-project/gregor/internal/authz"
)

// Raft peer traffic on a controller listener.
//
// A controller listener carries two protocols on one port: the quorum's raft messages
// between controllers (a connection that starts with the quorum's hello) and the Kafka
// protocol (brokers registering, heartbeating, forwarding admin requests, fetching the
// metadata log). On a TLS controller listener (SSL, SASL_SSL) the rule is:
//
//   - TLS comes first, for every connection, with the listener's key store; the decrypted
//     stream is then split by its first bytes. No byte of either protocol crosses in clear.
//   - The Kafka protocol then goes on as on any listener: SASL on SASL_SSL, and on SSL the
//     client certificate's mapped name when ssl.client.auth asks for one.
//   - Raft traffic is not the Kafka protocol and cannot run SASL, so a controller proves
//     itself with its certificate: the dialling controller presents its key store's
//     certificate as a client certificate and verifies the accepting controller's server
//     certificate with the listener's trust store (and its host name under
//     ssl.endpoint.identification.algorithm=https); the accepting controller verifies any
//     client certificate with the same trust store during the handshake (the listener asks
//     for one even with ssl.client.auth=none, where it is then not used as the Kafka
//     protocol's principal) and admits a raft connection only with a verified one
//     (VerifyPeer). A TLS controller listener therefore needs both stores.
//
// With an authorizer configured, a raft peer's certificate subject, mapped by
// ssl.principal.mapping.rules, must moreover be one of super.users (KIP-801: controllers'
// principals are super users, since their requests are authorized before any ACL is
// loaded); without one, any certificate the trust store verifies is a peer, as any
// authenticated principal may do anything without an authorizer.
//
// A SASL_PLAINTEXT controller listener cannot protect raft traffic at all (no certificate,
// no SASL on raft) and is refused at start-up.

// PeerTLS is the TLS of a controller listener for raft peer traffic, both sides. Immutable;
// safe for concurrent use. The accepting side serves the listener's TLS in service (its
// stores reload when their files change); the dialling side reads the stores once, when
// the PeerTLS is built.
type PeerTLS struct {
	l          *Listener
	client     *tls.Config
	superUsers []string // with an authorizer, the principals a peer may be; nil: any verified one
}

// NewPeerTLS builds the raft peer TLS of controller listener l (SSL or SASL_SSL) from the
// listener's configuration; errors name the key at fault. superUsers is super.users when an
// authorizer is configured (a peer, dialled or accepted, must map to one of them), nil
// without one.
func NewPeerTLS(l *Listener, values, setKey map[string]string, superUsers []string) (*PeerTLS, error) {
	if l.tls == nil {
		return nil, fmt.Errorf("listener %s (%s) has no TLS to protect raft traffic with", l.name, l.protocol)
	}
	c := &listenerConfig{name: l.name, protocol: l.protocol, values: values, setKey: withDefaults(setKey, values)}
	if !c.trustStore().configured() {
		return nil, fmt.Errorf("the controller listener %s is %s: controllers verify each other's certificates with its trust store, which is not set: set %s",
			l.name, l.protocol, c.setKey["ssl.truststore.location"])
	}
	cfg, err := ClientTLS(values, c.setKey)
	if err != nil {
		return nil, fmt.Errorf("listener %s: %w", l.name, err)
	}
	if len(cfg.Certificates) == 0 {
		return nil, fmt.Errorf("the controller listener %s is %s: controllers present their key store's certificate to each other: set %s",
			l.name, l.protocol, c.setKey["ssl.keystore.location"])
	}
	return &PeerTLS{l: l, client: cfg, superUsers: superUsers}, nil
}

// ServerConfig is the tls.Config to accept every connection of the controller listener
// with (tls.NewListener): each handshake is served with the listener's TLS in service,
// asking for a client certificate and verifying any one given with the trust store, as
// raft peers present theirs.
func (p *PeerTLS) ServerConfig() *tls.Config {
	return &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		cfg := p.l.tls.Config()
		if cfg.ClientAuth == tls.NoClientCert {
			cfg = cfg.Clone()
			cfg.ClientAuth = tls.VerifyClientCertIfGiven
		}
		return cfg, nil
	}}
}

// Dial connects to the controller listener of a peer controller at addr and runs the TLS
// handshake, presenting this controller's certificate.
func (p *PeerTLS) Dial(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	return p.DialVia(ctx, d.DialContext, addr)
}

// DialVia is Dial opening the TCP connection with dial.
func (p *PeerTLS) DialVia(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error), addr string) (net.Conn, error) {
	nc, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	cfg := p.client.Clone()
	if cfg.ServerName == "" && !cfg.InsecureSkipVerify {
		host, _, _ := net.SplitHostPort(addr)
		cfg.ServerName = host
	}
	tc := tls.Client(nc, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, fmt.Errorf("TLS handshake with controller %s: %w", addr, err)
	}
	// The accepted side is held to the same rule as the dialling one: no raft message goes
	// to a controller that is not a super user either.
	if err := p.superUser(tc.ConnectionState()); err != nil {
		tc.Close()
		return nil, fmt.Errorf("controller %s: %w", addr, err)
	}
	return tc, nil
}

// ErrNoPeerCertificate refuses a raft connection without a verified client certificate.
var ErrNoPeerCertificate = errors.New("security: the raft peer presented no verified client certificate (controllers prove themselves with their key store's certificate)")

// ErrPeerNotSuperUser refuses a raft connection whose certificate maps to a principal that
// is not a super user, when an authorizer is configured.
var ErrPeerNotSuperUser = errors.New("security: the raft peer's principal is not one of super.users (controllers must be super users when an authorizer is configured)")

// VerifyPeer admits a raft connection accepted on a TLS controller listener, given its TLS
// state: the handshake is done, the peer's client certificate was verified with the trust
// store, and with an authorizer its mapped principal is a super user.
func (p *PeerTLS) VerifyPeer(cs tls.ConnectionState) error {
	if !cs.HandshakeComplete || len(cs.VerifiedChains) == 0 {
		return ErrNoPeerCertificate
	}
	return p.superUser(cs)
}

// superUser checks a peer's certificate against superUsers (nil: any).
func (p *PeerTLS) superUser(cs tls.ConnectionState) error {
	if p.superUsers == nil {
		return nil
	}
	if len(cs.PeerCertificates) == 0 {
		return ErrNoPeerCertificate
	}
	// The listener's mapping rules, whatever ssl.client.auth says of the Kafka protocol's
	// principals: raft peers always present their certificate.
	name, ok := p.l.tls.mapper.Name(DistinguishedName(cs.PeerCertificates[0]))
	if !ok {
		return fmt.Errorf("%w: no ssl.principal.mapping.rules rule maps %q", ErrPeerNotSuperUser, DistinguishedName(cs.PeerCertificates[0]))
	}
	pr := authz.User(name).String()
	for _, su := range p.superUsers {
		if su == pr {
			return nil
		}
	}
	return fmt.Errorf("%w: %s", ErrPeerNotSuperUser, pr)
}
