package state

import "slices"

// Partitions follow broker liveness (Kafka's ReplicationControlManager on a broker fenced,
// unfenced or shut down, with its PartitionChangeBuilder): when a command changes which
// brokers are active, every partition with a replica on one of them is reconciled (ISR
// members that are gone leave the ISR, a partition without an active leader gets a new one
// from the ISR, or uncleanly when allowed), and the change is written as a
// PartitionChangeRecord (diff, which AlterPartition, reassignment and ElectLeaders use
// too).

// liveness tells whether a broker may lead and be in an ISR, with a command's pending broker
// changes (fence, unfence, shutdown) laid over the image.
type liveness struct {
	im       *Image
	override map[int32]bool
}

func (c *Controller) liveness() *liveness { return &liveness{im: c.im, override: map[int32]bool{}} }

func (l *liveness) set(id int32, active bool) { l.override[id] = active }

func (l *liveness) active(id int32) bool {
	if a, ok := l.override[id]; ok {
		return a
	}
	return l.im.brokers[id].Active()
}

// reconcile returns the state p should have given broker liveness: ISR members that are not
// active leave the ISR (unless that would empty it: the last members stay, so one of them
// can return as a clean leader), and a partition whose leader is gone gets the first active
// ISR member in replica order, or with unclean election the first active replica (the ISR
// becomes just that replica), or no leader. It returns nil when nothing changes, and
// whether the election was unclean.
func reconcile(p *Partition, live *liveness, unclean bool) (*Partition, bool) {
	isr := p.ISR
	if slices.ContainsFunc(isr, func(id int32) bool { return !live.active(id) }) {
		kept := slices.DeleteFunc(slices.Clone(isr), func(id int32) bool { return !live.active(id) })
		if len(kept) > 0 {
			isr = kept
		}
	}
	leader := p.Leader
	wasUnclean := false
	if leader == NoLeader || !live.active(leader) || !contains(isr, leader) {
		leader = NoLeader
		for _, r := range p.Replicas {
			if contains(isr, r) && live.active(r) {
				leader = r
				break
			}
		}
		if leader == NoLeader && unclean {
			if r, ok := uncleanCandidate(p, live); ok {
				leader, isr, wasUnclean = r, []int32{r}, true
			}
		}
	}
	if leader == p.Leader && slices.Equal(isr, p.ISR) {
		return nil, false
	}
	np := *p
	np.Leader, np.ISR = leader, isr
	return &np, wasUnclean
}

// uncleanCandidate picks an active replica outside the ISR, preferring replicas that are not
// still being added by a reassignment (those have the least data).
func uncleanCandidate(p *Partition, live *liveness) (int32, bool) {
	for _, pass := range []bool{false, true} {
		for _, r := range p.Replicas {
			if contains(p.Adding, r) == pass && live.active(r) {
				return r, true
			}
		}
	}
	return 0, false
}

// diff returns the record turning old into next (nil if they are equal). The leader epoch is
// bumped when the leader changes or a replica leaves the assignment.
func diff(topic UUID, partition int32, old, next *Partition) *PartitionChangeRecord {
	r := &PartitionChangeRecord{TopicID: topic, Partition: partition, PartitionEpoch: old.PartitionEpoch}
	if next.Leader != old.Leader {
		r.Fields |= ChangeLeader
		r.Leader = next.Leader
		r.BumpLeaderEpoch = true
	}
	if !slices.Equal(next.ISR, old.ISR) {
		r.Fields |= ChangeISR
		r.ISR = slices.Clone(next.ISR)
	}
	if !slices.Equal(next.Replicas, old.Replicas) {
		r.Fields |= ChangeReplicas
		r.Replicas = slices.Clone(next.Replicas)
		if !subset(old.Replicas, next.Replicas) {
			r.BumpLeaderEpoch = true
		}
	}
	if !slices.Equal(next.Adding, old.Adding) {
		r.Fields |= ChangeAdding
		r.Adding = slices.Clone(next.Adding)
	}
	if !slices.Equal(next.Removing, old.Removing) {
		r.Fields |= ChangeRemoving
		r.Removing = slices.Clone(next.Removing)
	}
	if r.Fields == 0 {
		return nil
	}
	return r
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// reconcileBrokers returns the partition changes that follow from the liveness overrides in
// live (for every partition with a replica among changed), in topic-name then partition
// order, and the partitions whose new leader was elected uncleanly.
func (c *Controller) reconcileBrokers(live *liveness, changed []int32) (recs []Record, uncleanElected []TopicPartition) {
	for _, t := range c.im.sortedTopics() {
		unclean := -1 // computed once per topic, when needed
		for i, p := range t.Partitions {
			if !slices.ContainsFunc(p.Replicas, func(id int32) bool { return contains(changed, id) }) {
				continue
			}
			if unclean < 0 {
				unclean = 0
				if c.uncleanEnabled(t) {
					unclean = 1
				}
			}
			if np, wasUnclean := reconcile(p, live, unclean == 1); np != nil {
				recs = append(recs, diff(t.ID, int32(i), p, np))
				if wasUnclean {
					uncleanElected = append(uncleanElected, TopicPartition{t.Name, int32(i)})
				}
			}
		}
	}
	return recs, uncleanElected
}
