package quota

import (
	"fmt"
	"math"
	"net"
	"net/netip"
	"sort"
	"strings"
)

// Entity types, as Kafka names them (ClientQuotaEntity).
const (
	TypeUser     = "user"
	TypeClientID = "client-id"
	TypeIP       = "ip"
)

// Quota keys, as Kafka names them (QuotaConfig).
const (
	ProducerByteRate       = "producer_byte_rate"
	ConsumerByteRate       = "consumer_byte_rate"
	RequestPercentage      = "request_percentage"
	ControllerMutationRate = "controller_mutation_rate"
	ConnectionCreationRate = "connection_creation_rate"
)

// NameKind says what an entity type's part of an Entity is.
type NameKind uint8

const (
	Absent  NameKind = iota // the entity has no part of this type
	Default                 // the default entity of the type (a null name on the wire)
	Named                   // the entity named Name
)

// Name is one entity type's part of an Entity. The zero value is Absent.
type Name struct {
	Kind NameKind
	Name string // set when Kind is Named
}

// Of is the part named name.
func Of(name string) Name { return Name{Kind: Named, Name: name} }

// DefaultName is the default entity's part.
var DefaultName = Name{Kind: Default}

// Entity is what a client quota is set on: a comparable value, so it keys maps. A valid
// entity (ParseEntity) has a user, a client id, both, or an IP alone.
type Entity struct {
	User, ClientID, IP Name
}

// Part is one (type, name) of an entity as requests and records carry it; a nil Name is the
// default entity.
type Part struct {
	Type string
	Name *string
}

// ParseEntity checks the parts of an entity as Kafka's ClientQuotaControlManager does and
// returns it; the error text is Kafka's message (INVALID_REQUEST).
func ParseEntity(parts []Part) (Entity, error) {
	var e Entity
	if len(parts) == 0 {
		return e, fmt.Errorf("Invalid empty client quota entity")
	}
	for _, p := range parts {
		var n *Name
		switch p.Type {
		case TypeUser:
			n = &e.User
		case TypeClientID:
			n = &e.ClientID
		case TypeIP:
			n = &e.IP
		default:
			return e, fmt.Errorf("Unhandled client quota entity type: %s", p.Type)
		}
		if n.Kind != Absent {
			return e, fmt.Errorf("Invalid client quota entity, duplicate entity entry %s", p.Type)
		}
		if p.Name == nil {
			*n = DefaultName
			continue
		}
		if *p.Name == "" {
			return e, fmt.Errorf("Empty %s not supported", p.Type)
		}
		*n = Of(*p.Name)
	}
	if e.IP.Kind != Absent {
		if e.User.Kind != Absent || e.ClientID.Kind != Absent {
			// Kafka's message, its missing space included.
			return e, fmt.Errorf("Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId")
		}
		// Kafka also accepts a host name it can resolve; the controller's core does no I/O,
		// so only an address is taken.
		if e.IP.Kind == Named && net.ParseIP(e.IP.Name) == nil {
			return e, fmt.Errorf("%s is not a valid IP or resolvable host.", e.IP.Name)
		}
	}
	return e, nil
}

// Parts is the entity as (type, name) pairs, in the order user, client-id, ip.
func (e Entity) Parts() []Part {
	var ps []Part
	add := func(typ string, n Name) {
		switch n.Kind {
		case Default:
			ps = append(ps, Part{Type: typ})
		case Named:
			s := n.Name
			ps = append(ps, Part{Type: typ, Name: &s})
		}
	}
	add(TypeUser, e.User)
	add(TypeClientID, e.ClientID)
	add(TypeIP, e.IP)
	return ps
}

// String writes the entity as kafka-configs does its --entity-type/--entity-name pairs:
// "user=alice, client-id=<default>".
func (e Entity) String() string {
	var b strings.Builder
	for i, p := range e.Parts() {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(p.Type)
		b.WriteByte('=')
		if p.Name == nil {
			b.WriteString("<default>")
		} else {
			b.WriteString(*p.Name)
		}
	}
	return b.String()
}

// keyType is the type Kafka's QuotaConfig gives a key's value.
type keyType uint8

const (
	typeLong keyType = iota
	typeInt
	typeDouble
)

// userClientKeys are the keys of user and client-id entities; ipKeys those of ip entities.
var (
	userClientKeys = map[string]keyType{
		ProducerByteRate:       typeLong,
		ConsumerByteRate:       typeLong,
		RequestPercentage:      typeDouble,
		ControllerMutationRate: typeDouble,
	}
	ipKeys = map[string]keyType{ConnectionCreationRate: typeInt}
	// notEnforced are Kafka's keys that Gregor knows but does not enforce yet.
	notEnforced = map[string]bool{ControllerMutationRate: true}
)

// ValidateValue checks one key and value set on e (a parsed entity) as Kafka's
// ClientQuotaControlManager does; the error text is Kafka's message (INVALID_REQUEST).
func ValidateValue(e Entity, key string, value float64) error {
	keys := userClientKeys
	if e.IP.Kind != Absent {
		keys = ipKeys
	}
	t, ok := keys[key]
	if !ok {
		return fmt.Errorf("Invalid configuration key %s", key)
	}
	if notEnforced[key] {
		// Kafka's key, refused rather than stored and ignored until its enforcement
		// (KIP-599 for controller mutations) is built.
		return fmt.Errorf("Quota %s is not enforced by Gregor yet", key)
	}
	if !(value > 0) {
		return fmt.Errorf("Quota %s must be greater than 0", key)
	}
	switch t {
	case typeInt:
		if value > math.MaxInt32 {
			return fmt.Errorf("Proposed value for %s is too large for an INT.", key)
		}
	case typeLong:
		if value > math.MaxInt64 {
			return fmt.Errorf("Proposed value for %s is too large for a LONG.", key)
		}
	case typeDouble:
		return nil
	}
	if math.Abs(math.Mod(value, 1)) > 1e-6 {
		return fmt.Errorf("%s cannot be a fractional value.", key)
	}
	return nil
}

// Table is every client quota set, by entity then key. A Table in a published metadata image
// is never modified.
type Table map[Entity]map[string]float64

// Entities returns the entities of t in a stable order (by their String).
func (t Table) Entities() []Entity {
	es := make([]Entity, 0, len(t))
	for e := range t {
		es = append(es, e)
	}
	sort.Slice(es, func(i, j int) bool { return es[i].String() < es[j].String() })
	return es
}

// SensorKey names whose rate a quota is measured on (Kafka's metric tags): a user, a client
// id or both; "" is a tag left out.
type SensorKey struct {
	User, ClientID string
}

// Resolve returns the quota of key that applies to a client of user with clientID, Kafka's
// DefaultQuotaCallback precedence (see the package comment), and whose rate it bounds. ok is
// false when no quota applies. An empty user or client id matches only entities without that
// part, as in Kafka (where an empty tag is one left out).
func (t Table) Resolve(key, user, clientID string) (limit float64, sensor SensorKey, ok bool) {
	if len(t) == 0 {
		return 0, SensorKey{}, false
	}
	u, c := Of(user), Of(clientID)
	both := SensorKey{User: user, ClientID: clientID}
	candidates := [...]struct {
		e     Entity
		s     SensorKey
		valid bool
	}{
		{Entity{User: u, ClientID: c}, both, user != "" && clientID != ""},
		{Entity{User: u, ClientID: DefaultName}, both, user != "" && clientID != ""},
		{Entity{User: u}, SensorKey{User: user}, user != ""},
		{Entity{User: DefaultName, ClientID: c}, both, user != "" && clientID != ""},
		{Entity{User: DefaultName, ClientID: DefaultName}, both, user != "" && clientID != ""},
		{Entity{User: DefaultName}, SensorKey{User: user}, user != ""},
		{Entity{ClientID: c}, SensorKey{ClientID: clientID}, clientID != ""},
		{Entity{ClientID: DefaultName}, SensorKey{ClientID: clientID}, clientID != ""},
	}
	for _, cand := range candidates {
		if !cand.valid {
			continue
		}
		if v, found := t[cand.e][key]; found {
			return v, cand.s, true
		}
	}
	return 0, SensorKey{}, false
}

// ResolveIP returns the quota of key (ConnectionCreationRate) that applies to connections
// from ip: the ip entity naming that address, else the default ip entity, as Kafka's
// ConnectionQuotas.connectionRateForIp. An entity names an address in any form net.ParseIP
// takes (an IPv4-mapped IPv6 address is its IPv4 address). ok is false when neither is set.
func (t Table) ResolveIP(key string, ip netip.Addr) (limit float64, ok bool) {
	if len(t) == 0 {
		return 0, false
	}
	ip = ip.Unmap()
	if v, found := t[Entity{IP: Of(ip.String())}][key]; found {
		return v, true
	}
	for e, q := range t {
		if e.IP.Kind != Named {
			continue
		}
		if a, err := netip.ParseAddr(e.IP.Name); err == nil && a.Unmap() == ip {
			if v, found := q[key]; found {
				return v, true
			}
		}
	}
	v, found := t[Entity{IP: DefaultName}][key]
	return v, found
}
