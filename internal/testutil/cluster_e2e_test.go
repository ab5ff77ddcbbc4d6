package testutil

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// partitionState reads a topic's partitions from a broker's metadata.
func partitionState(ctx context.Context, adm *kadm.Client, topic string) (kadm.PartitionDetails, error) {
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return nil, err
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil {
		return nil, fmt.Errorf("topic %s: %v", topic, td.Err)
	}
	return td.Partitions, nil
}

// brokerCount is how many brokers an uncached Metadata request lists (-1
// on error). kadm's BrokerMetadata answers from the client's broker list,
// which a client without topics refreshes only every metadata.max.age (5
// minutes): a first answer from a broker that had not seen every
// registration yet would be repeated until the wait times out.
func brokerCount(ctx context.Context, cl *kgo.Client) int {
	m, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		return -1
	}
	return len(m.Brokers)
}

// fullyReplicated reports whether every partition of topic has a leader and
// an ISR of rf replicas.
func fullyReplicated(ctx context.Context, adm *kadm.Client, topic string, partitions, rf int) bool {
	ps, err := partitionState(ctx, adm, topic)
	if err != nil || len(ps) != partitions {
		return false
	}
	for _, p := range ps {
		if p.Err != nil || p.Leader < 0 || len(p.Replicas) != rf || len(p.ISR) != rf {
			return false
		}
	}
	return true
}

// produceN produces n records with acks=all and returns their values.
func produceN(ctx context.Context, t *testing.T, cl *kgo.Client, topic, prefix string, n int) []string {
	t.Helper()
	var values []string
	for i := range n {
		v := fmt.Sprintf("%s-%d", prefix, i)
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
		values = append(values, v)
	}
	return values
}

// consumeAll reads topic from the start until it has every value of want.
func consumeAll(ctx context.Context, t *testing.T, c *Cluster, topic string, want []string) {
	t.Helper()
	cl := c.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]bool{}
	for len(seen) < len(want) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records: %v", len(seen), len(want), ctx.Err())
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s[%d]: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}
	for _, v := range want {
		if !seen[v] {
			t.Fatalf("record %s was acknowledged but not consumed", v)
		}
	}
}

// Three real nodes form a cluster: a topic with replication factor 3 gets a
// leader and a full ISR on every partition, and what is produced with
// acks=all is consumed back.
func TestClusterThreeNodesReplicate(t *testing.T) {
	c := StartCluster(t, ClusterOptions{Nodes: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl := c.Client(t)
	adm := kadm.NewClient(cl)
	c.WaitFor(t, 30*time.Second, func() bool {
		return brokerCount(ctx, cl) == 3
	}, "three brokers in metadata")

	resp, err := adm.CreateTopic(ctx, 3, 3, nil, "replicated")
	if err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	c.WaitFor(t, 30*time.Second, func() bool { return fullyReplicated(ctx, adm, "replicated", 3, 3) },
		"every partition to have a leader and an ISR of 3")
	ps, err := partitionState(ctx, adm, "replicated")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if r := slices.Sorted(slices.Values(p.Replicas)); !slices.Equal(r, []int32{1, 2, 3}) {
			t.Errorf("partition %d: replicas %v, want 1,2,3", p.Partition, p.Replicas)
		}
	}

	want := produceN(ctx, t, c.Client(t, kgo.RequiredAcks(kgo.AllISRAcks())), "replicated", "v", 100)
	consumeAll(ctx, t, c, "replicated", want)
}

// Killing the leader of a replicated partition moves leadership to another
// ISR member without losing an acknowledged record, and the old leader
// catches up and rejoins the ISR after a restart.
func TestClusterLeaderKilled(t *testing.T) {
	c := StartCluster(t, ClusterOptions{Nodes: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cl := c.Client(t)
	adm := kadm.NewClient(cl)
	c.WaitFor(t, 30*time.Second, func() bool {
		return brokerCount(ctx, cl) == 3
	}, "three brokers in metadata")
	if resp, err := adm.CreateTopic(ctx, 1, 3, nil, "failover"); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	c.WaitFor(t, 30*time.Second, func() bool { return fullyReplicated(ctx, adm, "failover", 1, 3) }, "a full ISR")
	before := produceN(ctx, t, c.Client(t, kgo.RequiredAcks(kgo.AllISRAcks())), "failover", "before", 50)

	ps, err := partitionState(ctx, adm, "failover")
	if err != nil {
		t.Fatal(err)
	}
	old := ps[0].Leader
	c.Node(old).Kill()

	// A client seeded with the survivors sees a new leader.
	survivors := kadm.NewClient(c.Client(t))
	c.WaitFor(t, 30*time.Second, func() bool {
		ps, err := partitionState(ctx, survivors, "failover")
		return err == nil && ps[0].Leader >= 0 && ps[0].Leader != old
	}, "a new leader")
	after := produceN(ctx, t, c.Client(t, kgo.RequiredAcks(kgo.AllISRAcks())), "failover", "after", 50)
	consumeAll(ctx, t, c, "failover", append(before, after...))

	c.Node(old).Start()
	c.WaitFor(t, 60*time.Second, func() bool { return fullyReplicated(ctx, survivors, "failover", 1, 3) },
		"the restarted node back in the ISR")
}
