package group

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// Assignors: every partition of a subscribed topic goes to exactly one member subscribing
// to it; uniform balances homogeneous groups to within one partition and keeps members'
// partitions when a member joins.
func TestAssignorsProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	topics := []string{"a", "b", "c", "d"}
	for iter := 0; iter < 300; iter++ {
		in := assignInput{partitions: map[TopicID]int32{}}
		for _, n := range topics {
			id := topicID(n)
			in.partitions[id] = int32(rng.IntN(12))
			in.order = append(in.order, id)
		}
		homog := rng.IntN(2) == 0
		n := 1 + rng.IntN(8)
		common := subsetOf(rng, in.order)
		for i := 0; i < n; i++ {
			m := assignMember{id: fmt.Sprintf("m%02d", i)}
			if homog {
				m.topics = common
			} else {
				m.topics = subsetOf(rng, in.order)
			}
			in.members = append(in.members, m)
		}
		for name, a := range map[string]assignor{"uniform": uniformAssignor{}, "range": rangeAssignor{}} {
			out := a.assign(in)
			checkAssignment(t, name, in, out)
			if name != "uniform" {
				continue
			}
			// Again with the result as the previous target and one more member.
			next := in
			next.members = slices.Clone(in.members)
			for i := range next.members {
				next.members[i].prev = out[next.members[i].id]
			}
			extra := assignMember{id: "zz", topics: common}
			if !homog {
				extra.topics = subsetOf(rng, in.order)
			}
			next.members = append(next.members, extra)
			out2 := a.assign(next)
			checkAssignment(t, name+" after a join", next, out2)
			if homogeneous(next.members) {
				total := 0
				for _, id := range common {
					total += int(next.partitions[id])
				}
				quota := total / len(next.members)
				for _, m := range in.members {
					before, after := out[m.id].count(), out2[m.id].count()
					lost := 0
					for id, ps := range out[m.id] {
						lost += len(subtract(ps, out2[m.id][id]))
					}
					// A member gives up only what it has beyond its new share.
					if allowed := max(before-quota, 0); lost > allowed || after < min(before, quota) {
						t.Fatalf("uniform moved too much from %s: had %d, lost %d, quota %d", m.id, before, lost, quota)
					}
				}
			}
		}
	}
}

func subsetOf(rng *rand.Rand, ids []TopicID) []TopicID {
	var out []TopicID
	for _, id := range ids {
		if rng.IntN(2) == 0 {
			out = append(out, id)
		}
	}
	return out
}

func checkAssignment(t *testing.T, name string, in assignInput, out map[string]Assignment) {
	t.Helper()
	owner := map[tp]string{}
	counts := map[string]int{}
	for _, m := range in.members {
		for id, ps := range out[m.id] {
			if !slices.Contains(m.topics, id) {
				t.Fatalf("%s: %s got unsubscribed topic %x", name, m.id, id[:2])
			}
			for _, p := range ps {
				if p < 0 || p >= in.partitions[id] {
					t.Fatalf("%s: %s got partition %d of a %d-partition topic", name, m.id, p, in.partitions[id])
				}
				k := tp{id, p}
				if o, dup := owner[k]; dup {
					t.Fatalf("%s: partition %v to %s and %s", name, k, o, m.id)
				}
				owner[k] = m.id
				counts[m.id]++
			}
		}
	}
	for _, id := range in.order {
		subscribed := false
		for _, m := range in.members {
			subscribed = subscribed || slices.Contains(m.topics, id)
		}
		for p := int32(0); p < in.partitions[id] && subscribed; p++ {
			if _, ok := owner[tp{id, p}]; !ok {
				t.Fatalf("%s: partition %x-%d unassigned", name, id[:2], p)
			}
		}
	}
	if homogeneous(in.members) && strings.HasPrefix(name, "uniform") {
		lo, hi := 1<<30, 0
		for _, m := range in.members {
			lo, hi = min(lo, counts[m.id]), max(hi, counts[m.id])
		}
		if hi-lo > 1 {
			t.Fatalf("%s: unbalanced %v", name, counts)
		}
	}
}

// Random joins, leaves, crashes, subscription and topic changes: invariants hold after
// every step, no partition is ever owned by two live clients, and once things calm down
// every partition is assigned.
func TestConsumerRandomSchedules(t *testing.T) {
	for seed := uint64(1); seed <= 25; seed++ {
		runConsumerSchedule(t, seed)
	}
}

func runConsumerSchedule(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	cfg := testConfig()
	cfg.ConsumerSessionTimeoutMs = 10000
	parts := map[string]int32{"x": 5, "y": 3}
	h := newCGHarness(t, cfg, parts)
	var live []*member
	next := 0
	// Clients the coordinator still counts as members own only what it has them own (so,
	// by the group invariants, no partition twice). A client whose session ran out while it
	// was slow is no longer a member; it finds out on its next heartbeat.
	noDoubleOwners := func(step int) {
		seen := map[tp]string{}
		g := h.s.groups["g"]
		for _, m := range live {
			sm := g.cons.members[m.id]
			if sm == nil {
				continue
			}
			for id, ps := range m.owned {
				if len(subtract(ps, union(sm.Assigned[id], sm.PendingRevocation[id]))) > 0 {
					t.Fatalf("seed %d step %d: %s owns %v of %x, coordinator says %v + %v", seed, step, m.id, ps, id[:1], sm.Assigned[id], sm.PendingRevocation[id])
				}
				for _, p := range ps {
					if o, dup := seen[tp{id, p}]; dup {
						t.Fatalf("seed %d step %d: partition %x-%d owned by %s and %s", seed, step, id[:1], p, o, m.id)
					}
					seen[tp{id, p}] = m.id
				}
			}
		}
	}
	for step := 0; step < 300; step++ {
		switch r := rng.IntN(20); {
		case r < 3 || len(live) == 0:
			m := h.member("g", fmt.Sprintf("m%d", next), "x")
			next++
			if rng.IntN(3) == 0 {
				m.topics = []string{"x", "y"}
			}
			if rng.IntN(4) == 0 {
				m.assignor = strPtr("range")
			}
			if code := m.send(m.request(0)); code == 0 {
				live = append(live, m)
			}
		case r < 4:
			i := rng.IntN(len(live))
			live[i].leave()
			live = slices.Delete(live, i, i+1)
		case r < 5:
			// Crash: the client stops; it owns nothing any more.
			i := rng.IntN(len(live))
			live = slices.Delete(live, i, i+1)
		case r < 6:
			m := live[rng.IntN(len(live))]
			if len(m.topics) == 1 {
				m.topics = []string{"x", "y"}
			} else {
				m.topics = []string{"x"}
			}
		case r < 7:
			parts = map[string]int32{"x": parts["x"] + int32(rng.IntN(2)), "y": parts["y"]}
			h.setTopics(parts)
		case r < 9:
			h.advance(int64(rng.IntN(4000)))
		default:
			m := live[rng.IntN(len(live))]
			if code := m.send(m.request(m.epoch)); code != 0 {
				// Fenced (its session ran out while it was slow): it rejoins from scratch.
				m.owned = Assignment{}
				if m.send(m.request(0)) != 0 {
					t.Fatalf("seed %d: rejoin failed", seed)
				}
			}
		}
		noDoubleOwners(step)
	}
	// Calm: everyone heartbeats until Stable; every partition is assigned.
	for round := 0; round < 30; round++ {
		h.advance(1000) // crashed members' sessions run out
		for _, m := range live {
			if m.send(m.request(m.epoch)) != 0 {
				m.owned = Assignment{}
				m.send(m.request(0))
			}
		}
		noDoubleOwners(1000 + round)
	}
	if g := h.s.groups["g"]; g != nil && len(live) > 0 {
		if st := g.cons.state(); st != ConsumerStable {
			t.Fatalf("seed %d: not stable: %s", seed, h.describe("g"))
		}
		total := 0
		for _, m := range live {
			total += m.owned.count()
		}
		want := int(parts["x"])
		for _, m := range live {
			if len(m.topics) == 2 {
				want += int(parts["y"])
				break
			}
		}
		if total != want {
			t.Fatalf("seed %d: %d partitions owned, want %d: %s", seed, total, want, h.describe("g"))
		}
	}
}
