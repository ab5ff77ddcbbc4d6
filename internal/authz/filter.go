package authz

import (
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Matching and validating ACLs, with the semantics of Kafka's AclBindingFilter,
// ResourcePatternFilter and AccessControlEntryFilter (matching), AclControlManager and
// AclApis (what CreateAcls accepts) and DeleteAcls' and DescribeAcls' filter checks.
//
// Enum values a binding or filter carries come off the wire as any int8; a value this
// code does not know is treated as Kafka treats it, as UNKNOWN.

// ErrInvalidBinding is a binding CreateAcls may not create; ErrInvalidFilter a filter
// DescribeAcls or DeleteAcls cannot use. Both are INVALID_REQUEST on the wire.
var (
	ErrInvalidBinding = errors.New("authz: invalid ACL binding")
	ErrInvalidFilter  = errors.New("authz: invalid ACL filter")
)

// OperationTwoPhaseCommit is TWO_PHASE_COMMIT (KIP-939), an operation Kafka 4.x knows and
// kmsg does not name yet.
const OperationTwoPhaseCommit kmsg.ACLOperation = 15

// knownResourceType reports whether t is a concrete resource type (not UNKNOWN or ANY).
func knownResourceType(t kmsg.ACLResourceType) bool {
	return t >= kmsg.ACLResourceTypeTopic && t <= kmsg.ACLResourceTypeUser
}

// knownOperation reports whether op is a concrete operation (not UNKNOWN or ANY).
func knownOperation(op kmsg.ACLOperation) bool {
	return op >= kmsg.ACLOperationAll && op <= OperationTwoPhaseCommit
}

// Validate checks a binding CreateAcls is asked to create, as Kafka's controller
// (AclControlManager.validateNewAcl) and broker (AclApis) do: a concrete resource type,
// pattern type LITERAL or PREFIXED, a concrete operation, permission ALLOW or DENY, a
// non-empty resource name, and for the CLUSTER resource only the name "kafka-cluster".
//
// Two checks go beyond Kafka's, which stores these and then cannot use them: the principal
// must be of the form Type:Name (Kafka's StandardAuthorizer fails on an ACL whose principal
// has no colon) and the host must not be empty (no connection comes from host "").
func (b Binding) Validate() error {
	switch {
	case !knownResourceType(b.ResourceType):
		return fmt.Errorf("%w: invalid resource type %s", ErrInvalidBinding, b.ResourceType)
	case b.PatternType != kmsg.ACLResourcePatternTypeLiteral && b.PatternType != kmsg.ACLResourcePatternTypePrefixed:
		return fmt.Errorf("%w: invalid pattern type %s", ErrInvalidBinding, b.PatternType)
	case !knownOperation(b.Operation):
		return fmt.Errorf("%w: invalid operation %s", ErrInvalidBinding, b.Operation)
	case b.Permission != kmsg.ACLPermissionTypeAllow && b.Permission != kmsg.ACLPermissionTypeDeny:
		return fmt.Errorf("%w: invalid permission type %s", ErrInvalidBinding, b.Permission)
	case b.Name == "":
		return fmt.Errorf("%w: resource name should not be empty", ErrInvalidBinding)
	case b.ResourceType == kmsg.ACLResourceTypeCluster && b.Name != ClusterName:
		return fmt.Errorf("%w: the only valid name for the CLUSTER resource is %s", ErrInvalidBinding, ClusterName)
	case b.Host == "":
		return fmt.Errorf("%w: host should not be empty", ErrInvalidBinding)
	}
	if _, err := ParsePrincipal(b.Principal); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidBinding, err)
	}
	return nil
}

// Validate checks a DescribeAcls or DeleteAcls filter as Kafka's AclControlManager does:
// no field may be UNKNOWN (a value Kafka does not know counts as UNKNOWN). ANY, and MATCH
// for the pattern type, are what filters are for.
func (f Filter) Validate() error {
	switch {
	case f.ResourceType != kmsg.ACLResourceTypeAny && !knownResourceType(f.ResourceType):
		return fmt.Errorf("%w: unknown resource type %s", ErrInvalidFilter, f.ResourceType)
	case f.PatternType < kmsg.ACLResourcePatternTypeAny || f.PatternType > kmsg.ACLResourcePatternTypePrefixed:
		return fmt.Errorf("%w: unknown pattern type %s", ErrInvalidFilter, f.PatternType)
	case f.Operation != kmsg.ACLOperationAny && !knownOperation(f.Operation):
		return fmt.Errorf("%w: unknown operation %s", ErrInvalidFilter, f.Operation)
	case f.Permission < kmsg.ACLPermissionTypeAny || f.Permission > kmsg.ACLPermissionTypeAllow:
		return fmt.Errorf("%w: unknown permission type %s", ErrInvalidFilter, f.Permission)
	}
	return nil
}

// Matches reports whether the filter selects b (AclBindingFilter.matches): every field
// that is not nil or ANY must equal b's, except the pattern type MATCH, which selects the
// bindings that apply to the resource the filter names: a LITERAL binding of that name or
// of the wildcard "*", and every PREFIXED binding whose name is a prefix of it. With MATCH
// and a nil name, every binding of the resource type matches.
func (f Filter) Matches(b Binding) bool {
	return f.matchesPattern(b.Pattern) && f.matchesEntry(b.Entry)
}

func (f Filter) matchesPattern(p Pattern) bool {
	if f.ResourceType != kmsg.ACLResourceTypeAny && f.ResourceType != p.ResourceType {
		return false
	}
	switch f.PatternType {
	case kmsg.ACLResourcePatternTypeAny, kmsg.ACLResourcePatternTypeMatch:
	default:
		if f.PatternType != p.PatternType {
			return false
		}
	}
	if f.Name == nil {
		return true
	}
	name := *f.Name
	if f.PatternType != kmsg.ACLResourcePatternTypeMatch || f.PatternType == p.PatternType {
		return name == p.Name
	}
	switch p.PatternType {
	case kmsg.ACLResourcePatternTypeLiteral:
		return name == p.Name || p.Name == Wildcard
	case kmsg.ACLResourcePatternTypePrefixed:
		return strings.HasPrefix(name, p.Name)
	}
	return false
}

func (f Filter) matchesEntry(e Entry) bool {
	switch {
	case f.Principal != nil && *f.Principal != e.Principal:
		return false
	case f.Host != nil && *f.Host != e.Host:
		return false
	case f.Operation != kmsg.ACLOperationAny && f.Operation != e.Operation:
		return false
	}
	return f.Permission == kmsg.ACLPermissionTypeAny || f.Permission == e.Permission
}
