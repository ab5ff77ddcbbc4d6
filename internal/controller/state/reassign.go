package state

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Reassignment states of a partition (see Partition.Adding and Removing):
//
//	stable:     Adding = Removing = ∅; Replicas is the assignment.
//	moving:     Replicas = target ++ (old replicas not in target); Adding = target minus the
//	            replicas the partition had before; Removing = Replicas minus target. The new
//	            replicas fetch from the leader and join the ISR like any follower.
//	completing: as soon as the ISR holds every target replica (checked whenever the ISR
//	            changes and when the reassignment starts), one change sets Replicas = target,
//	            ISR = ISR ∩ target, clears Adding and Removing, bumps the leader epoch (the
//	            removed replicas are fenced) and, if the leader is not in the target, makes
//	            the first active target replica in the ISR the leader.
//	cancelled:  Replicas = the original replicas, ISR = ISR ∩ original, Adding = Removing = ∅.
//
// A new reassignment of a moving partition replaces the target; replicas still being added
// that are not in the new target are removed when it completes.

// ReassignmentRequest moves one partition to Replicas (nil cancels its reassignment).
type ReassignmentRequest struct {
	Topic     string
	Partition int32
	Replicas  []int32
}

// ReassignmentResult is the outcome for one partition.
type ReassignmentResult struct {
	Topic     string
	Partition int32
	Err       error
}

// AlterPartitionReassignments starts, replaces or cancels reassignments. The target must be
// distinct registered brokers (INVALID_REPLICA_ASSIGNMENT); as in Kafka's KRaft controller
// (ReplicationControlManager.validateManualPartitionAssignment) a registered broker that is
// fenced or shutting down may be added: its replica joins the ISR, and the reassignment
// completes, once the broker is back and has caught up. Cancelling a partition that is not
// moving is NO_REASSIGNMENT_IN_PROGRESS. Each partition succeeds or fails alone.
func (c *Controller) AlterPartitionReassignments(reqs []ReassignmentRequest) ([]Record, []ReassignmentResult) {
	var recs []Record
	results := make([]ReassignmentResult, len(reqs))
	seen := map[TopicPartition]int{}
	for _, r := range reqs {
		seen[TopicPartition{r.Topic, r.Partition}]++
	}
	live := c.liveness()
	for i, r := range reqs {
		results[i] = ReassignmentResult{Topic: r.Topic, Partition: r.Partition}
		if seen[TopicPartition{r.Topic, r.Partition}] > 1 {
			results[i].Err = errf(kerr.InvalidRequest, "%s-%d appears more than once", r.Topic, r.Partition)
			continue
		}
		rec, err := c.reassign(r, live)
		if err != nil {
			results[i].Err = err
			continue
		}
		if rec != nil {
			recs = append(recs, rec)
		}
	}
	return recs, results
}

func (c *Controller) reassign(r ReassignmentRequest, live *liveness) (*PartitionChangeRecord, error) {
	t := c.im.topicsByName[r.Topic]
	if t == nil {
		return nil, errf(kerr.UnknownTopicOrPartition, "topic %q does not exist", r.Topic)
	}
	p := c.im.Partition(t.ID, r.Partition)
	if p == nil {
		return nil, errf(kerr.UnknownTopicOrPartition, "%s-%d does not exist", r.Topic, r.Partition)
	}
	if r.Replicas == nil {
		if !p.Reassigning() {
			return nil, errf(kerr.NoReassignmentInProgress, "%s-%d is not being reassigned", r.Topic, r.Partition)
		}
		np, err := cancelReassignment(p, live)
		if err != nil {
			return nil, errf(kerr.InvalidReplicaAssignment, "%s-%d: %v", r.Topic, r.Partition, err)
		}
		return diff(t.ID, r.Partition, p, np), nil
	}
	target := r.Replicas
	switch {
	case len(target) == 0:
		return nil, errf(kerr.InvalidReplicaAssignment, "%s-%d: empty replica list", r.Topic, r.Partition)
	case !distinct(target):
		return nil, errf(kerr.InvalidReplicaAssignment, "%s-%d: replicas %v are not distinct", r.Topic, r.Partition, target)
	}
	orig := p.Original()
	for _, id := range target {
		if c.im.brokers[id] == nil {
			return nil, errf(kerr.InvalidReplicaAssignment, "%s-%d: broker %d is not registered", r.Topic, r.Partition, id)
		}
	}
	if !p.Reassigning() && slices.Equal(target, p.Replicas) {
		return nil, nil // already there
	}
	np := *p
	np.Replicas = append(slices.Clone(target), without(p.Replicas, target)...)
	np.Adding = without(target, orig)
	np.Removing = without(p.Replicas, target)
	if len(np.Adding) == 0 {
		np.Adding = nil
	}
	if len(np.Removing) == 0 {
		np.Removing = nil
	}
	// With nothing to add or remove (same replicas in a new order: a new preferred leader)
	// the change is immediate; otherwise it completes now if the target is already in sync.
	if done := completeReassignment(&np, live); done != nil {
		np = *done
	}
	return diff(t.ID, r.Partition, p, &np), nil
}

// completeReassignment returns the finished state of a moving partition whose ISR holds
// every target replica, or nil if p is not moving or not caught up.
func completeReassignment(p *Partition, live *liveness) *Partition {
	if !p.Reassigning() {
		return nil
	}
	target := p.Target()
	if !subset(target, p.ISR) {
		return nil
	}
	np := *p
	np.Replicas = slices.Clone(target)
	np.ISR = slices.DeleteFunc(slices.Clone(p.ISR), func(r int32) bool { return !contains(target, r) })
	np.Adding, np.Removing = nil, nil
	np.Leader = pickLeader(np.Replicas, np.ISR, p.Leader, live)
	return &np
}

// cancelReassignment reverts a moving partition to its original replicas.
func cancelReassignment(p *Partition, live *liveness) (*Partition, error) {
	orig := p.Original()
	isr := slices.DeleteFunc(slices.Clone(p.ISR), func(r int32) bool { return !contains(orig, r) })
	if len(isr) == 0 {
		return nil, errNoOriginalInSync
	}
	np := *p
	np.Replicas = slices.Clone(orig)
	np.ISR = isr
	np.Adding, np.Removing = nil, nil
	np.Leader = pickLeader(np.Replicas, np.ISR, p.Leader, live)
	return &np, nil
}

var errNoOriginalInSync = errorString("cannot cancel: no original replica is in sync")

type errorString string

func (e errorString) Error() string { return string(e) }

// pickLeader keeps the current leader if it is an active ISR member, else takes the first
// active ISR member in replica order, else none.
func pickLeader(replicas, isr []int32, current int32, live *liveness) int32 {
	if current != NoLeader && contains(isr, current) && live.active(current) {
		return current
	}
	for _, r := range replicas {
		if contains(isr, r) && live.active(r) {
			return r
		}
	}
	return NoLeader
}

// OngoingReassignment describes one moving partition.
type OngoingReassignment struct {
	Topic     string
	Partition int32
	Replicas  []int32
	Adding    []int32
	Removing  []int32
}

// ListPartitionReassignments returns the moving partitions among parts (all when nil), in
// topic and partition order.
func (c *Controller) ListPartitionReassignments(parts []TopicPartition) []OngoingReassignment {
	var out []OngoingReassignment
	add := func(t *Topic, i int32, p *Partition) {
		if p != nil && p.Reassigning() {
			out = append(out, OngoingReassignment{t.Name, i, slices.Clone(p.Replicas), slices.Clone(p.Adding), slices.Clone(p.Removing)})
		}
	}
	if parts == nil {
		for _, t := range c.im.sortedTopics() {
			for i, p := range t.Partitions {
				add(t, int32(i), p)
			}
		}
		return out
	}
	for _, tp := range parts {
		if t := c.im.topicsByName[tp.Topic]; t != nil {
			add(t, tp.Partition, c.im.Partition(t.ID, tp.Partition))
		}
	}
	return out
}
