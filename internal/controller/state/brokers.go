package state

import (
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
)

// RegisterBrokerRequest is a broker announcing itself (Kafka's BrokerRegistration).
type RegisterBrokerRequest struct {
	NodeID        int32
	IncarnationID UUID // random per process start
	ClusterID     string
	Endpoints     []Endpoint
	Rack          string
	// LogDirs are the broker's log dirs' directory ids (KIP-858; none before
	// BrokerRegistration v2). They are checked, not stored: see offlinedirs.go.
	LogDirs []UUID
}

// RegisterBrokerResponse carries the broker epoch the broker must send with every later
// request.
type RegisterBrokerResponse struct {
	Err         error
	BrokerEpoch int64
	// UncleanElected are the partitions whose new leader (taking over from the broker's old
	// registration) was elected from outside the ISR.
	UncleanElected []TopicPartition
}

// RegisterBroker registers a broker, fenced until it has caught up with the metadata log.
//
// A node id whose current registration has another incarnation id and a live session is
// DUPLICATE_BROKER_REGISTRATION (two processes configured with one node.id); a wrong cluster
// id is INCONSISTENT_CLUSTER_ID. A restarted broker (new incarnation, expired session, or the
// same incarnation retrying) replaces its old registration; if the old one was unfenced its
// leaderships and ISR memberships are given up first, because a restarted broker may have
// lost unflushed data. The session starts at now (a mutation of the controller's soft
// state, not of the image).
func (c *Controller) RegisterBroker(now int64, req RegisterBrokerRequest) ([]Record, RegisterBrokerResponse) {
	switch {
	case req.ClusterID != c.cfg.ClusterID:
		return nil, RegisterBrokerResponse{Err: errf(kerr.InconsistentClusterID, "broker %d has cluster id %q, this cluster is %q", req.NodeID, req.ClusterID, c.cfg.ClusterID)}
	case req.NodeID < 0:
		return nil, RegisterBrokerResponse{Err: errf(kerr.InvalidRequest, "broker id %d is negative", req.NodeID)}
	case req.IncarnationID == (UUID{}):
		return nil, RegisterBrokerResponse{Err: errf(kerr.InvalidRequest, "broker %d sent no incarnation id", req.NodeID)}
	}
	if err := checkLogDirs(req.NodeID, req.LogDirs); err != nil {
		return nil, RegisterBrokerResponse{Err: err}
	}
	for i, ep := range req.Endpoints {
		if ep.Port < 0 || ep.Port > 65535 || ep.Name == "" || slices.ContainsFunc(req.Endpoints[:i], func(o Endpoint) bool { return o.Name == ep.Name }) {
			return nil, RegisterBrokerResponse{Err: errf(kerr.InvalidRequest, "broker %d: bad or duplicate endpoint %+v", req.NodeID, ep)}
		}
	}
	old := c.im.brokers[req.NodeID]
	if old != nil && old.IncarnationID != req.IncarnationID {
		if last, ok := c.sessions[req.NodeID]; ok && now-last <= c.cfg.SessionTimeoutMs {
			return nil, RegisterBrokerResponse{Err: errf(kerr.DuplicateBrokerRegistration,
				"broker %d is registered by another process (incarnation %s) whose session is live", req.NodeID, old.IncarnationID)}
		}
	}
	epoch := c.im.nextBrokerEpoch
	recs := []Record{&RegisterBrokerRecord{
		NodeID: req.NodeID, IncarnationID: req.IncarnationID, BrokerEpoch: epoch,
		Endpoints: slices.Clone(req.Endpoints), Rack: req.Rack, ClusterID: req.ClusterID,
		Fenced: true, RegisteredOffset: -1,
	}}
	var unclean []TopicPartition
	if old.Active() {
		live := c.liveness()
		live.set(req.NodeID, false)
		var changes []Record
		changes, unclean = c.reconcileBrokers(live, []int32{req.NodeID})
		recs = append(recs, changes...)
	}
	c.sessions[req.NodeID] = now
	return recs, RegisterBrokerResponse{BrokerEpoch: epoch, UncleanElected: unclean}
}

// HeartbeatRequest is a broker's periodic heartbeat (Kafka's BrokerHeartbeat).
type HeartbeatRequest struct {
	NodeID      int32
	BrokerEpoch int64
	// CurrentMetadataOffset is the highest metadata offset the broker has applied.
	CurrentMetadataOffset int64
	WantFence             bool // the broker wants to be fenced (e.g. its log dirs failed)
	WantShutDown          bool // the broker is stopping: move its leaderships away
}

// HeartbeatResponse tells the broker its state after the heartbeat's records apply.
type HeartbeatResponse struct {
	Err            error
	IsCaughtUp     bool // the broker has applied the log up to its registration
	IsFenced       bool
	ShouldShutDown bool // controlled shutdown is done: the broker leads nothing and may stop
	// UncleanElected are the partitions whose new leader was elected from outside the ISR
	// (a broker unfencing as the only live replica of a leaderless partition).
	UncleanElected []TopicPartition
}

// Heartbeat renews a broker's session and moves it between fenced, active and shutting
// down. It produces records only when that state changes: unfencing once the broker has
// caught up, fencing on request, and for a controlled shutdown moving every leadership of
// the broker to another ISR member and taking it out of ISRs (a partition whose only ISR
// member is the broker is left without a leader). ShouldShutDown is set once the broker
// leads no partition.
func (c *Controller) Heartbeat(now int64, req HeartbeatRequest) ([]Record, HeartbeatResponse) {
	b := c.im.brokers[req.NodeID]
	if b == nil {
		return nil, HeartbeatResponse{Err: errf(kerr.BrokerIDNotRegistered, "broker %d is not registered", req.NodeID)}
	}
	if b.Epoch != req.BrokerEpoch {
		return nil, HeartbeatResponse{Err: errf(kerr.StaleBrokerEpoch, "broker %d has epoch %d, not %d", req.NodeID, b.Epoch, req.BrokerEpoch)}
	}
	c.sessions[req.NodeID] = now
	resp := HeartbeatResponse{IsCaughtUp: req.CurrentMetadataOffset >= b.RegisteredOffset, IsFenced: b.Fenced}
	change := &BrokerRegistrationChangeRecord{NodeID: b.ID, BrokerEpoch: b.Epoch}
	live := c.liveness()
	switch {
	case req.WantShutDown:
		if b.Fenced {
			resp.ShouldShutDown = true // leads nothing already
			c.sessions[req.NodeID] = now - c.cfg.SessionTimeoutMs - 1
			return nil, resp
		}
		if !b.InControlledShutdown {
			change.InControlledShutdown = SetTrue
		}
		live.set(b.ID, false)
	case req.WantFence:
		if b.Fenced {
			return nil, resp
		}
		change.Fenced = SetTrue
		live.set(b.ID, false)
		resp.IsFenced = true
	case b.Fenced && resp.IsCaughtUp && !b.InControlledShutdown:
		change.Fenced = SetFalse
		live.set(b.ID, true)
		resp.IsFenced = false
	default:
		return nil, resp
	}
	var recs []Record
	if change.Fenced != NoChange || change.InControlledShutdown != NoChange {
		recs = append(recs, change)
	}
	changes, unclean := c.reconcileBrokers(live, []int32{b.ID})
	recs = append(recs, changes...)
	resp.UncleanElected = unclean
	if req.WantShutDown {
		resp.ShouldShutDown = !c.leadsAnyAfter(b.ID, changes)
		if resp.ShouldShutDown {
			// Done: the broker is fenced (as a stopped broker is) and its session ends, so
			// its next process registers without waiting out the session timeout.
			c.sessions[b.ID] = now - c.cfg.SessionTimeoutMs - 1
			if len(recs) > 0 && recs[0] == change {
				change.Fenced = SetTrue
			} else {
				recs = append([]Record{&BrokerRegistrationChangeRecord{NodeID: b.ID, BrokerEpoch: b.Epoch, Fenced: SetTrue}}, recs...)
			}
			resp.IsFenced = true
		}
	}
	return recs, resp
}

// leadsAnyAfter reports whether broker id leads a partition once changes apply.
func (c *Controller) leadsAnyAfter(id int32, changes []Record) bool {
	moved := map[TopicPartition]bool{}
	for _, r := range changes {
		if pc, ok := r.(*PartitionChangeRecord); ok && pc.Fields&ChangeLeader != 0 {
			moved[TopicPartition{c.im.topics[pc.TopicID].Name, pc.Partition}] = pc.Leader == id
		}
	}
	for _, t := range c.im.topicsByName {
		for i, p := range t.Partitions {
			leads, ok := moved[TopicPartition{t.Name, int32(i)}]
			if !ok {
				leads = p.Leader == id
			}
			if leads {
				return true
			}
		}
	}
	return false
}

// ExpireSessions fences every unfenced broker whose last heartbeat is older than the session
// timeout, electing new leaders for its partitions from their ISRs (or, where unclean leader
// election is enabled and no ISR member is left, from the other live replicas). It returns
// the records, the fenced broker ids and the partitions that got an unclean leader.
func (c *Controller) ExpireSessions(now int64) (recs []Record, fenced []int32, uncleanElected []TopicPartition) {
	live := c.liveness()
	for _, b := range c.im.Brokers() {
		last, ok := c.sessions[b.ID]
		if !ok {
			c.sessions[b.ID] = now // first seen by this controller: start its session now
			continue
		}
		if b.Fenced || now-last <= c.cfg.SessionTimeoutMs {
			continue
		}
		recs = append(recs, &BrokerRegistrationChangeRecord{NodeID: b.ID, BrokerEpoch: b.Epoch, Fenced: SetTrue})
		live.set(b.ID, false)
		fenced = append(fenced, b.ID)
	}
	if len(fenced) == 0 {
		return nil, nil, nil
	}
	changes, unclean := c.reconcileBrokers(live, fenced)
	return append(recs, changes...), fenced, unclean
}

// UnregisterBroker removes a broker's registration (Kafka's UnregisterBroker, used to
// decommission a node), first giving up its leaderships and ISR memberships.
func (c *Controller) UnregisterBroker(id int32) ([]Record, error) {
	b := c.im.brokers[id]
	if b == nil {
		return nil, errf(kerr.BrokerIDNotRegistered, "broker %d is not registered", id)
	}
	var recs []Record
	if b.Active() || b.InControlledShutdown {
		live := c.liveness()
		live.set(id, false)
		recs, _ = c.reconcileBrokers(live, []int32{id})
	}
	return append(recs, &UnregisterBrokerRecord{NodeID: id, BrokerEpoch: b.Epoch}), nil
}

// activeBrokers returns the brokers that may receive new replicas, by id.
func (c *Controller) activeBrokers() []*Broker {
	var bs []*Broker
	for _, b := range c.im.brokers {
		if b.Active() {
			bs = append(bs, b)
		}
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].ID < bs[j].ID })
	return bs
}
