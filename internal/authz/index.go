package authz

import (
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The index behind ACLs. Bindings are grouped by resource type, then by pattern: one ruleSet
// per distinct literal name (the wildcard "*" is the literal name "*") and one per distinct
// prefix, the prefixes in a path-compressed prefix tree. Finding the ACLs that apply to a
// resource is then one map lookup for its name, one for "*", and a walk down the tree along
// the name, collecting the rule sets of the nodes passed: O(len(name)) whatever the number of
// ACLs. Within a rule set, rules are scanned; a large set is also indexed by principal, so that
// ten thousand users' ACLs on one topic cost a request two map lookups, not a scan.
//
// Everything here is built once by NewACLs and never modified afterwards.

// ruleScanMax is the size up to which a rule set is only scanned; a larger one is indexed by
// principal as well.
const ruleScanMax = 16

// wildcardPrincipal is the entry principal "User:*", which every principal matches.
var wildcardPrincipal = Principal{Type: UserType, Name: Wildcard}

// aclRule is the access side of one binding, prepared for matching.
type aclRule struct {
	principal Principal // the entry's principal, split at its first colon as Kafka does
	parsed    bool      // false: the entry's principal has no colon and matches no one
	host      string
	anyHost   bool   // host is "*"
	allow     bool   // ALLOW; every other permission acts as DENY, as in Kafka
	ops       uint32 // the requested operations the rule matches: bit i for operation i
}

// opsBitsAll is every operation: what an entry for ALL matches.
const opsBitsAll = ^uint32(0)

func opBit(op kmsg.ACLOperation) uint32 {
	if op < 0 || op > 31 {
		return 0
	}
	return 1 << uint(op)
}

// matchedOperations is the set of requested operations an entry for op matches (Kafka's
// StandardAuthorizerData.findResult): ALL matches every operation; otherwise the operation
// itself, and for an ALLOW entry also what it implies: READ, WRITE, DELETE and ALTER imply
// DESCRIBE, ALTER_CONFIGS implies DESCRIBE_CONFIGS. A DENY entry denies only its own operation
// (a DENY READ leaves DESCRIBE alone).
func matchedOperations(op kmsg.ACLOperation, allow bool) uint32 {
	if op == kmsg.ACLOperationAll {
		return opsBitsAll
	}
	m := opBit(op)
	if allow {
		switch op {
		case kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationDelete, kmsg.ACLOperationAlter:
			m |= opBit(kmsg.ACLOperationDescribe)
		case kmsg.ACLOperationAlterConfigs:
			m |= opBit(kmsg.ACLOperationDescribeConfigs)
		}
	}
	return m
}

func newRule(e Entry) aclRule {
	r := aclRule{
		host:    e.Host,
		anyHost: e.Host == Wildcard,
		allow:   e.Permission == kmsg.ACLPermissionTypeAllow,
	}
	typ, name, ok := strings.Cut(e.Principal, ":")
	r.principal, r.parsed = Principal{Type: typ, Name: name}, ok
	r.ops = matchedOperations(e.Operation, r.allow)
	return r
}

// verdict accumulates what the rules that apply to a resource say about one request.
type verdict struct {
	found bool   // some ACL applies to the resource, whoever and whatever it is for
	allow uint32 // operations some matching ALLOW rule allows
	deny  uint32 // operations some matching DENY rule denies
}

func (v *verdict) add(r *aclRule) {
	if r.allow {
		v.allow |= r.ops
	} else {
		v.deny |= r.ops
	}
}

// ruleSet is the rules of one pattern (a literal name or a prefix of one resource type).
type ruleSet struct {
	rules []aclRule
	// byPrincipal holds the rules of parsed principals by principal; nil when len(rules) <=
	// ruleScanMax.
	byPrincipal map[Principal][]aclRule
}

func newRuleSet(rules []aclRule) *ruleSet {
	s := &ruleSet{rules: rules}
	if len(rules) > ruleScanMax {
		s.byPrincipal = make(map[Principal][]aclRule)
		for _, r := range rules {
			if r.parsed {
				s.byPrincipal[r.principal] = append(s.byPrincipal[r.principal], r)
			}
		}
	}
	return s
}

// apply adds the rules of s that match the principal and host to v.
func (s *ruleSet) apply(p Principal, host string, v *verdict) {
	if s == nil || len(s.rules) == 0 {
		return
	}
	v.found = true
	if s.byPrincipal == nil {
		for i := range s.rules {
			r := &s.rules[i]
			if r.parsed && (r.principal == p || r.principal == wildcardPrincipal) && (r.anyHost || r.host == host) {
				v.add(r)
			}
		}
		return
	}
	applyHost(s.byPrincipal[p], host, v)
	if p != wildcardPrincipal {
		applyHost(s.byPrincipal[wildcardPrincipal], host, v)
	}
}

func applyHost(rules []aclRule, host string, v *verdict) {
	for i := range rules {
		if r := &rules[i]; r.anyHost || r.host == host {
			v.add(r)
		}
	}
}

// prefixNode is a node of a path-compressed prefix tree over the PREFIXED names of one
// resource type. The path from the root to a node, the concatenation of the labels on the
// way, is a string; rules is the rule set of the prefix equal to that string, if one exists.
// Invariants: children's labels are non-empty and start with distinct bytes, held in edges
// in ascending order (edges[i] == children[i].label[0]).
type prefixNode struct {
	label    string
	rules    *ruleSet
	edges    []byte
	children []*prefixNode
}

// newPrefixTree builds the tree of the given prefixes; nil when there are none.
func newPrefixTree(sets map[string]*ruleSet) *prefixNode {
	if len(sets) == 0 {
		return nil
	}
	keys := make([]string, 0, len(sets))
	for k := range sets {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return buildPrefixNode(keys, 0, sets)
}

// buildPrefixNode builds the node for keys (sorted, distinct, non-empty list) that share their
// first depth bytes, the path of the node's parent.
func buildPrefixNode(keys []string, depth int, sets map[string]*ruleSet) *prefixNode {
	// In a sorted list the common prefix of all keys is that of the first and the last.
	lcp := commonPrefixLen(keys[0], keys[len(keys)-1])
	n := &prefixNode{label: keys[0][depth:lcp]}
	i := 0
	if len(keys[0]) == lcp { // the node's own path is a key; it sorts first
		n.rules = sets[keys[0]]
		i = 1
	}
	for i < len(keys) {
		b := keys[i][lcp]
		j := i + 1
		for j < len(keys) && keys[j][lcp] == b {
			j++
		}
		n.edges = append(n.edges, b)
		n.children = append(n.children, buildPrefixNode(keys[i:j], lcp, sets))
		i = j
	}
	return n
}

func commonPrefixLen(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// apply adds, for every prefix in the tree that is a prefix of name (the empty prefix and name
// itself included), the matching rules of its set to v.
func (n *prefixNode) apply(name string, p Principal, host string, v *verdict) {
	pos := 0
	for n != nil {
		if !strings.HasPrefix(name[pos:], n.label) {
			return
		}
		pos += len(n.label)
		n.rules.apply(p, host, v)
		if pos == len(name) {
			return
		}
		i, ok := slices.BinarySearch(n.edges, name[pos])
		if !ok {
			return
		}
		n = n.children[i]
	}
}

// typeIndex is the ACLs of one resource type.
type typeIndex struct {
	literal  map[string]*ruleSet // by name; the wildcard is the name "*"
	prefixed *prefixNode
}

// apply adds the rules of the ACLs that apply to the resource name (Kafka's rule: LITERAL
// ones of that name, the LITERAL wildcard, PREFIXED ones whose name is a prefix of it) to v.
func (t *typeIndex) apply(name string, p Principal, host string, v *verdict) {
	t.literal[name].apply(p, host, v)
	if name != Wildcard {
		t.literal[Wildcard].apply(p, host, v)
	}
	t.prefixed.apply(name, p, host, v)
}

// buildIndex indexes bindings by resource type and pattern. Bindings of a pattern type other
// than LITERAL and PREFIXED apply to no resource (Kafka's authorizer never stores them).
func buildIndex(bindings []Binding) map[kmsg.ACLResourceType]*typeIndex {
	type key struct {
		rt   kmsg.ACLResourceType
		name string
	}
	literal := make(map[key][]aclRule)
	prefixed := make(map[key][]aclRule)
	for _, b := range bindings {
		k := key{b.ResourceType, b.Name}
		switch b.PatternType {
		case kmsg.ACLResourcePatternTypeLiteral:
			literal[k] = append(literal[k], newRule(b.Entry))
		case kmsg.ACLResourcePatternTypePrefixed:
			prefixed[k] = append(prefixed[k], newRule(b.Entry))
		}
	}
	idx := make(map[kmsg.ACLResourceType]*typeIndex)
	typeOf := func(rt kmsg.ACLResourceType) *typeIndex {
		t := idx[rt]
		if t == nil {
			t = &typeIndex{literal: make(map[string]*ruleSet)}
			idx[rt] = t
		}
		return t
	}
	for k, rules := range literal {
		typeOf(k.rt).literal[k.name] = newRuleSet(rules)
	}
	prefixSets := make(map[kmsg.ACLResourceType]map[string]*ruleSet)
	for k, rules := range prefixed {
		typeOf(k.rt)
		if prefixSets[k.rt] == nil {
			prefixSets[k.rt] = make(map[string]*ruleSet)
		}
		prefixSets[k.rt][k.name] = newRuleSet(rules)
	}
	for rt, sets := range prefixSets {
		idx[rt].prefixed = newPrefixTree(sets)
	}
	return idx
}
