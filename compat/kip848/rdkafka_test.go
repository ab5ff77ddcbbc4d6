// Package kip848 checks KIP-848 consumer groups with librdkafka: confluent-kafka-go v2 links
// the librdkafka it bundles (2.11.x, whose group.protocol=consumer is a "preview"); Debian's
// librdkafka 2.0.2 predates KIP-848. The franz-go tests are in internal/api.
package kip848_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
)

// Two librdkafka consumers with group.protocol=consumer share six partitions without
// overlap, a third takes its share, and all the records are read exactly once while the
// group is stable.
func TestLibrdkafkaConsumerProtocol(t *testing.T) {
	b := testutil.StartBroker(t, "group.initial.rebalance.delay.ms=0", "offsets.topic.num.partitions=5",
		"group.consumer.session.timeout.ms=6000", "group.consumer.min.session.timeout.ms=6000",
		"group.consumer.heartbeat.interval.ms=200", "group.consumer.min.heartbeat.interval.ms=200")
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.DefaultProduceTopic("six"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 6, 1, nil, "six"); err != nil {
		t.Fatal(err)
	}
	const n = 120
	for i := 0; i < n; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	_, lib := kafka.LibraryVersion()
	t.Logf("librdkafka %s", lib)

	type consumer struct {
		c    *kafka.Consumer
		seen map[string]int
	}
	start := func(name string) *consumer {
		c, err := kafka.NewConsumer(&kafka.ConfigMap{
			"bootstrap.servers": b.Addr(), "group.id": "rdk848", "group.protocol": "consumer", "client.id": name,
			"auto.offset.reset": "earliest", "log_level": 3,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Subscribe("six", nil); err != nil {
			t.Fatal(err)
		}
		x := &consumer{c: c, seen: map[string]int{}}
		t.Cleanup(func() { x.c.Close() })
		return x
	}
	poll := func(cs ...*consumer) {
		for _, c := range cs {
			if ev := c.c.Poll(20); ev != nil {
				if m, ok := ev.(*kafka.Message); ok {
					c.seen[fmt.Sprintf("%d@%d", m.TopicPartition.Partition, m.TopicPartition.Offset)]++
				}
			}
		}
	}
	parts := func(c *consumer) []int32 {
		a, err := c.c.Assignment()
		if err != nil {
			t.Fatal(err)
		}
		var ps []int32
		for _, tp := range a {
			ps = append(ps, tp.Partition)
		}
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		return ps
	}
	balanced := func(what string, cs ...*consumer) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			poll(cs...)
			owner := map[int32]int{}
			ok := true
			var desc []string
			for i, c := range cs {
				ps := parts(c)
				desc = append(desc, fmt.Sprint(ps))
				if len(ps) != 6/len(cs) {
					ok = false
				}
				for _, p := range ps {
					if _, dup := owner[p]; dup {
						t.Fatalf("%s: partition %d assigned twice: %v", what, p, desc)
					}
					owner[p] = i
				}
			}
			if ok && len(owner) == 6 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not balanced: %v", what, desc)
			}
		}
	}
	c1, c2 := start("c1"), start("c2")
	balanced("two members", c1, c2)
	deadline := time.Now().Add(20 * time.Second)
	for len(c1.seen)+len(c2.seen) < n && time.Now().Before(deadline) {
		poll(c1, c2)
	}
	for k, v := range c1.seen {
		if v > 1 || c2.seen[k] > 0 {
			t.Fatalf("record %s read %d + %d times", k, v, c2.seen[k])
		}
	}
	if got := len(c1.seen) + len(c2.seen); got != n {
		t.Fatalf("read %d records, want %d", got, n)
	}
	c3 := start("c3")
	balanced("three members", c1, c2, c3)

	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{"rdk848"}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if g := resp.Groups[0]; g.ErrorCode != 0 || g.State != "Stable" || len(g.Members) != 3 {
		t.Fatalf("ConsumerGroupDescribe: %+v", g)
	}
}
