package config

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Connection limits (Kafka's ConnectionQuotas): max.connections, max.connections.per.ip,
// max.connections.per.ip.overrides and max.connection.creation.rate. All four may change at
// runtime (IncrementalAlterConfigs on a broker or on the cluster default), as in Kafka.
// max.connections and max.connection.creation.rate may also be set for one listener as
// listener.name.<listener>.max.connections and
// listener.name.<listener>.max.connection.creation.rate, statically or at runtime (on a
// broker or on the cluster default), as Kafka lets them change.

// connListenerKeys are the connection limits a listener may override.
var connListenerKeys = []string{"max.connections", "max.connection.creation.rate"}

// validHost is the characters Kafka's Utils.validHostPattern lets a host of
// max.connections.per.ip.overrides have (an IPv4 or IPv6 address or a host name).
var validHost = regexp.MustCompile(`^[0-9a-zA-Z\-%._:]+$`)

// connOverridesType parses max.connections.per.ip.overrides: host:count pairs separated by
// commas (blanks around either ignored; the count follows the last colon, so an IPv6 host
// keeps its own), Kafka's parseCsvMap. Each count must be an INT of at least 0. The typed
// value is a map from host, as written, to count; the normalized one lists the pairs sorted
// by host.
func connOverridesType() valueType {
	return valueType{TypeString, func(s string) (any, string, string) {
		m := map[string]int32{}
		if strings.TrimSpace(s) == "" {
			return m, "", ""
		}
		for _, pair := range strings.Split(s, ",") {
			pair = strings.TrimSpace(pair)
			i := strings.LastIndex(pair, ":")
			if i < 0 {
				return nil, "", fmt.Sprintf("%q is not host:count", pair)
			}
			host, count := strings.TrimSpace(pair[:i]), strings.TrimSpace(pair[i+1:])
			if !validHost.MatchString(host) {
				return nil, "", fmt.Sprintf("max.connections.per.ip.overrides contains invalid addresses : %s", host)
			}
			n, err := strconv.ParseInt(count, 10, 32)
			if err != nil || n < 0 {
				return nil, "", fmt.Sprintf("the count of %s, %q, is not a number of connections (0 to 2147483647)", host, count)
			}
			if _, dup := m[host]; dup {
				return nil, "", fmt.Sprintf("%s is given twice", host)
			}
			m[host] = int32(n)
		}
		return m, formatConnOverrides(m), ""
	}}
}

func formatConnOverrides(m map[string]int32) string {
	hosts := make([]string, 0, len(m))
	for h := range m {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	var b strings.Builder
	for i, h := range hosts {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s:%d", h, m[h])
	}
	return b.String()
}

// ListenerConnectionLimits returns one listener's max.connections and
// max.connection.creation.rate: its listener.name.<listener>. value when set, else the
// broker's (Kafka's valuesWithPrefixOverride).
func (b *Broker) ListenerConnectionLimits(listener string) (maxConnections, maxCreationRate int32) {
	c := b.Current()
	maxConnections, maxCreationRate = c.MaxConnections, c.MaxConnectionCreationRate
	listener = strings.ToUpper(listener)
	// Static, then the cluster-wide dynamic default, then this broker's dynamic value: the
	// later wins, as for every dynamic key.
	for _, layer := range []map[string]string{c.lay.static, c.lay.dynDefault, c.lay.dynBroker} {
		for k, v := range layer {
			l, key, ok := splitListenerKey(k)
			if !ok || l != listener {
				continue
			}
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil {
				continue // normalized when set: cannot happen
			}
			switch key {
			case "max.connections":
				maxConnections = int32(n)
			case "max.connection.creation.rate":
				maxCreationRate = int32(n)
			}
		}
	}
	return maxConnections, maxCreationRate
}

// listenerConnKey reports whether k is listener.name.<listener>.max.connections or
// .max.connection.creation.rate, and its plain key.
func listenerConnKey(k string) (string, bool) {
	_, key, ok := splitListenerKey(k)
	return key, ok && contains(connListenerKeys, key)
}
