package group

import (
	"cmp"
	"slices"
	"strings"
)

// Server-side assignors (group.consumer.assignors): "uniform", which spreads partitions
// evenly and keeps each member's partitions where it can, so a join or leave moves only the
// partitions that must move; and "range", which gives each member a contiguous range of
// every topic it subscribes to, members ordered by instance id (static members first) then
// member id.
//
// An assignor sees every member with its subscribed (existing) topics and its previous
// target assignment, and returns a complete new target: every partition of a subscribed
// topic goes to exactly one member subscribing to it (when there is one).

// assignMember is a member as an assignor sees it.
type assignMember struct {
	id       string
	instance *string
	topics   []TopicID // subscribed topics that exist, in the group's topic order
	prev     Assignment
}

// assignInput is an assignor's view of the group.
type assignInput struct {
	members    []assignMember // by member id
	partitions map[TopicID]int32
	order      []TopicID // subscribed topics by name
}

type assignor interface {
	assign(in assignInput) map[string]Assignment
}

// assignorByName returns a built-in assignor, or nil.
func assignorByName(name string) assignor {
	switch name {
	case "uniform":
		return uniformAssignor{}
	case "range":
		return rangeAssignor{}
	}
	return nil
}

// assignorName maps a group.consumer.assignors entry (a name, or Kafka's class name of a
// built-in assignor) to its name; "" if it is neither.
func assignorName(entry string) string {
	switch strings.TrimSpace(entry) {
	case "uniform", "org.apache.kafka.coordinator.group.assignor.UniformAssignor":
		return "uniform"
	case "range", "org.apache.kafka.coordinator.group.assignor.RangeAssignor":
		return "range"
	}
	return ""
}

// tp is one partition of a topic.
type tp struct {
	id TopicID
	p  int32
}

// builder accumulates an assignment: sorted when done.
type builder map[TopicID][]int32

func (b builder) add(t tp) { b[t.id] = append(b[t.id], t.p) }

func (b builder) done() Assignment {
	a := Assignment{}
	for id, ps := range b {
		if len(ps) > 0 {
			a[id] = normalized(ps)
		}
	}
	return a
}

func homogeneous(ms []assignMember) bool {
	for _, m := range ms[1:] {
		if !slices.Equal(m.topics, ms[0].topics) {
			return false
		}
	}
	return true
}

type uniformAssignor struct{}

func (uniformAssignor) assign(in assignInput) map[string]Assignment {
	out := make(map[string]Assignment, len(in.members))
	if len(in.members) == 0 {
		return out
	}
	if homogeneous(in.members) {
		return uniformHomogeneous(in)
	}
	return uniformGeneral(in)
}

// uniformHomogeneous: every member subscribes to the same topics, so each gets the total
// divided by the members, some one more. Members first keep what they had (up to that
// quota, the extra slots going to members that had more), then the rest is handed out in
// member order.
func uniformHomogeneous(in assignInput) map[string]Assignment {
	var all []tp
	for _, id := range in.members[0].topics {
		for p := int32(0); p < in.partitions[id]; p++ {
			all = append(all, tp{id, p})
		}
	}
	n := len(in.members)
	minQ, extra := len(all)/n, len(all)%n
	taken := make(map[tp]bool, len(all))
	got := make([][]tp, n)
	keep := make([][]tp, n)
	subscribed := map[TopicID]bool{}
	for _, id := range in.members[0].topics {
		subscribed[id] = true
	}
	for i, m := range in.members {
		for _, id := range m.prev.sortedIDs() {
			if !subscribed[id] {
				continue
			}
			for _, p := range m.prev[id] {
				t := tp{id, p}
				if p < in.partitions[id] && !taken[t] {
					taken[t] = true
					keep[i] = append(keep[i], t)
				}
			}
		}
	}
	clear(taken)
	for i := range in.members {
		k := min(len(keep[i]), minQ)
		got[i] = append(got[i], keep[i][:k]...)
	}
	hasExtra := make([]bool, n)
	for i := range in.members {
		if extra > 0 && len(keep[i]) > minQ {
			got[i] = append(got[i], keep[i][minQ])
			hasExtra[i] = true
			extra--
		}
	}
	for i := range got {
		for _, t := range got[i] {
			taken[t] = true
		}
	}
	var free []tp
	for _, t := range all {
		if !taken[t] {
			free = append(free, t)
		}
	}
	for i := range in.members {
		for len(got[i]) < minQ && len(free) > 0 {
			got[i] = append(got[i], free[0])
			free = free[1:]
		}
	}
	for i := range in.members {
		if len(free) == 0 || extra == 0 {
			break
		}
		if !hasExtra[i] {
			got[i] = append(got[i], free[0])
			free = free[1:]
			extra--
		}
	}
	out := make(map[string]Assignment, n)
	for i, m := range in.members {
		b := builder{}
		for _, t := range got[i] {
			b.add(t)
		}
		out[m.id] = b.done()
	}
	return out
}

// uniformGeneral: members subscribe to different topics. Members keep what they had, each
// remaining partition goes to the least loaded member subscribing to its topic, then
// partitions move from a member to a less loaded subscriber while that narrows the gap by
// two or more.
func uniformGeneral(in assignInput) map[string]Assignment {
	n := len(in.members)
	subs := make([]map[TopicID]bool, n)
	byTopic := map[TopicID][]int{}
	for i, m := range in.members {
		subs[i] = map[TopicID]bool{}
		for _, id := range m.topics {
			subs[i][id] = true
			byTopic[id] = append(byTopic[id], i)
		}
	}
	own := map[tp]int{}
	count := make([]int, n)
	for i, m := range in.members {
		for _, id := range m.prev.sortedIDs() {
			if !subs[i][id] {
				continue
			}
			for _, p := range m.prev[id] {
				t := tp{id, p}
				if _, ok := own[t]; !ok && p < in.partitions[id] {
					own[t] = i
					count[i]++
				}
			}
		}
	}
	least := func(cands []int) int {
		best := -1
		for _, c := range cands {
			if best < 0 || count[c] < count[best] {
				best = c
			}
		}
		return best
	}
	var all []tp
	for _, id := range in.order {
		for p := int32(0); p < in.partitions[id]; p++ {
			t := tp{id, p}
			all = append(all, t)
			if _, ok := own[t]; ok {
				continue
			}
			if c := least(byTopic[id]); c >= 0 {
				own[t] = c
				count[c]++
			}
		}
	}
	for moved, rounds := true, 0; moved && rounds < len(all)+1; rounds++ {
		moved = false
		for _, t := range all {
			from, ok := own[t]
			if !ok {
				continue
			}
			to := least(byTopic[t.id])
			if to >= 0 && count[to]+1 < count[from] {
				own[t] = to
				count[from]--
				count[to]++
				moved = true
			}
		}
	}
	bs := make([]builder, n)
	for i := range bs {
		bs[i] = builder{}
	}
	for t, i := range own {
		bs[i].add(t)
	}
	out := make(map[string]Assignment, n)
	for i, m := range in.members {
		out[m.id] = bs[i].done()
	}
	return out
}

type rangeAssignor struct{}

func (rangeAssignor) assign(in assignInput) map[string]Assignment {
	ms := slices.Clone(in.members)
	slices.SortStableFunc(ms, func(a, b assignMember) int {
		switch {
		case a.instance != nil && b.instance != nil:
			return cmp.Compare(*a.instance, *b.instance)
		case a.instance != nil:
			return -1
		case b.instance != nil:
			return 1
		}
		return cmp.Compare(a.id, b.id)
	})
	subscribers := map[TopicID]int{}
	for _, m := range ms {
		for _, id := range m.topics {
			subscribers[id]++
		}
	}
	type split struct{ next, minQ, extra int32 }
	splits := map[TopicID]*split{}
	for id, k := range subscribers {
		n := in.partitions[id]
		splits[id] = &split{minQ: n / int32(k), extra: n % int32(k)}
	}
	out := make(map[string]Assignment, len(ms))
	for _, m := range ms {
		a := Assignment{}
		for _, id := range m.topics {
			sp := splits[id]
			q := sp.minQ
			if sp.extra > 0 {
				q++
				sp.extra--
			}
			end := min(sp.next+q, in.partitions[id])
			if sp.next < end {
				ps := make([]int32, 0, end-sp.next)
				for p := sp.next; p < end; p++ {
					ps = append(ps, p)
				}
				a[id] = ps
			}
			sp.next = end
		}
		out[m.id] = a
	}
	return out
}
