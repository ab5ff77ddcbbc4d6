package state

import "github.com/twmb/franz-go/pkg/kerr"

// Replicas on a failed log dir (KIP-858; Kafka's
// ReplicationControlManager.handleDirectoriesOffline).
//
// A broker whose log dir fails keeps running with its other dirs; the replicas in the failed
// dir can neither lead nor follow. The broker names them to the controller, which then treats
// the broker as gone for those partitions only: it leaves their ISRs, and where it led, the
// next ISR member in replica order leads (a partition whose ISR was only this broker is left
// without a leader, its ISR unchanged, as for a fenced broker), exactly as reconcile does for a
// fenced broker but limited to the named partitions.
//
// Gregor's choice (simpler than Kafka's, with the same visible outcome): the metadata does
// not store each replica's directory (Kafka's PartitionRecord.Directories, kept current by
// AssignReplicasToDirs on every creation and move). The broker alone knows which of its
// replicas a dir held, so when the dir fails it sends AssignReplicasToDirs naming that
// dir's id and every replica in it, and the controller takes those replicas offline; the
// dir is also reported in every later BrokerHeartbeat (OfflineLogDirs). Nothing is kept
// per replica: once out of the ISR, the replica stays out because it cannot fetch, and a new
// registration (the broker restarted, its disk dealt with) starts afresh. Limitation: a
// partition left leaderless with this broker as its last ISR member (or, with unclean election,
// one with no other live replica) may get this broker as leader again when another broker's
// state changes; it then answers KAFKA_STORAGE_ERROR until the broker restarts, as the
// partition would be offline anyway.

// OfflineReplicasRequest names a broker's replicas in a log dir that failed.
type OfflineReplicasRequest struct {
	NodeID      int32
	BrokerEpoch int64
	Dir         UUID // the failed dir's directory.id
	Partitions  []TopicIDPartition
}

// TopicIDPartition names a partition by its topic id.
type TopicIDPartition struct {
	TopicID   UUID
	Partition int32
}

// OfflineReplicasResponse has one error per partition of the request (nil: done), or Err
// for the whole request.
type OfflineReplicasResponse struct {
	Err    error
	Errors []error
	// UncleanElected are the partitions whose new leader was elected from outside the ISR.
	UncleanElected []TopicPartition
}

// OfflineReplicas takes the broker's replicas in a failed log dir out of their ISRs and moves
// their leaderships to other ISR members. A partition the cluster lacks is
// UNKNOWN_TOPIC_ID; one without a replica on the broker, NOT_LEADER_OR_FOLLOWER; a stale
// broker epoch, STALE_BROKER_EPOCH.
func (c *Controller) OfflineReplicas(req OfflineReplicasRequest) ([]Record, OfflineReplicasResponse) {
	b := c.im.brokers[req.NodeID]
	switch {
	case b == nil:
		return nil, OfflineReplicasResponse{Err: errf(kerr.BrokerIDNotRegistered, "broker %d is not registered", req.NodeID)}
	case b.Epoch != req.BrokerEpoch:
		return nil, OfflineReplicasResponse{Err: errf(kerr.StaleBrokerEpoch, "broker %d has epoch %d, not %d", req.NodeID, b.Epoch, req.BrokerEpoch)}
	}
	resp := OfflineReplicasResponse{Errors: make([]error, len(req.Partitions))}
	live := c.liveness()
	live.set(req.NodeID, false) // for the named partitions only
	var recs []Record
	done := map[TopicIDPartition]bool{}
	for i, tp := range req.Partitions {
		t := c.im.topics[tp.TopicID]
		if t == nil || tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions) {
			resp.Errors[i] = errf(kerr.UnknownTopicID, "no partition %d of topic id %s", tp.Partition, tp.TopicID.String())
			continue
		}
		p := t.Partitions[tp.Partition]
		if !contains(p.Replicas, req.NodeID) {
			resp.Errors[i] = errf(kerr.NotLeaderForPartition, "broker %d has no replica of %s-%d", req.NodeID, t.Name, tp.Partition)
			continue
		}
		if done[tp] {
			continue
		}
		done[tp] = true
		if np, unclean := reconcile(p, live, c.uncleanEnabled(t)); np != nil {
			recs = append(recs, diff(t.ID, tp.Partition, p, np))
			if unclean {
				resp.UncleanElected = append(resp.UncleanElected, TopicPartition{t.Name, tp.Partition})
			}
		}
	}
	return recs, resp
}

// checkLogDirs refuses a registration whose directory ids repeat or are among Kafka's
// reserved ones (UNASSIGNED, LOST, MIGRATING: first 15 bytes zero, last below 100) with
// INVALID_REGISTRATION, as Kafka's ClusterControlManager does.
func checkLogDirs(node int32, dirs []UUID) error {
	seen := make(map[UUID]bool, len(dirs))
	for _, d := range dirs {
		if reservedDirID(d) {
			return errf(kerr.InvalidRegistration, "broker %d: reserved directory id %s", node, d)
		}
		if seen[d] {
			return errf(kerr.InvalidRegistration, "broker %d: directory id %s listed twice", node, d)
		}
		seen[d] = true
	}
	return nil
}

func reservedDirID(id UUID) bool {
	for _, b := range id[:15] {
		if b != 0 {
			return false
		}
	}
	return id[15] < 100
}
