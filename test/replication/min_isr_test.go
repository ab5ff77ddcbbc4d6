package replication

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/testutil"
)

// With min.insync.replicas 2 and both followers of a partition killed, the
// leader refuses acks=all writes: once the ISR has shrunk to the leader, a
// Produce request sent straight to it is answered NOT_ENOUGH_REPLICAS and
// nothing is appended, and a producer with a short delivery timeout gets
// nothing acknowledged. Once the followers are back in the ISR, writes are
// acknowledged again, and the checker finds every acknowledged record.
func TestMinInsyncReplicasRefusesAcksAll(t *testing.T) {
	// One controller (node 1) and two broker-only nodes: killing two of the
	// partition's three replicas leaves the controller quorum whole, so the
	// ISR does shrink (with three voters it would lose its majority, and
	// acks=all would only time out).
	c := testutil.StartCluster(t, testutil.ClusterOptions{Nodes: 1})
	c.AddBroker(2)
	c.AddBroker(3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const topic = "min-isr"
	createTopicOn(ctx, t, c, topic, []int32{1, 2, 3}, map[string]string{"min.insync.replicas": "2"})
	leadWithFullISR(t, c, topic, 1)
	leader := c.Node(1)
	followers := []*testutil.Node{c.Node(2), c.Node(3)}

	// Pinned to the leader, so it keeps producing to it through the outage;
	// records that cannot be acknowledged fail after 3 s.
	p := StartProducer(t, c, topic, ProducerOptions{Seeds: []string{leader.ClientAddr()}, Rate: 200, DeliveryTimeout: 3 * time.Second})
	p.WaitAcked(t, 200, 30*time.Second)

	for _, f := range followers {
		f.Kill()
	}
	// The leader's own view: it refuses from the ISR its image holds.
	WaitPartition(t, c, topic, 0, 30*time.Second, func(s PartitionState) bool { return s.Leader == 1 && slices.Equal(s.ISR, []int32{1}) },
		"the ISR to shrink to the leader", leader.ClientAddr())
	// Answers to records that reached every replica before the kill came
	// within milliseconds; the ISR took seconds to shrink. From here on
	// nothing may be acknowledged.
	ackedAtShrink, failedAtShrink := p.Acked(), p.Failed()
	onLeader := nodeClient(t, leader)
	endBefore := endOffset(ctx, t, onLeader, topic)

	// A Produce request of our own, so the error code is the broker's, not a
	// client's retry outcome.
	const refused = "refused-raw"
	code := produceRaw(ctx, t, onLeader, topic, refused)
	if code != kerr.NotEnoughReplicas.Code {
		t.Errorf("acks=all produce to a leader alone in its ISR with min.insync.replicas 2: error %v, want NOT_ENOUGH_REPLICAS", kerr.ErrorForCode(code))
	}
	if end := endOffset(ctx, t, onLeader, topic); end != endBefore {
		t.Errorf("high watermark moved from %d to %d after a refused acks=all produce", endBefore, end)
	}
	// A fresh producer with a short delivery timeout: its record is refused
	// on every try until the timeout fails it. (The long-running producer's
	// records do not fail: an idempotent producer must retry a batch whose
	// append it cannot rule out, NOT_ENOUGH_REPLICAS_AFTER_APPEND or a lost
	// answer, until it has an answer, so they wait for the followers.)
	short := nodeClient(t, leader, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(3*time.Second))
	shortErr := short.ProduceSync(ctx, &kgo.Record{Value: []byte("refused-producer")}).FirstErr()
	if shortErr == nil {
		t.Errorf("an acks=all producer was acknowledged with one in-sync replica of min.insync.replicas 2")
	}
	if n := p.Acked() - ackedAtShrink; n > 0 {
		t.Errorf("%d records acknowledged with acks=all while the ISR was the leader alone, below min.insync.replicas 2", n)
	}
	if end := endOffset(ctx, t, onLeader, topic); end != endBefore {
		t.Errorf("high watermark moved from %d to %d while acks=all writes were refused", endBefore, end)
	}
	outage := p.Failed() - failedAtShrink

	for _, f := range followers {
		f.Start()
	}
	WaitPartition(t, c, topic, 0, 45*time.Second, PartitionState.FullISR, "the restarted followers back in the ISR", leader.ClientAddr())
	p.WaitMoreAcked(t, 200, 30*time.Second)
	res := p.Stop()
	t.Logf("acknowledged %d before the ISR shrank, %d failed during the outage (producer errors %v); raw produce: %v; short producer: %v",
		ackedAtShrink, outage, res.ErrorCounts(), kerr.ErrorForCode(code), shortErr)
	rep := Verify(t, c, topic, res)
	if rep.Acked < ackedAtShrink+200 {
		t.Errorf("%d records acknowledged in all, want at least %d", rep.Acked, ackedAtShrink+200)
	}
}

// nodeClient returns a client whose only seed is node n's CLIENT listener,
// closed when the test ends.
func nodeClient(t *testing.T, n *testutil.Node, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(n.ClientAddr())}, opts...)...)
	if err != nil {
		t.Fatalf("client of node %d: %v", n.ID, err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// createTopicOn creates topic with one partition on replicas (the first is
// the preferred leader) and configs, once every replica is a live broker in
// the metadata (the controller refuses an assignment to an unknown one).
func createTopicOn(ctx context.Context, t *testing.T, c *testutil.Cluster, topic string, replicas []int32, configs map[string]string) {
	t.Helper()
	cl := c.Client(t)
	// A raw Metadata request: kadm's BrokerMetadata answers from the
	// client's metadata cache, which keeps the broker list of its first
	// answer (a broker that unfenced later would never show up).
	c.WaitFor(t, 30*time.Second, func() bool {
		req := kmsg.NewPtrMetadataRequest()
		req.Topics = []kmsg.MetadataRequestTopic{}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return false
		}
		listed := map[int32]bool{}
		for _, b := range resp.Brokers {
			listed[b.NodeID] = true
		}
		for _, r := range replicas {
			if !listed[r] {
				return false
			}
		}
		return true
	}, fmt.Sprintf("brokers %v in metadata", replicas))
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = topic
	rt.NumPartitions, rt.ReplicationFactor = -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, replicas
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	for k, v := range configs {
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, cfg)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err == nil && len(resp.Topics) != 1 {
		err = fmt.Errorf("%d topics in the response", len(resp.Topics))
	}
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("create topic %s on %v: %v", topic, replicas, err)
	}
}

// leadWithFullISR waits until partition 0 of topic has a full ISR and then,
// if node id (its preferred replica) does not lead it, runs a preferred
// leader election: a replica that registered late may have missed the
// leadership at creation.
func leadWithFullISR(t *testing.T, c *testutil.Cluster, topic string, id int32) PartitionState {
	t.Helper()
	st := WaitPartition(t, c, topic, 0, 30*time.Second, PartitionState.FullISR, "a full ISR")
	if st.Leader == id {
		return st
	}
	t.Logf("%s[0] is led by %d, not its preferred replica %d: electing it", topic, st.Leader, id)
	c.WaitFor(t, 30*time.Second, func() bool {
		res, err := kadm.NewClient(c.Client(t)).ElectLeaders(t.Context(), kadm.ElectPreferredReplica, kadm.TopicsSet{topic: {0: {}}})
		if err != nil {
			return false
		}
		r, ok := res[topic][0]
		return ok && (r.Err == nil || errors.Is(r.Err, kerr.ElectionNotNeeded))
	}, "a preferred leader election")
	return WaitPartition(t, c, topic, 0, 30*time.Second, func(s PartitionState) bool { return s.Leader == id && s.FullISR() },
		fmt.Sprintf("node %d leading with a full ISR", id))
}

// endOffset is partition 0's end offset (its high watermark) as cl's
// broker answers it.
func endOffset(ctx context.Context, t *testing.T, cl *kgo.Client, topic string) int64 {
	t.Helper()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("list end offsets of %s: %v", topic, err)
	}
	o, ok := ends.Lookup(topic, 0)
	if !ok || o.Err != nil {
		t.Fatalf("end offset of %s[0]: %v", topic, o.Err)
	}
	return o.Offset
}

// produceRaw sends one Produce request with one record to the seed broker
// of cl (no retries, no idempotence) and returns the partition's error code.
func produceRaw(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, value string) int16 {
	t.Helper()
	req, err := produceRequest(topic, 5*time.Second, value)
	if err != nil {
		t.Fatal(err)
	}
	seeds := cl.SeedBrokers()
	if len(seeds) != 1 {
		t.Fatalf("produceRaw wants a client with one seed broker, it has %d", len(seeds))
	}
	resp, err := seeds[0].Request(ctx, req)
	if err != nil {
		t.Fatalf("produce request: %v", err)
	}
	pr, err := onePartition(resp)
	if err != nil {
		t.Fatal(err)
	}
	return pr.ErrorCode
}

// produceRequest is a Produce request of one record with value to
// partition 0 of topic, outside any producer id. Its acks are the client's:
// franz-go sets a Produce request's acks from its RequiredAcks option (all,
// by default) when it sends it.
func produceRequest(topic string, timeout time.Duration, value string) (*kmsg.ProduceRequest, error) {
	now := time.Now().UnixMilli()
	b, err := batch.Build(batch.Header{
		LastOffsetDelta: 0, BaseTimestamp: now, MaxTimestamp: now,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
	}, []batch.Record{{Value: []byte(value)}}, batch.CodecNone)
	if err != nil {
		return nil, err
	}
	req := kmsg.NewPtrProduceRequest()
	req.TimeoutMillis = int32(timeout / time.Millisecond)
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = 0
	rp.Records = b
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req, nil
}

// onePartition is the only partition of a Produce response.
func onePartition(resp kmsg.Response) (*kmsg.ProduceResponseTopicPartition, error) {
	pr := resp.(*kmsg.ProduceResponse)
	if len(pr.Topics) != 1 || len(pr.Topics[0].Partitions) != 1 {
		return nil, fmt.Errorf("produce response has %d topics, want 1 with 1 partition", len(pr.Topics))
	}
	return &pr.Topics[0].Partitions[0], nil
}
