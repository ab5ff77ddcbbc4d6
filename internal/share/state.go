package share

// The state of a share-partition as it is to be persisted (ShareSnapshot's StateBatches in
// __share_group_state, see doc.go): runs of offsets with one delivery state and count. An
// acquisition is not persisted: an Acquired record is written as Available with its
// delivery count, so a share-partition rebuilt from its state delivers it again.

// StateBatch is one run of a share-partition's persisted state.
type StateBatch struct {
	First, Last int64
	State       State // Available, Acknowledged or Archived
	Deliveries  int16
}

// Snapshot returns the share-partition's start offset and the state of its in-flight window
// [Start, End) as runs of equal state and delivery count, in offset order.
func (p *Partition) Snapshot() (int64, []StateBatch) {
	var out []StateBatch
	for i, r := range p.recs {
		off, st := p.start+int64(i), r.state
		if st == Acquired {
			st = Available
		}
		if n := len(out); n > 0 && out[n-1].Last == off-1 && out[n-1].State == st && out[n-1].Deliveries == r.deliveries {
			out[n-1].Last = off
			continue
		}
		out = append(out, StateBatch{First: off, Last: off, State: st, Deliveries: r.deliveries})
	}
	return p.start, out
}

// Restore rebuilds a share-partition from its persisted start offset and state batches (in
// offset order; batches or parts of them below start are ignored, offsets between batches
// are Available and never delivered). It equals the partition Snapshot was taken of, every
// Acquired record Available again.
func Restore(cfg Config, start int64, batches []StateBatch) *Partition {
	p := NewPartition(cfg, start)
	for _, b := range batches {
		if b.Last < p.End() {
			continue
		}
		for off := max(b.First, p.End()); off <= b.Last; off++ {
			for p.End() < off {
				p.recs = append(p.recs, record{})
			}
			st := b.State
			if st == Acquired {
				st = Available
			}
			p.recs = append(p.recs, record{state: st, deliveries: b.Deliveries})
		}
	}
	p.advance()
	return p
}

// Clone is a copy of the share-partition that shares nothing with it: the state to go back
// to when a change cannot be persisted.
func (p *Partition) Clone() *Partition {
	c := *p
	c.recs = append([]record(nil), p.recs...)
	return &c
}

// State is the share-partition's persisted form in leaderEpoch and stateEpoch.
func (p *Partition) State(leaderEpoch, stateEpoch int32) PartitionState {
	start, bs := p.Snapshot()
	return PartitionState{StateEpoch: stateEpoch, LeaderEpoch: leaderEpoch, Start: start, Batches: bs}
}
