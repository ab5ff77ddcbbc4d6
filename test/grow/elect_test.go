package grow

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/cli"
	"github.com/gregor-project/gregor/internal/testutil"
)

// createAssigned creates a topic with the replicas of each partition given (first =
// preferred leader).
func createAssigned(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, assignment ...[]int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10_000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = topic
	rt.NumPartitions, rt.ReplicationFactor = -1, -1
	for i, rs := range assignment {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(i), rs
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// partition returns one partition's metadata (Leader -2 if it could not be read).
func partition(ctx context.Context, cl *kgo.Client, topic string, p int32) kmsg.MetadataResponseTopicPartition {
	ps, err := partitions(ctx, cl, topic)
	if err != nil || int(p) >= len(ps) {
		return kmsg.MetadataResponseTopicPartition{Leader: -2}
	}
	return ps[p]
}

// elect runs the CLI's election for one partition and returns its result.
func elect(ctx context.Context, t *testing.T, cl *kgo.Client, unclean bool, topic string, p int32) cli.ElectionResult {
	t.Helper()
	rs, err := cli.ElectLeaders(ctx, cl, unclean, topic, p)
	if err != nil {
		t.Fatalf("elect %s-%d (unclean %v): %v", topic, p, unclean, err)
	}
	if len(rs) != 1 || rs[0].Topic != topic || rs[0].Partition != p {
		t.Fatalf("elect %s-%d: results %+v", topic, p, rs)
	}
	return rs[0]
}

// produceValues produces values to partition 0 of topic with acks=all, failing the test on
// an error.
func produceValues(ctx context.Context, t *testing.T, cl *kgo.Client, topic, prefix string, n int) []string {
	t.Helper()
	var out []string
	for i := range n {
		v := fmt.Sprintf("%s-%d", prefix, i)
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
		out = append(out, v)
	}
	return out
}

// readValues reads topic up to its end offsets and returns every value.
func readValues(ctx context.Context, t *testing.T, c *testutil.Cluster, cl *kgo.Client, topic string) map[string]int {
	t.Helper()
	seen := map[string]int{}
	ps, err := partitions(ctx, cl, topic)
	if err != nil {
		t.Fatal(err)
	}
	ends := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = topic
	for _, p := range ps {
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition, lp.Timestamp = p.Partition, -1
		lt.Partitions = append(lt.Partitions, lp)
	}
	ends.Topics = append(ends.Topics, lt)
	resp, err := ends.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]int64{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				t.Fatalf("end offset of %s-%d: %v", topic, rp.Partition, err)
			}
			if rp.Offset > 0 {
				want[rp.Partition] = rp.Offset
			}
		}
	}
	cons := c.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for len(want) > 0 {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: %v (left %v)", topic, ctx.Err(), want)
		}
		fs.EachRecord(func(r *kgo.Record) {
			seen[string(r.Value)]++
			if end, ok := want[r.Partition]; ok && r.Offset+1 >= end {
				delete(want, r.Partition)
			}
		})
	}
	return seen
}

// startElectCluster starts three combined nodes with extra configs, and waits for them.
func startElectCluster(t *testing.T, sets ...string) (*testutil.Cluster, *kgo.Client) {
	t.Helper()
	c := testutil.StartCluster(t, testutil.ClusterOptions{Nodes: 3, Sets: sets})
	cl := c.Client(t, kgo.RequiredAcks(kgo.AllISRAcks()))
	waitBrokers(context.Background(), t, c, cl, 3)
	return c, cl
}

// A cleanly stopped preferred leader hands its leaderships to other ISR members; restarted,
// it rejoins the ISRs as a follower and, with auto.leader.rebalance.enable=false, leadership
// stays where it went until a preferred election (the CLI's leader elect --preferred) moves
// it back. No acknowledged record is lost on the way.
func TestPreferredLeaderElection(t *testing.T) {
	const topic = "pref"
	c, cl := startElectCluster(t, "auto.leader.rebalance.enable=false")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	createAssigned(ctx, t, cl, topic, []int32{1, 2, 3}, []int32{2, 3, 1}, []int32{3, 1, 2})
	c.WaitFor(t, 30*time.Second, func() bool { return fullyReplicated(ctx, cl, topic, 3) }, "a full ISR on every partition")
	acked := produceValues(ctx, t, cl, topic, "before", 60)

	// Node 2 leads partition 1; stopping it moves that leadership.
	if err := c.Node(2).Stop(); err != nil {
		t.Fatalf("stop node 2: %v", err)
	}
	c.WaitFor(t, 30*time.Second, func() bool {
		p := partition(ctx, cl, topic, 1)
		return p.Leader >= 0 && p.Leader != 2
	}, "partition 1 led by another broker than the stopped 2")
	moved := partition(ctx, cl, topic, 1).Leader
	acked = append(acked, produceValues(ctx, t, cl, topic, "while-stopped", 60)...)

	c.Node(2).Start()
	c.WaitFor(t, 30*time.Second, func() bool { return fullyReplicated(ctx, cl, topic, 3) }, "node 2 back in every ISR")
	if p := partition(ctx, cl, topic, 1); p.Leader != moved {
		t.Fatalf("partition 1's leadership moved from %d to %d by itself with the rebalance off", moved, p.Leader)
	}

	// A preferred election for every partition moves only partition 1.
	rs, err := cli.ElectLeaders(ctx, cl, false, "", -1)
	if err != nil {
		t.Fatalf("preferred election: %v", err)
	}
	for _, r := range rs {
		if r.Topic != topic {
			continue
		}
		want := "not-needed"
		if r.Partition == 1 {
			want = "elected"
		}
		if r.Result != want {
			t.Errorf("%s-%d: %s (%s), want %s", r.Topic, r.Partition, r.Result, r.Error, want)
		}
	}
	c.WaitFor(t, 30*time.Second, func() bool {
		ps, err := partitions(ctx, cl, topic)
		if err != nil {
			return false
		}
		for _, p := range ps {
			if p.Leader != p.Replicas[0] {
				return false
			}
		}
		return true
	}, "every partition led by its preferred replica")
	if r := elect(ctx, t, cl, false, topic, 1); r.Result != "not-needed" {
		t.Errorf("a second preferred election of %s-1: %+v, want not-needed", topic, r)
	}

	acked = append(acked, produceValues(ctx, t, cl, topic, "after", 60)...)
	seen := readValues(ctx, t, c, cl, topic)
	for _, v := range acked {
		if seen[v] != 1 {
			t.Errorf("acknowledged record %s is in the topic %d times", v, seen[v])
		}
	}
	t.Logf("%d acknowledged records, all read back once", len(acked))
}

// Unclean elections: refused (ELECTION_NOT_NEEDED) while the partition has a live leader in
// its ISR; ELIGIBLE_LEADERS_NOT_AVAILABLE while no replica is alive; and, once a replica
// outside the ISR is the only live one, it is elected only when asked (unclean election is
// off), losing exactly what only the old ISR had. The replicas are on broker-only nodes 4
// and 5 so that killing them leaves the controller quorum whole.
func TestUncleanElection(t *testing.T) {
	c, cl := startElectCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	c.AddBroker(4)
	c.AddBroker(5)
	waitBrokers(ctx, t, c, cl, 5)
	createAssigned(ctx, t, cl, "solo", []int32{5})
	createAssigned(ctx, t, cl, "pair", []int32{4, 5})
	c.WaitFor(t, 30*time.Second, func() bool {
		return fullyReplicated(ctx, cl, "solo", 1) && fullyReplicated(ctx, cl, "pair", 1)
	}, "leaders and full ISRs")
	onBoth := produceValues(ctx, t, cl, "pair", "both", 50)

	// A live leader in the ISR: nothing to elect, and nothing moves.
	if r := elect(ctx, t, cl, true, "pair", 0); r.Result != "not-needed" {
		t.Fatalf("unclean election with a live ISR leader: %+v, want not-needed", r)
	}
	if p := partition(ctx, cl, "pair", 0); p.Leader != 4 {
		t.Fatalf("pair-0 led by %d after a refused unclean election, want 4", p.Leader)
	}

	// Broker 5 dies: solo-0 has no live replica; pair-0's ISR shrinks to 4.
	c.Node(5).Kill()
	c.WaitFor(t, 30*time.Second, func() bool {
		s, p := partition(ctx, cl, "solo", 0), partition(ctx, cl, "pair", 0)
		return s.Leader == -1 && p.Leader == 4 && len(p.ISR) == 1
	}, "solo-0 leaderless and pair-0's ISR down to broker 4")
	if r := elect(ctx, t, cl, true, "solo", 0); r.Result != "failed" || !strings.Contains(r.Error, "ELIGIBLE_LEADERS_NOT_AVAILABLE") {
		t.Errorf("unclean election with no live replica: %+v, want ELIGIBLE_LEADERS_NOT_AVAILABLE", r)
	}
	if r := elect(ctx, t, cl, false, "solo", 0); r.Result != "failed" || !strings.Contains(r.Error, "PREFERRED_LEADER_NOT_AVAILABLE") {
		t.Errorf("preferred election with the preferred replica dead: %+v, want PREFERRED_LEADER_NOT_AVAILABLE", r)
	}
	if r := elect(ctx, t, cl, true, "pair", 0); r.Result != "not-needed" {
		t.Errorf("unclean election with a live ISR leader: %+v, want not-needed", r)
	}
	onlyOn4 := produceValues(ctx, t, cl, "pair", "only4", 50)

	// Broker 4 dies too: pair-0 has no live replica.
	c.Node(4).Kill()
	c.WaitFor(t, 30*time.Second, func() bool { return partition(ctx, cl, "pair", 0).Leader == -1 }, "pair-0 leaderless")
	if r := elect(ctx, t, cl, true, "pair", 0); r.Result != "failed" || !strings.Contains(r.Error, "ELIGIBLE_LEADERS_NOT_AVAILABLE") {
		t.Errorf("unclean election with both replicas dead: %+v, want ELIGIBLE_LEADERS_NOT_AVAILABLE", r)
	}

	// Broker 5 returns. It leads solo-0 again (its only ISR member), in the same metadata
	// change that would elect it for pair-0 if unclean election were on: it is not.
	c.Node(5).Start()
	c.WaitFor(t, 30*time.Second, func() bool { return partition(ctx, cl, "solo", 0).Leader == 5 }, "solo-0 led by the restarted 5")
	if p := partition(ctx, cl, "pair", 0); p.Leader != -1 {
		t.Fatalf("pair-0 got leader %d (ISR %v) without an unclean election", p.Leader, p.ISR)
	}
	if r := elect(ctx, t, cl, false, "pair", 0); r.Result != "failed" || !strings.Contains(r.Error, "PREFERRED_LEADER_NOT_AVAILABLE") {
		t.Errorf("preferred election of pair-0 with 4 dead: %+v, want PREFERRED_LEADER_NOT_AVAILABLE", r)
	}
	if r := elect(ctx, t, cl, true, "pair", 0); r.Result != "elected" {
		t.Fatalf("unclean election of pair-0 with 5 alive: %+v, want elected", r)
	}
	c.WaitFor(t, 30*time.Second, func() bool {
		p := partition(ctx, cl, "pair", 0)
		return p.Leader == 5 && len(p.ISR) == 1 && p.ISR[0] == 5
	}, "pair-0 led by 5 with ISR [5]")
	after := produceValues(ctx, t, cl, "pair", "after", 20)

	// 5's log: everything acknowledged while it was in the ISR, then the new records; what
	// only 4 had is gone, as an unclean election loses it.
	seen := readValues(ctx, t, c, cl, "pair")
	for _, v := range append(onBoth, after...) {
		if seen[v] != 1 {
			t.Errorf("record %s, acknowledged while 5 was in the ISR, is in the topic %d times", v, seen[v])
		}
	}
	lost := 0
	for _, v := range onlyOn4 {
		if seen[v] == 0 {
			lost++
		}
	}
	t.Logf("the unclean election lost %d of %d records only broker 4 had", lost, len(onlyOn4))
	if lost != len(onlyOn4) {
		t.Errorf("%d records that only broker 4 had survived the unclean election of 5", len(onlyOn4)-lost)
	}
}

// With auto.leader.rebalance.enable and a one-second check interval, a preferred leader
// that was stopped and restarted gets its leadership back by itself once it is in the ISR.
func TestAutoLeaderRebalance(t *testing.T) {
	const topic = "auto"
	c, cl := startElectCluster(t, "auto.leader.rebalance.enable=true", "leader.imbalance.check.interval.seconds=1",
		"leader.imbalance.per.broker.percentage=10")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	createAssigned(ctx, t, cl, topic, []int32{1, 2, 3}, []int32{2, 3, 1}, []int32{3, 1, 2})
	c.WaitFor(t, 30*time.Second, func() bool { return fullyReplicated(ctx, cl, topic, 3) }, "a full ISR on every partition")
	acked := produceValues(ctx, t, cl, topic, "before", 30)

	if err := c.Node(3).Stop(); err != nil {
		t.Fatalf("stop node 3: %v", err)
	}
	c.WaitFor(t, 30*time.Second, func() bool {
		p := partition(ctx, cl, topic, 2)
		return p.Leader >= 0 && p.Leader != 3
	}, "partition 2 led by another broker than the stopped 3")
	acked = append(acked, produceValues(ctx, t, cl, topic, "while-stopped", 30)...)
	start := time.Now()
	c.Node(3).Start()
	c.WaitFor(t, 30*time.Second, func() bool {
		ps, err := partitions(ctx, cl, topic)
		if err != nil || len(ps) != 3 {
			return false
		}
		for _, p := range ps {
			if p.Leader != p.Replicas[0] {
				return false
			}
		}
		return true
	}, "every partition back with its preferred leader, without an election asked for")
	t.Logf("leadership back on broker 3 %v after its restart", time.Since(start).Round(time.Millisecond))

	acked = append(acked, produceValues(ctx, t, cl, topic, "after", 30)...)
	seen := readValues(ctx, t, c, cl, topic)
	for _, v := range acked {
		if seen[v] != 1 {
			t.Errorf("acknowledged record %s is in the topic %d times", v, seen[v])
		}
	}
}
