package cluster

import (
	"context"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
)

// Decommissioning a broker with UnregisterBroker (KIP-631; kafka-cluster.sh unregister),
// sent to any broker, which forwards it to the active controller. Three voters and a
// broker-only node 4:
//
//   - Live: node 4 leads a partition and is in every ISR when it is unregistered (through
//     node 2, with the protocol request). Node 2 answers once its own Metadata no longer
//     lists node 4; every node then agrees: brokers 1-3, node 4 in no ISR, the partition it
//     led led by another ISR member. Node 4 keeps running and heartbeating, as a Kafka broker
//     does, and stays out: the controller refuses its heartbeats and it does not register
//     again; the leaders refuse to take it back into their ISRs.
//   - Restart: node 4 restarted registers again, as a new Kafka broker process does.
//   - The operator's way: the partitions are moved off node 4, it is stopped (SIGTERM), and
//     `gregor cluster unregister --id 4` removes it; a second attempt, and any unknown id,
//     is BROKER_ID_NOT_REGISTERED. The cluster keeps serving acks=all writes throughout.
func TestUnregisterBroker(t *testing.T) {
	c := testutil.StartCluster(t, testutil.ClusterOptions{Nodes: 3})
	n4 := c.AddBroker(4)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	cls := nodeClients(t, c)
	voterCls := map[int32]*kgo.Client{1: cls[1], 2: cls[2], 3: cls[3]}
	all, three := []int32{1, 2, 3, 4}, []int32{1, 2, 3}
	waitSameView(ctx, t, cls, 30*time.Second, func(v clusterView) error { return wantBrokers(v, all) })

	if err := createAssignedTopic(ctx, cls[1], "decom", []int32{4, 1, 2}, []int32{1, 2, 4}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "decom led by its preferred replicas with full ISRs on every node", func() bool {
		return agreeOnPartitions(ctx, cls, "decom", func(ps map[int32]partitionState) error {
			if ps[0].Leader != 4 || ps[1].Leader != 1 || len(ps[0].ISR) != 3 || len(ps[1].ISR) != 3 {
				return fmt.Errorf("partitions %v", ps)
			}
			return nil
		}) == nil
	})
	producer := c.Client(t, kgo.SeedBrokers(c.Node(1).ClientAddr(), c.Node(2).ClientAddr(), c.Node(3).ClientAddr()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("decom"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce := func(what string) {
		t.Helper()
		for p := range int32(2) {
			r := &kgo.Record{Partition: p, Value: []byte(what)}
			if err := producer.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("acks=all produce to decom-%d %s: %v", p, what, err)
			}
		}
	}
	produce("before")

	// Live: unregister node 4 while it leads decom-0.
	start := time.Now()
	if err := unregisterBroker(ctx, cls[2], 4); err != nil {
		t.Fatalf("unregister live broker 4 through node 2: %v", err)
	}
	t.Logf("unregistering live broker 4 took %v", time.Since(start))
	if v, err := viewOf(ctx, cls[2]); err != nil || slices.Contains(v.MetaBrokers, 4) || slices.Contains(v.DescribeBrokers, 4) {
		t.Fatalf("node 2 answered UnregisterBroker before its own view dropped broker 4: %v (%v)", v, err)
	}
	waitSameView(ctx, t, voterCls, 15*time.Second, func(v clusterView) error { return wantBrokers(v, three) })
	outOfISRs := func(ps map[int32]partitionState) error {
		for p, s := range ps {
			if s.Leader == 4 || s.Leader < 0 || slices.Contains(s.ISR, 4) || !slices.Contains(s.ISR, s.Leader) {
				return fmt.Errorf("decom-%d: leader %d, ISR %v", p, s.Leader, s.ISR)
			}
		}
		return nil
	}
	waitFor(t, 15*time.Second, "decom-0 led by another ISR member and node 4 in no ISR, on every voter", func() bool {
		return agreeOnPartitions(ctx, voterCls, "decom", outOfISRs) == nil
	})
	// Node 4 heartbeats on; the refusal is in its log, and it did not register again.
	waitFor(t, 15*time.Second, "node 4 to log that it was unregistered", func() bool {
		return strings.Contains(readFile(t, n4.LogFile), "this broker was unregistered")
	})
	produce("after the live unregister")
	if log := readFile(t, n4.LogFile); strings.Contains(log, "registering again") || strings.Count(log, "registered with the controller") != 1 {
		t.Fatalf("node 4 registered again after it was unregistered:\n%s", log)
	}
	waitSameView(ctx, t, voterCls, 15*time.Second, func(v clusterView) error { return wantBrokers(v, three) })
	if err := agreeOnPartitions(ctx, voterCls, "decom", outOfISRs); err != nil {
		t.Fatalf("node 4 came back into an ISR while unregistered: %v", err)
	}

	// Restart: a new process registers again (a SIGTERM of an unregistered broker has no
	// leaderships to move and stops at once).
	stopStart := time.Now()
	if err := n4.Stop(); err != nil {
		t.Fatalf("SIGTERM of the unregistered node 4: %v", err)
	}
	if d := time.Since(stopStart); d > 10*time.Second {
		t.Errorf("the unregistered node 4 took %v to stop", d)
	}
	n4.Start()
	cls = nodeClients(t, c)
	waitSameView(ctx, t, cls, 30*time.Second, func(v clusterView) error { return wantBrokers(v, all) })

	// The operator's way: move the partitions off node 4, stop it, unregister it.
	for p := range int32(2) {
		if err := reassign(ctx, cls[1], "decom", p, three); err != nil {
			t.Fatalf("reassign decom-%d off node 4: %v", p, err)
		}
	}
	waitFor(t, 30*time.Second, "decom on brokers 1-3 only, on every node", func() bool {
		return agreeOnPartitions(ctx, cls, "decom", func(ps map[int32]partitionState) error {
			for p, s := range ps {
				if !slices.Equal(slices.Sorted(slices.Values(s.Replicas)), three) || len(s.ISR) != 3 {
					return fmt.Errorf("decom-%d: replicas %v, ISR %v", p, s.Replicas, s.ISR)
				}
			}
			return nil
		}) == nil
	})
	if err := n4.Stop(); err != nil {
		t.Fatalf("SIGTERM of node 4: %v", err)
	}
	delete(cls, 4)
	out, err := runGregor(ctx, t, "cluster", "unregister", "--id", "4", "-b", c.Node(3).ClientAddr())
	if err != nil {
		t.Fatalf("gregor cluster unregister --id 4: %v\n%s", err, out)
	}
	if !strings.Contains(out, "4") {
		t.Errorf("gregor cluster unregister --id 4 printed %q", out)
	}
	waitSameView(ctx, t, cls, 15*time.Second, func(v clusterView) error { return wantBrokers(v, three) })
	produce("after the stopped broker was unregistered")

	// Unregistering it again, or a broker that never was, is BROKER_ID_NOT_REGISTERED, from
	// the CLI (a non-zero exit naming the error) and from the protocol.
	out, err = runGregor(ctx, t, "cluster", "unregister", "--id", "4", "-b", c.Node(1).ClientAddr())
	if err == nil || !strings.Contains(out, "BROKER_ID_NOT_REGISTERED") {
		t.Errorf("unregistering broker 4 again: %v, output %q; want a failure naming BROKER_ID_NOT_REGISTERED", err, out)
	}
	for id, cl := range cls {
		if err := unregisterBroker(ctx, cl, 99); err != kerr.BrokerIDNotRegistered {
			t.Errorf("unregister broker 99 through node %d: %v, want BROKER_ID_NOT_REGISTERED", id, err)
		}
	}
}

// unregisterBroker sends UnregisterBroker for id through cl and returns its error code as
// a kerr error (nil for none), or the request's failure.
func unregisterBroker(ctx context.Context, cl *kgo.Client, id int32) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	req := kmsg.NewPtrUnregisterBrokerRequest()
	req.BrokerID = id
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("request: %w", err)
	}
	return kerr.ErrorForCode(resp.ErrorCode)
}

// partitionState is one partition as a node's Metadata shows it.
type partitionState struct {
	Leader   int32
	Replicas []int32
	ISR      []int32
}

// partitionsOf asks the node behind cl for topic's partitions.
func partitionsOf(ctx context.Context, cl *kgo.Client, topic string) (map[int32]partitionState, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	resp, err := requestTopicMetadata(ctx, cl, topic)
	if err != nil {
		return nil, err
	}
	if len(resp.Topics) != 1 {
		return nil, fmt.Errorf("metadata answered %d topics", len(resp.Topics))
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		return nil, err
	}
	out := map[int32]partitionState{}
	for _, p := range resp.Topics[0].Partitions {
		isr := slices.Sorted(slices.Values(p.ISR))
		out[p.Partition] = partitionState{Leader: p.Leader, Replicas: p.Replicas, ISR: isr}
	}
	return out, nil
}

func requestTopicMetadata(ctx context.Context, cl *kgo.Client, topic string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = []kmsg.MetadataRequestTopic{rt}
	return req.RequestWith(ctx, cl)
}

// agreeOnPartitions reports why the nodes behind cls do not all show topic's partitions
// alike and accepted by cond (nil when they do).
func agreeOnPartitions(ctx context.Context, cls map[int32]*kgo.Client, topic string, cond func(map[int32]partitionState) error) error {
	var first map[int32]partitionState
	for _, id := range slices.Sorted(maps.Keys(cls)) {
		ps, err := partitionsOf(ctx, cls[id], topic)
		if err == nil {
			err = cond(ps)
		}
		if err == nil && first != nil && fmt.Sprint(ps) != fmt.Sprint(first) {
			err = fmt.Errorf("shows %v, another node %v", ps, first)
		}
		if err != nil {
			return fmt.Errorf("node %d: %w", id, err)
		}
		first = ps
	}
	return nil
}

// runGregor runs the gregor binary with args and returns its combined output.
func runGregor(ctx context.Context, t testing.TB, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, testutil.Binary(t), args...).CombinedOutput()
	return string(out), err
}
