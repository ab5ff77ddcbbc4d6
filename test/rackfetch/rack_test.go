// Package rackfetch runs a three-rack cluster of real broker processes and proves that a
// consumer naming its rack reads from the replica in that rack, not from a leader elsewhere
// (KIP-392, replica.selector.class = RackAwareReplicaSelector).
package rackfetch

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/config"
	"github.com/gregor-project/gregor/internal/testutil"
)

// batchesByBroker counts the records a client read, by the broker whose fetch answer carried
// them (franz-go's HookFetchBatchRead).
type batchesByBroker struct {
	mu      sync.Mutex
	records map[int32]int
}

func (b *batchesByBroker) OnFetchBatchRead(meta kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.records[meta.NodeID] += m.NumRecords
}

func (b *batchesByBroker) snapshot() map[int32]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[int32]int{}
	for id, n := range b.records {
		out[id] = n
	}
	return out
}

// Node i is in rack ri. A topic led by node 1 (r1) with replicas on all three nodes is
// consumed by a client in rack r2: every record it reads comes from node 2, the follower in its
// rack, and none from the leader.
func TestConsumerReadsFromReplicaInItsRack(t *testing.T) {
	c := testutil.StartCluster(t, testutil.ClusterOptions{
		Nodes: 3,
		Sets:  []string{"replica.selector.class=" + config.RackAwareReplicaSelector},
		NodeSets: map[int32][]string{
			1: {"broker.rack=r1"},
			2: {"broker.rack=r2"},
			3: {"broker.rack=r3"},
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	admin := c.Client(t)
	c.WaitFor(t, 30*time.Second, func() bool {
		m, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, admin)
		if err != nil || len(m.Brokers) != 3 {
			return false
		}
		for _, b := range m.Brokers {
			if b.Rack == nil || *b.Rack != fmt.Sprintf("r%d", b.NodeID) {
				return false
			}
		}
		return true
	}, "three brokers with their racks in metadata")

	const topic = "racks"
	createAssigned(ctx, t, admin, topic, []int32{1, 2, 3})
	c.WaitFor(t, 30*time.Second, func() bool {
		p, ok := partition0(ctx, admin, topic)
		return ok && p.Leader == 1 && len(p.ISR) == 3
	}, "node 1 leading with an ISR of 3")

	const n = 300
	prod := c.Client(t, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0))
	var rs []*kgo.Record
	for i := range n {
		rs = append(rs, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "v-%d", i)})
	}
	// Several produce requests, so the log holds several batches.
	for i := 0; i < n; i += 50 {
		if err := prod.ProduceSync(ctx, rs[i:i+50]...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}

	hook := &batchesByBroker{records: map[int32]int{}}
	cons := c.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.Rack("r2"), kgo.WithHooks(hook), kgo.FetchMaxBytes(4<<10), kgo.FetchMaxPartitionBytes(4<<10))
	seen := map[string]bool{}
	for len(seen) < n {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records: %v", len(seen), n, ctx.Err())
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s[%d]: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}
	for _, r := range rs {
		if !seen[string(r.Value)] {
			t.Fatalf("record %s was acknowledged but not consumed", r.Value)
		}
	}
	got := hook.snapshot()
	t.Logf("records read by broker: %v (of %d)", got, n)
	if got[2] < n || got[1] != 0 || got[3] != 0 {
		t.Fatalf("records read by broker %v: want all %d from node 2 (rack r2), none from the leader or r3", got, n)
	}
}

// createAssigned creates topic with one partition on replicas, the first its preferred leader.
func createAssigned(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, replicas []int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30_000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	a.Partition, a.Replicas = 0, replicas
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("create topic: %v", err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		t.Fatalf("create topic: %v", err)
	}
}

// partition0 reads partition 0 of topic with an uncached Metadata request.
func partition0(ctx context.Context, cl *kgo.Client, topic string) (kmsg.MetadataResponseTopicPartition, bool) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	m, err := req.RequestWith(ctx, cl)
	if err != nil || len(m.Topics) != 1 || m.Topics[0].ErrorCode != 0 || len(m.Topics[0].Partitions) != 1 {
		return kmsg.MetadataResponseTopicPartition{}, false
	}
	p := m.Topics[0].Partitions[0]
	return p, p.ErrorCode == 0
}
