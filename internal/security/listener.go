package security

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
)

// Security protocols of listener.security.protocol.map.
const (
	ProtocolPlaintext     = "PLAINTEXT"
	ProtocolSSL           = "SSL"
	ProtocolSASLPlaintext = "SASL_PLAINTEXT"
	ProtocolSASLSSL       = "SASL_SSL"
)

// ListenerOptions are what a listener's security is built from.
type ListenerOptions struct {
	Name     string // listener name, e.g. SASL_SSL
	Protocol string // its security protocol
	// Values are the listener's effective ssl.*, sasl.* and connections.max.reauth.ms
	// values and its "<mechanism>.sasl.jaas.config" entries (config.Broker.ListenerSecurity);
	// SetKey names the configuration key each came from, for errors.
	Values, SetKey map[string]string
	// InterBroker is set for the inter-broker listener: a change of its stores must keep
	// the brokers able to verify each other (see ServerTLS's reconfiguration).
	InterBroker bool
	// Scram finds SCRAM credentials (the metadata image); nil: SCRAM knows no user.
	Scram  ScramCredentials
	Logger *slog.Logger
}

// Listener is the security of one listener: how its connections are encrypted and
// authenticated. Immutable once built (its TLS stores reload themselves); safe for
// concurrent use.
type Listener struct {
	name        string
	protocol    string
	interBroker bool       // the inter-broker listener
	tls         *ServerTLS // SSL and SASL_SSL
	mechanisms  map[string]mechanism
	enabled     []string      // sasl.enabled.mechanisms, as configured
	reauth      time.Duration // connections.max.reauth.ms; 0: sessions do not expire
	failDelay   time.Duration // connection.failed.authentication.delay.ms
	maxReceive  int32         // sasl.server.max.receive.size
}

// listenerConfig is a listener's security configuration as text.
type listenerConfig struct {
	name, protocol string
	values, setKey map[string]string
}

func withDefaults(setKey, values map[string]string) map[string]string {
	out := map[string]string{}
	for k := range values {
		out[k] = k
	}
	for k, v := range setKey {
		out[k] = v
	}
	return out
}

func (c *listenerConfig) keyStore() storeSpec {
	v, k := c.values, c.setKey
	return storeSpec{
		typ: v["ssl.keystore.type"], location: v["ssl.keystore.location"], password: v["ssl.keystore.password"],
		keyPassword: v["ssl.key.password"], inlineKey: v["ssl.keystore.key"], inlineChain: v["ssl.keystore.certificate.chain"],
		locationKey: k["ssl.keystore.location"], passwordKey: k["ssl.keystore.password"], keyPasswordKey: k["ssl.key.password"],
		inlineKeyKey: k["ssl.keystore.key"], inlineChainKey: k["ssl.keystore.certificate.chain"],
	}
}

func (c *listenerConfig) trustStore() storeSpec {
	v, k := c.values, c.setKey
	return storeSpec{
		typ: v["ssl.truststore.type"], location: v["ssl.truststore.location"], password: v["ssl.truststore.password"],
		inlineChain: v["ssl.truststore.certificates"],
		locationKey: k["ssl.truststore.location"], passwordKey: k["ssl.truststore.password"], inlineChainKey: k["ssl.truststore.certificates"],
	}
}

// NewListener builds a listener's security. Anything it cannot serve as configured (a
// missing or unreadable store, a mechanism Gregor does not serve, a mechanism without its
// JAAS configuration) is an error naming the configuration key: a listener never falls back
// to less security than configured.
func NewListener(o ListenerOptions) (*Listener, error) {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	c := &listenerConfig{name: o.Name, protocol: o.Protocol, values: o.Values, setKey: withDefaults(o.SetKey, o.Values)}
	l := &Listener{name: o.Name, protocol: o.Protocol, interBroker: o.InterBroker, mechanisms: map[string]mechanism{}}
	var err error
	if l.reauth, err = millis(c, "connections.max.reauth.ms"); err != nil {
		return nil, err
	}
	if l.failDelay, err = millis(c, "connection.failed.authentication.delay.ms"); err != nil {
		return nil, err
	}
	l.maxReceive = 524288
	if v := c.values["sasl.server.max.receive.size"]; v != "" {
		var n int32
		if _, err := fmt.Sscan(v, &n); err != nil || n <= 0 {
			return nil, fmt.Errorf("%s: %q is not a positive size", c.setKey["sasl.server.max.receive.size"], v)
		}
		l.maxReceive = n
	}
	switch o.Protocol {
	case ProtocolPlaintext:
	case ProtocolSSL, ProtocolSASLSSL:
		if l.tls, err = newServerTLS(c, log.With("listener", o.Name)); err != nil {
			return nil, err
		}
	case ProtocolSASLPlaintext:
	default:
		return nil, fmt.Errorf("listener %s: unknown security protocol %q", o.Name, o.Protocol)
	}
	if l.SASL() {
		if err := l.setupSASL(c, o.Scram, log.With("listener", o.Name)); err != nil {
			return nil, err
		}
	}
	return l, nil
}

func millis(c *listenerConfig, key string) (time.Duration, error) {
	v := c.values[key]
	if v == "" {
		return 0, nil
	}
	var n int64
	if _, err := fmt.Sscan(v, &n); err != nil || n < 0 {
		return 0, fmt.Errorf("%s: %q is not a non-negative number of milliseconds", c.setKey[key], v)
	}
	return time.Duration(n) * time.Millisecond, nil
}

// setupSASL builds the enabled mechanisms of a SASL listener.
func (l *Listener) setupSASL(c *listenerConfig, creds ScramCredentials, log *slog.Logger) error {
	key := c.setKey["sasl.enabled.mechanisms"]
	l.enabled = splitComma(c.values["sasl.enabled.mechanisms"])
	if len(l.enabled) == 0 {
		return fmt.Errorf("listener %s (%s): %s is empty: a SASL listener needs at least one mechanism", c.name, c.protocol, key)
	}
	for _, m := range l.enabled {
		jaasKey := "listener.name." + strings.ToLower(c.name) + "." + strings.ToLower(m) + ".sasl.jaas.config"
		switch m {
		case Plain:
			text, ok := c.values[strings.ToLower(m)+".sasl.jaas.config"]
			if !ok {
				return fmt.Errorf("listener %s: PLAIN is enabled (%s) but %s is not set: the users come from its user_<name>=\"<password>\" options", c.name, key, jaasKey)
			}
			j, err := ParseJAAS(text)
			if err != nil {
				return fmt.Errorf("%s: %w", jaasKey, err)
			}
			p, err := newPlain(j)
			if err != nil {
				return fmt.Errorf("%s: %w", jaasKey, err)
			}
			l.mechanisms[m] = p
		case ScramSHA256, ScramSHA512:
			s, err := newScram(m, creds)
			if err != nil {
				return fmt.Errorf("listener %s: %s: %w", c.name, m, err)
			}
			l.mechanisms[m] = s
		case GSSAPI:
			g, err := c.gssapi(jaasKey)
			if err != nil {
				return err
			}
			l.mechanisms[m] = g
		case OAuthBearer:
			o, err := newOAuth(c, log)
			if err != nil {
				return err
			}
			l.mechanisms[m] = o
		default:
			return fmt.Errorf("listener %s (%s): %s: mechanism %q is not served by Gregor yet (GSSAPI, PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER are)", c.name, c.protocol, key, m)
		}
		if m != OAuthBearer {
			if h, ok := c.values[strings.ToLower(m)+".sasl.server.callback.handler.class"]; ok && h != "" {
				return fmt.Errorf("%s: %q is not served by Gregor: %s validates with its own (only OAUTHBEARER takes %s)", c.mechKey(m, "sasl.server.callback.handler.class"), h, m, OAuthBearerValidatorCallbackHandler)
			}
		}
	}
	return nil
}

// gssapi builds GSSAPI from the listener's JAAS line (jaasKey), sasl.kerberos.service.name,
// sasl.kerberos.principal.to.local.rules and krb5.conf.
func (c *listenerConfig) gssapi(jaasKey string) (*gssapiMechanism, error) {
	text, ok := c.values["gssapi.sasl.jaas.config"]
	if !ok {
		return nil, fmt.Errorf("listener %s: GSSAPI is enabled (%s) but %s is not set: the broker's principal and keytab come from its %s line (useKeyTab=true storeKey=true keyTab=\"...\" principal=\"...\")", c.name, c.setKey["sasl.enabled.mechanisms"], jaasKey, krb5LoginModule)
	}
	j, err := ParseJAAS(text)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", jaasKey, err)
	}
	g, err := newGSSAPI(KerberosOptions{
		JAAS: j, ServiceName: c.values["sasl.kerberos.service.name"],
		Rules: splitComma(c.values["sasl.kerberos.principal.to.local.rules"]), ConfigPath: Krb5ConfigPath(),
	})
	if err != nil {
		return nil, fmt.Errorf("listener %s: GSSAPI (%s, %s): %w", c.name, jaasKey, c.setKey["sasl.kerberos.service.name"], err)
	}
	return g, nil
}

// Name is the listener's name.
func (l *Listener) Name() string { return l.name }

// Protocol is the listener's security protocol.
func (l *Listener) Protocol() string { return l.protocol }

// TLS is the tls.Config for a new connection, nil on a listener without TLS.
func (l *Listener) TLS() *tls.Config {
	if l.tls == nil {
		return nil
	}
	return l.tls.Config()
}

// TLSChange says what ReconfigureTLS does with the stores it is given.
type TLSChange int

const (
	// TLSValidate checks the new stores against the ones in service and changes nothing
	// (Kafka's SslFactory.validateReconfiguration).
	TLSValidate TLSChange = iota
	// TLSApply checks them likewise, then serves new connections with them
	// (SslFactory.reconfigure).
	TLSApply
	// TLSStartUp serves, from the start, the stores a broker's dynamic configs name: they
	// replace the static ones before any connection is served, so they are not compared
	// with stores that never served (Kafka builds its listeners from the dynamic configs at
	// start-up); they need only load.
	TLSStartUp
)

// ReconfigureTLS replaces the listener's key and trust stores with the ones values names
// (the listener's effective ssl.* values, as ListenerOptions.Values; setKey as
// ListenerOptions.SetKey), as change says: checked as Kafka's SslFactory checks a dynamic
// update (see tls.go; on the inter-broker listener the old and new stores must also trust
// each other's certificates), and then, unless TLSValidate, served. New connections get the
// new stores; connections already open keep theirs. A listener without TLS has no stores to
// change: nil. On error nothing changes.
func (l *Listener) ReconfigureTLS(values, setKey map[string]string, change TLSChange) error {
	if l.tls == nil {
		return nil
	}
	c := &listenerConfig{name: l.name, protocol: l.protocol, values: values, setKey: withDefaults(setKey, values)}
	if err := l.tls.reconfigure(c, l.interBroker, change); err != nil {
		return fmt.Errorf("listener %s: %w", l.name, err)
	}
	return nil
}

// SASL reports whether connections must authenticate with SASL.
func (l *Listener) SASL() bool {
	return l.protocol == ProtocolSASLPlaintext || l.protocol == ProtocolSASLSSL
}

// Mechanisms are the enabled SASL mechanisms, as configured.
func (l *Listener) Mechanisms() []string { return slices.Clone(l.enabled) }

// FailedAuthenticationDelay is connection.failed.authentication.delay.ms.
func (l *Listener) FailedAuthenticationDelay() time.Duration { return l.failDelay }

// MaxReceive is sasl.server.max.receive.size: the largest frame a connection may send
// before it is authenticated.
func (l *Listener) MaxReceive() int32 { return l.maxReceive }
