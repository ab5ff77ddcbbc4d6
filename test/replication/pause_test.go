package replication

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/testutil"
)

// Test 4: the leader of a partition with replication factor 3 and
// min.insync.replicas 2 is paused (SIGSTOP) past its session timeout while
// an idempotent acks=all producer writes, and a raw acks=all Produce is
// written into its socket while it is stopped. The others elect a new
// leader and the producer moves on to it. When the old leader resumes it
// still believes it leads until its metadata catches up: the stale Produce
// it then reads must not be acknowledged (it cannot reach its old ISR, which
// follows the new leader), it steps down, answers produces with
// NOT_LEADER_OR_FOLLOWER, and rejoins the ISR as a follower; nothing
// acknowledged is lost and the three logs end byte-identical.
//
// Controlled: the Produce is in the paused node's socket before the others
// elect a new leader. Best-effort: whether the resumed node reads it before
// or after its metadata names the new leader is up to its scheduling (the
// answer is logged); in both cases it must not be acknowledged.
//
// The paused leader is not the active controller here: see
// TestPausedLeaderAndActiveController for that case.
func TestPausedLeaderIsFenced(t *testing.T) { pauseLeader(t, false) }

// TestPausedLeaderAndActiveController is TestPausedLeaderIsFenced with the
// paused leader also the active controller: the brokers must leave the
// stopped controller (each controller request without a deadline of its own
// is bounded) and heartbeat the new one before it fences them.
func TestPausedLeaderAndActiveController(t *testing.T) { pauseLeader(t, true) }

// pauseLeader runs the scenario; the leader is the active controller if
// controller, another node if not.
func pauseLeader(t *testing.T, controller bool) {
	c := testutil.StartCluster(t, testutil.ClusterOptions{Nodes: 3})
	const topic = "pause-leader"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The preferred (first) replica leads: the active controller or the
	// next node.
	active := activeController(ctx, t, c)
	first := active
	if !controller {
		first = active%3 + 1
	}
	createTopicOn(ctx, t, c, topic, []int32{first, first%3 + 1, (first+1)%3 + 1}, map[string]string{"min.insync.replicas": "2"})
	st := WaitPartition(t, c, topic, 0, 30*time.Second, func(s PartitionState) bool {
		return s.FullISR() && s.Leader == first
	}, fmt.Sprintf("node %d to lead with a full ISR", first))
	t.Logf("active controller %d; leader %d", active, st.Leader)

	// Short request timeouts, so a produce stuck on the paused leader is
	// given up (and retried elsewhere) within seconds.
	p := StartProducer(t, c, topic, ProducerOptions{Opts: []kgo.Opt{
		kgo.ProduceRequestTimeout(2 * time.Second), kgo.RequestTimeoutOverhead(time.Second),
	}})
	p.WaitAcked(t, 200, 30*time.Second)

	old := st.Leader
	// A client of the old leader alone, for raw requests to it.
	raw := c.Client(t, kgo.SeedBrokers(c.Node(old).ClientAddr()), kgo.RequestRetries(0))
	if err := raw.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	stale := "stale-produce"
	c.Node(old).Pause()
	paused := time.Now()
	staleErr := make(chan int16, 1)
	go func() { staleErr <- rawProduce(ctx, raw.Broker(int(old)), topic, stale) }()

	var others []string
	for _, n := range c.Nodes() {
		if n.ID != old {
			others = append(others, n.ClientAddr())
		}
	}
	next := WaitPartition(t, c, topic, 0, 30*time.Second, func(s PartitionState) bool {
		return s.Leader >= 0 && s.Leader != old && s.LeaderEpoch > st.LeaderEpoch && !s.InISR(old)
	}, "a new leader without the paused node in the ISR", others...)
	t.Logf("leader %d paused; node %d leads at epoch %d with ISR %v after %v",
		old, next.Leader, next.LeaderEpoch, next.ISR, time.Since(paused).Round(time.Millisecond))
	p.WaitMoreAcked(t, 100, 30*time.Second)
	t.Logf("producer moved on: %d acknowledged, %d failed", p.Acked(), p.Failed())

	c.Node(old).Resume()
	select {
	case code := <-staleErr:
		t.Logf("the stale acks=all produce to the resumed node was answered %v", kerr.ErrorForCode(code))
		if code == 0 {
			t.Errorf("the old leader acknowledged an acks=all produce it read after being replaced")
		}
	case <-ctx.Done():
		t.Fatal("no answer to the stale produce")
	}
	// It steps down: its own metadata names the new leader, and it refuses
	// produces.
	WaitPartition(t, c, topic, 0, 30*time.Second, func(s PartitionState) bool {
		return s.Leader != old && s.Leader >= 0
	}, "the resumed node to see the new leader", c.Node(old).ClientAddr())
	if code := rawProduce(ctx, raw.Broker(int(old)), topic, "to-follower"); code != kerr.NotLeaderForPartition.Code {
		t.Errorf("a produce to the resumed node, now a follower, was answered %v, want NOT_LEADER_OR_FOLLOWER", kerr.ErrorForCode(code))
	}
	WaitPartition(t, c, topic, 0, 30*time.Second, func(s PartitionState) bool {
		return s.FullISR() && s.Leader != old
	}, "the resumed node back in the ISR as a follower")
	p.WaitMoreAcked(t, 100, 30*time.Second)

	res := p.Stop()
	t.Logf("produced %d: acknowledged %d, failed %d %v", res.Sent, len(res.Acked), len(res.Failed), res.ErrorCounts())
	rep := Verify(t, c, topic, res)
	for _, v := range []string{stale, "to-follower"} {
		if offs := rep.Offsets[v]; len(offs) > 0 {
			t.Errorf("%q, refused, is in the log at %v", v, offs)
		}
	}
}

// rawProduce sends one acks=all Produce of value to partition 0 of topic
// through b and returns the partition's error code (-1 if the request
// failed).
func rawProduce(ctx context.Context, b *kgo.Broker, topic, value string) int16 {
	now := time.Now().UnixMilli()
	rec, err := batch.Build(batch.Header{
		BaseTimestamp: now, MaxTimestamp: now, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
	}, []batch.Record{{Value: []byte(value)}}, batch.CodecNone)
	if err != nil {
		return -1
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = 0
	rp.Records = rec
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := b.Request(ctx, req)
	if err != nil {
		return -1
	}
	r := resp.(*kmsg.ProduceResponse)
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		return -1
	}
	return r.Topics[0].Partitions[0].ErrorCode
}

// activeController is the active controller as every broker's Metadata
// names it (ControllerID), once they agree.
func activeController(ctx context.Context, t *testing.T, c *testutil.Cluster) int32 {
	t.Helper()
	var id int32 = -1
	c.WaitFor(t, 30*time.Second, func() bool {
		id = -1
		for _, n := range c.Nodes() {
			cl, err := kgo.NewClient(kgo.SeedBrokers(n.ClientAddr()))
			if err != nil {
				return false
			}
			req := kmsg.NewPtrMetadataRequest()
			req.Topics = []kmsg.MetadataRequestTopic{}
			resp, err := req.RequestWith(ctx, cl)
			cl.Close()
			if err != nil || resp.ControllerID < 0 || (id >= 0 && resp.ControllerID != id) {
				return false
			}
			id = resp.ControllerID
		}
		return true
	}, "the brokers to agree on the active controller")
	return id
}
