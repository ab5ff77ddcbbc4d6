package config

import (
	"fmt"
	"sort"
	"strings"
)

// Security keys and their per-listener form.
//
// Every ssl.* and sasl.* key of brokerDefList, and connections.max.reauth.ms, may be set for
// one listener (and so may the connection limits max.connections and
// max.connection.creation.rate, see connlimits.go) as listener.name.<listener>.<key> (the listener name lower-cased, as Kafka
// writes it), which wins over the plain key for that listener. A SASL mechanism's JAAS
// configuration exists only in that form, per mechanism:
// listener.name.<listener>.<mechanism>.sasl.jaas.config (mechanism lower-cased, e.g.
// listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config), as Kafka's brokers take it. So is
// listener.name.<listener>.<mechanism>.sasl.server.callback.handler.class, and, as Kafka's
// OAUTHBEARER handlers read them, a sasl.oauthbearer.* key may also be given for the
// mechanism: listener.name.<listener>.oauthbearer.sasl.oauthbearer.<key>, which wins over
// listener.name.<listener>.sasl.oauthbearer.<key>. Those come back from ListenerSecurity
// keyed "<mechanism>.<key>".
//
// Listener keys are static: they are read at start-up (an SSL listener's key and trust
// stores are then reloaded when their files change, see internal/security), except where
// a listener's key and trust stores are (dynamicListenerKeys): those may also be set per
// broker at runtime (KIP-226), as listener.name.<listener>.<key> only, on the broker's own
// resource (a broker id), never as a cluster-wide default, as Kafka allows. Before such a
// change is stored the broker loads the new stores and checks them against the ones in
// service (internal/broker); once its metadata image carries the change the listener
// serves new connections with them.

// listenerPrefix starts every per-listener key.
const listenerPrefix = "listener.name."

// saslJaasSuffix ends a per-listener, per-mechanism JAAS configuration key.
const saslJaasSuffix = ".sasl.jaas.config"

// saslServerCallbackHandler is the per-listener, per-mechanism key choosing how a mechanism
// validates credentials: listener.name.<listener>.<mechanism>.sasl.server.callback.handler.class.
// Gregor serves one class, for OAUTHBEARER: OAuthBearerValidatorCallbackHandler.
const saslServerCallbackHandler = "sasl.server.callback.handler.class"

// OAuthBearerValidatorCallbackHandler is Kafka's class validating signed OAUTHBEARER tokens
// against the keys of a JWKS (KIP-768), by the sasl.oauthbearer.* keys.
const OAuthBearerValidatorCallbackHandler = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"

// OAuthBearerLoginCallbackHandler is Kafka's class getting OAUTHBEARER tokens from an
// identity provider (KIP-768) for the broker's own connections, by
// sasl.oauthbearer.token.endpoint.url and the sasl.login.* keys; the second name is what
// Kafka 3.1 to 3.9 called it.
const (
	OAuthBearerLoginCallbackHandler   = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
	oauthBearerLoginCallbackHandler31 = "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler"
)

// jaasMechanisms are the mechanisms a JAAS key may name (lower-cased).
var jaasMechanisms = []string{"plain", "scram-sha-256", "scram-sha-512", "oauthbearer", "gssapi"}

// dynamicListenerKeys are the per-listener keys of Kafka's SslFactory reconfigurable
// configs (SslConfigs.RECONFIGURABLE_CONFIGS) that are served at runtime: where the key and
// trust stores are, what format they have, and their passwords. As in Kafka's KRaft mode,
// a dynamic password is kept in the metadata log as it was given (KRaft does not encrypt
// ConfigRecord values; password.encoder.secret is for ZooKeeper's) and is described as
// sensitive, without its value, everywhere.
var dynamicListenerKeys = []string{
	"ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.certificate.chain", "ssl.keystore.key",
	"ssl.keystore.password", "ssl.key.password",
	"ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.certificates", "ssl.truststore.password",
}

// DynamicListenerKey reports whether k is a per-listener store key that may be set per
// broker at runtime (listener.name.<listener>.ssl.keystore.location, ...), and its
// listener (upper-cased) and plain key.
func DynamicListenerKey(k string) (listener, key string, ok bool) {
	l, key, ok := splitListenerKey(k)
	if !ok || !contains(dynamicListenerKeys, key) {
		return "", "", false
	}
	return l, key, true
}

// PerBrokerOnly reports whether key may be set dynamically on a broker's own resource
// only, never as the cluster-wide default (Kafka's DynamicBrokerConfig.PerBrokerConfigs:
// the listener stores).
func PerBrokerOnly(key string) bool {
	_, _, ok := DynamicListenerKey(key)
	return ok
}

// checkDynamicListenerKey is checkDynamic for a listener.name.<listener>.<key> key k.
func checkDynamicListenerKey(k, value string, withValue bool) (string, error) {
	_, key, _ := splitListenerKey(k)
	switch {
	case contains(connListenerKeys, key):
		if !withValue {
			return "", nil
		}
		norm, _, err := normalizeListenerKey(k, value)
		return norm, err
	case !contains(dynamicListenerKeys, key):
		if _, known, err := normalizeListenerKey(k, value); known && err != nil && withValue {
			return "", err
		}
		return "", invalid(k, value, "cannot be updated dynamically")
	case !withValue:
		return "", nil
	}
	norm, _, err := normalizeListenerKey(k, value)
	return norm, err
}

// listenerOverridable reports whether key may be set per listener.
func listenerOverridable(key string) bool {
	if brokerDefs[key] == nil {
		return false
	}
	return securityKey(key) || contains(connListenerKeys, key)
}

// securityKey reports whether key is one of the security keys a listener may override.
func securityKey(key string) bool {
	return strings.HasPrefix(key, "ssl.") || strings.HasPrefix(key, "sasl.") || key == "connections.max.reauth.ms"
}

// splitListenerKey splits listener.name.<listener>.<key> into the upper-cased listener name
// and the key; ok is false for any other key.
func splitListenerKey(k string) (listener, key string, ok bool) {
	rest, found := strings.CutPrefix(k, listenerPrefix)
	if !found {
		return "", "", false
	}
	name, key, found := strings.Cut(rest, ".")
	if !found || name == "" || key == "" {
		return "", "", false
	}
	return strings.ToUpper(name), key, true
}

// normalizeListenerKey validates one per-listener key and value; known is false when k is not
// of the listener.name. form at all.
func normalizeListenerKey(k, v string) (norm string, known bool, err error) {
	_, key, ok := splitListenerKey(k)
	if !ok {
		return "", false, nil
	}
	if mech, found := strings.CutSuffix(key, saslJaasSuffix); found {
		if !contains(jaasMechanisms, mech) {
			return "", true, invalid(k, v, fmt.Sprintf("%q is not a SASL mechanism (one of %s, lower-cased)", mech, strings.Join(jaasMechanisms, ", ")))
		}
		return strings.TrimSpace(v), true, nil
	}
	if mech, rest, found := strings.Cut(key, "."); found && contains(jaasMechanisms, mech) {
		switch {
		case rest == saslServerCallbackHandler:
			// Which classes are served is the listener's to say (internal/security), naming
			// this key.
			return strings.TrimSpace(v), true, nil
		case mech == "oauthbearer" && (strings.HasPrefix(rest, "sasl.oauthbearer.") || strings.HasPrefix(rest, "sasl.login.")) && listenerOverridable(rest):
			_, n, reason := brokerDefs[rest].vt.parse(strings.TrimSpace(v))
			if reason != "" {
				return "", true, invalid(k, v, reason)
			}
			return n, true, nil
		}
	}
	if !listenerOverridable(key) {
		return "", true, unknown(k, "per-listener configuration (only ssl.*, sasl.*, connections.max.reauth.ms, max.connections and max.connection.creation.rate keys, and <mechanism>.sasl.jaas.config and <mechanism>.sasl.server.callback.handler.class, may be set per listener)")
	}
	_, n, reason := brokerDefs[key].vt.parse(strings.TrimSpace(v))
	if reason != "" {
		return "", true, invalid(k, v, reason)
	}
	return n, true, nil
}

// ListenerSecurity returns the effective security configuration of one listener: every
// overridable key's value (the listener's own, else the broker's), keyed by the plain key,
// and the JAAS configuration of each mechanism set for it, keyed
// "<mechanism>.sasl.jaas.config". setKey maps each returned key to the configuration key it
// came from, so errors can name what the user wrote.
func (b *Broker) ListenerSecurity(listener string) (values map[string]string, setKey map[string]string) {
	c := b.Current()
	listener = strings.ToUpper(listener)
	values, setKey = map[string]string{}, map[string]string{}
	for _, d := range brokerDefList {
		if !securityKey(d.name) || brokerDefs[d.name] == nil {
			continue
		}
		if !c.null[d.name] {
			values[d.name] = c.values[d.name]
		}
		setKey[d.name] = d.name
	}
	// Static listener keys, then this broker's dynamic ones (the stores), which win.
	for _, layer := range []map[string]string{c.lay.static, c.lay.dynBroker} {
		keys := make([]string, 0, len(layer))
		for k := range layer {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			l, key, ok := splitListenerKey(k)
			if !ok || l != listener || contains(connListenerKeys, key) {
				continue
			}
			values[key] = layer[k]
			setKey[key] = k
		}
	}
	return values, setKey
}

// WithDynamic returns the configuration this broker would have with m as its whole set of
// per-broker dynamic configs, without publishing it: what a change is checked against
// before it is stored (the listener stores it names are loaded from it).
func (b *Broker) WithDynamic(m map[string]string) (*Broker, error) {
	cur := b.Current()
	lay := copyLayers(cur.lay)
	lay.dynBroker = make(map[string]string, len(m))
	for k, v := range m {
		norm, err := checkDynamic(k, v, true)
		if err != nil {
			return nil, err
		}
		lay.dynBroker[k] = norm
	}
	next, err := build(lay)
	if err != nil {
		return nil, err
	}
	return next, nil
}

// passwordType is Kafka's PASSWORD: any text, reported as sensitive (DescribeConfigs gives
// no value).
func passwordType() valueType {
	return valueType{TypePassword, func(s string) (any, string, string) { return s, s, "" }}
}

// DelegationTokenSecret is the key delegation tokens are signed with:
// delegation.token.secret.key, else its former name delegation.token.master.key; "" when
// delegation tokens are disabled.
func (b *Broker) DelegationTokenSecret() string {
	c := b.Current()
	if c.DelegationTokenSecretKey != "" {
		return c.DelegationTokenSecretKey
	}
	if c.null["delegation.token.master.key"] {
		return ""
	}
	return c.values["delegation.token.master.key"]
}
