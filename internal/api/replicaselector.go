package api

import (
	"github.com/gregor-project/gregor/internal/config"
	"github.com/gregor-project/gregor/internal/metadata"
	"github.com/gregor-project/gregor/internal/replica"
)

// Fetching from the closest replica (KIP-392). With replica.selector.class set to Kafka's
// RackAwareReplicaSelector, the leader answers the partition of a consumer's fetch (v11+)
// that names a rack (client.rack, the request's rack_id) the leader is not in, but an in-sync
// follower is, with that follower as preferred_read_replica and no records, at once, as
// Kafka's ReplicaManager.findPreferredReadReplica. The consumer then fetches the partition
// from the follower, which serves it up to its own high watermark (fetch.go's consumerCheck).
// Without the setting, or without a rack, every consumer reads from the leader.
//
// The candidates are Kafka's: the leader, and each follower of the committed ISR that is
// registered and unfenced with an endpoint on the listener the consumer came in on (so the
// consumer can reach it) and whose log, as the leader last saw it fetch, holds the fetch
// offset (log start offset <= offset <= log end offset). Among the candidates in the client's
// rack the leader wins when it is one; otherwise the follower with the highest log end
// offset, then the most recently caught up, then (here, to be deterministic) the lowest id.

// replicaView is one candidate replica for a consumer's reads.
type replicaView struct {
	id             int32
	rack           string
	logEndOffset   int64
	lastCaughtUpMs int64
}

// selectRackAware is Kafka's RackAwareReplicaSelector: the follower of the client's rack to
// read from, or -1 for the leader (no rack, the leader is in it, or no follower is).
func selectRackAware(clientRack, leaderRack string, followers []replicaView) int32 {
	if clientRack == "" || leaderRack == clientRack {
		return -1
	}
	best := -1
	for i := range followers {
		f := &followers[i]
		if f.rack != clientRack {
			continue
		}
		if best < 0 || preferReplica(f, &followers[best]) {
			best = i
		}
	}
	if best < 0 {
		return -1
	}
	return followers[best].id
}

// preferReplica orders two replicas of one rack: further log end offset, then caught up more
// recently, then the lower id.
func preferReplica(a, b *replicaView) bool {
	switch {
	case a.logEndOffset != b.logEndOffset:
		return a.logEndOffset > b.logEndOffset
	case a.lastCaughtUpMs != b.lastCaughtUpMs:
		return a.lastCaughtUpMs > b.lastCaughtUpMs
	}
	return a.id < b.id
}

// clientRack is the rack a fetch's consumer may be directed to read from, "" when the
// leader serves it: replica.selector.class is unset, the fetch is a follower's or older than
// v11, it names no rack or the leader's, or no other live broker is in that rack (the
// common case of a consumer beside its leaders costs one look at the brokers per fetch).
func clientRack(h *Handler, im *metadata.Image, version int16, replicaID int32, rack string) string {
	if version < 11 || replicaID >= 0 || rack == "" || rack == h.Rack {
		return ""
	}
	if h.Cfg.Current().ReplicaSelectorClass != config.RackAwareReplicaSelector {
		return ""
	}
	for id, b := range im.Brokers {
		if id != h.NodeID && b.Rack == rack && !b.Fenced {
			return rack
		}
	}
	return ""
}

// preferredReadReplica is the replica a consumer of rack should fetch p from at offset, or -1
// to read it here. p must be led by this broker (the caller checked). The followers and their
// positions are the leader's (taken under the partition's lock); their racks, fencing and
// endpoints come from the metadata image.
func preferredReadReplica(h *Handler, im *metadata.Image, listener, rack string, p *replica.Partition, offset int64) int32 {
	var views []replicaView
	for _, f := range p.InSyncFollowers() {
		b := im.Broker(f.ID)
		if b == nil || b.Fenced || b.Rack != rack || f.LogEndOffset < offset || f.LogStartOffset > offset {
			continue
		}
		if _, _, ok := im.Endpoint(f.ID, listener); !ok {
			continue
		}
		views = append(views, replicaView{id: f.ID, rack: b.Rack, logEndOffset: f.LogEndOffset, lastCaughtUpMs: f.LastCaughtUpMs})
	}
	return selectRackAware(rack, h.Rack, views)
}
