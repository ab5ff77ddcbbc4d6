package replica

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// A randomized model of one leader tenure: the leader (broker 1) appends, followers 2..4 fetch
// (sometimes partially, sometimes not at all for a while), a simulated controller answers
// AlterPartition (or fails, or refuses), fences and unfences followers and removes them from
// the ISR on its own, and metadata reaches the leader late. After every step:
//   - the high watermark never decreases and never passes the leader's log end offset;
//   - once it has advanced past its starting value, every member of the controller's ISR and
//     of the leader's maximal ISR has every record below it;
//   - a successful acks=all answer means every member of those ISRs, and at least
//     min.insync.replicas replicas, have the records; every produce is answered exactly once;
//   - every new proposal is the leader's one pending change, based on its current partition
//     epoch.
//
// At the end everything heals: every follower catches up and rejoins, and every produce is
// answered.
func TestLeaderStateProperties(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 50
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			m := newISRModel(t, uint64(seed))
			for range 400 {
				m.step()
				m.check()
			}
			m.heal()
		})
	}
}

type simController struct {
	leaderEpoch, partitionEpoch int32
	replicas, isr               []int32
	fenced                      map[int32]bool
}

func (c *simController) registration() Registration {
	return Registration{Leader: 1, LeaderEpoch: c.leaderEpoch, PartitionEpoch: c.partitionEpoch, Replicas: slices.Clone(c.replicas), ISR: slices.Clone(c.isr)}
}

// alter applies an AlterPartition as the controller state machine does.
func (c *simController) alter(p *ISRChange) AlterPartitionResult {
	res := AlterPartitionResult{Leader: 1, LeaderEpoch: c.leaderEpoch, PartitionEpoch: c.partitionEpoch, ISR: slices.Clone(c.isr)}
	switch {
	case p.LeaderEpoch != c.leaderEpoch:
		res.Err = kerr.FencedLeaderEpoch
	case p.PartitionEpoch != c.partitionEpoch:
		res.Err = kerr.InvalidUpdateVersion
	case slices.ContainsFunc(p.NewISR, func(id int32) bool { return c.fenced[id] }):
		res.Err = kerr.IneligibleReplica
	default:
		if !slices.Equal(c.isr, p.NewISR) {
			c.isr = slices.Clone(p.NewISR)
			c.partitionEpoch++
		}
		res.ISR, res.PartitionEpoch = slices.Clone(c.isr), c.partitionEpoch
	}
	return res
}

type produceInfo struct {
	required int64
	minISR   int32
	deadline int64
	answered bool
}

type isrModel struct {
	t      *testing.T
	rng    *rand.Rand
	now    int64
	s      *LeaderState
	ctl    *simController
	leo    int64           // the leader's log end offset
	actual map[int32]int64 // each follower's real log end offset
	paused map[int32]bool

	inflight     []*ISRChange   // sent to the controller, not answered
	metadata     []Registration // published, not yet seen by the leader
	produces     map[int]*produceInfo
	nextToken    int
	hw, startHW  int64
	proposalSeen map[uint64]bool
}

func newISRModel(t *testing.T, seed uint64) *isrModel {
	m := &isrModel{
		t: t, rng: rand.New(rand.NewPCG(seed, 17)), now: 1_000_000,
		ctl:          &simController{leaderEpoch: 3, partitionEpoch: 7, replicas: []int32{1, 2, 3, 4}, fenced: map[int32]bool{}},
		actual:       map[int32]int64{},
		paused:       map[int32]bool{},
		produces:     map[int]*produceInfo{},
		proposalSeen: map[uint64]bool{},
	}
	// A leader taking over with some history: followers somewhere below its end offset.
	m.leo = int64(m.rng.IntN(50))
	m.startHW = int64(m.rng.IntN(int(m.leo) + 1))
	m.ctl.isr = []int32{1}
	for _, id := range []int32{2, 3, 4} {
		m.actual[id] = m.startHW + int64(m.rng.IntN(int(m.leo-m.startHW)+1))
		if m.rng.IntN(3) > 0 {
			m.ctl.isr = append(m.ctl.isr, id)
		}
	}
	cfg := ReplicationConfig{LocalID: 1, ReplicaLagTimeMaxMs: 10_000, Eligible: func(id int32) bool { return !m.ctl.fenced[id] }}
	s, err := NewLeaderState(cfg, m.ctl.registration(), m.leo, m.startHW, m.now)
	if err != nil {
		t.Fatal(err)
	}
	m.s, m.hw = s, m.startHW
	m.drain()
	return m
}

func (m *isrModel) step() {
	m.now += int64(m.rng.IntN(3000))
	switch r := m.rng.IntN(100); {
	case r < 20: // produce
		acksAll := m.rng.IntN(4) > 0
		minISR := int32(1 + m.rng.IntN(3))
		if err := m.s.CheckAppend(acksAll, minISR); err != nil {
			if !errors.Is(err, ErrNotEnoughReplicas) || int32(len(m.s.ISR())) >= minISR {
				m.t.Fatalf("CheckAppend: %v with ISR %v", err, m.s.ISR())
			}
			return
		}
		m.leo += int64(1 + m.rng.IntN(5))
		if err := m.s.Appended(m.leo, m.now); err != nil {
			m.t.Fatal(err)
		}
		if acksAll {
			tok := m.nextToken
			m.nextToken++
			p := &produceInfo{required: m.leo, minISR: minISR, deadline: m.now + int64(1000+m.rng.IntN(30_000))}
			m.produces[tok] = p
			m.s.AddWaiter(ProduceWaiter{RequiredOffset: p.required, MinISR: minISR, DeadlineMs: p.deadline, Token: tok})
		}
	case r < 55: // a follower fetches
		id := int32(2 + m.rng.IntN(3))
		if m.paused[id] {
			return
		}
		m.fetch(id)
	case r < 60: // a follower stops or resumes fetching
		id := int32(2 + m.rng.IntN(3))
		m.paused[id] = !m.paused[id]
	case r < 70:
		m.s.Tick(m.now)
	case r < 85: // the controller answers the AlterPartition in flight
		if len(m.inflight) == 0 {
			return
		}
		i := m.rng.IntN(len(m.inflight))
		p := m.inflight[i]
		m.inflight = slices.Delete(m.inflight, i, i+1)
		var res AlterPartitionResult
		switch x := m.rng.IntN(10); {
		case x < 6:
			res = m.ctl.alter(p)
			if res.Err == nil {
				m.publish()
			}
		case x < 8:
			res = AlterPartitionResult{Err: errors.New("request timed out")}
		default:
			res = AlterPartitionResult{Err: kerr.OperationNotAttempted}
		}
		m.s.HandleAlterPartition(p.ID, res, m.now)
	case r < 90: // the controller fences or unfences a follower; fencing removes it from the ISR
		id := int32(2 + m.rng.IntN(3))
		m.ctl.fenced[id] = !m.ctl.fenced[id]
		if m.ctl.fenced[id] && slices.Contains(m.ctl.isr, id) {
			m.ctl.isr = slices.DeleteFunc(slices.Clone(m.ctl.isr), func(x int32) bool { return x == id })
			m.ctl.partitionEpoch++
			m.publish()
		}
	default: // the leader sees published metadata
		if len(m.metadata) == 0 {
			return
		}
		reg := m.metadata[0]
		m.metadata = m.metadata[1:]
		if _, err := m.s.UpdateRegistration(reg, m.now); err != nil {
			m.t.Fatal(err)
		}
	}
	m.drain()
}

func (m *isrModel) publish() { m.metadata = append(m.metadata, m.ctl.registration()) }

// fetch: the follower reports its position, then receives some of what the leader has.
func (m *isrModel) fetch(id int32) {
	if err := m.s.FollowerFetched(id, m.actual[id], 0, m.now); err != nil {
		m.t.Fatal(err)
	}
	if m.rng.IntN(4) > 0 {
		m.actual[id] += int64(m.rng.IntN(int(m.leo-m.actual[id]) + 1))
	}
}

// drain takes the leader's outputs and checks the produces it answered.
func (m *isrModel) drain() {
	rd := m.s.Ready()
	if rd.Proposal != nil {
		p := rd.Proposal
		if !m.proposalSeen[p.ID] && p.PartitionEpoch != m.s.PartitionEpoch() {
			m.t.Fatalf("proposal %+v on partition epoch %d", *p, m.s.PartitionEpoch())
		}
		if pd := m.s.Pending(); pd != p {
			m.t.Fatalf("proposal %+v is not the pending change %+v", *p, pd)
		}
		m.proposalSeen[p.ID] = true
		m.inflight = append(m.inflight, p)
	}
	for _, c := range rd.Completed {
		p := m.produces[c.Token.(int)]
		if p.answered {
			m.t.Fatalf("produce %v answered twice", c.Token)
		}
		p.answered = true
		switch {
		case c.Err == nil:
			holders := int32(1)
			for _, leo := range m.actual {
				if leo >= p.required {
					holders++
				}
			}
			if holders < p.minISR {
				m.t.Fatalf("acks=all answered with %d replicas holding offset %d, min.insync.replicas %d", holders, p.required, p.minISR)
			}
			for _, id := range m.isrs() {
				if m.actual[id] < p.required {
					m.t.Fatalf("acks=all answered before ISR member %d has offset %d (it has %d)", id, p.required, m.actual[id])
				}
			}
		case errors.Is(c.Err, ErrNotEnoughReplicasAfterAppend):
			if m.s.HighWatermark() < p.required {
				m.t.Fatal("NOT_ENOUGH_REPLICAS_AFTER_APPEND before the high watermark passed")
			}
		case errors.Is(c.Err, ErrRequestTimedOut):
			if m.now < p.deadline {
				m.t.Fatalf("timed out at %d before its deadline %d", m.now, p.deadline)
			}
		default:
			m.t.Fatalf("produce answered %v", c.Err)
		}
	}
}

// isrs is the union of the controller's ISR and the leader's maximal ISR, followers only.
func (m *isrModel) isrs() []int32 {
	var out []int32
	for _, id := range append(m.ctl.isr, m.s.MaximalISR()...) {
		if id != 1 && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

func (m *isrModel) check() {
	hw := m.s.HighWatermark()
	if hw < m.hw {
		m.t.Fatalf("high watermark went back from %d to %d", m.hw, hw)
	}
	if hw > m.leo {
		m.t.Fatalf("high watermark %d past the log end offset %d", hw, m.leo)
	}
	m.hw = hw
	if hw > m.startHW {
		for _, id := range m.isrs() {
			if m.actual[id] < hw {
				m.t.Fatalf("high watermark %d, but ISR member %d has only %d (controller ISR %v, leader maximal ISR %v)", hw, id, m.actual[id], m.ctl.isr, m.s.MaximalISR())
			}
		}
	}
	// The controller's ISR is within the leader's maximal ISR: the leader never computes
	// the high watermark over fewer replicas than the controller may elect from.
	for _, id := range m.ctl.isr {
		if !slices.Contains(m.s.MaximalISR(), id) {
			m.t.Fatalf("controller ISR %v has %d, leader maximal ISR %v does not", m.ctl.isr, id, m.s.MaximalISR())
		}
	}
}

// heal lets every follower catch up and rejoin, then checks that everything converged.
func (m *isrModel) heal() {
	for id := range m.ctl.fenced {
		m.ctl.fenced[id] = false
	}
	clear(m.paused)
	for range 200 {
		m.now += 500
		for _, id := range []int32{2, 3, 4} {
			if err := m.s.FollowerFetched(id, m.actual[id], 0, m.now); err != nil {
				m.t.Fatal(err)
			}
			m.actual[id] = m.leo
		}
		m.s.Tick(m.now)
		m.drain()
		for len(m.inflight) > 0 {
			p := m.inflight[0]
			m.inflight = m.inflight[1:]
			res := m.ctl.alter(p)
			if res.Err == nil {
				m.publish()
			}
			m.s.HandleAlterPartition(p.ID, res, m.now)
			m.drain()
		}
		for _, reg := range m.metadata {
			if _, err := m.s.UpdateRegistration(reg, m.now); err != nil {
				m.t.Fatal(err)
			}
		}
		m.metadata = nil
		m.drain()
		m.check()
	}
	m.now += 60_000
	m.s.Tick(m.now)
	m.drain()
	if hw := m.s.HighWatermark(); hw != m.leo {
		m.t.Fatalf("healed: high watermark %d, log end offset %d", hw, m.leo)
	}
	if !slices.Equal(m.s.ISR(), []int32{1, 2, 3, 4}) && !slices.Equal(sorted(m.s.ISR()), []int32{1, 2, 3, 4}) {
		m.t.Fatalf("healed: ISR %v", m.s.ISR())
	}
	for tok, p := range m.produces {
		if !p.answered {
			m.t.Fatalf("produce %d (offset %d) never answered", tok, p.required)
		}
	}
}

func sorted(s []int32) []int32 {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
