package authz

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	topicT   = kmsg.ACLResourceTypeTopic
	groupT   = kmsg.ACLResourceTypeGroup
	clusterT = kmsg.ACLResourceTypeCluster
	txnT     = kmsg.ACLResourceTypeTransactionalId

	opAll             = kmsg.ACLOperationAll
	opRead            = kmsg.ACLOperationRead
	opWrite           = kmsg.ACLOperationWrite
	opCreate          = kmsg.ACLOperationCreate
	opDelete          = kmsg.ACLOperationDelete
	opAlter           = kmsg.ACLOperationAlter
	opDescribe        = kmsg.ACLOperationDescribe
	opClusterAction   = kmsg.ACLOperationClusterAction
	opDescribeConfigs = kmsg.ACLOperationDescribeConfigs
	opAlterConfigs    = kmsg.ACLOperationAlterConfigs
	opIdempotentWrite = kmsg.ACLOperationIdempotentWrite
)

func litPattern(rt kmsg.ACLResourceType, name string) Pattern {
	return Pattern{ResourceType: rt, Name: name, PatternType: kmsg.ACLResourcePatternTypeLiteral}
}

func prefixPattern(rt kmsg.ACLResourceType, name string) Pattern {
	return Pattern{ResourceType: rt, Name: name, PatternType: kmsg.ACLResourcePatternTypePrefixed}
}

func allowEntry(principal, host string, op kmsg.ACLOperation) Entry {
	return Entry{Principal: principal, Host: host, Operation: op, Permission: kmsg.ACLPermissionTypeAllow}
}

func denyEntry(principal, host string, op kmsg.ACLOperation) Entry {
	return Entry{Principal: principal, Host: host, Operation: op, Permission: kmsg.ACLPermissionTypeDeny}
}

func aclOf(p Pattern, e Entry) Binding { return Binding{Pattern: p, Entry: e} }

type authCase struct {
	name     string
	bindings []Binding
	opts     Options
	p        Principal
	host     string
	op       kmsg.ACLOperation
	rt       kmsg.ACLResourceType
	resource string
	want     bool
}

func TestAuthorize(t *testing.T) {
	alice, bob := User("alice"), User("bob")
	const h1, h2 = "10.0.0.1", "10.0.0.2"
	cases := []authCase{
		// Resource matching.
		{name: "literal name", bindings: []Binding{aclOf(litPattern(topicT, "orders"), allowEntry("User:alice", "*", opRead))},
			p: alice, host: h1, op: opRead, rt: topicT, resource: "orders", want: true},
		{name: "literal is not a prefix", bindings: []Binding{aclOf(litPattern(topicT, "orders"), allowEntry("User:alice", "*", opRead))},
			p: alice, host: h1, op: opRead, rt: topicT, resource: "orders-eu", want: false},
		{name: "literal of another type", bindings: []Binding{aclOf(litPattern(groupT, "orders"), allowEntry("User:alice", "*", opRead))},
			p: alice, host: h1, op: opRead, rt: topicT, resource: "orders", want: false},
		{name: "literal wildcard", bindings: []Binding{aclOf(litPattern(topicT, "*"), allowEntry("User:alice", "*", opRead))},
			p: alice, host: h1, op: opRead, rt: topicT, resource: "anything", want: true},
		{name: "prefixed", bindings: []Binding{aclOf(prefixPattern(topicT, "ord"), allowEntry("User:alice", "*", opRead))},
			p: alice, host: h1, op: opRead, rt: topicT, resource: "orders", want: true},
		{name: "prefixed equal to the name", bindings: []Binding{aclOf(prefixPattern(topicT, "orders"), allowEntry("User:alice", "*", opRead))},
			p: alice, host: h1, op: opRead, rt: topicT, resource: "orders", want: true},
		{name: "prefixed longer than the name", bindings: []Binding{aclOf(prefixPattern(topicT, "orders-"), allowEntry("User:alice", "*", opRead))},
			p: alice, host: h1, op: opRead, rt: topicT, resource: "orders", want: false},
		{name: "prefixed star is not a wildcard", bindings: []Binding{aclOf(prefixPattern(topicT, "*"), allowEntry("User:alice", "*", opRead))},
			p: alice, host: h1, op: opRead, rt: topicT, resource: "orders", want: false},
		{name: "prefixed star matches names starting with a star", bindings: []Binding{aclOf(prefixPattern(topicT, "*"), allowEntry("User:alice", "*", opRead))},
			p: alice, host: h1, op: opRead, rt: topicT, resource: "*x", want: true},
		{name: "literal star name is the wildcard", bindings: []Binding{aclOf(litPattern(topicT, "*"), allowEntry("User:alice", "*", opRead))},
			p: alice, host: h1, op: opRead, rt: topicT, resource: "*", want: true},
		{name: "cluster", bindings: []Binding{aclOf(litPattern(clusterT, ClusterName), allowEntry("User:alice", "*", opClusterAction))},
			p: alice, host: h1, op: opClusterAction, rt: clusterT, resource: ClusterName, want: true},
		{name: "a pattern type other than literal and prefixed applies to nothing", bindings: []Binding{aclOf(Pattern{ResourceType: topicT, Name: "orders", PatternType: kmsg.ACLResourcePatternTypeMatch}, allowEntry("User:alice", "*", opRead))},
			opts: Options{AllowEveryoneIfNoACLFound: true}, p: alice, host: h1, op: opRead, rt: topicT, resource: "orders", want: true},

		// Principals and hosts.
		{name: "another principal", bindings: []Binding{aclOf(litPattern(topicT, "orders"), allowEntry("User:alice", "*", opRead))},
			p: bob, host: h1, op: opRead, rt: topicT, resource: "orders", want: false},
		{name: "wildcard principal", bindings: []Binding{aclOf(litPattern(topicT, "orders"), allowEntry("User:*", "*", opRead))},
			p: bob, host: h1, op: opRead, rt: topicT, resource: "orders", want: true},
		{name: "User:* matches a principal of another type", bindings: []Binding{aclOf(litPattern(topicT, "orders"), allowEntry("User:*", "*", opRead))},
			p: Principal{Type: "Group", Name: "ops"}, host: h1, op: opRead, rt: topicT, resource: "orders", want: true},
		{name: "Group:* is not a wildcard", bindings: []Binding{aclOf(litPattern(topicT, "orders"), allowEntry("Group:*", "*", opRead))},
			p: Principal{Type: "Group", Name: "ops"}, host: h1, op: opRead, rt: topicT, resource: "orders", want: false},
		{name: "principal type matters", bindings: []Binding{aclOf(litPattern(topicT, "orders"), allowEntry("Group:alice", "*", opRead))},
			p: alice, host: h1, op: opRead, rt: topicT, resource: "orders", want: false},
		{name: "principal name with colons", bindings: []Binding{aclOf(litPattern(topicT, "orders"), allowEntry("User:CN=a:b", "*", opRead))},
			p: User("CN=a:b"), host: h1, op: opRead, rt: topicT, resource: "orders", want: true},
		{name: "principal without a colon matches no one", bindings: []Binding{aclOf(litPattern(topicT, "orders"), allowEntry("alice", "*", opRead))},
			opts: Options{AllowEveryoneIfNoACLFound: true}, p: alice, host: h1, op: opRead, rt: topicT, resource: "orders", want: false},
		{name: "host", bindings: []Binding{aclOf(litPattern(topicT, "orders"), allowEntry("User:alice", h1, opRead))},
			p: alice, host: h1, op: opRead, rt: topicT, resource: "orders", want: true},
		{name: "another host", bindings: []Binding{aclOf(litPattern(topicT, "orders"), allowEntry("User:alice", h1, opRead))},
			p: alice, host: h2, op: opRead, rt: topicT, resource: "orders", want: false},
		{name: "deny from one host only", bindings: []Binding{
			aclOf(litPattern(topicT, "orders"), allowEntry("User:alice", "*", opRead)),
			aclOf(litPattern(topicT, "orders"), denyEntry("User:alice", h1, opRead))},
			p: alice, host: h2, op: opRead, rt: topicT, resource: "orders", want: true},

		// DENY beats ALLOW.
		{name: "deny beats allow", bindings: []Binding{
			aclOf(litPattern(topicT, "orders"), allowEntry("User:alice", "*", opRead)),
			aclOf(litPattern(topicT, "orders"), denyEntry("User:alice", "*", opRead))},
			opts: Options{AllowEveryoneIfNoACLFound: true}, p: alice, host: h1, op: opRead, rt: topicT, resource: "orders", want: false},
		{name: "prefixed deny beats literal allow", bindings: []Binding{
			aclOf(litPattern(topicT, "orders"), allowEntry("User:alice", "*", opRead)),
			aclOf(prefixPattern(topicT, "ord"), denyEntry("User:alice", "*", opRead))},
			opts: Options{AllowEveryoneIfNoACLFound: true}, p: alice, host: h1, op: opRead, rt: topicT, resource: "orders", want: false},
		{name: "wildcard deny beats literal allow", bindings: []Binding{
			aclOf(litPattern(topicT, "orders"), allowEntry("User:alice", "*", opAll)),
			aclOf(litPattern(topicT, "*"), denyEntry("User:*", "*", opWrite))},
			p: alice, host: h1, op: opWrite, rt: topicT, resource: "orders", want: false},
		{name: "deny ALL", bindings: []Binding{
			aclOf(litPattern(topicT, "orders"), allowEntry("User:alice", "*", opRead)),
			aclOf(litPattern(topicT, "orders"), denyEntry("User:alice", "*", opAll))},
			opts: Options{AllowEveryoneIfNoACLFound: true}, p: alice, host: h1, op: opRead, rt: topicT, resource: "orders", want: false},
		{name: "deny of another operation", bindings: []Binding{
			aclOf(litPattern(topicT, "orders"), allowEntry("User:alice", "*", opRead)),
			aclOf(litPattern(topicT, "orders"), denyEntry("User:alice", "*", opWrite))},
			p: alice, host: h1, op: opRead, rt: topicT, resource: "orders", want: true},
		{name: "deny READ does not deny DESCRIBE", bindings: []Binding{
			aclOf(litPattern(topicT, "orders"), allowEntry("User:alice", "*", opWrite)),
			aclOf(litPattern(topicT, "orders"), denyEntry("User:alice", "*", opRead))},
			p: alice, host: h1, op: opDescribe, rt: topicT, resource: "orders", want: true},
		{name: "deny of another principal", bindings: []Binding{
			aclOf(litPattern(topicT, "orders"), allowEntry("User:*", "*", opRead)),
			aclOf(litPattern(topicT, "orders"), denyEntry("User:bob", "*", opRead))},
			p: alice, host: h1, op: opRead, rt: topicT, resource: "orders", want: true},
		{name: "deny of the wildcard principal", bindings: []Binding{
			aclOf(litPattern(topicT, "orders"), allowEntry("User:alice", "*", opRead)),
			aclOf(litPattern(topicT, "orders"), denyEntry("User:*", "*", opRead))},
			opts: Options{AllowEveryoneIfNoACLFound: true}, p: alice, host: h1, op: opRead, rt: topicT, resource: "orders", want: false},

		// Operations.
		{name: "another operation", bindings: []Binding{aclOf(litPattern(topicT, "orders"), allowEntry("User:alice", "*", opRead))},
			p: alice, host: h1, op: opWrite, rt: topicT, resource: "orders", want: false},
		{name: "ALLOW ALL", bindings: []Binding{aclOf(litPattern(topicT, "orders"), allowEntry("User:alice", "*", opAll))},
			p: alice, host: h1, op: opAlterConfigs, rt: topicT, resource: "orders", want: true},
		{name: "asking for ALL needs ALL", bindings: []Binding{aclOf(litPattern(topicT, "orders"), allowEntry("User:alice", "*", opRead))},
			p: alice, host: h1, op: opAll, rt: topicT, resource: "orders", want: false},
		{name: "READ implies DESCRIBE", bindings: []Binding{aclOf(litPattern(topicT, "orders"), allowEntry("User:alice", "*", opRead))},
			p: alice, host: h1, op: opDescribe, rt: topicT, resource: "orders", want: true},
		{name: "WRITE implies DESCRIBE", bindings: []Binding{aclOf(litPattern(topicT, "orders"), allowEntry("User:alice", "*", opWrite))},
			p: alice, host: h1, op: opDescribe, rt: topicT, resource: "orders", want: true},
		{name: "DELETE implies DESCRIBE", bindings: []Binding{aclOf(litPattern(topicT, "orders"), allowEntry("User:alice", "*", opDelete))},
			p: alice, host: h1, op: opDescribe, rt: topicT, resource: "orders", want: true},
		{name: "ALTER implies DESCRIBE", bindings: []Binding{aclOf(litPattern(topicT, "orders"), allowEntry("User:alice", "*", opAlter))},
			p: alice, host: h1, op: opDescribe, rt: topicT, resource: "orders", want: true},
		{name: "CREATE does not imply DESCRIBE", bindings: []Binding{aclOf(litPattern(topicT, "orders"), allowEntry("User:alice", "*", opCreate))},
			p: alice, host: h1, op: opDescribe, rt: topicT, resource: "orders", want: false},
		{name: "ALTER_CONFIGS implies DESCRIBE_CONFIGS", bindings: []Binding{aclOf(litPattern(topicT, "orders"), allowEntry("User:alice", "*", opAlterConfigs))},
			p: alice, host: h1, op: opDescribeConfigs, rt: topicT, resource: "orders", want: true},
		{name: "ALTER does not imply DESCRIBE_CONFIGS", bindings: []Binding{aclOf(litPattern(topicT, "orders"), allowEntry("User:alice", "*", opAlter))},
			p: alice, host: h1, op: opDescribeConfigs, rt: topicT, resource: "orders", want: false},
		{name: "DESCRIBE implies nothing else", bindings: []Binding{aclOf(litPattern(topicT, "orders"), allowEntry("User:alice", "*", opDescribe))},
			p: alice, host: h1, op: opRead, rt: topicT, resource: "orders", want: false},
		{name: "deny ALTER_CONFIGS does not deny DESCRIBE_CONFIGS", bindings: []Binding{
			aclOf(litPattern(topicT, "orders"), allowEntry("User:alice", "*", opDescribeConfigs)),
			aclOf(litPattern(topicT, "orders"), denyEntry("User:alice", "*", opAlterConfigs))},
			p: alice, host: h1, op: opDescribeConfigs, rt: topicT, resource: "orders", want: true},
		{name: "an operation code past 31", bindings: []Binding{aclOf(litPattern(topicT, "orders"), allowEntry("User:alice", "*", opAll))},
			opts: Options{AllowEveryoneIfNoACLFound: true}, p: alice, host: h1, op: 40, rt: topicT, resource: "orders", want: false},

		// Super users.
		{name: "super user over a deny", bindings: []Binding{aclOf(litPattern(topicT, "orders"), denyEntry("User:*", "*", opAll))},
			opts: Options{SuperUsers: []string{"User:admin", "User:alice"}}, p: alice, host: h1, op: opDelete, rt: topicT, resource: "orders", want: true},
		{name: "super user with no ACLs", opts: Options{SuperUsers: []string{" User:alice "}},
			p: alice, host: h1, op: opClusterAction, rt: clusterT, resource: ClusterName, want: true},
		{name: "super users compare as strings: a colon in the type", opts: Options{SuperUsers: []string{"A:B:c"}},
			p: Principal{Type: "A:B", Name: "c"}, host: h1, op: opRead, rt: topicT, resource: "orders", want: true},
		{name: "super users compare as strings: a colon in the name", opts: Options{SuperUsers: []string{"A:B:c"}},
			p: Principal{Type: "A", Name: "B:c"}, host: h1, op: opRead, rt: topicT, resource: "orders", want: true},
		{name: "a super.users entry without a colon names no one", opts: Options{SuperUsers: []string{"alice"}},
			p: alice, host: h1, op: opRead, rt: topicT, resource: "orders", want: false},
		{name: "super user of another type", opts: Options{SuperUsers: []string{"Group:alice"}},
			p: alice, host: h1, op: opRead, rt: topicT, resource: "orders", want: false},

		// allow.everyone.if.no.acl.found.
		{name: "no ACL, default deny", p: alice, host: h1, op: opRead, rt: topicT, resource: "orders", want: false},
		{name: "no ACL, allow everyone", opts: Options{AllowEveryoneIfNoACLFound: true},
			p: alice, host: h1, op: opRead, rt: topicT, resource: "orders", want: true},
		{name: "ACLs elsewhere only, allow everyone", opts: Options{AllowEveryoneIfNoACLFound: true},
			bindings: []Binding{
				aclOf(litPattern(topicT, "payments"), allowEntry("User:bob", "*", opRead)),
				aclOf(prefixPattern(topicT, "pay"), denyEntry("User:alice", "*", opRead)),
				aclOf(litPattern(groupT, "orders"), denyEntry("User:alice", "*", opRead))},
			p: alice, host: h1, op: opRead, rt: topicT, resource: "orders", want: true},
		{name: "an ACL for another principal counts as found", bindings: []Binding{aclOf(litPattern(topicT, "orders"), allowEntry("User:bob", "*", opRead))},
			opts: Options{AllowEveryoneIfNoACLFound: true}, p: alice, host: h1, op: opRead, rt: topicT, resource: "orders", want: false},
		{name: "an ACL for another operation counts as found", bindings: []Binding{aclOf(litPattern(topicT, "orders"), allowEntry("User:alice", "*", opWrite))},
			opts: Options{AllowEveryoneIfNoACLFound: true}, p: alice, host: h1, op: opRead, rt: topicT, resource: "orders", want: false},
		{name: "an ACL for another host counts as found", bindings: []Binding{aclOf(litPattern(topicT, "orders"), allowEntry("User:alice", h2, opRead))},
			opts: Options{AllowEveryoneIfNoACLFound: true}, p: alice, host: h1, op: opRead, rt: topicT, resource: "orders", want: false},
		{name: "a prefixed ACL counts as found", bindings: []Binding{aclOf(prefixPattern(topicT, "o"), denyEntry("User:bob", "*", opWrite))},
			opts: Options{AllowEveryoneIfNoACLFound: true}, p: alice, host: h1, op: opRead, rt: topicT, resource: "orders", want: false},
		{name: "a wildcard ACL counts as found", bindings: []Binding{aclOf(litPattern(topicT, "*"), allowEntry("User:bob", "*", opRead))},
			opts: Options{AllowEveryoneIfNoACLFound: true}, p: alice, host: h1, op: opRead, rt: topicT, resource: "orders", want: false},
		{name: "a deny of another operation counts as found", bindings: []Binding{aclOf(litPattern(topicT, "orders"), denyEntry("User:alice", "*", opWrite))},
			opts: Options{AllowEveryoneIfNoACLFound: true}, p: alice, host: h1, op: opRead, rt: topicT, resource: "orders", want: false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := NewACLs(c.bindings, c.opts)
			if got := a.Authorize(c.p, c.host, c.op, c.rt, c.resource); got != c.want {
				t.Errorf("Authorize(%s, %s, %s, %s, %q) = %v, want %v", c.p, c.host, c.op, c.rt, c.resource, got, c.want)
			}
			if got := naiveAuthorize(c.bindings, c.opts, c.p, c.host, c.op, c.rt, c.resource); got != c.want {
				t.Errorf("naive scan = %v, want %v", got, c.want)
			}
		})
	}
}

func opsBits(ops ...kmsg.ACLOperation) int32 {
	var b int32
	for _, op := range ops {
		b |= 1 << op
	}
	return b
}

func TestSupportedOperations(t *testing.T) {
	for _, c := range []struct {
		rt   kmsg.ACLResourceType
		want int32
	}{
		{topicT, opsBits(opRead, opWrite, opCreate, opDescribe, opDelete, opAlter, opDescribeConfigs, opAlterConfigs)},
		{groupT, opsBits(opRead, opDescribe, opDelete, opDescribeConfigs, opAlterConfigs)},
		{clusterT, opsBits(opCreate, opClusterAction, opDescribeConfigs, opAlterConfigs, opIdempotentWrite, opAlter, opDescribe)},
		{txnT, opsBits(opDescribe, opWrite)},
		{kmsg.ACLResourceTypeDelegationToken, opsBits(opDescribe)},
		{kmsg.ACLResourceTypeUser, opsBits(kmsg.ACLOperationCreateTokens, kmsg.ACLOperationDescribeTokens)},
		{kmsg.ACLResourceTypeAny, 0},
		{kmsg.ACLResourceTypeUnknown, 0},
		{42, 0},
	} {
		if got := SupportedOperations(c.rt); got != c.want {
			t.Errorf("SupportedOperations(%s) = %#x, want %#x", c.rt, got, c.want)
		}
	}
	// Kafka's values, as clients see them: a topic's full set is 3576, a group's 3400, the
	// cluster's 8096 (bits by operation code).
	if got := SupportedOperations(topicT); got != 3576 {
		t.Errorf("topic operations = %d, want 3576", got)
	}
	if got := SupportedOperations(groupT); got != 3400 {
		t.Errorf("group operations = %d, want 3400", got)
	}
	if got := SupportedOperations(clusterT); got != 8096 {
		t.Errorf("cluster operations = %d, want 8096", got)
	}
}

func TestAuthorizedOperations(t *testing.T) {
	alice := User("alice")
	const h1 = "10.0.0.1"
	cases := []struct {
		name     string
		bindings []Binding
		opts     Options
		p        Principal
		rt       kmsg.ACLResourceType
		resource string
		want     int32
	}{
		{name: "no ACL, default deny", rt: topicT, resource: "orders", p: alice, want: 0},
		{name: "no ACL, allow everyone", opts: Options{AllowEveryoneIfNoACLFound: true}, rt: topicT, resource: "orders", p: alice,
			want: SupportedOperations(topicT)},
		{name: "super user", opts: Options{SuperUsers: []string{"User:alice"}},
			bindings: []Binding{aclOf(litPattern(clusterT, ClusterName), denyEntry("User:*", "*", opAll))},
			rt:       clusterT, resource: ClusterName, p: alice, want: SupportedOperations(clusterT)},
		{name: "read implies describe", bindings: []Binding{aclOf(litPattern(topicT, "orders"), allowEntry("User:alice", "*", opRead))},
			rt: topicT, resource: "orders", p: alice, want: opsBits(opRead, opDescribe)},
		{name: "alter configs implies describe configs", bindings: []Binding{aclOf(prefixPattern(groupT, "g"), allowEntry("User:*", "*", opAlterConfigs))},
			rt: groupT, resource: "g1", p: alice, want: opsBits(opAlterConfigs, opDescribeConfigs)},
		{name: "ALL minus a deny", bindings: []Binding{
			aclOf(litPattern(topicT, "*"), allowEntry("User:alice", "*", opAll)),
			aclOf(prefixPattern(topicT, "ord"), denyEntry("User:alice", "*", opDelete)),
			aclOf(litPattern(topicT, "orders"), denyEntry("User:*", h1, opRead))},
			rt: topicT, resource: "orders", p: alice,
			want: opsBits(opWrite, opCreate, opDescribe, opAlter, opDescribeConfigs, opAlterConfigs)},
		{name: "ALL is limited to the supported operations", bindings: []Binding{aclOf(litPattern(txnT, "tx"), allowEntry("User:alice", "*", opAll))},
			rt: txnT, resource: "tx", p: alice, want: opsBits(opDescribe, opWrite)},
		{name: "unsupported operations do not show", bindings: []Binding{aclOf(litPattern(txnT, "tx"), allowEntry("User:alice", "*", opRead))},
			rt: txnT, resource: "tx", p: alice, want: opsBits(opDescribe)},
		{name: "not a concrete resource type", opts: Options{AllowEveryoneIfNoACLFound: true}, rt: kmsg.ACLResourceTypeAny, resource: "x", p: alice, want: 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := NewACLs(c.bindings, c.opts)
			got := a.AuthorizedOperations(c.p, h1, c.rt, c.resource)
			if got != c.want {
				t.Errorf("AuthorizedOperations = %#x, want %#x", got, c.want)
			}
			// It is Authorize over every supported operation.
			var each int32
			for op := range kmsg.ACLOperation(32) {
				if SupportedOperations(c.rt)&opBitsOf(op) != 0 && a.Authorize(c.p, h1, op, c.rt, c.resource) {
					each |= opBitsOf(op)
				}
			}
			if got != each {
				t.Errorf("AuthorizedOperations = %#x, Authorize per operation = %#x", got, each)
			}
		})
	}
}

func opBitsOf(op kmsg.ACLOperation) int32 { return 1 << op }

func TestAllowAll(t *testing.T) {
	var a Authorizer = AllowAll{}
	if !a.Authorize(Anonymous, "10.0.0.1", opAlter, clusterT, ClusterName) {
		t.Error("AllowAll denied")
	}
	for _, rt := range []kmsg.ACLResourceType{topicT, groupT, clusterT, txnT, kmsg.ACLResourceTypeDelegationToken, kmsg.ACLResourceTypeUser} {
		if got, want := a.AuthorizedOperations(Anonymous, "10.0.0.1", rt, "x"), SupportedOperations(rt); got != want {
			t.Errorf("AllowAll.AuthorizedOperations(%s) = %#x, want %#x", rt, got, want)
		}
	}
}

func TestBindingsIsASortedCopy(t *testing.T) {
	in := []Binding{
		aclOf(litPattern(topicT, "b"), allowEntry("User:alice", "*", opRead)),
		aclOf(prefixPattern(topicT, "a"), allowEntry("User:alice", "*", opRead)),
		aclOf(litPattern(groupT, "a"), allowEntry("User:alice", "*", opRead)),
		aclOf(litPattern(topicT, "a"), denyEntry("User:bob", "*", opRead)),
		aclOf(litPattern(topicT, "a"), allowEntry("User:bob", "*", opRead)),
	}
	orig := slices.Clone(in)
	a := NewACLs(in, Options{})
	in[0].Name = "changed"
	if a.Len() != 5 {
		t.Fatalf("Len = %d, want 5", a.Len())
	}
	want := []Binding{orig[3], orig[4], orig[1], orig[0], orig[2]}
	got := a.Bindings()
	if !slices.Equal(got, want) {
		t.Fatalf("Bindings = %v\nwant %v", got, want)
	}
	got[0].Name = "changed"
	if a.Bindings()[0].Name != "a" {
		t.Error("Bindings returned the snapshot's own slice")
	}
	if !a.Authorize(User("alice"), "h", opRead, topicT, "b") {
		t.Error("changing the caller's slice changed the snapshot")
	}
}
