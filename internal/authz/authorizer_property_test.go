package authz

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// naiveAuthorize is Kafka's StandardAuthorizerData.authorize written as a linear scan over
// every binding, with nothing shared with the index: the reference the indexed ACLs must
// agree with.
func naiveAuthorize(bindings []Binding, opts Options, p Principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	for _, su := range opts.SuperUsers {
		if strings.TrimSpace(su) == p.String() {
			return true
		}
	}
	if op < 0 || op > 31 {
		return false
	}
	found, allow := false, false
	for _, b := range bindings {
		if b.ResourceType != rt {
			continue
		}
		applies := b.PatternType == kmsg.ACLResourcePatternTypeLiteral && (b.Name == name || b.Name == "*") ||
			b.PatternType == kmsg.ACLResourcePatternTypePrefixed && strings.HasPrefix(name, b.Name)
		if !applies {
			continue
		}
		found = true
		switch naiveResult(b.Entry, p, host, op) {
		case kmsg.ACLPermissionTypeDeny:
			return false
		case kmsg.ACLPermissionTypeAllow:
			allow = true
		}
	}
	switch {
	case allow:
		return true
	case found:
		return false
	default:
		return opts.AllowEveryoneIfNoACLFound
	}
}

// naiveResult is Kafka's findResult: Unknown when the entry does not match the request,
// otherwise its verdict.
func naiveResult(e Entry, p Principal, host string, op kmsg.ACLOperation) kmsg.ACLPermissionType {
	i := strings.Index(e.Principal, ":")
	if i < 0 {
		return kmsg.ACLPermissionTypeUnknown
	}
	ep := Principal{Type: e.Principal[:i], Name: e.Principal[i+1:]}
	if ep != p && ep != (Principal{Type: "User", Name: "*"}) {
		return kmsg.ACLPermissionTypeUnknown
	}
	if e.Host != "*" && e.Host != host {
		return kmsg.ACLPermissionTypeUnknown
	}
	if e.Operation != kmsg.ACLOperationAll {
		if e.Permission == kmsg.ACLPermissionTypeAllow {
			switch op {
			case kmsg.ACLOperationDescribe:
				if !slices.Contains([]kmsg.ACLOperation{kmsg.ACLOperationDescribe, kmsg.ACLOperationRead,
					kmsg.ACLOperationWrite, kmsg.ACLOperationDelete, kmsg.ACLOperationAlter}, e.Operation) {
					return kmsg.ACLPermissionTypeUnknown
				}
			case kmsg.ACLOperationDescribeConfigs:
				if e.Operation != kmsg.ACLOperationDescribeConfigs && e.Operation != kmsg.ACLOperationAlterConfigs {
					return kmsg.ACLPermissionTypeUnknown
				}
			default:
				if op != e.Operation {
					return kmsg.ACLPermissionTypeUnknown
				}
			}
		} else if op != e.Operation {
			return kmsg.ACLPermissionTypeUnknown
		}
	}
	if e.Permission == kmsg.ACLPermissionTypeAllow {
		return kmsg.ACLPermissionTypeAllow
	}
	return kmsg.ACLPermissionTypeDeny
}

// aclGen draws bindings and requests from small alphabets, so that names are often prefixes
// of one another, principals and hosts often collide, and a pattern often has more rules than
// ruleScanMax.
type aclGen struct{ r *rand.Rand }

func (g aclGen) pick(xs ...string) string { return xs[g.r.IntN(len(xs))] }

func (g aclGen) name() string {
	var b strings.Builder
	for range g.r.IntN(5) {
		b.WriteByte("ab*"[g.r.IntN(3)])
	}
	return b.String()
}

func (g aclGen) resourceType() kmsg.ACLResourceType {
	return []kmsg.ACLResourceType{topicT, topicT, groupT, clusterT}[g.r.IntN(4)]
}

func (g aclGen) op() kmsg.ACLOperation {
	if g.r.IntN(40) == 0 {
		return 40
	}
	return kmsg.ACLOperation(g.r.IntN(15))
}

func (g aclGen) binding() Binding {
	pt := kmsg.ACLResourcePatternTypeLiteral
	switch n := g.r.IntN(20); {
	case n < 9:
		pt = kmsg.ACLResourcePatternTypePrefixed
	case n == 19:
		pt = kmsg.ACLResourcePatternTypeMatch
	}
	perm := kmsg.ACLPermissionTypeAllow
	switch n := g.r.IntN(10); {
	case n < 3:
		perm = kmsg.ACLPermissionTypeDeny
	case n == 9:
		perm = kmsg.ACLPermissionTypeUnknown
	}
	return Binding{
		Pattern: Pattern{ResourceType: g.resourceType(), Name: g.name(), PatternType: pt},
		Entry: Entry{
			Principal:  g.pick("User:alice", "User:bob", "User:*", "User:*", "Group:alice", "alice", "User:carol"),
			Host:       g.pick("*", "*", "h1", "h2"),
			Operation:  g.op(),
			Permission: perm,
		},
	}
}

func (g aclGen) principal() Principal {
	return []Principal{User("alice"), User("bob"), User("dave"), {Type: "Group", Name: "alice"}, User("*")}[g.r.IntN(5)]
}

// TestAuthorizeMatchesLinearScan checks the indexed ACLs against naiveAuthorize over random
// bindings, configs and requests; and that AuthorizedOperations is Authorize over the
// supported operations.
func TestAuthorizeMatchesLinearScan(t *testing.T) {
	seeds := 400
	if testing.Short() {
		seeds = 50
	}
	for seed := range seeds {
		g := aclGen{rand.New(rand.NewPCG(uint64(seed), 0x5eed))}
		bindings := make([]Binding, g.r.IntN([]int{8, 60, 400}[seed%3]))
		for i := range bindings {
			bindings[i] = g.binding()
		}
		var opts Options
		opts.AllowEveryoneIfNoACLFound = g.r.IntN(2) == 0
		if g.r.IntN(3) == 0 {
			opts.SuperUsers = []string{g.pick("User:bob", "Group:alice", "User:*")}
		}
		a := NewACLs(bindings, opts)
		if a.Len() != len(bindings) {
			t.Fatalf("seed %d: Len = %d, want %d", seed, a.Len(), len(bindings))
		}
		if !slices.IsSortedFunc(a.Bindings(), compareBindings) {
			t.Fatalf("seed %d: Bindings not sorted", seed)
		}
		for range 300 {
			p, host, rt, name := g.principal(), g.pick("h1", "h2", "h3"), g.resourceType(), g.name()
			op := g.op()
			got := a.Authorize(p, host, op, rt, name)
			if want := naiveAuthorize(bindings, opts, p, host, op, rt, name); got != want {
				t.Fatalf("seed %d: Authorize(%s, %s, %s, %s, %q) = %v, linear scan says %v\nbindings:\n%s",
					seed, p, host, op, rt, name, got, want, describeBindings(bindings, rt))
			}
			var each int32
			for op := range kmsg.ACLOperation(32) {
				if SupportedOperations(rt)&opBitsOf(op) != 0 && naiveAuthorize(bindings, opts, p, host, op, rt, name) {
					each |= opBitsOf(op)
				}
			}
			if got := a.AuthorizedOperations(p, host, rt, name); got != each {
				t.Fatalf("seed %d: AuthorizedOperations(%s, %s, %s, %q) = %#x, linear scan says %#x", seed, p, host, rt, name, got, each)
			}
		}
	}
}

func describeBindings(bindings []Binding, rt kmsg.ACLResourceType) string {
	var b strings.Builder
	for _, x := range bindings {
		if x.ResourceType == rt {
			fmt.Fprintln(&b, x)
		}
	}
	return b.String()
}

// TestPrefixTree checks the tree's walk directly: every stored prefix of the name, and only
// those, is visited.
func TestPrefixTree(t *testing.T) {
	prefixes := []string{"", "a", "ab", "abc", "abd", "b", "ba", "bab", "c*", "zzzz"}
	sets := make(map[string]*ruleSet)
	for i, p := range prefixes {
		// Each prefix's one rule allows a distinct operation, so the allowed bits say which
		// prefixes were visited.
		sets[p] = newRuleSet([]aclRule{{principal: wildcardPrincipal, parsed: true, anyHost: true, allow: true, ops: 1 << i}})
	}
	tree := newPrefixTree(sets)
	for _, name := range []string{"", "a", "ab", "abc", "abcd", "abd", "abe", "b", "bab", "babab", "c", "c*", "c*x", "zzz", "zzzzz", "q"} {
		var v verdict
		tree.apply(name, User("x"), "h", &v)
		var want uint32
		for i, p := range prefixes {
			if strings.HasPrefix(name, p) {
				want |= 1 << i
			}
		}
		if v.allow != want {
			t.Errorf("walk of %q visited %b, want %b", name, v.allow, want)
		}
	}
	var empty *prefixNode
	var v verdict
	empty.apply("abc", User("x"), "h", &v)
	if v.found {
		t.Error("an empty tree found rules")
	}
}
