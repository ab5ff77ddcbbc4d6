package broker

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/gregor-project/gregor/internal/authz"
	"github.com/gregor-project/gregor/internal/config"
	"github.com/gregor-project/gregor/internal/controller/state"
	"github.com/gregor-project/gregor/internal/metadata"
	"github.com/gregor-project/gregor/internal/security"
	"github.com/gregor-project/gregor/internal/wire"
)

// Security wiring: each broker listener gets its security.Listener (TLS stores, SASL
// mechanisms) built at start-up, so a listener that cannot serve what it is configured for
// stops start-up with the key at fault named, never serving less; and the broker's own
// connections to other brokers (follower fetches, transaction markers, verification) speak
// the inter-broker listener's protocol as a client.

// listenerSecurity builds the security of broker listener l.
func (b *Broker) listenerSecurity(l config.Listener) (*security.Listener, error) {
	values, setKey := b.cfg.ListenerSecurity(l.Name)
	sec, err := security.NewListener(security.ListenerOptions{
		Name: l.Name, Protocol: l.SecurityProtocol, Values: values, SetKey: setKey,
		InterBroker: l.Name == b.cfg.InterBrokerListenerName,
		Scram:       b.scramCredentials(), Logger: b.log,
	})
	if err != nil {
		return nil, fmt.Errorf("listener %s: %w", l.Name, err)
	}
	return sec, nil
}

// listenerStores checks a change of the broker's dynamic listener store configs before it
// is stored (api.ListenerStores).
type listenerStores struct{ b *Broker }

// CheckListenerStores checks that every listener whose stores next names differently can
// serve them (Kafka's SslFactory.validateReconfiguration): the stores load, and the new
// certificate keeps the subject and subject alternative names of the one in service
// unless ssl.allow.dn.changes / ssl.allow.san.changes. A store key for a listener this
// broker does not serve as a broker listener (the controller listener, or a name it has
// no listener of) is refused: there is no store of it to change at runtime.
func (s listenerStores) CheckListenerStores(next *config.Broker) error {
	b := s.b
	keyOf := map[string]string{} // listener -> one of its dynamic store keys, for errors
	for k, v := range next.Dynamic() {
		l, _, ok := config.DynamicListenerKey(k)
		if !ok {
			continue
		}
		if b.listenerSec[l] == nil {
			return &config.Error{Key: k, Value: v, Err: config.ErrInvalidConfig,
				Reason: fmt.Sprintf("%s is not a broker listener of broker %d: only a broker listener's stores can be updated dynamically", l, b.cfg.NodeID)}
		}
		if old, ok := keyOf[l]; !ok || k < old {
			keyOf[l] = k
		}
	}
	for name, sec := range b.listenerSec {
		values, setKey := next.ListenerSecurity(name)
		if err := sec.ReconfigureTLS(values, setKey, security.TLSValidate); err != nil {
			k := keyOf[name]
			if k == "" {
				k = "listener.name." + strings.ToLower(name) + ".ssl.keystore.location"
			}
			return &config.Error{Key: k, Value: next.Dynamic()[k], Err: config.ErrInvalidConfig, Reason: err.Error()}
		}
	}
	return nil
}

// reconfigureListenerStores gives each TLS listener the stores the live configuration
// names, after a change of the dynamic configs (Kafka's SslFactory.reconfigure): new
// connections are served with them. Stores that no longer load or pass the checks of
// CheckListenerStores leave the ones in service serving, and are logged. At start-up
// (startUp: the first image, before any connection is served) the dynamic stores replace
// the static ones and need only load: they were checked against the stores in service
// when they were set, and the static ones never served.
//
// The broker's own connections to other brokers speak the inter-broker listener as a client
// with its stores (the trust store verifies the others, the key store is the certificate
// shown to them): when they change, new connections use a client built from the new ones,
// as Kafka reconfigures its inter-broker clients' channel builders.
func (b *Broker) reconfigureListenerStores(startUp bool) {
	change := security.TLSApply
	if startUp {
		change = security.TLSStartUp
	}
	for name, sec := range b.listenerSec {
		values, setKey := b.cfg.ListenerSecurity(name)
		if err := sec.ReconfigureTLS(values, setKey, change); err != nil {
			b.log.Error("listener stores not changed; the ones in service keep serving", "listener", name, "err", err)
		}
	}
	values, _ := b.cfg.ListenerSecurity(b.cfg.InterBrokerListenerName)
	if b.interValues == nil || maps.Equal(values, b.interValues) {
		return
	}
	c, err := b.interBrokerClient()
	if err != nil {
		b.log.Error("inter-broker client not changed; connections to other brokers keep the stores in service", "listener", b.cfg.InterBrokerListenerName, "err", err)
		return
	}
	b.interSec.Store(c)
	b.interValues = values
	b.log.Info("inter-broker client rebuilt with the listener's new stores", "listener", b.cfg.InterBrokerListenerName)
}

// checkControllerSecurity refuses a controller listener whose protocol cannot protect both
// kinds of traffic it carries. SASL_PLAINTEXT is refused: raft peer traffic between
// controllers is not the Kafka protocol and cannot run SASL, and without TLS there is no
// certificate for a controller to prove itself with, so the raft half would be served with
// no protection at all (a listener never serves less than it is configured for). PLAINTEXT,
// SSL and SASL_SSL are served (see security.PeerTLS for the rule on a TLS controller
// listener).
func checkControllerSecurity(cfg *config.Broker) error {
	for _, n := range cfg.ControllerListenerNames {
		if p := cfg.ListenerSecurityProtocolMap[n]; p == security.ProtocolSASLPlaintext {
			return fmt.Errorf("listener.security.protocol.map: the controller listener %s is %s, which cannot protect the raft traffic between controllers on it (raft cannot run SASL, and without TLS a controller has no certificate to prove itself with): use SASL_SSL or SSL", n, p)
		}
	}
	return nil
}

// controllerListenerName is the listener the controllers serve and brokers dial them on:
// the first of controller.listener.names.
func (b *Broker) controllerListenerName() string {
	if names := b.cfg.ControllerListenerNames; len(names) > 0 {
		return names[0]
	}
	return "CONTROLLER"
}

// controllerSecurity builds the server side of this controller's listener: its
// security.Listener (as any listener's, refusing what it cannot serve by key) and, on a
// TLS listener, the raft peers' TLS (which also needs the trust store). Without
// controller.quorum.voters the listener is a loopback port only this process dials, and
// PLAINTEXT.
func (b *Broker) controllerSecurity() (*security.Listener, *security.PeerTLS, error) {
	l, ok := b.cfg.ControllerListener()
	if !ok || len(b.cfg.Voters()) == 0 {
		return nil, nil, nil
	}
	values, setKey := b.cfg.ListenerSecurity(l.Name)
	sec, err := security.NewListener(security.ListenerOptions{
		Name: l.Name, Protocol: l.SecurityProtocol, Values: values, SetKey: setKey,
		Scram: quorumScram{b}, Logger: b.log,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("listener %s: %w", l.Name, err)
	}
	if sec.TLS() == nil {
		return sec, nil, nil
	}
	var superUsers []string // nil: no authorizer, any verified controller is a peer
	if b.cfg.AuthorizerClassName != "" {
		superUsers = append([]string{}, b.cfg.SuperUsers...)
	}
	peer, err := security.NewPeerTLS(sec, values, setKey, superUsers)
	if err != nil {
		return nil, nil, err
	}
	return sec, peer, nil
}

// controllerClient is how this node connects to the controllers with the Kafka protocol
// (registration, heartbeats, forwarded requests, the metadata log): the controller
// listener's protocol, TLS settings and SASL mechanism (sasl.mechanism.controller.protocol).
// Without controller.quorum.voters it dials its own loopback controller, PLAINTEXT.
func (b *Broker) controllerClient() (*security.Client, error) {
	if len(b.cfg.Voters()) == 0 {
		return nil, nil
	}
	name := b.controllerListenerName()
	proto := b.cfg.ListenerSecurityProtocolMap[name]
	values, setKey := b.cfg.ListenerSecurity(name)
	c, err := security.NewClient(name, proto, values, setKey, "sasl.mechanism.controller.protocol")
	if err != nil {
		return nil, fmt.Errorf("controller.listener.names %s: %w", name, err)
	}
	return c, nil
}

// interBrokerClient is how this broker connects to the others: the inter-broker listener's
// protocol, TLS settings and SASL mechanism (sasl.mechanism.inter.broker.protocol).
func (b *Broker) interBrokerClient() (*security.Client, error) {
	name := b.cfg.InterBrokerListenerName
	proto := b.cfg.ListenerSecurityProtocolMap[name]
	values, setKey := b.cfg.ListenerSecurity(name)
	c, err := security.NewClient(name, proto, values, setKey, "sasl.mechanism.inter.broker.protocol")
	if err != nil {
		return nil, fmt.Errorf("inter.broker.listener.name %s: %w", name, err)
	}
	return c, nil
}

// dialBroker connects to another broker on the inter-broker listener.
func (b *Broker) dialBroker(ctx context.Context, addr, clientID string) (*wire.Conn, error) {
	return wire.DialVia(ctx, b.dial, addr, clientID, b.interSec.Load())
}

// scramCredentials finds SCRAM credentials in the broker's metadata image, where
// AlterUserScramCredentials put them: a new or changed credential authenticates the next
// connection, with no restart.
func (b *Broker) scramCredentials() security.ScramCredentials {
	return imageScram{meta: b.meta, tokens: b.tokenCreds}
}

// imageScram reads SCRAM credentials from the newest metadata image, and delegation tokens'
// from the image's tokens (tokens.go).
type imageScram struct {
	meta   *metadata.Publisher
	tokens *tokenCredentials
}

func (s imageScram) TokenCredential(id, mechanism string, now time.Time) (security.ScramCredential, authz.Principal, time.Time, bool) {
	return s.tokens.credential(s.meta.Image(), id, mechanism, now)
}

func (s imageScram) ScramCredential(user, mechanism string) (security.ScramCredential, bool) {
	m, ok := state.ScramMechanism(mechanism)
	if !ok {
		return security.ScramCredential{}, false
	}
	c, ok := s.meta.Image().ScramCredential(user, m)
	if !ok {
		return security.ScramCredential{}, false
	}
	return security.ScramCredential{Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: int(c.Iterations)}, true
}

// quorumScram reads SCRAM credentials from this controller's own state, for its listener:
// a controller-only node has no broker metadata image, and a broker's image may lag the
// quorum it is authenticating against.
type quorumScram struct{ b *Broker }

// quorumScramTimeout bounds one credential lookup on the quorum's run loop.
const quorumScramTimeout = 2 * time.Second

func (s quorumScram) ScramCredential(user, mechanism string) (security.ScramCredential, bool) {
	m, ok := state.ScramMechanism(mechanism)
	if !ok {
		return security.ScramCredential{}, false
	}
	node := s.b.quorum
	if node == nil {
		return security.ScramCredential{}, false
	}
	ctx, cancel := context.WithTimeout(s.b.ctx, quorumScramTimeout)
	defer cancel()
	var out security.ScramCredential
	found := false
	err := node.Read(ctx, func(c *state.Controller) {
		cr, ok := c.Image().ScramCredential(user, m)
		if !ok {
			return
		}
		found = true
		out = security.ScramCredential{Salt: bytes.Clone(cr.Salt), StoredKey: bytes.Clone(cr.StoredKey),
			ServerKey: bytes.Clone(cr.ServerKey), Iterations: int(cr.Iterations)}
	})
	if err != nil || !found {
		return security.ScramCredential{}, false
	}
	return out, true
}
