package group

// GroupStats are one group's figures for the broker's metrics (internal/observe).
type GroupStats struct {
	ID    string
	State string // Kafka's state name (Stable, PreparingRebalance, ..., Assigning, Reconciling)
	// Offsets are the group's committed offsets (transactional ones pending their marker
	// left out).
	Offsets map[TopicPartition]int64
}

// Stats lists the groups of the shard.
func (s *Shard) Stats() []GroupStats {
	out := make([]GroupStats, 0, len(s.groups))
	for _, g := range s.sortedGroups() {
		st := GroupStats{ID: g.ID, State: g.stateName(), Offsets: make(map[TopicPartition]int64, len(g.offsets))}
		for tp, o := range g.offsets {
			st.Offsets[tp] = o.Offset
		}
		out = append(out, st)
	}
	return out
}

// Stats lists the groups of every partition this broker leads and has loaded, with their
// committed offsets: what the broker's metrics report at scrape time.
func (c *Coordinator) Stats() []GroupStats {
	shards, err := c.rt.Shards()
	if err != nil {
		return nil // closed
	}
	var out []GroupStats
	for _, sh := range shards {
		var got []GroupStats
		if err := c.step(sh, nil, func(s *Shard, _ int64) Ready {
			got = s.Stats()
			return Ready{}
		}); err != nil {
			// Resigned or still loading: another broker reports its groups, or this one
			// once it has loaded them.
			continue
		}
		out = append(out, got...)
	}
	return out
}
