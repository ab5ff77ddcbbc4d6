package replica

import "slices"

// What a leader knows of its in-sync followers, for choosing the replica a consumer reads from
// (KIP-392, Kafka's ReplicaManager.findPreferredReadReplica): the selection itself is the api
// layer's; this only takes a consistent snapshot under the partition's lock.

// FollowerView is one in-sync follower as the leader last saw it fetch.
type FollowerView struct {
	ID             int32
	LogStartOffset int64
	LogEndOffset   int64 // -1: not fetched in this leader epoch
	LastCaughtUpMs int64 // when it last was caught up (a time far in the past: never)
}

// InSyncFollowers returns the followers in the committed ISR with their fetch state, in the
// order of the replica list; nil unless this broker leads the partition with followers.
func (p *Partition) InSyncFollowers() []FollowerView {
	p.mu.Lock()
	defer p.mu.Unlock()
	ls := p.mu.leader
	if ls == nil || ls.Resigned() {
		return nil
	}
	return ls.inSyncFollowers()
}

// inSyncFollowers is InSyncFollowers on the leader state.
func (s *LeaderState) inSyncFollowers() []FollowerView {
	var out []FollowerView
	for i := range s.followers {
		f := &s.followers[i]
		if !slices.Contains(s.isr, f.id) {
			continue
		}
		out = append(out, FollowerView{ID: f.id, LogStartOffset: f.logStartOffset, LogEndOffset: f.logEndOffset, LastCaughtUpMs: f.lastCaughtUpMs})
	}
	return out
}
