package broker

import (
	"context"
	"fmt"

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
		Scram: b.scramCredentials(), Logger: b.log,
	})
	if err != nil {
		return nil, fmt.Errorf("listener %s: %w", l.Name, err)
	}
	return sec, nil
}

// checkControllerSecurity refuses a controller listener with a security protocol other
// than PLAINTEXT: the quorum's raft traffic and the brokers' controller connections do not
// speak TLS or SASL yet, and a listener must never serve less than it is configured for.
func checkControllerSecurity(cfg *config.Broker) error {
	for _, n := range cfg.ControllerListenerNames {
		if p := cfg.ListenerSecurityProtocolMap[n]; p != "" && p != security.ProtocolPlaintext {
			return fmt.Errorf("listener.security.protocol.map: the controller listener %s is %s, but controller listeners serve only PLAINTEXT for now", n, p)
		}
	}
	return nil
}

// interBrokerClient is how this broker connects to the others: the inter-broker listener's
// protocol, TLS settings and SASL mechanism (sasl.mechanism.inter.broker.protocol).
func (b *Broker) interBrokerClient() (*security.Client, error) {
	name := b.cfg.InterBrokerListenerName
	proto := b.cfg.ListenerSecurityProtocolMap[name]
	values, setKey := b.cfg.ListenerSecurity(name)
	c, err := security.NewInterBrokerClient(proto, values, setKey, "sasl.mechanism.inter.broker.protocol")
	if err != nil {
		return nil, fmt.Errorf("inter.broker.listener.name %s: %w", name, err)
	}
	return c, nil
}

// dialBroker connects to another broker on the inter-broker listener.
func (b *Broker) dialBroker(ctx context.Context, addr, clientID string) (*wire.Conn, error) {
	return wire.DialSecure(ctx, addr, clientID, b.interSec)
}

// scramCredentials finds SCRAM credentials in the broker's metadata image, where
// AlterUserScramCredentials put them: a new or changed credential authenticates the next
// connection, with no restart.
func (b *Broker) scramCredentials() security.ScramCredentials { return imageScram{b.meta} }

// imageScram reads SCRAM credentials from the newest metadata image.
type imageScram struct{ meta *metadata.Publisher }

func (s imageScram) ScramCredential(user, mechanism string) (security.ScramCredential, bool) {
	m := state.ScramSHA256
	switch mechanism {
	case security.ScramSHA256:
	case security.ScramSHA512:
		m = state.ScramSHA512
	default:
		return security.ScramCredential{}, false
	}
	c, ok := s.meta.Image().ScramCredential(user, m)
	if !ok {
		return security.ScramCredential{}, false
	}
	return security.ScramCredential{Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: int(c.Iterations)}, true
}
