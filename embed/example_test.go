package embed_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/embed"
)

// A single node in the calling process: produce a record and read it back.
func ExampleStart() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	node, err := embed.Start(ctx, embed.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer node.Close() // removes its temporary data directory too

	cl, err := kgo.NewClient(
		kgo.SeedBrokers(node.Addr()),
		kgo.AllowAutoTopicCreation(), // franz-go creates topics only when asked to
		kgo.DefaultProduceTopic("greetings"),
		kgo.ConsumeTopics("greetings"),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()

	if err := cl.ProduceSync(ctx, kgo.StringRecord("hello, Gregor")).FirstErr(); err != nil {
		log.Fatal(err)
	}
	fetches := cl.PollFetches(ctx)
	if err := fetches.Err(); err != nil {
		log.Fatal(err)
	}
	fetches.EachRecord(func(r *kgo.Record) { fmt.Printf("%s[%d]@%d: %s\n", r.Topic, r.Partition, r.Offset, r.Value) })
	// Output: greetings[0]@0: hello, Gregor
}

// A three-node cluster: a topic replicated three times keeps taking and serving records
// while one of its brokers is down, and the broker rejoins when it is restarted.
func ExampleStartCluster() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cluster, err := embed.StartCluster(ctx, 3, embed.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()

	cl, err := kgo.NewClient(
		kgo.SeedBrokers(cluster.Addrs()...),
		kgo.DefaultProduceTopic("orders"),
		kgo.ConsumeTopics("orders"),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	// One partition on all three brokers; min.insync.replicas=2, so an acknowledged
	// record (acks=all, franz-go's default) is on at least two of them.
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, "orders"); err != nil {
		log.Fatal(err)
	}

	produce := func(values ...string) {
		for _, v := range values {
			if err := cl.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err != nil {
				log.Fatal(err)
			}
		}
	}
	consume := func(n int) (got []string) {
		for len(got) < n {
			fetches := cl.PollFetches(ctx)
			if err := fetches.Err(); err != nil {
				log.Fatal(err)
			}
			fetches.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		}
		return got
	}

	produce("order-1", "order-2")
	fmt.Println("all three up:", consume(2))

	if err := cluster.Stop(2); err != nil { // a clean shutdown; its leaderships move
		log.Fatal(err)
	}
	produce("order-3")
	fmt.Println("node 2 down:", consume(1))

	if err := cluster.Restart(2); err != nil {
		log.Fatal(err)
	}
	produce("order-4")
	fmt.Println("node 2 back:", consume(1))
	// Output:
	// all three up: [order-1 order-2]
	// node 2 down: [order-3]
	// node 2 back: [order-4]
}
