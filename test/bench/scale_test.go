package bench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
)

// maxPartitionsPerCreate is the most partitions one CreateTopics may create: the limit of
// 10,000 records per admin operation counts partition and config records (not the topic's).
const maxPartitionsPerCreate = 10_000

// allLeaders reports whether broker id's own Metadata shows topic with n partitions, each
// with a leader.
func allLeaders(ctx context.Context, cl *kgo.Client, id int32, topic string, n int) bool {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.Broker(int(id)))
	if err != nil || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != n {
		return false
	}
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != 0 || p.Leader < 0 {
			return false
		}
	}
	return true
}

// servedEverywhere reports whether every partition of topic answers ListOffsets on its
// leader: the leaders have opened the logs.
func servedEverywhere(ctx context.Context, adm *kadm.Client, topic string, n int) bool {
	offs, err := adm.ListEndOffsets(ctx, topic)
	if err != nil || offs.Error() != nil {
		return false
	}
	got := 0
	offs.Each(func(kadm.ListedOffset) { got++ })
	return got == n
}

// createTimes creates topic (10,000 partitions, RF 3) with assignment in one CreateTopics and
// reports how long the answer took, until every broker's Metadata shows every leader, and,
// when served is set, until every leader serves its partition.
func createTimes(ctx context.Context, t *testing.T, c *testutil.Cluster, topic string, assignment [][]int32, served bool) (answer, meta, serve time.Duration) {
	t.Helper()
	cl := c.Client(t)
	adm := kadm.NewClient(cl)
	start := time.Now()
	createAssigned(ctx, t, cl, topic, assignment)
	answer = time.Since(start)
	var brokers []int32
	for _, n := range c.Nodes() {
		if n.ClientAddr() != "" {
			brokers = append(brokers, n.ID)
		}
	}
	c.WaitFor(t, 5*time.Minute, func() bool {
		for _, id := range brokers {
			if !allLeaders(ctx, cl, id, topic, len(assignment)) {
				return false
			}
		}
		return true
	}, "every broker's metadata to show every leader of "+topic)
	meta = time.Since(start)
	if served {
		c.WaitFor(t, 5*time.Minute, func() bool { return servedEverywhere(ctx, adm, topic, len(assignment)) },
			"every partition of "+topic+" served by its leader")
		serve = time.Since(start)
	}
	return answer, meta, serve
}

// spread assigns n partitions round-robin over brokers, rf replicas each.
func spread(n int, brokers []int32, rf int) [][]int32 {
	out := make([][]int32, n)
	for p := range out {
		for r := range rf {
			out[p] = append(out[p], brokers[(p+r)%len(brokers)])
		}
	}
	return out
}

// One CreateTopics of 10,000 partitions with replication factor 3 (the most one request may
// create) on a three-voter cluster: the time until the answer, until every broker's
// Metadata shows every leader, and until every leader serves its partition. Two layouts:
// replicas on three fake brokers (the controller and the metadata path alone: no broker opens
// a log), and on the three real brokers (10,000 logs each: one descriptor per log, under
// this machine's limit of 20,000 open files).
func TestScaleCreate10kPartitions(t *testing.T) {
	needScale(t)
	c := testutil.StartCluster(t, testutil.ClusterOptions{Nodes: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	waitBrokers(ctx, t, c, c.Client(t), 3)
	fakes := []int32{101, 102, 103}
	for _, id := range fakes {
		startFakeBroker(t, c, id)
	}
	for r := range rounds(1) {
		a, m, _ := createTimes(ctx, t, c, fmt.Sprintf("meta-%d", r), spread(maxPartitionsPerCreate, fakes, 3), false)
		t.Logf("10,000 partitions RF 3 on fake brokers: answer %v, every broker's metadata %v (target < 5s)",
			a.Round(time.Millisecond), m.Round(time.Millisecond))
	}

	hosts := []int32{1, 2, 3}
	for r := range rounds(1) {
		topic := fmt.Sprintf("real-%d", r)
		a, m, s := createTimes(ctx, t, c, topic, spread(maxPartitionsPerCreate, hosts, 3), true)
		t.Logf("10,000 partitions RF 3 on 3 real brokers: answer %v, every broker's metadata %v, every leader serving %v (target < 5s)",
			a.Round(time.Millisecond), m.Round(time.Millisecond), s.Round(time.Millisecond))
		// Delete it so the next round's brokers open 10,000 logs again, not 20,000.
		if _, err := kadm.NewClient(c.Client(t)).DeleteTopics(ctx, topic); err != nil {
			t.Fatal(err)
		}
		c.WaitFor(t, 2*time.Minute, func() bool {
			for _, n := range c.Nodes() {
				if ents, err := os.ReadDir(n.Dir); err != nil || countPrefix(ents, topic+"-") > 0 {
					return false
				}
			}
			return true
		}, topic+"'s logs deleted on every broker")
	}
}

func countPrefix(ents []os.DirEntry, prefix string) int {
	n := 0
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			n++
		}
	}
	return n
}

// A controller holding 100,000 partitions (ten CreateTopics of 10,000, all on
// a fake broker, so no broker opens a log) restarts, and what the metadata of 100,000
// partitions costs a broker that hosts none of them. Node 1 is the single voter (a combined
// node that hosts nothing); node 2 is a broker-only node. Memory is VmRSS and RssAnon from
// /proc, and the Go heap from the processes' gctrace (GODEBUG=gctrace=1 is inherited).
func TestScaleController100kPartitions(t *testing.T) {
	needScale(t)
	t.Setenv("GODEBUG", "gctrace=1")
	c := testutil.StartCluster(t, testutil.ClusterOptions{Nodes: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	c.AddBroker(2)
	cl := c.Client(t)
	waitBrokers(ctx, t, c, cl, 2)
	startFakeBroker(t, c, 100)
	ctrl, obs := c.Node(1), c.Node(2)

	mem := func(what string) {
		for _, n := range []*testutil.Node{ctrl, obs} {
			rss, anon := memKB(t, nodePID(t, n))
			t.Logf("%s: node %d VmRSS %.1f MB, RssAnon %.1f MB, last gctrace: %s", what, n.ID, float64(rss)/1024, float64(anon)/1024, lastGC(t, n))
		}
	}
	mem("before the topics")

	var topics []string
	total := 0
	start := time.Now()
	for i := range 100_000 / maxPartitionsPerCreate {
		n := maxPartitionsPerCreate
		topic := fmt.Sprintf("t%02d", i)
		one := make([][]int32, n)
		for p := range one {
			one[p] = []int32{100}
		}
		ts := time.Now()
		createAssigned(ctx, t, cl, topic, one)
		t.Logf("create %s (%d partitions): %v", topic, n, time.Since(ts).Round(time.Millisecond))
		topics = append(topics, topic)
		total += n
	}
	imageHas := func(n *testutil.Node) bool {
		req := kmsg.NewPtrMetadataRequest()
		resp, err := req.RequestWith(ctx, cl.Broker(int(n.ID)))
		if err != nil {
			return false
		}
		got := 0
		for _, tp := range resp.Topics {
			got += len(tp.Partitions)
		}
		return got >= total
	}
	c.WaitFor(t, 5*time.Minute, func() bool { return imageHas(ctrl) && imageHas(obs) }, "100,000 partitions in both images")
	t.Logf("%d partitions in %d topics created and in both images in %v", total, len(topics), time.Since(start).Round(time.Millisecond))
	// Let a GC cycle or two run on the settled image before reading memory.
	settle := time.Now()
	c.WaitFor(t, time.Minute, func() bool { return time.Since(settle) > 5*time.Second }, "settling")
	mem("with 100,000 partitions")

	for _, how := range []string{"SIGTERM", "kill -9"} {
		for range rounds(1) {
			for _, n := range []*testutil.Node{ctrl, obs} {
				if how == "SIGTERM" {
					if err := n.Stop(); err != nil {
						t.Fatalf("stop node %d: %v", n.ID, err)
					}
				} else {
					n.Kill()
				}
				if how == "SIGTERM" {
					t.Logf("node %d's shutdown, from its log:\n%s", n.ID, stopLines(t, n, 6))
				}
				n.Start()
				c.WaitFor(t, 5*time.Minute, func() bool { return imageHas(n) }, fmt.Sprintf("node %d's image after restart", n.ID))
				ready := time.Now()
				st, at := logTimes(t, n, "active controller", "gregor started")
				line := fmt.Sprintf("restart after %s: node %d (%s): ", how, n.ID, strings.Join(n.Roles, "+"))
				if !at[0].IsZero() {
					line += fmt.Sprintf("active controller after %v, ", at[0].Sub(st).Round(time.Millisecond))
				}
				line += fmt.Sprintf("serving (listener up) after %v, 100,000 partitions in its Metadata after %v",
					at[1].Sub(st).Round(time.Millisecond), ready.Sub(st).Round(time.Millisecond))
				t.Logf("%s (target < 2s)", line)
				t.Logf("node %d's start-up, from its log:\n%s", n.ID, startLines(t, n, 20))
				waitBrokers(ctx, t, c, cl, 3) // with the fake broker
			}
		}
	}
	settle = time.Now()
	c.WaitFor(t, time.Minute, func() bool { return time.Since(settle) > 5*time.Second }, "settling")
	mem("restarted, with 100,000 partitions")
}

// lastGC is the last gctrace line of the node's current process ("" if none): its
// "A->B->C MB" is the heap at the start of the cycle, at its end and live after it.
func lastGC(t *testing.T, n *testutil.Node) string {
	t.Helper()
	data, err := os.ReadFile(n.LogFile)
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	if i := strings.LastIndex(s, "=== "); i >= 0 {
		s = s[i:]
	}
	last := ""
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "gc ") {
			last = l
		}
	}
	return last
}

// startLines is the first n lines the node's current process logged, gctrace left out.
func startLines(t *testing.T, n *testutil.Node, max int) string {
	t.Helper()
	data, err := os.ReadFile(n.LogFile)
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	if i := strings.LastIndex(s, "=== "); i >= 0 {
		s = s[i:]
	}
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(l, "gc ") && len(out) < max {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// stopLines is the last n lines the node's latest process logged, gctrace left out.
func stopLines(t *testing.T, n *testutil.Node, last int) string {
	t.Helper()
	data, err := os.ReadFile(n.LogFile)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		if !strings.HasPrefix(l, "gc ") {
			out = append(out, l)
		}
	}
	return strings.Join(out[max(0, len(out)-last):], "\n")
}
