package cluster

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
)

// SIGTERM of any node (the first to register, whose broker epoch is 0, and the active
// controller included) moves its leaderships and ISR memberships away before the process
// exits, and ends its session, so its next process registers at once. The session timeout is
// 60 s here: a broker that skipped the controlled shutdown would keep its leadership, and
// its restart would be refused as a duplicate registration, for a minute.
func TestControlledShutdownOfEveryNode(t *testing.T) {
	c := testutil.StartCluster(t, testutil.ClusterOptions{Nodes: 3, Sets: []string{"broker.session.timeout.ms=60000"}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	waitSameView(ctx, t, nodeClients(t, c), 30*time.Second, func(v clusterView) error { return wantBrokers(v, []int32{1, 2, 3}) })
	for _, n := range c.Nodes() {
		others := []int32{}
		for _, o := range c.Nodes() {
			if o.ID != n.ID {
				others = append(others, o.ID)
			}
		}
		topic := fmt.Sprintf("stop-%d", n.ID)
		admin := pinnedClient(t, c.Node(others[0]).ClientAddr())
		if err := createAssignedTopic(ctx, admin, topic, append([]int32{n.ID}, others...)); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, topic+" led by its first replica with a full ISR", func() bool {
			p, err := partitionOf(ctx, admin, topic)
			return err == nil && p.Leader == n.ID && len(p.ISR) == 3
		})

		if err := n.Stop(); err != nil {
			t.Fatalf("SIGTERM of node %d: %v", n.ID, err)
		}
		for _, id := range others {
			cl := pinnedClient(t, c.Node(id).ClientAddr())
			waitFor(t, 20*time.Second, fmt.Sprintf("node %d showing %s led by another node without node %d in the ISR", id, topic, n.ID), func() bool {
				p, err := partitionOf(ctx, cl, topic)
				return err == nil && p.Leader != n.ID && p.Leader >= 0 && !slices.Contains(p.ISR, n.ID)
			})
		}
		// Writes go on with acks=all on the two that are left.
		pr := pinnedClient(t, c.Node(others[0]).ClientAddr(), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RequestRetries(20))
		if err := pr.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
			t.Fatalf("produce after node %d stopped: %v", n.ID, err)
		}

		n.Start()
		waitFor(t, 20*time.Second, fmt.Sprintf("node %d back in the ISR of %s", n.ID, topic), func() bool {
			p, err := partitionOf(ctx, admin, topic)
			return err == nil && len(p.ISR) == 3
		})
	}
}

// partitionOf is partition 0 of topic in the view of the node behind cl.
func partitionOf(ctx context.Context, cl *kgo.Client, topic string) (kmsg.MetadataResponseTopicPartition, error) {
	ps, err := topicPartitions(ctx, cl, topic)
	if err == nil && len(ps) != 1 {
		err = fmt.Errorf("metadata of %s: %d partitions", topic, len(ps))
	}
	if err != nil {
		return kmsg.MetadataResponseTopicPartition{}, err
	}
	return ps[0], nil
}
