package config

import (
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
)

// Listener is one endpoint of listeners or advertised.listeners, written
// NAME://host:port. Name is upper-cased (Kafka normalizes listener names).
// An empty Host binds every interface; when advertised, an empty Host means
// the server must substitute its own host name (as Kafka does with the
// canonical local host name). IPv6 hosts are written in brackets and stored
// without them.
type Listener struct {
	Name string
	Host string
	Port int
	// SecurityProtocol is the listener's protocol from
	// listener.security.protocol.map: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.
	SecurityProtocol string
}

// Addr is host:port for net.Listen / net.Dial.
func (l Listener) Addr() string { return net.JoinHostPort(l.Host, strconv.Itoa(l.Port)) }

// String is the listener as written in server.properties.
func (l Listener) String() string { return l.Name + "://" + l.Addr() }

func formatListeners(ls []Listener) string {
	s := make([]string, len(ls))
	for i, l := range ls {
		s[i] = l.String()
	}
	return strings.Join(s, ",")
}

// Kafka's endpoint pattern: NAME://host:port with an optional [] around the host.
var endpointRE = regexp.MustCompile(`^([A-Za-z0-9_\-.]+)://\[?([0-9A-Za-z\-%._:]*)\]?:(-?[0-9]+)$`)

func parsePort(s string) (int, error) {
	p, err := strconv.Atoi(s)
	if err != nil || p < 0 || p > 65535 {
		return 0, fmt.Errorf("port %s is not between 0 and 65535", s)
	}
	return p, nil
}

// ParseListener parses one NAME://host:port endpoint. SecurityProtocol is left
// empty; Parse fills it from listener.security.protocol.map.
func ParseListener(s string) (Listener, error) {
	m := endpointRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return Listener{}, fmt.Errorf("%q is not a listener of the form NAME://host:port", s)
	}
	port, err := parsePort(m[3])
	if err != nil {
		return Listener{}, fmt.Errorf("%q: %w", s, err)
	}
	return Listener{Name: strings.ToUpper(m[1]), Host: m[2], Port: port}, nil
}

// listenersType parses a LIST of endpoints. Names must be distinct; with
// uniquePorts, so must non-zero ports (Kafka's rule for listeners, which it
// relaxes only for one IPv4 and one IPv6 listener sharing a port).
func listenersType(uniquePorts bool) valueType {
	return valueType{TypeList, func(s string) (any, string, string) {
		parts, r := splitList(s)
		if r != "" {
			return nil, "", r
		}
		ls := make([]Listener, 0, len(parts))
		names := map[string]bool{}
		ports := map[int]bool{}
		for _, p := range parts {
			l, err := ParseListener(p)
			if err != nil {
				return nil, "", err.Error()
			}
			if names[l.Name] {
				return nil, "", fmt.Sprintf("listener name %s is used twice", l.Name)
			}
			names[l.Name] = true
			if uniquePorts && l.Port != 0 {
				if ports[l.Port] {
					return nil, "", fmt.Sprintf("port %d is used by two listeners", l.Port)
				}
				ports[l.Port] = true
			}
			ls = append(ls, l)
		}
		return ls, formatListeners(ls), ""
	}}
}

// Security protocols Kafka knows.
var securityProtocols = []string{"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}

// protocolMapType parses listener.security.protocol.map: NAME:PROTOCOL,...
// The typed value is a map from upper-cased listener name to protocol.
func protocolMapType() valueType {
	return valueType{TypeString, func(s string) (any, string, string) {
		parts, r := splitList(s)
		if r != "" {
			return nil, "", r
		}
		m := make(map[string]string, len(parts))
		norm := make([]string, 0, len(parts))
		for _, p := range parts {
			name, proto, ok := strings.Cut(p, ":")
			name = strings.ToUpper(strings.TrimSpace(name))
			proto = strings.ToUpper(strings.TrimSpace(proto))
			if !ok || name == "" {
				return nil, "", fmt.Sprintf("%q is not of the form LISTENER:PROTOCOL", p)
			}
			if !contains(securityProtocols, proto) {
				return nil, "", fmt.Sprintf("%q is not one of %s", proto, strings.Join(securityProtocols, ", "))
			}
			if _, dup := m[name]; dup {
				return nil, "", fmt.Sprintf("listener %s is mapped twice", name)
			}
			m[name] = proto
			norm = append(norm, name+":"+proto)
		}
		return m, strings.Join(norm, ","), ""
	}}
}

// upperListType is a LIST of listener names, upper-cased.
func upperListType() valueType {
	return valueType{TypeString, func(s string) (any, string, string) {
		parts, r := splitList(strings.ToUpper(s))
		if r != "" {
			return nil, "", r
		}
		return parts, strings.Join(parts, ","), ""
	}}
}

// Voter is one entry of controller.quorum.voters: id@host:port.
type Voter struct {
	ID   int32
	Host string
	Port int
}

var voterRE = regexp.MustCompile(`^(-?[0-9]+)@\[?([0-9A-Za-z\-%._:]+)\]?:(-?[0-9]+)$`)

// ParseVoters parses controller.quorum.voters ("1@host1:9093,2@host2:9093").
// Ids must be >= 0 and distinct; the empty string is no voters.
func ParseVoters(s string) ([]Voter, error) {
	parts, r := splitList(s)
	if r != "" {
		return nil, fmt.Errorf("%s", r)
	}
	vs := make([]Voter, 0, len(parts))
	ids := map[int32]bool{}
	for _, p := range parts {
		m := voterRE.FindStringSubmatch(p)
		if m == nil {
			return nil, fmt.Errorf("%q is not a voter of the form id@host:port", p)
		}
		id, err := strconv.ParseInt(m[1], 10, 32)
		if err != nil || id < 0 {
			return nil, fmt.Errorf("%q: voter id must be an integer >= 0", p)
		}
		port, err := parsePort(m[3])
		if err != nil {
			return nil, fmt.Errorf("%q: %w", p, err)
		}
		if ids[int32(id)] {
			return nil, fmt.Errorf("voter id %d is listed twice", id)
		}
		ids[int32(id)] = true
		vs = append(vs, Voter{ID: int32(id), Host: m[2], Port: port})
	}
	return vs, nil
}

func votersType() valueType {
	return valueType{TypeList, func(s string) (any, string, string) {
		vs, err := ParseVoters(s)
		if err != nil {
			return nil, "", err.Error()
		}
		norm := make([]string, len(vs))
		for i, v := range vs {
			norm[i] = strconv.Itoa(int(v.ID)) + "@" + net.JoinHostPort(v.Host, strconv.Itoa(v.Port))
		}
		return strings.Join(norm, ","), strings.Join(norm, ","), ""
	}}
}

// hostPortListType is a LIST of host:port (controller.quorum.bootstrap.servers).
func hostPortListType() valueType {
	return valueType{TypeList, func(s string) (any, string, string) {
		parts, r := splitList(s)
		if r != "" {
			return nil, "", r
		}
		for _, p := range parts {
			_, port, err := net.SplitHostPort(p)
			if err != nil {
				return nil, "", fmt.Sprintf("%q is not host:port", p)
			}
			if _, err := parsePort(port); err != nil {
				return nil, "", fmt.Sprintf("%q: %v", p, err)
			}
		}
		return parts, strings.Join(parts, ","), ""
	}}
}

// hostPortType is one host:port, or empty.
func hostPortType() valueType {
	return valueType{TypeString, func(s string) (any, string, string) {
		s = strings.TrimSpace(s)
		if s == "" {
			return "", "", ""
		}
		_, port, err := net.SplitHostPort(s)
		if err != nil {
			return nil, "", fmt.Sprintf("%q is not host:port", s)
		}
		if _, err := parsePort(port); err != nil {
			return nil, "", fmt.Sprintf("%q: %v", s, err)
		}
		return s, s, ""
	}}
}
