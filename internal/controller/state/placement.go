package state

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// placer chooses replicas for new partitions.
//
// Rules, in priority order:
//  1. the replicas of a partition are distinct active brokers (registered, unfenced, not
//     shutting down);
//  2. when any active broker has broker.rack set, a partition's replicas go to as many
//     distinct racks as possible (a broker without a rack counts as a rack of its own);
//  3. leaders (first replicas) are spread evenly: first over the topic's own partitions (the
//     broker leading the fewest of them, as Kafka stripes each topic), then over the cluster,
//     counting every existing partition and those placed so far;
//  4. replicas are spread evenly the same way: each follower is the broker holding the
//     fewest replicas among those allowed by 1 and 2;
//  5. ties are broken by a rotation that depends on the partition, so equal brokers take
//     turns and the followers of one leader vary from round to round.
//
// Counting existing partitions makes a new, empty broker the first choice for new
// partitions; existing partitions never move unless reassigned.
type placer struct {
	brokers   []*Broker // active, by id
	index     map[int32]int
	replicas  []int // per broker (same order as brokers): replicas held
	leaders   []int // per broker: partitions led (preferred leader = first replica)
	topicLead []int // per broker: partitions of the topic being placed that it leads
	rackAware bool
	seq       int // partitions placed so far (drives the tie-break rotation)
}

func (c *Controller) newPlacer() *placer {
	pl := &placer{brokers: c.activeBrokers(), index: map[int32]int{}}
	pl.replicas = make([]int, len(pl.brokers))
	pl.leaders = make([]int, len(pl.brokers))
	pl.topicLead = make([]int, len(pl.brokers))
	for i, b := range pl.brokers {
		pl.index[b.ID] = i
		if b.Rack != "" {
			pl.rackAware = true
		}
	}
	for _, t := range c.im.topics {
		for _, p := range t.Partitions {
			pl.count(p.Target())
		}
	}
	return pl
}

// startTopic begins placing partitions of one topic, whose existing partitions are existing.
func (pl *placer) startTopic(existing []*Partition) {
	clear(pl.topicLead)
	for _, p := range existing {
		if t := p.Target(); len(t) > 0 {
			if i, ok := pl.index[t[0]]; ok {
				pl.topicLead[i]++
			}
		}
	}
}

// count adds a placed (or existing) replica list to the balance counters.
func (pl *placer) count(replicas []int32) {
	for k, id := range replicas {
		if i, ok := pl.index[id]; ok {
			pl.replicas[i]++
			if k == 0 {
				pl.leaders[i]++
			}
		}
	}
}

// place returns rf replicas for the next partition.
func (pl *placer) place(rf int) ([]int32, error) {
	n := len(pl.brokers)
	if rf < 1 || rf > n {
		return nil, errf(kerr.InvalidReplicationFactor, "replication factor %d: %d brokers are available", rf, n)
	}
	seq := pl.seq
	pl.seq++
	chosen := make([]int32, 0, rf)
	picked := make([]bool, n)
	rackUse := map[string]int{}
	// Leader: fewest leaderships of this topic, then of the cluster, then fewest replicas,
	// then rotation.
	best := -1
	for k := range n {
		i := (seq + k) % n
		if best < 0 || pl.topicLead[i] < pl.topicLead[best] ||
			(pl.topicLead[i] == pl.topicLead[best] && (pl.leaders[i] < pl.leaders[best] ||
				(pl.leaders[i] == pl.leaders[best] && pl.replicas[i] < pl.replicas[best]))) {
			best = i
		}
	}
	pick := func(i int) {
		picked[i] = true
		chosen = append(chosen, pl.brokers[i].ID)
		rackUse[pl.rack(i)]++
	}
	pick(best)
	pl.topicLead[best]++
	// Followers start their rotation after the leader, shifted once per round of n
	// partitions so a leader's followers differ between rounds.
	shift := 1
	if n > 1 {
		shift += (seq / n) % (n - 1)
	}
	for f := 1; f < rf; f++ {
		best = -1
		for k := range n {
			i := (pl.index[chosen[0]] + shift + f - 1 + k) % n
			if picked[i] {
				continue
			}
			if best < 0 || pl.better(i, best, rackUse) {
				best = i
			}
		}
		pick(best)
	}
	pl.count(chosen)
	return chosen, nil
}

func (pl *placer) rack(i int) string {
	if !pl.rackAware {
		return ""
	}
	if r := pl.brokers[i].Rack; r != "" {
		return "rack:" + r
	}
	return fmt.Sprintf("broker:%d", pl.brokers[i].ID) // no rack: a rack of its own
}

// better reports whether broker i is a better follower than broker j: a less used rack
// first, then fewer replicas (earlier in the rotation on a tie: the caller scans in order).
func (pl *placer) better(i, j int, rackUse map[string]int) bool {
	if ri, rj := rackUse[pl.rack(i)], rackUse[pl.rack(j)]; ri != rj {
		return ri < rj
	}
	return pl.replicas[i] < pl.replicas[j]
}
