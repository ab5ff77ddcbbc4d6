package authz

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// benchBindings is 10,000 ACLs shaped like a multi-tenant cluster's: per-topic literal ACLs,
// per-team prefixed ACLs, group ACLs, a few wildcard ACLs, and one shared topic that 2,000
// users may read.
func benchBindings() []Binding {
	var bs []Binding
	add := func(p Pattern, e Entry) { bs = append(bs, Binding{Pattern: p, Entry: e}) }
	for i := range 3000 {
		user := fmt.Sprintf("User:app-%d", i%500)
		topic := fmt.Sprintf("team-%d.topic-%d", i%200, i)
		add(litPattern(topicT, topic), allowEntry(user, "*", opWrite))
		if i%10 == 0 {
			add(litPattern(topicT, topic), denyEntry("User:*", "10.9.9.9", opWrite))
		}
	}
	for i := range 2000 {
		add(prefixPattern(topicT, fmt.Sprintf("team-%d.", i%200)), allowEntry(fmt.Sprintf("User:app-%d", i%500), "*", opRead))
	}
	for i := range 2000 {
		add(prefixPattern(groupT, fmt.Sprintf("team-%d.", i%200)), allowEntry(fmt.Sprintf("User:app-%d", i%500), "*", opRead))
	}
	for i := range 696 {
		add(litPattern(kmsg.ACLResourceTypeTransactionalId, fmt.Sprintf("txn-%d", i)), allowEntry(fmt.Sprintf("User:app-%d", i%500), "*", opWrite))
	}
	for i := range 2000 {
		add(litPattern(topicT, "shared-events"), allowEntry(fmt.Sprintf("User:reader-%d", i), "*", opRead))
	}
	add(litPattern(topicT, "*"), denyEntry("User:evil", "*", opAll))
	add(litPattern(clusterT, ClusterName), allowEntry("User:*", "*", opIdempotentWrite))
	add(litPattern(groupT, "*"), allowEntry("User:ops", "*", opDescribe))
	add(prefixPattern(topicT, "_"), denyEntry("User:*", "*", opWrite))
	return bs
}

type benchRequest struct {
	name string
	p    Principal
	op   kmsg.ACLOperation
	rt   kmsg.ACLResourceType
	res  string
	want bool
}

var benchRequests = []benchRequest{
	{"literal", User("app-7"), opWrite, topicT, "team-7.topic-1007", true},
	{"prefixed", User("app-7"), opRead, topicT, "team-7.topic-1007", true},
	{"implied describe", User("app-7"), opDescribe, topicT, "team-7.topic-1007", true},
	{"denied", User("app-8"), opRead, topicT, "team-7.topic-1007", false},
	{"shared topic of 2000 users", User("reader-1999"), opRead, topicT, "shared-events", true},
	{"no ACL on the resource", User("app-7"), opRead, topicT, "unnamed", false},
	{"group prefix", User("app-7"), opRead, groupT, "team-7.consumers", true},
	{"cluster", User("app-7"), opIdempotentWrite, clusterT, ClusterName, true},
}

func BenchmarkAuthorize(b *testing.B) {
	bs := benchBindings()
	a := NewACLs(bs, Options{SuperUsers: []string{"User:admin"}})
	for _, r := range benchRequests {
		if got := a.Authorize(r.p, "10.0.0.1", r.op, r.rt, r.res); got != r.want {
			b.Fatalf("%s: Authorize = %v, want %v", r.name, got, r.want)
		}
		b.Run(r.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				a.Authorize(r.p, "10.0.0.1", r.op, r.rt, r.res)
			}
		})
	}
}

// BenchmarkAuthorizeLinearScan is the same requests answered by scanning every binding, the
// cost the index saves.
func BenchmarkAuthorizeLinearScan(b *testing.B) {
	bs := benchBindings()
	opts := Options{SuperUsers: []string{"User:admin"}}
	for _, r := range benchRequests[:2] {
		b.Run(r.name, func(b *testing.B) {
			for b.Loop() {
				naiveAuthorize(bs, opts, r.p, "10.0.0.1", r.op, r.rt, r.res)
			}
		})
	}
}

func BenchmarkAuthorizedOperations(b *testing.B) {
	a := NewACLs(benchBindings(), Options{})
	b.ReportAllocs()
	for b.Loop() {
		a.AuthorizedOperations(User("app-7"), "10.0.0.1", topicT, "team-7.topic-1007")
	}
}

func BenchmarkNewACLs(b *testing.B) {
	bs := benchBindings()
	b.ReportAllocs()
	for b.Loop() {
		NewACLs(bs, Options{})
	}
}
