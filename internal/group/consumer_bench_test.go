package group

import (
	"fmt"
	"testing"
)

// BenchmarkUniformAssign100x1000: the uniform assignor's target for 100 members over a
// 1,000-partition topic when one member joins a balanced group of 99 (what the first
// heartbeat after a join computes, under the group's partition lock).
func BenchmarkUniformAssign100x1000(b *testing.B) {
	id := topicID("wide")
	in := assignInput{partitions: map[TopicID]int32{id: 1000}, order: []TopicID{id}}
	for i := 0; i < 99; i++ {
		in.members = append(in.members, assignMember{id: fmt.Sprintf("m%03d", i), topics: []TopicID{id}})
	}
	prev := uniformAssignor{}.assign(in)
	for i := range in.members {
		in.members[i].prev = prev[in.members[i].id]
	}
	in.members = append(in.members, assignMember{id: "m099", topics: []TopicID{id}})
	b.ReportAllocs()
	for b.Loop() {
		uniformAssignor{}.assign(in)
	}
}
