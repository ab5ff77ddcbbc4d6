package state

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// AlterPartitionItem is a partition leader's proposed ISR.
type AlterPartitionItem struct {
	TopicID        UUID
	Partition      int32
	LeaderEpoch    int32 // the leader epoch the leader holds
	PartitionEpoch int32 // the partition epoch the ISR change is based on
	NewISR         []int32
}

// AlterPartitionRequest is a leader's ISR changes (Kafka's AlterPartition).
type AlterPartitionRequest struct {
	BrokerID    int32
	BrokerEpoch int64
	Partitions  []AlterPartitionItem
}

// AlterPartitionResult is the partition's state once the change applies (or its current
// state when the change is refused with a fencing error, so the leader can catch up).
type AlterPartitionResult struct {
	TopicID        UUID
	Partition      int32
	Err            error
	Leader         int32
	LeaderEpoch    int32
	ISR            []int32
	PartitionEpoch int32
}

// AlterPartition applies ISR changes sent by partition leaders. Each change is fenced: the
// sender must be the leader (NOT_LEADER_OR_FOLLOWER), hold the current leader epoch
// (FENCED_LEADER_EPOCH) and have based the change on the current partition epoch
// (INVALID_UPDATE_VERSION). The new ISR must be a set of the partition's replicas that
// contains the leader (INVALID_REQUEST), and every member must be an active broker
// (INELIGIBLE_REPLICA). When the new ISR holds every target replica of a reassignment, the
// reassignment completes in the same change (its removed replicas leave; if the leader
// itself is removed, another target replica leads and the result says NEW_LEADER_ELECTED).
func (c *Controller) AlterPartition(req AlterPartitionRequest) ([]Record, []AlterPartitionResult, error) {
	b := c.im.brokers[req.BrokerID]
	if b == nil {
		return nil, nil, errf(kerr.BrokerIDNotRegistered, "broker %d is not registered", req.BrokerID)
	}
	if b.Epoch != req.BrokerEpoch {
		return nil, nil, errf(kerr.StaleBrokerEpoch, "broker %d has epoch %d, not %d", req.BrokerID, b.Epoch, req.BrokerEpoch)
	}
	var recs []Record
	results := make([]AlterPartitionResult, len(req.Partitions))
	done := map[TopicPartition]bool{}
	live := c.liveness()
	for i, it := range req.Partitions {
		res := &results[i]
		res.TopicID, res.Partition = it.TopicID, it.Partition
		t := c.im.topics[it.TopicID]
		if t == nil {
			res.Err = errf(kerr.UnknownTopicID, "topic id %s does not exist", it.TopicID)
			continue
		}
		p := c.im.Partition(it.TopicID, it.Partition)
		if p == nil {
			res.Err = errf(kerr.UnknownTopicOrPartition, "%s-%d does not exist", t.Name, it.Partition)
			continue
		}
		setResult(res, p)
		tp := TopicPartition{t.Name, it.Partition}
		if done[tp] {
			res.Err = errf(kerr.InvalidRequest, "%s-%d appears more than once", t.Name, it.Partition)
			continue
		}
		done[tp] = true
		switch {
		case p.Leader != req.BrokerID:
			res.Err = errf(kerr.NotLeaderForPartition, "broker %d does not lead %s-%d (leader %d)", req.BrokerID, t.Name, it.Partition, p.Leader)
			continue
		case it.LeaderEpoch != p.LeaderEpoch:
			res.Err = errf(kerr.FencedLeaderEpoch, "%s-%d: leader epoch %d, current %d", t.Name, it.Partition, it.LeaderEpoch, p.LeaderEpoch)
			continue
		case it.PartitionEpoch != p.PartitionEpoch:
			res.Err = errf(kerr.InvalidUpdateVersion, "%s-%d: partition epoch %d, current %d", t.Name, it.Partition, it.PartitionEpoch, p.PartitionEpoch)
			continue
		case len(it.NewISR) == 0 || !distinct(it.NewISR) || !contains(it.NewISR, p.Leader):
			res.Err = errf(kerr.InvalidRequest, "%s-%d: ISR %v must be a set containing the leader %d", t.Name, it.Partition, it.NewISR, p.Leader)
			continue
		}
		if bad := slices.IndexFunc(it.NewISR, func(r int32) bool { return !contains(p.Replicas, r) || !live.active(r) }); bad >= 0 {
			res.Err = errf(kerr.IneligibleReplica, "%s-%d: replica %d is not an active replica of the partition", t.Name, it.Partition, it.NewISR[bad])
			continue
		}
		np := *p
		np.ISR = slices.Clone(it.NewISR)
		if done := completeReassignment(&np, live); done != nil {
			np = *done
		}
		rec := diff(t.ID, it.Partition, p, &np)
		if rec == nil {
			continue // nothing changes; the result is the current state
		}
		recs = append(recs, rec)
		setResult(res, rec.result(p))
		if np.Leader != p.Leader {
			res.Err = errf(kerr.NewLeaderElected, "%s-%d: reassignment completed and broker %d leads now", t.Name, it.Partition, np.Leader)
		}
	}
	return recs, results, nil
}

func setResult(res *AlterPartitionResult, p *Partition) {
	res.Leader, res.LeaderEpoch, res.ISR, res.PartitionEpoch = p.Leader, p.LeaderEpoch, slices.Clone(p.ISR), p.PartitionEpoch
}
