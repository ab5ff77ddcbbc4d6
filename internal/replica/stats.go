package replica

// Stats are a partition's figures for the broker's metrics (internal/observe), read at
// scrape time.
type Stats struct {
	Leader          bool // this broker leads it (or is its only replica)
	Replicas, ISR   int  // assigned replicas; in-sync ones (the leader's committed ISR; else as registered)
	WaitingProduces int  // acks=all produces parked in the leader's purgatory
	Size            int64
	Segments        int
	LogStartOffset  int64
	LogEndOffset    int64
	HighWatermark   int64
}

// Stats reads the partition's figures, holding its lock for the role's part only.
func (p *Partition) Stats() Stats {
	l := p.Log()
	s := Stats{
		Size: l.Size(), Segments: l.NumSegments(),
		LogStartOffset: l.LogStartOffset(), LogEndOffset: l.LogEndOffset(), HighWatermark: p.hw.Load(),
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch v := p.role.Load(); {
	case v == nil || v.kind == roleNone:
		s.Replicas, s.ISR = len(p.mu.reg.Replicas), len(p.mu.reg.ISR)
	case v.kind == roleSole:
		s.Leader, s.Replicas, s.ISR = true, 1, 1
	case v.kind == roleLeader && p.mu.leader != nil:
		s.Leader = true
		s.Replicas, s.ISR = len(p.mu.reg.Replicas), len(p.mu.leader.isr)
		s.WaitingProduces = p.mu.leader.WaitingProduces()
	default:
		s.Replicas, s.ISR = len(p.mu.reg.Replicas), len(p.mu.reg.ISR)
	}
	return s
}
