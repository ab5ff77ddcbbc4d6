package streams

import (
	"fmt"
	"slices"
	"strings"
)

// copartition records that the source topics of ns (the inputs of a join) must be
// co-partitioned.
func (b *Builder) copartition(ns ...*node) {
	b.copartitioned = append(b.copartitioned, ns)
}

// sourceTopics are the logical topics of the source nodes upstream of n, in order.
func sourceTopics(n *node) []string {
	var out []string
	seen := map[*node]bool{}
	var walk func(*node)
	walk = func(n *node) {
		if seen[n] {
			return
		}
		seen[n] = true
		if n.kind == sourceNode {
			for _, t := range n.topics {
				if !slices.Contains(out, t) {
					out = append(out, t)
				}
			}
			return
		}
		for _, p := range n.parents {
			walk(p)
		}
	}
	walk(n)
	return out
}

// copartitionCounts checks every co-partition group against the partition counts of the
// input topics (count, by logical name) and returns the partition count each internal
// (repartition) topic of a group must have: the input topics' count, or the largest of the
// group's repartition topics when it has no input topic, as Kafka Streams'
// CopartitionedTopicsEnforcer. Input topics of one group with different counts are an
// invalid topology.
func (t *topology) copartitionCounts(count map[string]int, writers func(topic string) int) (map[string]int, error) {
	pinned := map[string]int{}
	// Groups that share a topic are one group, as Kafka Streams merges them.
	var groups [][]string
	for _, g := range t.b.copartitioned {
		var topics []string
		for _, n := range g {
			for _, tp := range sourceTopics(n) {
				if !slices.Contains(topics, tp) {
					topics = append(topics, tp)
				}
			}
		}
		for i := 0; i < len(groups); {
			if slices.ContainsFunc(groups[i], func(tp string) bool { return slices.Contains(topics, tp) }) {
				for _, tp := range groups[i] {
					if !slices.Contains(topics, tp) {
						topics = append(topics, tp)
					}
				}
				groups = slices.Delete(groups, i, i+1)
				continue
			}
			i++
		}
		groups = append(groups, topics)
	}
	for _, topics := range groups {
		n := 0
		var external []string
		for _, tp := range topics {
			if t.b.internal[tp] {
				continue
			}
			external = append(external, tp)
			if n == 0 {
				n = count[tp]
			}
		}
		for _, tp := range external {
			if count[tp] != n {
				desc := make([]string, len(external))
				for i, e := range external {
					desc[i] = fmt.Sprintf("%s (%d partitions)", e, count[e])
				}
				return nil, fmt.Errorf("streams: invalid topology: topics not co-partitioned: [%s]; the inputs of a join must have the same number of partitions",
					strings.Join(desc, ", "))
			}
		}
		if n == 0 {
			for _, tp := range topics {
				n = max(n, writers(tp), pinned[tp])
			}
		}
		for _, tp := range topics {
			if t.b.internal[tp] {
				pinned[tp] = n
			}
		}
	}
	return pinned, nil
}
