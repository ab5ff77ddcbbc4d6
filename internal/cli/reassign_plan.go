package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Partition reassignment plans: the JSON file kafka-reassign-partitions.sh
// reads and writes, its validation, and the generation of a balanced plan.
// Everything here is pure (no client, no clock) so it is unit-tested
// directly; reassign.go talks to the cluster.
//
// The file format (version 1, the only one Kafka has):
//
//	{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,3]}]}
//
// A partition entry may carry "log_dirs" (one per replica); only "any" is
// accepted, as gregor does not move replicas between log directories. A
// missing "version" means 1, as in Kafka's tool.

// PlanVersion is the only reassignment file version there is.
const PlanVersion = 1

// Assignment is a replica assignment: topic -> partition -> replicas, the
// first replica being the preferred leader.
type Assignment map[string]map[int32][]int32

// Set records the replicas of one partition.
func (a Assignment) Set(topic string, partition int32, replicas []int32) {
	ps := a[topic]
	if ps == nil {
		ps = map[int32][]int32{}
		a[topic] = ps
	}
	ps[partition] = replicas
}

// Lookup returns the replicas of one partition and whether it is known.
func (a Assignment) Lookup(topic string, partition int32) ([]int32, bool) {
	r, ok := a[topic][partition]
	return r, ok
}

// Plan renders a as a reassignment file, sorted by topic then partition.
func (a Assignment) Plan() ReassignmentPlan {
	p := ReassignmentPlan{Version: PlanVersion, Partitions: []PlanPartition{}}
	for _, t := range sortedKeys(a) {
		ps := a[t]
		nums := make([]int32, 0, len(ps))
		for n := range ps {
			nums = append(nums, n)
		}
		slices.Sort(nums)
		for _, n := range nums {
			p.Partitions = append(p.Partitions, PlanPartition{Topic: t, Partition: n, Replicas: nonNil(ps[n])})
		}
	}
	return p
}

// ReassignmentPlan is a reassignment file.
type ReassignmentPlan struct {
	Version    int             `json:"version"`
	Partitions []PlanPartition `json:"partitions"`
}

// PlanPartition is one entry of a reassignment file: the replicas a
// partition should end up with, preferred leader first.
type PlanPartition struct {
	Topic     string   `json:"topic"`
	Partition int32    `json:"partition"`
	Replicas  []int32  `json:"replicas"`
	LogDirs   []string `json:"log_dirs,omitempty"`
}

// name is "topic-partition", as Kafka's tools print a partition.
func (p PlanPartition) name() string { return fmt.Sprintf("%s-%d", p.Topic, p.Partition) }

// Assignment returns the plan's target assignment.
func (p ReassignmentPlan) Assignment() Assignment {
	a := Assignment{}
	for _, e := range p.Partitions {
		a.Set(e.Topic, e.Partition, e.Replicas)
	}
	return a
}

// Topics returns the plan's topics, sorted.
func (p ReassignmentPlan) Topics() []string { return sortedKeys(p.Assignment()) }

// MarshalCompact renders the plan on one line, as Kafka's tool prints it.
func (p ReassignmentPlan) MarshalCompact() string {
	b, err := json.Marshal(p)
	if err != nil { // only plain ints and strings: cannot fail
		panic(err)
	}
	return string(b)
}

// rawPlan decodes a plan file with every field optional, so a missing field
// is told apart from a zero one.
type rawPlan struct {
	Version    *int                `json:"version"`
	Partitions *[]rawPlanPartition `json:"partitions"`
}

type rawPlanPartition struct {
	Topic     *string  `json:"topic"`
	Partition *int32   `json:"partition"`
	Replicas  []int32  `json:"replicas"`
	LogDirs   []string `json:"log_dirs"`
}

// ParsePlan parses and checks a reassignment file on its own (without the
// cluster): malformed JSON, an unknown version, entries missing a field, a
// negative partition or broker id, empty or duplicate replicas, log dirs
// other than "any", and partitions listed twice. Every problem is reported,
// each naming its entry as partitions[i] (topic-partition).
func ParsePlan(data []byte) (ReassignmentPlan, error) {
	var raw rawPlan
	if err := json.Unmarshal(data, &raw); err != nil {
		return ReassignmentPlan{}, fmt.Errorf("malformed reassignment plan: %w", err)
	}
	plan := ReassignmentPlan{Version: PlanVersion}
	if raw.Version != nil && *raw.Version != PlanVersion {
		return ReassignmentPlan{}, fmt.Errorf("unsupported reassignment plan version %d (want %d)", *raw.Version, PlanVersion)
	}
	if raw.Partitions == nil {
		return ReassignmentPlan{}, errors.New(`malformed reassignment plan: no "partitions" list`)
	}
	if len(*raw.Partitions) == 0 {
		return ReassignmentPlan{}, errors.New("reassignment plan lists no partitions")
	}
	var errs []error
	first := map[string]int{} // topic-partition -> index of its first entry
	for i, rp := range *raw.Partitions {
		var e PlanPartition
		where := fmt.Sprintf("partitions[%d]", i)
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("%s: %s", where, fmt.Sprintf(format, args...)))
		}
		switch {
		case rp.Topic == nil || *rp.Topic == "":
			bad(`no "topic"`)
			continue
		case rp.Partition == nil:
			bad(`topic %s: no "partition"`, *rp.Topic)
			continue
		}
		e.Topic, e.Partition, e.Replicas, e.LogDirs = *rp.Topic, *rp.Partition, rp.Replicas, rp.LogDirs
		where = fmt.Sprintf("partitions[%d] (%s)", i, e.name())
		if e.Partition < 0 {
			bad("negative partition %d", e.Partition)
		}
		if j, dup := first[e.name()]; dup {
			bad("partition listed twice (also partitions[%d])", j)
		} else {
			first[e.name()] = i
		}
		if len(e.Replicas) == 0 {
			bad("no replicas")
		}
		seen := map[int32]bool{}
		for _, r := range e.Replicas {
			if r < 0 {
				bad("negative broker id %d in replicas [%s]", r, joinInt32s(e.Replicas))
			}
			if seen[r] {
				bad("broker %d listed twice in replicas [%s]", r, joinInt32s(e.Replicas))
			}
			seen[r] = true
		}
		if e.LogDirs != nil {
			if len(e.LogDirs) != len(e.Replicas) {
				bad("%d log_dirs for %d replicas", len(e.LogDirs), len(e.Replicas))
			}
			for _, d := range e.LogDirs {
				if d != "any" {
					bad(`log dir %q: only "any" is supported`, d)
					break
				}
			}
		}
		plan.Partitions = append(plan.Partitions, e)
	}
	if len(errs) > 0 {
		return ReassignmentPlan{}, fmt.Errorf("invalid reassignment plan:\n%w", errors.Join(errs...))
	}
	return plan, nil
}

// CheckPlan checks a parsed plan against the cluster: every partition must
// exist in current (the cluster's assignment of at least the plan's topics)
// and every replica must be one of brokers. Every problem is reported, each
// naming its entry.
func CheckPlan(plan ReassignmentPlan, current Assignment, brokers []int32) error {
	live := map[int32]bool{}
	for _, b := range brokers {
		live[b] = true
	}
	sorted := slices.Sorted(maps.Keys(live))
	var errs []error
	for i, e := range plan.Partitions {
		where := fmt.Sprintf("partitions[%d] (%s)", i, e.name())
		if _, ok := current[e.Topic]; !ok {
			errs = append(errs, fmt.Errorf("%s: unknown topic %s", where, e.Topic))
			continue
		}
		if _, ok := current.Lookup(e.Topic, e.Partition); !ok {
			errs = append(errs, fmt.Errorf("%s: unknown partition: topic %s has %d partition(s)", where, e.Topic, len(current[e.Topic])))
			continue
		}
		for _, r := range e.Replicas {
			if !live[r] {
				errs = append(errs, fmt.Errorf("%s: broker %d is not in the cluster (brokers: %s)", where, r, joinInt32s(sorted)))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("reassignment plan does not match the cluster:\n%w", errors.Join(errs...))
	}
	return nil
}

// GenerateAssignment proposes a balanced assignment of every partition in
// current over brokers, with rf replicas each (rf <= 0: each partition keeps
// its replica count). It is deterministic. The result satisfies:
//
//   - a partition's replicas are distinct and all in brokers;
//   - replica counts per broker differ by at most one;
//   - leader (first replica) counts per broker differ by at most one
//     whenever some choice of leaders among the placed replicas allows it,
//     which it does in practice when all partitions have the same replica
//     count (with mixed counts, a broker may hold more single-replica
//     partitions than its share of leaders: replicas are balanced first);
//   - replicas already on an allowed broker stay there, and current leaders
//     stay leaders, unless balance requires moving them.
//
// Balance is over all the given partitions together (Kafka's tool balances
// the same way when given several topics).
func GenerateAssignment(current Assignment, brokers []int32, rf int) (Assignment, error) {
	bs := slices.Clone(brokers)
	slices.Sort(bs)
	bs = slices.Compact(bs)
	if len(bs) == 0 {
		return nil, errors.New("no brokers to assign replicas to")
	}
	for _, b := range bs {
		if b < 0 {
			return nil, fmt.Errorf("negative broker id %d", b)
		}
	}
	var slots []*planSlot
	for _, e := range current.Plan().Partitions {
		n := rf
		if n <= 0 {
			n = len(e.Replicas)
		}
		if n == 0 {
			return nil, fmt.Errorf("%s has no replicas: give a replication factor", e.name())
		}
		if n > len(bs) {
			return nil, fmt.Errorf("%s: replication factor %d is larger than the %d broker(s) given", e.name(), n, len(bs))
		}
		slots = append(slots, &planSlot{topic: e.Topic, partition: e.Partition, orig: e.Replicas, rf: n})
	}
	g := &planGen{brokers: bs, slots: slots, replicas: map[int32]int{}, leaders: map[int32]int{}}
	g.placeReplicas()
	g.chooseLeaders()
	out := Assignment{}
	for _, s := range slots {
		out.Set(s.topic, s.partition, s.replicas)
	}
	return out, nil
}

// planSlot is one partition being placed.
type planSlot struct {
	topic     string
	partition int32
	orig      []int32 // current replicas
	rf        int
	replicas  []int32 // proposed; leader first once chooseLeaders ran
}

// planGen holds the running per-broker counts of a generation.
type planGen struct {
	brokers  []int32 // sorted, distinct
	slots    []*planSlot
	replicas map[int32]int // replicas placed per broker
	leaders  map[int32]int // leaderships per broker
}

// placeReplicas keeps current replicas up to each broker's fair share
// (ceil), fills the rest on the least loaded brokers, then repairs any
// imbalance by moving one replica at a time from the most to the least
// loaded broker. Each repair lowers the sum of squared counts, so it ends.
func (g *planGen) placeReplicas() {
	total := 0
	for _, s := range g.slots {
		total += s.rf
	}
	ceil := (total + len(g.brokers) - 1) / len(g.brokers)
	allowed := map[int32]bool{}
	for _, b := range g.brokers {
		allowed[b] = true
	}
	// Keep position by position (every current leader first, then every
	// second replica, ...) so a full broker sheds its last-listed replicas
	// spread over many partitions, and leaders are the last to go.
	for pos, more := 0, true; more; pos++ {
		more = false
		for _, s := range g.slots {
			if pos >= len(s.orig) {
				continue
			}
			more = true
			b := s.orig[pos]
			if len(s.replicas) < s.rf && allowed[b] && !slices.Contains(s.replicas, b) && g.replicas[b] < ceil {
				s.replicas = append(s.replicas, b)
				g.replicas[b]++
			}
		}
	}
	for _, s := range g.slots {
		for len(s.replicas) < s.rf {
			b := g.leastLoaded(g.replicas, func(b int32) bool { return !slices.Contains(s.replicas, b) })
			s.replicas = append(s.replicas, b)
			g.replicas[b]++
		}
	}
	for {
		hi, lo := g.extremes(g.replicas)
		if g.replicas[hi]-g.replicas[lo] <= 1 {
			return
		}
		// A partition holding hi but not lo exists: hi is in more
		// partitions than lo. Prefer one lo was in before (a move back),
		// then one where hi is a new placement (no extra movement).
		best, bestScore := -1, -1
		for i, s := range g.slots {
			if !slices.Contains(s.replicas, hi) || slices.Contains(s.replicas, lo) {
				continue
			}
			score := 0
			if slices.Contains(s.orig, lo) {
				score += 2
			}
			if !slices.Contains(s.orig, hi) {
				score++
			}
			if score > bestScore {
				best, bestScore = i, score
			}
		}
		s := g.slots[best]
		s.replicas[slices.Index(s.replicas, hi)] = lo
		g.replicas[hi]--
		g.replicas[lo]++
	}
}

// chooseLeaders picks each partition's first replica: the current leader
// while it is under its fair share, else the replica leading least; then it
// evens leader counts by shifting leaderships along chains of partitions
// (a leads p1 which holds b, b leads p2 which holds c: a->b->c moves one
// leadership from a to c and leaves b's count unchanged).
func (g *planGen) chooseLeaders() {
	ceil := (len(g.slots) + len(g.brokers) - 1) / len(g.brokers)
	leader := make([]int32, len(g.slots))
	var rest []int
	for i, s := range g.slots {
		if len(s.orig) > 0 && slices.Contains(s.replicas, s.orig[0]) && g.leaders[s.orig[0]] < ceil {
			leader[i] = s.orig[0]
			g.leaders[s.orig[0]]++
			continue
		}
		rest = append(rest, i)
	}
	for _, i := range rest {
		s := g.slots[i]
		b := s.replicas[0]
		for _, r := range s.replicas[1:] {
			if g.leaders[r] < g.leaders[b] {
				b = r
			}
		}
		leader[i] = b
		g.leaders[b]++
	}
	for g.shiftLeader(leader) {
	}
	for i, s := range g.slots {
		j := slices.Index(s.replicas, leader[i])
		s.replicas = append([]int32{leader[i]}, slices.Delete(slices.Clone(s.replicas), j, j+1)...)
	}
}

// shiftLeader finds a chain of leadership moves from a broker to one
// leading at least two fewer partitions, applies it and reports whether it
// found one. Sources are tried from the most leaderships down; the chain is
// a breadth-first path, so it is the shortest and deterministic.
func (g *planGen) shiftLeader(leader []int32) bool {
	sources := slices.Clone(g.brokers)
	sort.SliceStable(sources, func(i, j int) bool { return g.leaders[sources[i]] > g.leaders[sources[j]] })
	for _, src := range sources {
		// via[b] is the slot whose leadership moves to b on the path.
		via := map[int32]int{src: -1}
		queue := []int32{src}
		for len(queue) > 0 {
			a := queue[0]
			queue = queue[1:]
			if g.leaders[a] <= g.leaders[src]-2 {
				for b := a; b != src; {
					i := via[b]
					prev := leader[i]
					leader[i] = b
					b = prev
				}
				g.leaders[src]--
				g.leaders[a]++
				return true
			}
			for i, s := range g.slots {
				if leader[i] != a {
					continue
				}
				for _, b := range s.replicas {
					if _, seen := via[b]; !seen {
						via[b] = i
						queue = append(queue, b)
					}
				}
			}
		}
	}
	return false
}

// leastLoaded returns the broker passing ok with the lowest count (lowest
// id on ties). The caller guarantees one passes.
func (g *planGen) leastLoaded(counts map[int32]int, ok func(int32) bool) int32 {
	best := int32(-1)
	for _, b := range g.brokers {
		if ok(b) && (best < 0 || counts[b] < counts[best]) {
			best = b
		}
	}
	return best
}

// extremes returns the brokers with the highest and the lowest count
// (lowest id on ties).
func (g *planGen) extremes(counts map[int32]int) (hi, lo int32) {
	hi, lo = g.brokers[0], g.brokers[0]
	for _, b := range g.brokers[1:] {
		if counts[b] > counts[hi] {
			hi = b
		}
		if counts[b] < counts[lo] {
			lo = b
		}
	}
	return hi, lo
}

// movedReplicas counts the replicas of next that are not in prev, the data a
// reassignment from prev to next copies.
func movedReplicas(prev, next Assignment) int {
	n := 0
	for t, ps := range next {
		for p, rs := range ps {
			old, _ := prev.Lookup(t, p)
			for _, r := range rs {
				if !slices.Contains(old, r) {
					n++
				}
			}
		}
	}
	return n
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// parseBrokerIDs parses a comma-separated list of broker ids ("1,2,3").
func parseBrokerIDs(s string) ([]int32, error) {
	var out []int32
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.ParseInt(f, 10, 32)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("broker id %q: want a non-negative integer", f)
		}
		id := int32(n)
		if slices.Contains(out, id) {
			return nil, fmt.Errorf("broker id %d given twice", id)
		}
		out = append(out, id)
	}
	if len(out) == 0 {
		return nil, errors.New("no broker ids given")
	}
	return out, nil
}
