package api_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
)

// bench848 is a consumer-protocol group driven over raw connections, one per member; each
// member applies the assignment it is sent at once and reports what it owns.
type bench848 struct {
	tb      testing.TB
	group   string
	topic   string
	conns   []*groupConn
	members []*bench848Member
}

type bench848Member struct {
	id     string
	epoch  int32
	owned  map[[16]byte][]int32
	active bool
}

func newBench848(tb testing.TB, addr, group, topic string, n int) *bench848 {
	g := &bench848{tb: tb, group: group, topic: topic}
	for i := 0; i < n; i++ {
		g.conns = append(g.conns, dialGroupConn(tb, addr))
		g.members = append(g.members, &bench848Member{id: fmt.Sprintf("bench-member-%03d", i)})
	}
	return g
}

// heartbeat sends member i's heartbeat (a join at epoch 0, a leave at -1) and applies the
// answer; it reports whether the answer carried a new assignment.
func (g *bench848) heartbeat(i int, epoch int32) bool {
	m := g.members[i]
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch = g.group, m.id, epoch
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if epoch == 0 {
		req.RebalanceTimeoutMillis = 60000
		req.SubscribedTopicNames = []string{g.topic}
	} else {
		for id, ps := range m.owned {
			req.Topics = append(req.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: id, Partitions: ps})
		}
	}
	resp, err := g.conns[i].try(req, 1)
	if err != nil {
		g.tb.Error(err)
		return false
	}
	r := resp.(*kmsg.ConsumerGroupHeartbeatResponse)
	if r.ErrorCode != 0 {
		g.tb.Errorf("member %d heartbeat at epoch %d: %v", i, epoch, kerr.ErrorForCode(r.ErrorCode))
		return false
	}
	if epoch == -1 {
		m.active, m.owned, m.epoch = false, nil, 0
		return false
	}
	m.active, m.epoch = true, r.MemberEpoch
	if r.Assignment == nil {
		return false
	}
	m.owned = map[[16]byte][]int32{}
	for _, t := range r.Assignment.Topics {
		m.owned[t.TopicID] = t.Partitions
	}
	return true
}

// round has every active member heartbeat once, concurrently (as members do, each on its
// own interval); it reports whether any got a new assignment.
func (g *bench848) round() bool {
	var wg sync.WaitGroup
	var mu sync.Mutex
	changed := false
	for i, m := range g.members {
		if !m.active {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if g.heartbeat(i, m.epoch) {
				mu.Lock()
				changed = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return changed
}

// converge runs rounds until the group is Stable (ConsumerGroupDescribe after each round)
// and returns how many it took.
func (g *bench848) converge(c *groupConn, parts int) int {
	for rounds := 1; rounds <= 50; rounds++ {
		g.round()
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{g.group}
		d := c.do(req, 1).(*kmsg.ConsumerGroupDescribeResponse).Groups[0]
		if d.State != "Stable" {
			continue
		}
		owned := 0
		for _, m := range g.members {
			for _, ps := range m.owned {
				owned += len(ps)
			}
		}
		if owned == parts {
			return rounds
		}
	}
	g.tb.Fatalf("group did not converge in 50 rounds")
	return 0
}

// BenchmarkConsumerGroupRebalance100x1000: a KIP-848 group of 100 members over a
// 1,000-partition topic (uniform assignor). Each iteration a new member joins a Stable group
// of 99 with ConsumerGroupHeartbeat; then every member heartbeats in rounds (all 100
// concurrently, back to back) until the group is Stable again: the new target is computed
// on the first heartbeat after the join, the members that must give up a partition revoke
// it, and the new member picks its ten up as they are released. Reported: ms from the join
// until the group is Stable, and the heartbeat rounds it took (real members heartbeat every
// group.consumer.heartbeat.interval.ms, 5 s by default, so each round is an interval). The
// member then leaves (untimed).
func BenchmarkConsumerGroupRebalance100x1000(b *testing.B) {
	br := testutil.StartBroker(b, "offsets.topic.num.partitions=50")
	c := dialGroupConn(b, br.Addr())
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "wide", NumPartitions: 1000, ReplicationFactor: 1}}
	if r := c.do(ct, 7).(*kmsg.CreateTopicsResponse); r.Topics[0].ErrorCode != 0 {
		b.Fatalf("create topic: %v", kerr.ErrorForCode(r.Topics[0].ErrorCode))
	}
	g := newBench848(b, br.Addr(), "bench848", "wide", 100)
	for i := 0; i < 99; i++ {
		g.heartbeat(i, 0)
	}
	g.converge(c, 1000)
	b.ResetTimer()
	var total time.Duration
	rounds := 0
	for i := 0; i < b.N; i++ {
		start := time.Now()
		g.heartbeat(99, 0)
		rounds += g.converge(c, 1000)
		total += time.Since(start)
		b.StopTimer()
		g.heartbeat(99, -1)
		g.converge(c, 1000)
		b.StartTimer()
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms-to-stable")
	b.ReportMetric(float64(rounds)/float64(b.N), "heartbeat-rounds")
	b.ReportMetric(0, "ns/op")
}
