package authz

import (
	"cmp"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Authorizer decides whether a principal, connected from a host, may perform an operation on
// a resource. The api handlers ask it with the connection's principal and the client's
// address; it never calls back into them.
type Authorizer interface {
	// Authorize reports whether p, connected from host, may perform op on the resource of
	// type rt named name (the cluster is named ClusterName).
	Authorize(p Principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool
	// AuthorizedOperations is the bit field of the operations valid for the resource type
	// (SupportedOperations) that p, connected from host, may perform on the resource: bit i
	// set when operation i is allowed, as Metadata, DescribeCluster and DescribeGroups
	// return it.
	AuthorizedOperations(p Principal, host string, rt kmsg.ACLResourceType, name string) int32
}

// Options are the authorization configs of the broker.
type Options struct {
	// SuperUsers are principals ("Type:Name", as super.users lists them) allowed every
	// operation on every resource whatever the ACLs say.
	SuperUsers []string
	// AllowEveryoneIfNoACLFound (allow.everyone.if.no.acl.found) is the answer for a
	// resource no ACL applies to: true allows every principal, false only super users.
	AllowEveryoneIfNoACLFound bool
}

// ACLs is Kafka's StandardAuthorizer over one set of bindings: an immutable snapshot, safe for
// concurrent use. A change of the ACLs or of the configs builds a new one.
type ACLs struct {
	bindings   []Binding              // sorted by compareBindings
	superUsers map[Principal]struct{} // super.users, split at their first colon
	allowIfNo  bool
	index      map[kmsg.ACLResourceType]*typeIndex
}

var _ Authorizer = (*ACLs)(nil)

// NewACLs builds the authorizer of the bindings under opts. It keeps its own copy of both.
// Bindings are used as they are: validating them (as CreateAcls does) is the caller's.
// A binding whose pattern type is neither LITERAL nor PREFIXED applies to no resource; one
// whose permission is not ALLOW acts as a DENY; one whose principal has no colon matches no
// principal. Each still counts as an ACL of its pattern for allow.everyone.if.no.acl.found.
func NewACLs(bindings []Binding, opts Options) *ACLs {
	a := &ACLs{
		bindings:   slices.Clone(bindings),
		superUsers: make(map[Principal]struct{}, len(opts.SuperUsers)),
		allowIfNo:  opts.AllowEveryoneIfNoACLFound,
	}
	slices.SortStableFunc(a.bindings, compareBindings)
	for _, s := range opts.SuperUsers {
		// A principal's string always holds a colon, so an entry without one names no one.
		if typ, name, ok := strings.Cut(strings.TrimSpace(s), ":"); ok {
			a.superUsers[Principal{Type: typ, Name: name}] = struct{}{}
		}
	}
	a.index = buildIndex(a.bindings)
	return a
}

// compareBindings orders bindings as Bindings returns them: by resource type, resource name,
// pattern type, principal, host, operation and permission.
func compareBindings(x, y Binding) int {
	return cmp.Or(
		cmp.Compare(x.ResourceType, y.ResourceType),
		strings.Compare(x.Name, y.Name),
		cmp.Compare(x.PatternType, y.PatternType),
		strings.Compare(x.Principal, y.Principal),
		strings.Compare(x.Host, y.Host),
		cmp.Compare(x.Operation, y.Operation),
		cmp.Compare(x.Permission, y.Permission),
	)
}

// Len is the number of bindings.
func (a *ACLs) Len() int { return len(a.bindings) }

// Bindings is a copy of the bindings, ordered by resource type, resource name, pattern type,
// principal, host, operation and permission.
func (a *ACLs) Bindings() []Binding { return slices.Clone(a.bindings) }

// isSuperUser reports whether p.String() is one of super.users, as Kafka compares them.
// Splitting at the first colon is one-to-one over strings that hold one, so comparing split
// forms is comparing strings; only a type that itself holds a colon needs re-splitting.
func (a *ACLs) isSuperUser(p Principal) bool {
	if len(a.superUsers) == 0 {
		return false
	}
	if strings.Contains(p.Type, ":") {
		typ, name, _ := strings.Cut(p.String(), ":")
		p = Principal{Type: typ, Name: name}
	}
	_, ok := a.superUsers[p]
	return ok
}

// verdict collects what the ACLs that apply to the resource say about p from host.
func (a *ACLs) verdict(p Principal, host string, rt kmsg.ACLResourceType, name string) verdict {
	var v verdict
	if t := a.index[rt]; t != nil {
		t.apply(name, p, host, &v)
	}
	return v
}

// Authorize answers by Kafka's rules (see the package documentation): super users may do
// anything; otherwise a matching DENY ACL denies, a matching ALLOW ACL allows, and a resource
// no ACL applies to is open to everyone only under allow.everyone.if.no.acl.found. An
// operation outside 0..31 is allowed to super users only.
func (a *ACLs) Authorize(p Principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	if a.isSuperUser(p) {
		return true
	}
	want := opBit(op)
	if want == 0 {
		return false
	}
	v := a.verdict(p, host, rt, name)
	switch {
	case v.deny&want != 0:
		return false
	case v.allow&want != 0:
		return true
	case v.found:
		return false
	default:
		return a.allowIfNo
	}
}

// AuthorizedOperations is the set of the operations valid for rt that Authorize allows, as a
// bit field, computed in one pass over the ACLs of the resource. It is 0 for a resource type
// that is not a concrete one (Kafka refuses to compute it).
func (a *ACLs) AuthorizedOperations(p Principal, host string, rt kmsg.ACLResourceType, name string) int32 {
	supported := uint32(SupportedOperations(rt))
	if a.isSuperUser(p) {
		return int32(supported)
	}
	v := a.verdict(p, host, rt, name)
	if !v.found {
		if a.allowIfNo {
			return int32(supported)
		}
		return 0
	}
	return int32(supported & v.allow &^ v.deny)
}

// AllowAll is the authorizer of a broker with no authorizer.class.name: every principal may
// do everything, and AuthorizedOperations is every operation valid for the resource type (as
// Kafka's broker answers without an authorizer).
type AllowAll struct{}

var _ Authorizer = AllowAll{}

// Authorize allows everything.
func (AllowAll) Authorize(Principal, string, kmsg.ACLOperation, kmsg.ACLResourceType, string) bool {
	return true
}

// AuthorizedOperations is SupportedOperations(rt).
func (AllowAll) AuthorizedOperations(_ Principal, _ string, rt kmsg.ACLResourceType, _ string) int32 {
	return SupportedOperations(rt)
}

// SupportedOperations is the bit field (bit i for operation i) of the operations valid for a
// resource type, Kafka's AclEntry.supportedOperations; 0 for a type that is not concrete
// (UNKNOWN, ANY or a code Kafka does not define).
func SupportedOperations(rt kmsg.ACLResourceType) int32 {
	var ops []kmsg.ACLOperation
	switch rt {
	case kmsg.ACLResourceTypeTopic:
		ops = []kmsg.ACLOperation{kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationCreate,
			kmsg.ACLOperationDescribe, kmsg.ACLOperationDelete, kmsg.ACLOperationAlter,
			kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs}
	case kmsg.ACLResourceTypeGroup:
		ops = []kmsg.ACLOperation{kmsg.ACLOperationRead, kmsg.ACLOperationDescribe, kmsg.ACLOperationDelete,
			kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs}
	case kmsg.ACLResourceTypeCluster:
		ops = []kmsg.ACLOperation{kmsg.ACLOperationCreate, kmsg.ACLOperationClusterAction,
			kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs, kmsg.ACLOperationIdempotentWrite,
			kmsg.ACLOperationAlter, kmsg.ACLOperationDescribe}
	case kmsg.ACLResourceTypeTransactionalId:
		ops = []kmsg.ACLOperation{kmsg.ACLOperationDescribe, kmsg.ACLOperationWrite}
	case kmsg.ACLResourceTypeDelegationToken:
		ops = []kmsg.ACLOperation{kmsg.ACLOperationDescribe}
	case kmsg.ACLResourceTypeUser:
		ops = []kmsg.ACLOperation{kmsg.ACLOperationCreateTokens, kmsg.ACLOperationDescribeTokens}
	}
	var bits uint32
	for _, op := range ops {
		bits |= opBit(op)
	}
	return int32(bits)
}
