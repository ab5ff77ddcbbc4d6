package authz

import (
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Principal is an authenticated identity, Kafka's KafkaPrincipal: a type ("User" for every
// principal Kafka's own authenticators produce) and a name. A connection that has not
// authenticated (PLAINTEXT, or SSL without a client certificate) is Anonymous.
type Principal struct {
	Type string
	Name string
}

// UserType is the principal type of every authenticated user.
const UserType = "User"

// Anonymous is the principal of an unauthenticated connection (Kafka's User:ANONYMOUS).
var Anonymous = Principal{Type: UserType, Name: "ANONYMOUS"}

// User is the principal User:name.
func User(name string) Principal { return Principal{Type: UserType, Name: name} }

// String is the principal as ACLs and super.users write it: "Type:Name".
func (p Principal) String() string { return p.Type + ":" + p.Name }

// ErrInvalidPrincipal is a principal string not of the form Type:Name.
var ErrInvalidPrincipal = errors.New("authz: invalid principal")

// ParsePrincipal reads "Type:Name" (the name may itself hold colons, as a certificate's
// distinguished name mapped by ssl.principal.mapping.rules can). Neither part may be empty.
func ParsePrincipal(s string) (Principal, error) {
	typ, name, ok := strings.Cut(s, ":")
	if !ok || typ == "" || name == "" {
		return Principal{}, fmt.Errorf("%w: %q is not of the form Type:Name", ErrInvalidPrincipal, s)
	}
	return Principal{Type: typ, Name: name}, nil
}

// Wildcard is the resource name, principal name and host that match every one in an ACL.
const Wildcard = "*"

// WildcardPrincipal is the principal of an ACL that applies to every user ("User:*").
const WildcardPrincipal = "User:*"

// ClusterName is the name of the one CLUSTER resource ("kafka-cluster").
const ClusterName = "kafka-cluster"

// Pattern is the resource side of an ACL: a resource type, a name, and whether the name is
// matched literally (the wildcard "*" matches every name) or as a prefix.
type Pattern struct {
	ResourceType kmsg.ACLResourceType
	Name         string
	PatternType  kmsg.ACLResourcePatternType // Literal or Prefixed in a stored binding
}

// Entry is the access side of an ACL: who (a principal string such as "User:alice", or
// "User:*"), from where (a host address, or "*"), which operation, allowed or denied.
type Entry struct {
	Principal  string
	Host       string
	Operation  kmsg.ACLOperation
	Permission kmsg.ACLPermissionType // Allow or Deny in a stored binding
}

// Binding is one ACL: a Pattern and an Entry, as CreateAcls creates it and the metadata log
// stores it.
type Binding struct {
	Pattern
	Entry
}

// NewBinding is the binding of an ACL as Kafka's requests spell it field by field
// (CreateAcls' creations, DeleteAcls' matching ACLs).
func NewBinding(rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType, principal, host string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) Binding {
	return Binding{
		Pattern: Pattern{ResourceType: rt, Name: name, PatternType: pt},
		Entry:   Entry{Principal: principal, Host: host, Operation: op, Permission: perm},
	}
}

// String is the binding as Kafka's tools print it.
func (b Binding) String() string {
	return fmt.Sprintf("(pattern=ResourcePattern(resourceType=%s, name=%s, patternType=%s), entry=(principal=%s, host=%s, operation=%s, permissionType=%s))",
		b.ResourceType, b.Name, b.PatternType, b.Principal, b.Host, b.Operation, b.Permission)
}

// Filter selects bindings, for DescribeAcls and DeleteAcls. A nil string matches any value;
// the Any enum values match any value; PatternType Match matches the bindings that would
// apply to the named resource (a literal of that name, the literal wildcard, and every
// prefix of the name).
type Filter struct {
	ResourceType kmsg.ACLResourceType
	Name         *string
	PatternType  kmsg.ACLResourcePatternType
	Principal    *string
	Host         *string
	Operation    kmsg.ACLOperation
	Permission   kmsg.ACLPermissionType
}
