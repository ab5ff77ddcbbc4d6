package cluster

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/internal/testutil"
)

// One three-node cluster goes through the control plane's life in order:
// it forms, loses its active controller, loses one controller while clients
// produce, and restarts as a whole. Each step starts from the state the
// previous one left, so a failed step ends the test.
func TestControlPlane(t *testing.T) {
	c := testutil.StartCluster(t, testutil.ClusterOptions{Nodes: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	all := []int32{1, 2, 3}
	var acked *ackLog // records acknowledged by the data-plane step, read back after the restart

	steps := []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"Forms", func(t *testing.T) {
			// Every node answers Metadata and DescribeCluster with the three brokers and
			// the controller the quorum itself names as active.
			leader := waitLeader(ctx, t, quorumClients(t, c), 30*time.Second)
			v := waitSameView(ctx, t, nodeClients(t, c), 30*time.Second, func(v clusterView) error {
				return wantBrokersController(v, all, leader)
			})
			if v.ClusterID != c.ClusterID() {
				t.Fatalf("cluster id %q, the nodes were formatted with %q", v.ClusterID, c.ClusterID())
			}
			t.Logf("formed: %v; active controller %d", v, leader)
		}},

		{"ActiveControllerKilled", func(t *testing.T) {
			old := waitLeader(ctx, t, quorumClients(t, c), 10*time.Second)
			survivors := without(all, old)
			c.Node(old).Kill()
			killed := time.Now()
			qcls := quorumClients(t, c) // the survivors' CONTROLLER listeners
			var leader int32
			elected := waitFor(t, 15*time.Second, "a new active controller", func() bool {
				l, err := agreedLeader(ctx, qcls)
				leader = l
				return err == nil && l != old
			})
			cls := nodeClients(t, c)
			named := waitFor(t, 15*time.Second, "every survivor's Metadata to name the new controller", func() bool {
				for _, cl := range cls {
					if v, err := viewOf(ctx, cl); err != nil || v.MetaController != leader || v.DescribeController != leader {
						return false
					}
				}
				return true
			}) + elected
			v := waitSameView(ctx, t, cls, 15*time.Second, func(v clusterView) error {
				return wantBrokersController(v, survivors, leader)
			})
			t.Logf("controller %d killed: controller %d active after %v, named by every survivor's Metadata and DescribeCluster after %v, broker %d fenced after %v",
				old, leader, elected, named, old, time.Since(killed))
			if elected > 3*time.Second {
				t.Errorf("a new controller took %v to be elected; want about a second", elected)
			}

			// Topic creation goes through whichever survivor is asked.
			topics := map[string]int32{}
			for _, id := range survivors {
				name := fmt.Sprintf("after-failover-%d", id)
				if err := createTopic(ctx, cls[id], name, 2, 2, nil); err != nil {
					t.Fatalf("create %s through node %d: %v", name, id, err)
				}
				topics[name] = id
			}
			for name := range topics {
				waitFor(t, 15*time.Second, name+" fully replicated", func() bool {
					return fullyReplicated(ctx, cls[survivors[0]], name, 2, 2)
				})
			}

			// The killed node comes back and every node shows the same metadata.
			c.Node(old).Start()
			back := time.Now()
			cls = nodeClients(t, c)
			v = waitSameView(ctx, t, cls, 30*time.Second, func(v clusterView) error {
				for name := range topics {
					if _, ok := v.Topics[name]; !ok {
						return fmt.Errorf("topic %s missing", name)
					}
				}
				return wantBrokers(v, all)
			})
			l := waitLeader(ctx, t, quorumClients(t, c), 10*time.Second)
			if v.MetaController != l {
				t.Errorf("brokers name controller %d, the quorum %d", v.MetaController, l)
			}
			t.Logf("node %d rejoined after %v: %v", old, time.Since(back), v)
		}},

		{"MinorityDownDataPlane", func(t *testing.T) {
			const topic = "data"
			cls := nodeClients(t, c)
			if err := createTopic(ctx, cls[1], topic, 3, 3, map[string]string{"min.insync.replicas": "2"}); err != nil {
				t.Fatal(err)
			}
			for _, id := range all {
				waitFor(t, 20*time.Second, fmt.Sprintf("node %d to see %s fully replicated", id, topic), func() bool {
					return fullyReplicated(ctx, cls[id], topic, 3, 3)
				})
			}
			acked = newAckLog()
			p := startProducer(ctx, t, c, topic, acked)
			waitFor(t, 15*time.Second, "acknowledgements before the outage", func() bool { return acked.count() >= 200 })

			// Kill a controller that is not the active one: the quorum keeps its
			// majority. It leads some partitions of the topic, which move.
			leader := waitLeader(ctx, t, quorumClients(t, c), 10*time.Second)
			victim := without(all, leader)[0]
			c.Node(victim).Kill()
			killed := time.Now()
			before := acked.count()
			stall := waitFor(t, 30*time.Second, "acknowledgements during the outage", func() bool {
				return acked.countSince(killed) >= 300
			})
			// Consumers read everything acknowledged so far while the node is down.
			snapshot := acked.values()
			consumeAll(ctx, t, c, topic, snapshot, 0)
			during := acked.countSince(killed)
			c.Node(victim).Start()
			restarted := time.Now()
			p.stop()
			t.Logf("node %d (not the active controller %d) killed: %d records acknowledged before, %d during the outage (300 within %v), %d failed; consumers read %d",
				victim, leader, before, during, stall, p.failed(), len(snapshot))
			if during == 0 {
				t.Fatal("no record acknowledged while one node of three was down")
			}
			waitFor(t, 30*time.Second, fmt.Sprintf("node %d back in every ISR", victim), func() bool {
				return fullyReplicated(ctx, cls[leader], topic, 3, 3)
			})
			t.Logf("node %d back in every ISR %v after its restart", victim, time.Since(restarted))
		}},

		{"RestartAll", func(t *testing.T) {
			cls := nodeClients(t, c)
			before := waitSameView(ctx, t, cls, 20*time.Second, func(v clusterView) error { return wantBrokers(v, all) })
			names := slices.Sorted(maps.Keys(before.Topics))
			// Dynamic topic configs set with IncrementalAlterConfigs.
			set := map[string]map[string]string{
				"data":             {"retention.ms": "3600000", "max.message.bytes": "500000"},
				"after-failover-1": {"cleanup.policy": "compact"},
			}
			if _, ok := before.Topics["after-failover-1"]; !ok { // node 1 was the first controller killed
				set["after-failover-2"] = set["after-failover-1"]
				delete(set, "after-failover-1")
			}
			adm := kadm.NewClient(cls[1])
			for _, topic := range slices.Sorted(maps.Keys(set)) {
				var alter []kadm.AlterConfig
				for _, k := range slices.Sorted(maps.Keys(set[topic])) {
					alter = append(alter, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: kadm.StringPtr(set[topic][k])})
				}
				resps, err := adm.AlterTopicConfigs(ctx, alter, topic)
				if err == nil {
					for _, r := range resps {
						if r.Err != nil {
							err = fmt.Errorf("%w: %s", r.Err, r.ErrMessage)
						}
					}
				}
				if err != nil {
					t.Fatalf("alter configs of %s: %v", topic, err)
				}
			}
			var configs map[string]map[string]string
			for _, id := range all {
				waitFor(t, 15*time.Second, fmt.Sprintf("node %d to show the new configs", id), func() bool {
					got, err := topicConfigs(ctx, cls[id], names)
					if err != nil || !containsConfigs(got, set) {
						return false
					}
					if configs == nil {
						configs = got
					}
					return reflect.DeepEqual(got, configs)
				})
			}
			ends, err := kadm.NewClient(c.Client(t)).ListEndOffsets(ctx, "data")
			if err != nil || ends.Error() != nil {
				t.Fatalf("end offsets: %v %v", err, ends.Error())
			}
			var total int64
			ends.Each(func(o kadm.ListedOffset) { total += o.Offset })

			start := time.Now()
			var wg sync.WaitGroup
			errs := make([]error, len(all))
			for i, id := range all {
				wg.Go(func() { errs[i] = c.Node(id).Stop() })
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Errorf("node %d did not stop cleanly on SIGTERM: %v", all[i], err)
				}
			}
			stopped := time.Since(start)
			start = time.Now()
			for _, id := range all {
				c.Node(id).Start()
			}
			cls = nodeClients(t, c)
			after := waitSameView(ctx, t, cls, 60*time.Second, func(v clusterView) error {
				if err := wantBrokers(v, all); err != nil {
					return err
				}
				if len(v.Topics) < len(before.Topics) {
					return fmt.Errorf("%d topics, want %d", len(v.Topics), len(before.Topics))
				}
				return nil
			})
			t.Logf("all nodes stopped in %v, back with a common view in %v: %v", stopped, time.Since(start), after)
			if !reflect.DeepEqual(after.Topics, before.Topics) {
				t.Errorf("topics changed across the restart:\nbefore %v\nafter  %v", before, after)
			}
			for _, id := range all {
				got, err := topicConfigs(ctx, cls[id], names)
				if err != nil {
					t.Fatalf("node %d: describe configs: %v", id, err)
				}
				if !reflect.DeepEqual(got, configs) {
					t.Errorf("node %d: topic configs after the restart %v, before %v", id, got, configs)
				}
			}

			// The data is readable: every acknowledged record and as many records as
			// the partitions held.
			waitFor(t, 30*time.Second, "data fully replicated after the restart", func() bool {
				return fullyReplicated(ctx, cls[1], "data", 3, 3)
			})
			n := consumeAll(ctx, t, c, "data", acked.values(), int(total))
			if int64(n) < total {
				t.Errorf("read %d records after the restart, the partitions held %d before", n, total)
			}
			t.Logf("read back %d records (%d acknowledged) after the restart", n, acked.count())
		}},
	}
	for _, s := range steps {
		if !t.Run(s.name, s.fn) {
			return
		}
	}
}

// wantBrokers checks v lists exactly brokers (sorted).
func wantBrokers(v clusterView, brokers []int32) error {
	if !slices.Equal(v.MetaBrokers, brokers) {
		return fmt.Errorf("brokers %v, want %v", v.MetaBrokers, brokers)
	}
	return nil
}

// wantBrokersController checks v lists exactly brokers and names
// controller.
func wantBrokersController(v clusterView, brokers []int32, controller int32) error {
	if err := wantBrokers(v, brokers); err != nil {
		return err
	}
	if v.MetaController != controller {
		return fmt.Errorf("controller %d, the quorum's active controller is %d", v.MetaController, controller)
	}
	return nil
}

// without returns ids without id, in order.
func without(ids []int32, id int32) []int32 {
	return slices.DeleteFunc(slices.Clone(ids), func(x int32) bool { return x == id })
}

// topicConfigs returns the dynamically set configs of topics, as the node
// behind cl describes them.
func topicConfigs(ctx context.Context, cl *kgo.Client, topics []string) (map[string]map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	rcs, err := kadm.NewClient(cl).DescribeTopicConfigs(ctx, topics...)
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]string{}
	for _, rc := range rcs {
		if rc.Err != nil {
			return nil, fmt.Errorf("%s: %w", rc.Name, rc.Err)
		}
		for _, cfg := range rc.Configs {
			if cfg.Source != 1 { // DYNAMIC_TOPIC_CONFIG
				continue
			}
			if out[rc.Name] == nil {
				out[rc.Name] = map[string]string{}
			}
			out[rc.Name][cfg.Key] = cfg.MaybeValue()
		}
	}
	return out, nil
}

// containsConfigs reports whether got has every config of want.
func containsConfigs(got, want map[string]map[string]string) bool {
	for topic, cfg := range want {
		for k, v := range cfg {
			if got[topic][k] != v {
				return false
			}
		}
	}
	return true
}

// ackLog records the values a producer got acknowledged and when.
type ackLog struct {
	mu struct {
		sync.Mutex
		at map[string]time.Time
	}
}

func newAckLog() *ackLog {
	a := &ackLog{}
	a.mu.at = map[string]time.Time{}
	return a
}

func (a *ackLog) add(v string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.mu.at[v] = time.Now()
}

func (a *ackLog) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.mu.at)
}

// countSince is how many records were acknowledged after t.
func (a *ackLog) countSince(t time.Time) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, at := range a.mu.at {
		if at.After(t) {
			n++
		}
	}
	return n
}

func (a *ackLog) values() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Collect(maps.Keys(a.mu.at))
}

// producer produces numbered records with acks=all until stopped.
type producer struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     struct {
		sync.Mutex
		failed int
	}
}

// startProducer produces to topic with acks=all, at most 50 records in
// flight, logging acknowledged values in acked.
func startProducer(ctx context.Context, t testing.TB, c *testutil.Cluster, topic string, acked *ackLog) *producer {
	cl := c.Client(t, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(20*time.Second), kgo.ProducerLinger(time.Millisecond))
	ctx, cancel := context.WithCancel(ctx)
	p := &producer{cancel: cancel, done: make(chan struct{})}
	sem := make(chan struct{}, 50)
	go func() {
		defer close(p.done)
		var wg sync.WaitGroup
		defer wg.Wait()
		for i := 0; ; i++ {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			v := fmt.Sprintf("r-%d", i)
			wg.Add(1)
			cl.Produce(ctx, &kgo.Record{Value: []byte(v)}, func(_ *kgo.Record, err error) {
				defer wg.Done()
				<-sem
				if err == nil {
					acked.add(v)
					return
				}
				if ctx.Err() == nil {
					p.mu.Lock()
					p.mu.failed++
					p.mu.Unlock()
				}
			})
		}
	}()
	t.Cleanup(p.stop)
	return p
}

// stop stops producing and waits for every record in flight.
func (p *producer) stop() {
	p.cancel()
	<-p.done
}

func (p *producer) failed() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.failed
}

// consumeAll reads topic from the start with a client of the running
// brokers until it has seen every value of want and read at least atLeast
// records, and returns how many records it read.
func consumeAll(ctx context.Context, t testing.TB, c *testutil.Cluster, topic string, want []string, atLeast int) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cl := c.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]bool{}
	read := 0
	missing := func() int {
		n := 0
		for _, v := range want {
			if !seen[v] {
				n++
			}
		}
		return n
	}
	for missing() > 0 || read < atLeast {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s: %d of %d acknowledged records never consumed (read %d, want at least %d)", topic, missing(), len(want), read, atLeast)
		}
		fs.EachRecord(func(r *kgo.Record) {
			read++
			seen[string(r.Value)] = true
		})
	}
	return read
}
