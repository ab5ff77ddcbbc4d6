package embed_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/embed"
)

// produceOne creates a topic (CreateTopics, replicated rf times) and produces one record to
// it with acks=all, failing b unless it is acknowledged: "ready" means a client can produce.
// (Producing to a topic that does not exist instead would measure the client's metadata
// retry backoff: auto-creation answers the first Metadata request without the topic, as
// Kafka's brokers do, and franz-go asks again 250 ms later.)
func produceOne(b testing.TB, rf int16, bootstrap ...string) {
	b.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...), kgo.DefaultProduceTopic("ready"))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, rf, nil, "ready"); err != nil {
		b.Fatalf("create topic: %v", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		b.Fatalf("produce: %v", err)
	}
}

// BenchmarkStartNode is the start of one node, until Start returns (the node serves).
func BenchmarkStartNode(b *testing.B) {
	for b.Loop() {
		n, err := embed.Start(context.Background(), embed.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := n.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkStartNodeProduce is the start of one node and the first record acknowledged by
// it (a topic created first).
func BenchmarkStartNodeProduce(b *testing.B) {
	for b.Loop() {
		n, err := embed.Start(context.Background(), embed.Options{})
		if err != nil {
			b.Fatal(err)
		}
		produceOne(b, 1, n.Addr())
		b.StopTimer()
		if err := n.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkStartCluster3 is the start of a three-node cluster, until StartCluster returns
// (every node serves).
func BenchmarkStartCluster3(b *testing.B) {
	for b.Loop() {
		c, err := embed.StartCluster(context.Background(), 3, embed.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := c.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkStartCluster3Produce is the start of a three-node cluster and the first record
// acknowledged by it.
func BenchmarkStartCluster3Produce(b *testing.B) {
	for b.Loop() {
		c, err := embed.StartCluster(context.Background(), 3, embed.Options{})
		if err != nil {
			b.Fatal(err)
		}
		produceOne(b, 3, c.Addrs()...)
		b.StopTimer()
		if err := c.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkStopRestart is Stop and then Restart of one node of a three-node cluster, until
// Restart returns (the node serves again).
func BenchmarkStopRestart(b *testing.B) {
	c, err := embed.StartCluster(context.Background(), 3, embed.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	for b.Loop() {
		if err := c.Stop(2); err != nil {
			b.Fatal(err)
		}
		if err := c.Restart(2); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCloseCluster3 is Close of a three-node cluster (every node stopping together).
func BenchmarkCloseCluster3(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		c, err := embed.StartCluster(context.Background(), 3, embed.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := c.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
