package replica

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// A randomized simulation of one partition on three brokers with real logs, putting the
// cores together the way the broker will: leaders (LeaderState) take acks=all produces with
// min.insync.replicas 2, followers (Follower) fetch from the leader they believe in, a
// simulated controller elects leaders from the ISR, applies AlterPartition with fencing and
// fences brokers it loses contact with. Brokers crash and restart (a clean close: no fsync is
// lost), get cut off from the controller while still serving clients and followers (zombie
// leaders), and learn metadata late.
//
// After every step: every acknowledged record is in the controller's current leader's log,
// at its offset. At the end, once everything heals: every replica's log is byte-identical and
// holds every acknowledged record.
func TestReplicationSimulation(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 8
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			s := newReplicationSim(t, uint64(seed))
			for range 500 {
				s.step()
				s.check()
			}
			s.heal()
		})
	}
}

type simBroker struct {
	*replicaNode
	up       bool
	cutOff   bool       // cannot reach the controller (or hear from it)
	outbox   *ISRChange // an AlterPartition to send
	lastSeen Registration
}

type simCluster struct {
	t       *testing.T
	rng     *rand.Rand
	now     int64
	brokers map[int32]*simBroker
	ctl     struct {
		leader                      int32 // -1: offline
		leaderEpoch, partitionEpoch int32
		isr                         []int32
		fenced                      map[int32]bool
	}
	acked   map[string]int64 // acknowledged record -> offset
	offsets map[string]int64 // every appended record -> offset (for the answers)
	next    int
	stats   map[string]int
}

var simReplicas = []int32{1, 2, 3}

func newReplicationSim(t *testing.T, seed uint64) *simCluster {
	s := &simCluster{t: t, rng: rand.New(rand.NewPCG(seed, 99)), now: 1_000_000, brokers: map[int32]*simBroker{}, acked: map[string]int64{}, offsets: map[string]int64{}, stats: map[string]int{}}
	for _, id := range simReplicas {
		n := newNode(t, id)
		n.fcfg = FollowerConfig{LocalID: id, BackoffMs: 500, UseOffsetForLeaderEpoch: s.rng.IntN(2) == 0}
		s.brokers[id] = &simBroker{replicaNode: n, up: true}
	}
	s.ctl.leader, s.ctl.leaderEpoch, s.ctl.partitionEpoch = 1, 0, 0
	s.ctl.isr = slices.Clone(simReplicas)
	s.ctl.fenced = map[int32]bool{}
	for _, id := range simReplicas {
		s.deliver(id)
	}
	return s
}

func (s *simCluster) registration() Registration {
	return Registration{Leader: s.ctl.leader, LeaderEpoch: s.ctl.leaderEpoch, PartitionEpoch: s.ctl.partitionEpoch, Replicas: simReplicas, ISR: slices.Clone(s.ctl.isr)}
}

// fence: the controller lost broker id's session. It leaves the ISR (unless it is the last
// member); if it led, another ISR member leads, or nobody.
func (s *simCluster) fence(id int32) {
	if s.ctl.fenced[id] {
		return
	}
	s.ctl.fenced[id] = true
	s.stats["fence"]++
	changed := false
	if slices.Contains(s.ctl.isr, id) && len(s.ctl.isr) > 1 {
		s.ctl.isr = slices.DeleteFunc(slices.Clone(s.ctl.isr), func(x int32) bool { return x == id })
		changed = true
	}
	if s.ctl.leader == id {
		s.ctl.leader = -1
		for _, c := range s.ctl.isr {
			if !s.ctl.fenced[c] {
				s.ctl.leader = c
				break
			}
		}
		s.ctl.leaderEpoch++
		changed = true
		s.stats["election"]++
	}
	if changed {
		s.ctl.partitionEpoch++
	}
}

// unfence: the broker registered again. An offline partition whose ISR holds it gets it as
// leader (a clean election).
func (s *simCluster) unfence(id int32) {
	if !s.ctl.fenced[id] {
		return
	}
	s.ctl.fenced[id] = false
	if s.ctl.leader == -1 && slices.Contains(s.ctl.isr, id) {
		s.ctl.leader = id
		s.ctl.leaderEpoch++
		s.ctl.partitionEpoch++
		s.stats["election"]++
	}
}

// alter is the controller's AlterPartition.
func (s *simCluster) alter(from int32, p *ISRChange) AlterPartitionResult {
	res := AlterPartitionResult{Leader: s.ctl.leader, LeaderEpoch: s.ctl.leaderEpoch, PartitionEpoch: s.ctl.partitionEpoch, ISR: slices.Clone(s.ctl.isr)}
	switch {
	case from != s.ctl.leader:
		res.Err = kerr.NotLeaderForPartition
	case p.LeaderEpoch != s.ctl.leaderEpoch:
		res.Err = kerr.FencedLeaderEpoch
	case p.PartitionEpoch != s.ctl.partitionEpoch:
		res.Err = kerr.InvalidUpdateVersion
	case slices.ContainsFunc(p.NewISR, func(id int32) bool { return s.ctl.fenced[id] }):
		res.Err = kerr.IneligibleReplica
	case !slices.Contains(p.NewISR, from):
		res.Err = kerr.InvalidRequest
	default:
		if !slices.Equal(s.ctl.isr, p.NewISR) {
			s.ctl.isr = slices.Clone(p.NewISR)
			s.ctl.partitionEpoch++
			s.stats["isr change"]++
		}
		res.ISR, res.PartitionEpoch = slices.Clone(s.ctl.isr), s.ctl.partitionEpoch
	}
	return res
}

// deliver gives broker id the controller's current state, as its metadata listener would,
// and makes it lead or follow accordingly.
func (s *simCluster) deliver(id int32) {
	b := s.brokers[id]
	reg := s.registration()
	if !b.up || b.cutOff || (reg.LeaderEpoch == b.lastSeen.LeaderEpoch && reg.PartitionEpoch == b.lastSeen.PartitionEpoch && b.lastSeen.Replicas != nil) {
		return
	}
	b.lastSeen = reg
	if b.leader != nil {
		before := b.leader.LeaderEpoch()
		_, err := b.leader.UpdateRegistration(reg, s.now)
		b.collect()
		if errors.Is(err, ErrNotLeaderOrFollower) {
			b.leader, b.outbox = nil, nil
		} else if err != nil {
			s.t.Fatal(err)
		} else if b.leader.LeaderEpoch() != before {
			if err := b.epochs.Assign(b.leader.LeaderEpoch(), b.log.LogEndOffset()); err != nil {
				s.t.Fatal(err)
			}
		}
	}
	switch {
	case reg.Leader == id && b.leader == nil:
		b.lead(reg, s.now)
		b.collect()
	case reg.Leader != id && reg.Leader >= 0:
		if b.follower == nil {
			b.follow(reg.Leader, reg.LeaderEpoch)
		} else if ok, act := b.follower.UpdateLeader(reg.Leader, reg.LeaderEpoch, b.local()); ok {
			b.apply(act)
		}
	}
}

// collect takes a leader's outputs: answers go to the cluster's record, a proposal to the
// outbox.
func (b *simBroker) collect() {
	if b.leader == nil {
		return
	}
	b.leaderReady()
	if b.proposal != nil {
		b.outbox, b.proposal = b.proposal, nil
	}
}

func (s *simCluster) random(pred func(b *simBroker) bool) *simBroker {
	var ids []int32
	for _, id := range simReplicas {
		if pred(s.brokers[id]) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	return s.brokers[ids[s.rng.IntN(len(ids))]]
}

func (s *simCluster) step() {
	s.now += int64(s.rng.IntN(2000))
	switch r := s.rng.IntN(100); {
	case r < 20: // a producer writes to a broker that believes it leads
		b := s.random(func(b *simBroker) bool { return b.up && b.leader != nil && !b.leader.Resigned() })
		if b == nil {
			return
		}
		if err := b.leader.CheckAppend(true, 2); err != nil {
			s.stats["not enough replicas"]++
			return
		}
		v := fmt.Sprintf("r%d", s.next)
		s.next++
		off := b.produce(s.now, v)
		s.offsets[v] = off
		b.leader.AddWaiter(ProduceWaiter{RequiredOffset: off + 1, MinISR: 2, DeadlineMs: s.now + 20_000, Token: v})
		b.collect()
	case r < 60: // a follower fetches from the broker it believes leads
		b := s.random(func(b *simBroker) bool { return b.up && b.follower != nil })
		if b == nil {
			return
		}
		ld := s.brokers[b.follower.Leader()]
		if !ld.up {
			return
		}
		if s.rng.IntN(8) == 0 {
			// The leader serves the fetch but the answer is lost (the follower restarts, or
			// the connection drops): the leader counted the position, the follower did not
			// learn the high watermark.
			if req := b.follower.Next(b.local(), s.now); req.Kind == RequestFetch {
				serveFetch(ld.replicaNode, b.id, req, s.now)
				ld.collect()
				s.stats["lost answer"]++
			}
			return
		}
		b.fetchRound(ld.replicaNode, s.now)
		ld.collect()
	case r < 70: // a leader's periodic work
		b := s.random(func(b *simBroker) bool { return b.up && b.leader != nil })
		if b == nil {
			return
		}
		b.leader.Tick(s.now)
		b.collect()
	case r < 78: // an AlterPartition reaches the controller and its answer comes back
		b := s.random(func(b *simBroker) bool { return b.up && !b.cutOff && b.outbox != nil && b.leader != nil })
		if b == nil {
			return
		}
		p := b.outbox
		b.outbox = nil
		var res AlterPartitionResult
		if s.rng.IntN(8) == 0 {
			res = AlterPartitionResult{Err: errors.New("connection reset")}
		} else {
			res = s.alter(b.id, p)
		}
		b.leader.HandleAlterPartition(p.ID, res, s.now)
		b.collect()
	case r < 88: // a broker learns the metadata
		if b := s.random(func(b *simBroker) bool { return b.up }); b != nil {
			s.deliver(b.id)
		}
	case r < 90: // crash
		b := s.random(func(b *simBroker) bool { return b.up })
		if b == nil {
			return
		}
		s.stats["crash"]++
		if b.leader != nil {
			b.leader.Resign(ErrNotLeaderOrFollower)
			b.collect()
		}
		b.restart() // closes cleanly: no data lost
		b.up, b.outbox, b.lastSeen = false, nil, Registration{}
	case r < 94: // restart
		if b := s.random(func(b *simBroker) bool { return !b.up }); b != nil {
			b.up = true
			if !b.cutOff {
				s.unfence(b.id)
			}
		}
	case r < 95: // cut off from the controller, or reconnected
		if b := s.random(func(b *simBroker) bool { return b.up }); b != nil {
			b.cutOff = !b.cutOff
			if !b.cutOff {
				s.unfence(b.id)
			}
		}
	case r < 97: // the controller moves leadership to another ISR member (controlled
		// shutdown, preferred leader election)
		var to []int32
		for _, id := range s.ctl.isr {
			if id != s.ctl.leader && !s.ctl.fenced[id] {
				to = append(to, id)
			}
		}
		if len(to) > 0 && s.ctl.leader >= 0 {
			s.ctl.leader = to[s.rng.IntN(len(to))]
			s.ctl.leaderEpoch++
			s.ctl.partitionEpoch++
			s.stats["leader move"]++
		}
	default: // the controller fences a broker whose session expired
		if b := s.random(func(b *simBroker) bool { return !b.up || b.cutOff }); b != nil {
			s.fence(b.id)
		}
	}
}

// check: every acknowledged record is in the current leader's log, at its offset.
func (s *simCluster) check() {
	for _, id := range simReplicas {
		b := s.brokers[id]
		for tok, err := range b.answers {
			v := tok.(string)
			delete(b.answers, tok)
			if err == nil {
				s.acked[v] = s.offsets[v]
				s.stats["acked"]++
			} else {
				s.stats[err.Error()]++
			}
		}
	}
	if s.ctl.leader < 0 {
		return
	}
	ld := s.brokers[s.ctl.leader]
	if !ld.up {
		return
	}
	s.holdsAcked(ld)
}

func (s *simCluster) holdsAcked(b *simBroker) {
	s.t.Helper()
	if len(s.acked) == 0 {
		return
	}
	have := map[int64]string{}
	eachRecord(s.t, b.log, func(off int64, _ int32, v string) { have[off] = v })
	for v, off := range s.acked {
		if have[off] != v {
			s.t.Fatalf("acknowledged record %s at offset %d is not in broker %d's log (leader %d, epoch %d): %v", v, off, b.id, s.ctl.leader, s.ctl.leaderEpoch, values(s.t, b.log))
		}
	}
}

// converged: the ISR is every replica, every broker knows the current leader epoch and
// every log ends where the leader's does, below its high watermark.
func (s *simCluster) converged() bool {
	if len(s.ctl.isr) != len(simReplicas) || s.ctl.leader < 0 {
		return false
	}
	ld := s.brokers[s.ctl.leader]
	if ld.leader == nil || ld.leader.LeaderEpoch() != s.ctl.leaderEpoch || ld.leader.Pending() != nil || ld.hw != ld.log.LogEndOffset() {
		return false
	}
	for _, id := range simReplicas {
		if s.brokers[id].log.LogEndOffset() != ld.log.LogEndOffset() {
			return false
		}
	}
	return true
}

// heal: everyone up, connected and registered; metadata delivered; fetch until the logs
// agree.
func (s *simCluster) heal() {
	for _, id := range simReplicas {
		b := s.brokers[id]
		b.up, b.cutOff = true, false
		s.unfence(id)
	}
	if s.ctl.leader < 0 {
		s.t.Fatalf("no leader after healing: ISR %v", s.ctl.isr)
	}
	for i := 0; i < 400 && !s.converged(); i++ {
		s.now += 1000
		for _, id := range simReplicas {
			b := s.brokers[id]
			s.deliver(id)
			if b.follower != nil {
				b.fetchRound(s.brokers[b.follower.Leader()].replicaNode, s.now)
				s.brokers[b.follower.Leader()].collect()
			}
			if b.leader != nil {
				b.leader.Tick(s.now)
				b.collect()
				if p := b.outbox; p != nil {
					b.outbox = nil
					b.leader.HandleAlterPartition(p.ID, s.alter(b.id, p), s.now)
					b.collect()
				}
			}
		}
		if i%20 == 0 {
			s.check()
		}
	}
	s.check()
	ld := s.brokers[s.ctl.leader]
	if len(s.ctl.isr) != 3 {
		s.t.Fatalf("healed: ISR %v", s.ctl.isr)
	}
	if ld.hw != ld.log.LogEndOffset() {
		s.t.Fatalf("healed: leader HW %d, LEO %d", ld.hw, ld.log.LogEndOffset())
	}
	var nodes []*replicaNode
	for _, id := range simReplicas {
		b := s.brokers[id]
		s.holdsAcked(b)
		if b.log.LogEndOffset() != ld.log.LogEndOffset() {
			s.t.Fatalf("healed: broker %d ends at %d, leader %d at %d", id, b.log.LogEndOffset(), ld.id, ld.log.LogEndOffset())
		}
		nodes = append(nodes, b.replicaNode)
	}
	sameBelow(s.t, ld.log.LogEndOffset(), nodes...)
	if testing.Verbose() {
		s.t.Logf("stats %v, log end offset %d", s.stats, ld.log.LogEndOffset())
	}
}
