package authz

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func sp(s string) *string { return &s }

func binding(rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType, principal, host string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) Binding {
	return Binding{
		Pattern: Pattern{ResourceType: rt, Name: name, PatternType: pt},
		Entry:   Entry{Principal: principal, Host: host, Operation: op, Permission: perm},
	}
}

const (
	topicT   = kmsg.ACLResourceTypeTopic
	groupT   = kmsg.ACLResourceTypeGroup
	literal  = kmsg.ACLResourcePatternTypeLiteral
	prefixed = kmsg.ACLResourcePatternTypePrefixed
	match    = kmsg.ACLResourcePatternTypeMatch
	anyPat   = kmsg.ACLResourcePatternTypeAny
	read     = kmsg.ACLOperationRead
	write    = kmsg.ACLOperationWrite
	allow    = kmsg.ACLPermissionTypeAllow
	deny     = kmsg.ACLPermissionTypeDeny
)

// anyFilter matches every binding.
func anyFilter() Filter {
	return Filter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: anyPat, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
}

func TestFilterMatches(t *testing.T) {
	lit := binding(topicT, "orders", literal, "User:alice", "*", read, allow)
	star := binding(topicT, "*", literal, "User:alice", "*", read, allow)
	pre := binding(topicT, "ord", prefixed, "User:alice", "*", read, allow)
	preLong := binding(topicT, "orders-eu", prefixed, "User:alice", "*", read, allow)
	other := binding(topicT, "payments", literal, "User:alice", "*", read, allow)
	grp := binding(groupT, "orders", literal, "User:alice", "*", read, allow)
	all := []Binding{lit, star, pre, preLong, other, grp}

	with := func(mod func(*Filter)) Filter { f := anyFilter(); mod(&f); return f }
	cases := []struct {
		name   string
		filter Filter
		want   []Binding
	}{
		{"any", anyFilter(), all},
		{"topic type", with(func(f *Filter) { f.ResourceType = topicT }), []Binding{lit, star, pre, preLong, other}},
		{"literal orders", with(func(f *Filter) { f.ResourceType = topicT; f.PatternType = literal; f.Name = sp("orders") }), []Binding{lit}},
		{"literal type only", with(func(f *Filter) { f.PatternType = literal }), []Binding{lit, star, other, grp}},
		{"prefixed ord", with(func(f *Filter) { f.PatternType = prefixed; f.Name = sp("ord") }), []Binding{pre}},
		{"prefixed is not a prefix search", with(func(f *Filter) { f.PatternType = prefixed; f.Name = sp("orders") }), nil},
		{"any pattern, name exact", with(func(f *Filter) { f.Name = sp("ord") }), []Binding{pre}},
		{"any pattern, wildcard name is literal", with(func(f *Filter) { f.Name = sp("*") }), []Binding{star}},
		{"match orders", with(func(f *Filter) { f.ResourceType = topicT; f.PatternType = match; f.Name = sp("orders") }), []Binding{lit, star, pre}},
		{"match orders-eu-1", with(func(f *Filter) { f.ResourceType = topicT; f.PatternType = match; f.Name = sp("orders-eu-1") }), []Binding{star, pre, preLong}},
		{"match without name", with(func(f *Filter) { f.ResourceType = topicT; f.PatternType = match }), []Binding{lit, star, pre, preLong, other}},
		{"match any type", with(func(f *Filter) { f.PatternType = match; f.Name = sp("orders") }), []Binding{lit, star, pre, grp}},
	}
	for _, c := range cases {
		var got []Binding
		for _, b := range all {
			if c.filter.Matches(b) {
				got = append(got, b)
			}
		}
		if len(got) != len(c.want) {
			t.Errorf("%s: matched %v, want %v", c.name, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%s: matched %v, want %v", c.name, got, c.want)
				break
			}
		}
	}
}

func TestFilterMatchesEntry(t *testing.T) {
	b := binding(topicT, "t", literal, "User:alice", "10.0.0.1", read, allow)
	with := func(mod func(*Filter)) Filter { f := anyFilter(); mod(&f); return f }
	cases := []struct {
		name   string
		filter Filter
		want   bool
	}{
		{"principal", with(func(f *Filter) { f.Principal = sp("User:alice") }), true},
		{"other principal", with(func(f *Filter) { f.Principal = sp("User:bob") }), false},
		{"wildcard principal is literal", with(func(f *Filter) { f.Principal = sp("User:*") }), false},
		{"host", with(func(f *Filter) { f.Host = sp("10.0.0.1") }), true},
		{"other host", with(func(f *Filter) { f.Host = sp("*") }), false},
		{"operation", with(func(f *Filter) { f.Operation = read }), true},
		{"other operation", with(func(f *Filter) { f.Operation = write }), false},
		{"ALL is not a wildcard in a filter", with(func(f *Filter) { f.Operation = kmsg.ACLOperationAll }), false},
		{"permission", with(func(f *Filter) { f.Permission = allow }), true},
		{"other permission", with(func(f *Filter) { f.Permission = deny }), false},
	}
	for _, c := range cases {
		if got := c.filter.Matches(b); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestBindingValidate(t *testing.T) {
	ok := binding(topicT, "orders", literal, "User:alice", "*", read, allow)
	with := func(mod func(*Binding)) Binding { b := ok; mod(&b); return b }
	cases := []struct {
		name string
		b    Binding
		ok   bool
	}{
		{"valid literal", ok, true},
		{"valid prefixed deny", with(func(b *Binding) { b.PatternType = prefixed; b.Permission = deny }), true},
		{"cluster", with(func(b *Binding) { b.ResourceType = kmsg.ACLResourceTypeCluster; b.Name = "kafka-cluster" }), true},
		{"principal with colons", with(func(b *Binding) { b.Principal = "User:CN=a:b" }), true},
		{"two-phase commit", with(func(b *Binding) {
			b.ResourceType = kmsg.ACLResourceTypeTransactionalId
			b.Operation = OperationTwoPhaseCommit
		}), true},
		{"unknown resource type", with(func(b *Binding) { b.ResourceType = kmsg.ACLResourceTypeUnknown }), false},
		{"any resource type", with(func(b *Binding) { b.ResourceType = kmsg.ACLResourceTypeAny }), false},
		{"out of range resource type", with(func(b *Binding) { b.ResourceType = 42 }), false},
		{"match pattern", with(func(b *Binding) { b.PatternType = match }), false},
		{"any pattern", with(func(b *Binding) { b.PatternType = anyPat }), false},
		{"unknown pattern", with(func(b *Binding) { b.PatternType = kmsg.ACLResourcePatternTypeUnknown }), false},
		{"any operation", with(func(b *Binding) { b.Operation = kmsg.ACLOperationAny }), false},
		{"unknown operation", with(func(b *Binding) { b.Operation = kmsg.ACLOperationUnknown }), false},
		{"out of range operation", with(func(b *Binding) { b.Operation = 99 }), false},
		{"any permission", with(func(b *Binding) { b.Permission = kmsg.ACLPermissionTypeAny }), false},
		{"unknown permission", with(func(b *Binding) { b.Permission = kmsg.ACLPermissionTypeUnknown }), false},
		{"empty name", with(func(b *Binding) { b.Name = "" }), false},
		{"cluster other name", with(func(b *Binding) { b.ResourceType = kmsg.ACLResourceTypeCluster; b.Name = "c" }), false},
		{"principal without colon", with(func(b *Binding) { b.Principal = "alice" }), false},
		{"principal without name", with(func(b *Binding) { b.Principal = "User:" }), false},
		{"empty host", with(func(b *Binding) { b.Host = "" }), false},
	}
	for _, c := range cases {
		err := c.b.Validate()
		if c.ok && err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		if !c.ok && !errors.Is(err, ErrInvalidBinding) {
			t.Errorf("%s: error %v, want ErrInvalidBinding", c.name, err)
		}
	}
}

func TestFilterValidate(t *testing.T) {
	with := func(mod func(*Filter)) Filter { f := anyFilter(); mod(&f); return f }
	cases := []struct {
		name string
		f    Filter
		ok   bool
	}{
		{"any", anyFilter(), true},
		{"match", with(func(f *Filter) { f.PatternType = match; f.Name = sp("x") }), true},
		{"concrete", with(func(f *Filter) {
			f.ResourceType = topicT
			f.PatternType = literal
			f.Operation = kmsg.ACLOperationAll
			f.Permission = deny
		}), true},
		{"unknown resource type", with(func(f *Filter) { f.ResourceType = kmsg.ACLResourceTypeUnknown }), false},
		{"out of range resource type", with(func(f *Filter) { f.ResourceType = -3 }), false},
		{"unknown pattern", with(func(f *Filter) { f.PatternType = kmsg.ACLResourcePatternTypeUnknown }), false},
		{"out of range pattern", with(func(f *Filter) { f.PatternType = 9 }), false},
		{"unknown operation", with(func(f *Filter) { f.Operation = kmsg.ACLOperationUnknown }), false},
		{"out of range operation", with(func(f *Filter) { f.Operation = 77 }), false},
		{"unknown permission", with(func(f *Filter) { f.Permission = kmsg.ACLPermissionTypeUnknown }), false},
		{"out of range permission", with(func(f *Filter) { f.Permission = 4 }), false},
	}
	for _, c := range cases {
		err := c.f.Validate()
		if c.ok && err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		if !c.ok && !errors.Is(err, ErrInvalidFilter) {
			t.Errorf("%s: error %v, want ErrInvalidFilter", c.name, err)
		}
	}
}
