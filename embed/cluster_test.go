package embed_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/embed"
	"github.com/gregor-project/gregor/embed/embedtest"
)

// partitionState is partition 0 of topic as one broker's metadata shows it.
type partitionState struct {
	leader int32
	isr    []int32
}

// stateOn asks broker id (its own metadata, not a client's cache) for partition 0 of topic.
func stateOn(ctx context.Context, cl *kgo.Client, id int, topic string) (partitionState, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := req.RequestWith(rctx, cl.Broker(id))
	if err != nil {
		return partitionState{}, err
	}
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return partitionState{}, err
		}
		for _, p := range t.Partitions {
			if p.Partition == 0 {
				return partitionState{leader: p.Leader, isr: p.ISR}, kerr.ErrorForCode(p.ErrorCode)
			}
		}
	}
	return partitionState{}, fmt.Errorf("no partition 0 of %s in broker %d's metadata", topic, id)
}

// waitState polls broker id's view of the partition until ok holds, failing t after a
// deadline with the last state seen.
func waitState(t *testing.T, cl *kgo.Client, id int, topic, what string, ok func(partitionState) bool) partitionState {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	var last partitionState
	var lastErr error
	for {
		last, lastErr = stateOn(ctx, cl, id, topic)
		if lastErr == nil && ok(last) {
			return last
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker %d never showed %s: last %+v, %v", id, what, last, lastErr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// produceConsume produces values with acks=all through a new client seeded with the given
// nodes only, then reads the whole partition back and checks that it ends with them.
func produceConsume(t *testing.T, c *embed.Cluster, nodes []int, topic string, values ...string) {
	t.Helper()
	var seeds []string
	for _, id := range nodes {
		seeds = append(seeds, c.Addr(id))
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, v := range values {
		if err := cl.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err != nil {
			t.Fatalf("produce %q through nodes %v: %v", v, nodes, err)
		}
	}
	var got []string
	for !slices.Equal(tail(got, len(values)), values) {
		fetches := cl.PollFetches(ctx)
		if err := fetches.Err(); err != nil {
			t.Fatalf("consume through nodes %v: %v (so far %v)", nodes, err, got)
		}
		fetches.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
}

func tail(s []string, n int) []string { return s[max(0, len(s)-n):] }

// An isolated partition leader loses its leadership to another in-sync replica while
// clients that reach the rest of the cluster keep producing and consuming; once healed it
// rejoins the ISR. A stopped broker's partition is served by the others, and the
// restarted broker catches up and rejoins the ISR.
func TestClusterStopRestartIsolateHeal(t *testing.T) {
	c := embedtest.StartCluster(t, 3, embed.Options{})
	const topic = "events"
	admin, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx := context.Background()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, 3
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		t.Fatal(err)
	}
	all := []int{1, 2, 3}
	full := func(p partitionState) bool { return p.leader >= 0 && len(p.isr) == 3 }
	st := waitState(t, admin, 1, topic, "a leader and all three replicas in sync", full)
	produceConsume(t, c, all, topic, "a", "b")

	// Stop the leader: another replica leads, producing and consuming go on.
	stopped := int(st.leader)
	others := slices.DeleteFunc(slices.Clone(all), func(id int) bool { return id == stopped })
	if err := c.Stop(stopped); err != nil {
		t.Fatal(err)
	}
	if c.Running(stopped) {
		t.Fatalf("node %d runs after Stop", stopped)
	}
	waitState(t, admin, others[0], topic, fmt.Sprintf("a leader other than stopped node %d", stopped), func(p partitionState) bool {
		return p.leader >= 0 && int(p.leader) != stopped
	})
	produceConsume(t, c, others, topic, "c", "d")
	if err := c.Restart(stopped); err != nil {
		t.Fatal(err)
	}
	waitState(t, admin, others[0], topic, fmt.Sprintf("restarted node %d back in the ISR", stopped), func(p partitionState) bool {
		return slices.Contains(p.isr, int32(stopped))
	})
	produceConsume(t, c, all, topic, "e")

	// Isolate the leader: the others elect a new one from the ISR.
	st = waitState(t, admin, 1, topic, "a leader", func(p partitionState) bool { return p.leader >= 0 })
	isolated := int(st.leader)
	others = slices.DeleteFunc(slices.Clone(all), func(id int) bool { return id == isolated })
	if err := c.Isolate(isolated); err != nil {
		t.Fatal(err)
	}
	st = waitState(t, admin, others[0], topic, fmt.Sprintf("isolated leader %d replaced", isolated), func(p partitionState) bool {
		return p.leader >= 0 && int(p.leader) != isolated && !slices.Contains(p.isr, int32(isolated))
	})
	if !slices.Contains(others, int(st.leader)) {
		t.Fatalf("new leader %d is not one of %v", st.leader, others)
	}
	produceConsume(t, c, others, topic, "f", "g")
	// Cut off from its peers, not from its clients: it still answers them.
	direct, err := kgo.NewClient(kgo.SeedBrokers(c.Addr(isolated)))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = direct.SeedBrokers()[0].Request(rctx, kmsg.NewPtrApiVersionsRequest())
	cancel()
	if err != nil {
		t.Fatalf("isolated node %d does not answer its clients: %v", isolated, err)
	}

	// Heal: the old leader rejoins as a follower and catches up into the ISR.
	if err := c.Heal(isolated); err != nil {
		t.Fatal(err)
	}
	waitState(t, admin, others[0], topic, fmt.Sprintf("healed node %d back in the ISR", isolated), func(p partitionState) bool {
		return slices.Contains(p.isr, int32(isolated))
	})
	// Its own view agrees once it has caught up with the metadata log.
	waitState(t, admin, isolated, topic, "the healed node's view of the new leader", func(p partitionState) bool {
		return int(p.leader) == int(st.leader) && slices.Contains(p.isr, int32(isolated))
	})
	produceConsume(t, c, []int{isolated}, topic, "h")
}

// A node restarted while isolated cannot rejoin until healed; Close does not wait for such
// a restart.
func TestRestartWhileIsolated(t *testing.T) {
	c := embedtest.StartCluster(t, 3, embed.Options{})
	if err := c.Isolate(3); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(3); err != nil {
		t.Fatal(err)
	}
	restarted := make(chan error, 1)
	go func() { restarted <- c.Restart(3) }()
	if err := c.Heal(3); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-restarted:
		if err != nil {
			t.Fatalf("Restart after Heal: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Restart did not return a minute after Heal")
	}
	produceConsume(t, c, []int{3}, "after-heal", "x")

	// Isolated and restarting when the cluster closes: the restart gives up.
	if err := c.Isolate(2); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(2); err != nil {
		t.Fatal(err)
	}
	go func() { restarted <- c.Restart(2) }()
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	for range 2 {
		select {
		case <-restarted:
		case err := <-closed:
			if err != nil {
				t.Errorf("Close: %v", err)
			}
		case <-time.After(time.Minute):
			t.Fatal("Close and a Restart of an isolated node still running after a minute")
		}
	}
}

// A cluster started again on the directory it was given is the same cluster, with its data.
func TestClusterDirKept(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := embed.StartCluster(ctx, 3, embed.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	id := c.ClusterID()
	produceConsume(t, c, []int{1, 2, 3}, "kept", "before")
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = embedtest.StartCluster(t, 3, embed.Options{Dir: dir})
	if c.ClusterID() != id || c.DataDir(2) != dir+"/node-2" {
		t.Fatalf("started again: cluster %s (was %s), node 2 in %s", c.ClusterID(), id, c.DataDir(2))
	}
	produceConsume(t, c, []int{1, 2, 3}, "kept", "after")
	if got := consume(t, ctx, c.Addr(1), "kept", 2); !slices.Equal(got, []string{"before", "after"}) {
		t.Fatalf("the topic after the second start holds %v", got)
	}
}

// A node that cannot start fails StartCluster, and the others, which wait for a quorum
// that will not form, give up with it instead of waiting for ever.
func TestStartClusterFailsWhole(t *testing.T) {
	dir := t.TempDir()
	for _, id := range []string{"2", "3"} { // two of three log dirs formatted for another cluster
		if err := os.MkdirAll(dir+"/node-"+id, 0o755); err != nil {
			t.Fatal(err)
		}
		props := "version=1\ncluster.id=AnotherClusterAAAAAAAA\nnode.id=" + id + "\n"
		if err := os.WriteFile(dir+"/node-"+id+"/meta.properties", []byte(props), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() {
		c, err := embed.StartCluster(context.Background(), 3, embed.Options{Dir: dir})
		if err == nil {
			c.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "cluster.id") {
			t.Fatalf("StartCluster: %v, want the cluster.id mismatch", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("StartCluster still waiting a minute after two of its nodes failed")
	}
}
