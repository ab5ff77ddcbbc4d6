package replication

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/embed"
)

// Kafka's replication throttle on a reassignment's new replica, configured as
// kafka-reassign-partitions.sh --throttle does: the rates are dynamic broker configs
// (leader.replication.throttled.rate on the brokers that lead, follower.replication.throttled.rate
// on the broker that receives the replica) and the replicas they apply to are topic configs
// (leader.replication.throttled.replicas, follower.replication.throttled.replicas; "*" is
// every replica). On each side alone, the bytes the new replica holds stay within the rate
// times the time since the reassignment started, plus the bucket's one-second burst and one
// fetch's worth; the copy still completes. The rates are not topic configs: setting one on
// a topic is INVALID_CONFIG.
func TestReplicationThrottleBoundsNewReplica(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := embed.StartCluster(ctx, 3, embed.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.ProducerBatchMaxBytes(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	// The observed misconfiguration: a rate set as a topic config is refused, not ignored.
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "throttle-misconfigured"); err != nil {
		t.Fatal(err)
	}
	rate1 := "1"
	res, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "leader.replication.throttled.rate", Value: &rate1}}, "throttle-misconfigured")
	if err == nil && len(res) == 1 {
		err = res[0].Err // kadm answers each resource's error here, not as err
	}
	if !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("leader.replication.throttled.rate as a topic config: %v, want INVALID_CONFIG", err)
	}

	const (
		rate       = 1 << 20  // bytes per second
		fetchBytes = 1 << 20  // replica.fetch.max.bytes: what one fetch may bring
		record     = 50 << 10 // bytes of each record's value
		records    = 100      // about 5 MiB in all
	)
	for _, tc := range []struct {
		side    string
		brokers []int32 // where the rate is set
	}{
		{"leader", []int32{1, 2}},
		{"follower", []int32{3}},
	} {
		t.Run(tc.side, func(t *testing.T) {
			topic := "throttle-" + tc.side
			createOn(ctx, t, cl, topic, 1, 2)
			value := make([]byte, record)
			for i := range records {
				rand.Read(value) // incompressible: the bytes copied are the bytes produced
				if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: value}).FirstErr(); err != nil {
					t.Fatalf("record %d: %v", i, err)
				}
			}
			total := waitReplicated(ctx, t, adm, topic, []int32{1, 2})

			rateKey, replicasKey := tc.side+".replication.throttled.rate", tc.side+".replication.throttled.replicas"
			r, all := strconv.Itoa(rate), "*"
			alter(t, "broker", func() (kadm.AlterConfigsResponses, error) {
				return adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: rateKey, Value: &r}}, tc.brokers...)
			})
			alter(t, "topic", func() (kadm.AlterConfigsResponses, error) {
				return adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: replicasKey, Value: &all}}, topic)
			})
			defer func() { // remove the throttle, as --verify does once a reassignment is done
				alter(t, "broker", func() (kadm.AlterConfigsResponses, error) {
					return adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: rateKey}}, tc.brokers...)
				})
			}()
			// The configs reach every broker through the metadata log; a describe of each
			// broker that enforces the rate shows it once that broker has it.
			for _, b := range tc.brokers {
				waitBrokerConfig(ctx, t, adm, b, rateKey, r)
			}
			waitTopicConfig(ctx, t, adm, topic, replicasKey, all)

			start := time.Now()
			ares, err := adm.AlterPartitionAssignments(ctx, kadm.AlterPartitionAssignmentsReq{topic: {0: {1, 2, 3}}})
			if err == nil {
				err = ares.Error()
			}
			if err != nil {
				t.Fatalf("reassigning %s-0 to [1 2 3]: %v", topic, err)
			}
			// Sample the new replica's size until it holds everything. Each sample is taken
			// before the elapsed time is read, so the bound is never too tight.
			deadline := time.Now().Add(60 * time.Second)
			samples := 0
			for {
				size := replicaSize(ctx, t, adm, 3, topic)
				elapsed := time.Since(start)
				bound := int64(elapsed.Seconds()*rate) + rate + fetchBytes
				samples++
				if size > bound {
					t.Fatalf("the new replica holds %d bytes %v after the reassignment started, over the %s throttle's bound %d (%d B/s)", size, elapsed, tc.side, bound, rate)
				}
				if size >= total {
					t.Logf("%s throttle: %d bytes copied in %v (%d samples)", tc.side, size, elapsed, samples)
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the new replica holds %d of %d bytes 60 s after the reassignment started", size, total)
				}
				time.Sleep(50 * time.Millisecond) // sampling the copy's progress
			}
			waitReplicated(ctx, t, adm, topic, []int32{1, 2, 3})
		})
	}
}

// createOn creates topic with one partition on replicas.
func createOn(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, replicas ...int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, replicas
	rt.ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{ra}
	req.Topics = []kmsg.CreateTopicsRequestTopic{rt}
	res, err := req.RequestWith(ctx, cl)
	if err == nil && len(res.Topics) == 1 {
		err = kerr.ErrorForCode(res.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("creating %s on %v: %v", topic, replicas, err)
	}
}

// waitReplicated waits until partition 0 of topic has exactly replicas, all in the ISR and
// of one size, and returns that size.
func waitReplicated(ctx context.Context, t *testing.T, adm *kadm.Client, topic string, replicas []int32) int64 {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		md, err := adm.Metadata(ctx, topic)
		var state string
		if err == nil {
			p := md.Topics[topic].Partitions[0]
			state = fmt.Sprintf("replicas %v, ISR %v", p.Replicas, p.ISR)
			isr := slices.Sorted(slices.Values(p.ISR))
			if slices.Equal(p.Replicas, replicas) && slices.Equal(isr, replicas) {
				sizes := map[int64]bool{}
				for _, b := range replicas {
					sizes[replicaSize(ctx, t, adm, b, topic)] = true
				}
				if len(sizes) == 1 {
					for s := range sizes {
						return s
					}
				}
				state += fmt.Sprintf(", sizes %v", sizes)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s-0 not on %v in sync after 60 s: %s (%v)", topic, replicas, state, err)
		}
		time.Sleep(50 * time.Millisecond) // polling for replication
	}
}

// replicaSize is the bytes of broker's replica of partition 0 of topic (0 if it has none).
func replicaSize(ctx context.Context, t *testing.T, adm *kadm.Client, broker int32, topic string) int64 {
	t.Helper()
	ds, err := adm.DescribeBrokerLogDirs(ctx, broker, kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		t.Fatalf("describing broker %d's log dirs: %v", broker, err)
	}
	p, ok := ds.LookupPartition(topic, 0)
	if !ok {
		return 0
	}
	return p.Size
}

func alter(t *testing.T, what string, fn func() (kadm.AlterConfigsResponses, error)) {
	t.Helper()
	res, err := fn()
	if err == nil {
		for _, r := range res {
			if r.Err != nil {
				err = fmt.Errorf("%s %s: %w (%s)", what, r.Name, r.Err, r.ErrMessage)
				break
			}
		}
	}
	if err != nil {
		t.Fatalf("altering %s configs: %v", what, err)
	}
}

func waitBrokerConfig(ctx context.Context, t *testing.T, adm *kadm.Client, broker int32, key, want string) {
	t.Helper()
	waitConfig(t, fmt.Sprintf("broker %d's %s", broker, key), want, func() (kadm.ResourceConfigs, error) {
		return adm.DescribeBrokerConfigs(ctx, broker)
	}, key)
}

func waitTopicConfig(ctx context.Context, t *testing.T, adm *kadm.Client, topic, key, want string) {
	t.Helper()
	waitConfig(t, topic+"'s "+key, want, func() (kadm.ResourceConfigs, error) {
		return adm.DescribeTopicConfigs(ctx, topic)
	}, key)
}

func waitConfig(t *testing.T, what, want string, describe func() (kadm.ResourceConfigs, error), key string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		rcs, err := describe()
		got := ""
		if err == nil {
			for _, rc := range rcs {
				for _, cf := range rc.Configs {
					if cf.Key == key && cf.Value != nil {
						got = *cf.Value
					}
				}
			}
			if got == want {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is %q after 20 s, want %q (%v)", what, got, want, err)
		}
		time.Sleep(50 * time.Millisecond) // polling for the config to be applied
	}
}

// An in-sync replica is never throttled, on either side, as in Kafka ("to avoid ISR
// thrashing", ReplicaManager.shouldLeaderThrottle and the follower's shouldFollowerThrottle):
// with a rate of 1 B/s over every replica of a topic, acks=all writes of megabytes still
// complete with both replicas in sync, and the follower holds all of them.
func TestReplicationThrottleSparesInSyncReplicas(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Kafka's replica.lag.time.max.ms (embed shortens it): a stalled follower stays in the
	// ISR past the writes' deadline, so acks=all can only complete through it.
	c, err := embed.StartCluster(ctx, 3, embed.Options{Config: map[string]string{"replica.lag.time.max.ms": "30000"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.ProducerBatchMaxBytes(1<<20), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for _, side := range []string{"leader", "follower"} {
		t.Run(side, func(t *testing.T) {
			topic := "insync-" + side
			createOn(ctx, t, cl, topic, 1, 2)
			waitReplicated(ctx, t, adm, topic, []int32{1, 2})
			rateKey, replicasKey := side+".replication.throttled.rate", side+".replication.throttled.replicas"
			one, all := "1", "*"
			alter(t, "broker", func() (kadm.AlterConfigsResponses, error) {
				return adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: rateKey, Value: &one}}, 1, 2)
			})
			defer alter(t, "broker", func() (kadm.AlterConfigsResponses, error) {
				return adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: rateKey}}, 1, 2)
			})
			alter(t, "topic", func() (kadm.AlterConfigsResponses, error) {
				return adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: replicasKey, Value: &all}}, topic)
			})
			for _, b := range []int32{1, 2} {
				waitBrokerConfig(ctx, t, adm, b, rateKey, one)
			}
			waitTopicConfig(ctx, t, adm, topic, replicasKey, all)

			// 4 MiB, several fetches' worth: past the throttle's burst and first fetch. The
			// writes must finish before replica.lag.time.max.ms (30 s) could take the follower
			// out of the ISR and let them complete without it.
			pctx, pcancel := context.WithTimeout(ctx, 20*time.Second)
			defer pcancel()
			value := make([]byte, 50<<10)
			for i := range 80 {
				rand.Read(value)
				if err := cl.ProduceSync(pctx, &kgo.Record{Topic: topic, Value: value}).FirstErr(); err != nil {
					t.Fatalf("acks=all record %d with the in-sync follower under a 1 B/s %s throttle: %v", i, side, err)
				}
			}
			md, err := adm.Metadata(ctx, topic)
			if err != nil {
				t.Fatal(err)
			}
			if isr := slices.Sorted(slices.Values(md.Topics[topic].Partitions[0].ISR)); !slices.Equal(isr, []int32{1, 2}) {
				t.Fatalf("ISR %v after the writes, want [1 2]", isr)
			}
			waitReplicated(ctx, t, adm, topic, []int32{1, 2})
		})
	}
}
