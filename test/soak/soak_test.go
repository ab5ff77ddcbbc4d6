// Package soak runs a three-node cluster of real broker processes under a
// mixed load while faults hit one node at a time, then checks that nothing
// acknowledged was lost, the replicas agree, the clients recovered and no
// node kept the resources the faults made it use.
//
// The load, all at once for the whole run: an idempotent acks=all producer
// per partition of a topic of 3 partitions (replication factor 3,
// min.insync.replicas 2); a consumer group of two members committing; topics
// created, written and deleted in a loop; Metadata and ListOffsets.
//
// The faults, each on one node chosen at random, one after another, the
// cluster recovering (every node up, every partition's ISR full) before the
// next: kill -9 and a restart, SIGSTOP for a few seconds then SIGCONT, cut
// off from the other nodes for a few seconds (testutil's proxies), SIGTERM
// and a restart, and a full log dir: node 3's log dir is a tmpfs of its own
// that the test fills, then empties.
//
// GREGOR_SOAK_DURATION (a Go duration; default 90s) is how long faults are
// injected; the whole test takes about a minute more. GREGOR_SOAK_SEED
// replays a run's choice of faults (the seed is logged), GREGOR_SOAK_FAULTS
// (such as "kill-9,isolate") injects only some kinds.
package soak

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
	"github.com/gregor-project/gregor/test/replication"
)

const (
	topic      = "soak"
	partitions = 3
	group      = "soak-group"
	// diskNode's log dir is the tmpfs the full-disk fault fills.
	diskNode = 3
	// rate is each producer's records per second.
	rate = 200
	// fdMargin is how many descriptors more than at the baseline a node may
	// hold once the load has stopped.
	fdMargin = 16
	// recoverTimeout bounds every wait for the cluster to recover.
	recoverTimeout = 90 * time.Second
)

// faultKinds are the faults, by the name the report counts them under.
var faultKinds = []string{"kill-9", "sigstop", "isolate", "sigterm", "disk-full"}

// soakDuration is GREGOR_SOAK_DURATION, or 90 s.
func soakDuration(t *testing.T) time.Duration {
	s := os.Getenv("GREGOR_SOAK_DURATION")
	if s == "" {
		return 90 * time.Second
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		t.Fatalf("GREGOR_SOAK_DURATION=%q: want a positive Go duration such as 30m", s)
	}
	return d
}

// soakFaults is GREGOR_SOAK_FAULTS (kinds separated by commas), or every
// kind.
func soakFaults(t *testing.T) []string {
	s := os.Getenv("GREGOR_SOAK_FAULTS")
	if s == "" {
		return faultKinds
	}
	kinds := strings.Split(s, ",")
	for _, k := range kinds {
		if !slices.Contains(faultKinds, k) {
			t.Fatalf("GREGOR_SOAK_FAULTS=%q: no fault %q; the faults are %v", s, k, faultKinds)
		}
	}
	return kinds
}

// soakSeed is GREGOR_SOAK_SEED, or a new one.
func soakSeed(t *testing.T) uint64 {
	s := os.Getenv("GREGOR_SOAK_SEED")
	if s == "" {
		return rand.Uint64()
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("GREGOR_SOAK_SEED=%q: want an unsigned integer", s)
	}
	return v
}

func TestSoak(t *testing.T) {
	duration, seed, kinds := soakDuration(t), soakSeed(t), soakFaults(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	t.Logf("seed %d (GREGOR_SOAK_SEED=%d replays the faults), faults %v for %v (GREGOR_SOAK_FAULTS, GREGOR_SOAK_DURATION)", seed, seed, kinds, duration)

	// The tmpfs holds everything node 3 writes in the run (about 40 KB a
	// second of the soak topic, the group's offsets and the churn) and the
	// pages of its preallocated index files (10 MiB each, sparse) that it
	// touches: loading an active segment after an unclean stop reads its
	// index files whole, and on a tmpfs every page read is allocated.
	tmpfsMiB := 320 + int(duration/time.Minute)*8
	c := testutil.StartCluster(t, testutil.ClusterOptions{
		Nodes: 3,
		Sets:  []string{"offsets.topic.num.partitions=5"},
		BeforeStart: func(n *testutil.Node) {
			if n.ID == diskNode {
				testutil.MountTmpfs(t, n, tmpfsMiB)
			}
		},
	})
	keepLogsOnFailure(t, c, seed)
	seeds := c.Bootstrap()
	cl := c.Client(t)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), duration+10*time.Minute)
	defer cancel()

	// StartCluster returns once the nodes listen, not once they are
	// registered: an RF 3 topic before then is INVALID_REPLICATION_FACTOR.
	mis := "2"
	c.WaitFor(t, recoverTimeout, func() bool {
		err := createTopic(ctx, adm, topic, partitions, 3, map[string]*string{"min.insync.replicas": &mis})
		return err == nil || errors.Is(err, kerr.TopicAlreadyExists)
	}, "the soak topic created")
	waitHealthy(t, c)

	// The load.
	var producers []*replication.Producer
	for p := range int32(partitions) {
		producers = append(producers, replication.StartProducer(t, c, topic, replication.ProducerOptions{
			Writer: int(p), Partition: p, Rate: rate,
			// A produce stuck on a stopped or cut-off leader is given up and
			// retried elsewhere within seconds.
			Opts: []kgo.Opt{kgo.ProduceRequestTimeout(3 * time.Second), kgo.RequestTimeoutOverhead(time.Second)},
		}))
	}
	var members []*member
	for range 2 {
		m, err := startMember(seeds, group, topic)
		if err != nil {
			t.Fatal(err)
		}
		members = append(members, m)
		t.Cleanup(m.close)
	}
	var churn churnStats
	var churnNames atomic.Int64
	churnLoop, err := startChurn(c, seeds, &churn, &churnNames)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(churnLoop.stop)
	var mdOK, mdErr atomic.Int64
	mdLoop, err := startMetadataTraffic(seeds, topic, &mdOK, &mdErr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mdLoop.stop)

	// Warm-up: every part of the load has done some work.
	for _, p := range producers {
		p.WaitAcked(t, 2*rate, recoverTimeout)
	}
	c.WaitFor(t, recoverTimeout, func() bool { return consumed(members) > int64(partitions*rate) }, "the group to consume")
	c.WaitFor(t, recoverTimeout, func() bool { return churn.deleteOK.Load() > 0 }, "a churned topic deleted")
	// The baseline of each node's descriptors, and of its RSS, which a
	// restarted node's first sample once the cluster has recovered replaces:
	// a new process's memory is its own (recovery maps index files).
	baseline := sampleAll(c)
	rssBase := map[int32]usage{}
	for id := int32(1); id <= 3; id++ {
		if _, ok := baseline[id]; !ok {
			t.Fatalf("no baseline sample of node %d", id)
		}
		rssBase[id] = baseline[id]
		t.Logf("baseline of node %d: %v", id, baseline[id])
	}

	// The faults.
	faults := map[string]int{}
	end := time.Now().Add(duration)
	for i := 1; time.Now().Before(end); i++ {
		kind := kinds[rng.IntN(len(kinds))]
		id := int32(1 + rng.IntN(3))
		if kind == "disk-full" {
			id = diskNode
		}
		hold := time.Duration(2000+rng.IntN(4000)) * time.Millisecond
		start := time.Now()
		pid := c.Node(id).Pid()
		detail := inject(t, c, kind, c.Node(id), hold)
		faults[kind]++
		waitHealthy(t, c)
		now := sampleAll(c)
		if c.Node(id).Pid() != pid {
			rssBase[id] = now[id]
		}
		acked := 0
		for _, p := range producers {
			acked += p.Acked()
		}
		t.Logf("fault %d: %s of node %d for %v%s; recovered after %v; %d acknowledged, %d consumed, churn %d/%d created, %d/%d deleted; %v",
			i, kind, id, hold, detail, time.Since(start).Round(time.Millisecond), acked, consumed(members),
			churn.createOK.Load(), churn.createOK.Load()+churn.createErr.Load(),
			churn.deleteOK.Load(), churn.deleteOK.Load()+churn.deleteErr.Load(), now)
	}
	t.Logf("faults injected: %v", faults)

	// After the faults, every part of the load works again.
	for _, p := range producers {
		p.WaitMoreAcked(t, rate, recoverTimeout)
	}
	was := consumed(members)
	c.WaitFor(t, recoverTimeout, func() bool { return consumed(members) >= was+int64(partitions*rate) }, "the group to consume after the faults")
	churnLoop.stop()
	t.Logf("churn: %d topics created (%d failed), %d deleted (%d failed); last error: %v",
		churn.createOK.Load(), churn.createErr.Load(), churn.deleteOK.Load(), churn.deleteErr.Load(), churn.lastErr)
	checkChurnWorks(ctx, t, c, adm)

	var results []replication.Result
	acked, failed := 0, 0
	for _, p := range producers {
		res := p.Stop()
		results = append(results, res)
		acked += len(res.Acked)
		failed += len(res.Failed)
		t.Logf("producer of %s[%d]: %d sent, %d acknowledged, %d failed %v", topic, res.Partition, res.Sent, len(res.Acked), len(res.Failed), res.ErrorCounts())
	}
	mdLoop.stop()
	t.Logf("metadata and list offsets: %d answered, %d failed", mdOK.Load(), mdErr.Load())

	// The group catches up: its committed offsets reach every partition's end.
	waitCommittedAtEnd(ctx, t, c, adm)
	for _, m := range members {
		m.close()
	}
	t.Logf("group: %d records consumed (with redeliveries), %d fetch errors", consumed(members), members[0].errors.Load()+members[1].errors.Load())

	// No churned topic is left, in the metadata or on disk.
	removeChurnedTopics(ctx, t, c, adm)

	// Resources: back to the baseline once the load has stopped.
	cl.Close()
	checkResources(t, c, baseline, rssBase)

	reps := replication.VerifyTopic(t, c, topic, []int32{0, 1, 2}, results...)
	lost := 0
	for _, r := range reps {
		lost += len(r.Lost)
	}
	t.Logf("summary: seed %d, %v of faults %v; %d records acknowledged, %d failed, %d lost",
		seed, duration, faults, acked, failed, lost)
}

// keepLogsOnFailure copies every node's whole log out of the test's temp
// dir (removed when the test ends) if the test fails, and says where: the
// cluster prints only the tails, and a crash's first lines are further up.
func keepLogsOnFailure(t *testing.T, c *testutil.Cluster, seed uint64) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		dir := filepath.Join(os.TempDir(), fmt.Sprintf("gregor-soak-%d-%d", seed, time.Now().Unix()))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Logf("keep the node logs: %v", err)
			return
		}
		for _, n := range c.Nodes() {
			data, err := os.ReadFile(n.LogFile)
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, filepath.Base(n.LogFile)), data, 0o644)
			}
			if err != nil {
				t.Logf("keep node %d's log: %v", n.ID, err)
			}
		}
		t.Logf("the nodes' whole logs are in %s", dir)
	})
}

// inject applies one fault of kind to n for hold and undoes it: every node
// is running and connected again when it returns. It returns details for
// the log.
func inject(t *testing.T, c *testutil.Cluster, kind string, n *testutil.Node, hold time.Duration) string {
	t.Helper()
	switch kind {
	case "kill-9":
		n.Kill()
		time.Sleep(hold) // the fault's length, not a wait for anything
		n.Start()
	case "sigstop":
		n.Pause()
		time.Sleep(hold)
		n.Resume()
	case "isolate":
		c.Isolate(n.ID)
		time.Sleep(hold)
		c.Heal(n.ID)
	case "sigterm":
		if err := n.Stop(); err != nil {
			t.Errorf("node %d after SIGTERM: %v (want a clean exit)", n.ID, err)
		}
		time.Sleep(hold)
		n.Start()
	case "disk-full":
		path, size, err := testutil.FillDisk(n.Dir)
		if err != nil {
			t.Fatalf("fill node %d's log dir: %v", n.ID, err)
		}
		time.Sleep(hold)
		if err := os.Remove(path); err != nil {
			t.Fatalf("remove the filler: %v", err)
		}
		free, err := testutil.FreeBytes(n.Dir)
		if err != nil {
			t.Fatal(err)
		}
		detail := fmt.Sprintf(" (filled with %.1f MiB; %.1f MiB free after)", float64(size)/(1<<20), float64(free)/(1<<20))
		if !n.Running() {
			// The node stopped on the failed writes (a broker whose only
			// log dir failed); an operator starts it again once the disk
			// has room.
			n.Start()
			detail += ", the node exited and was restarted"
		}
		return detail
	default:
		t.Fatalf("no fault %q", kind)
	}
	return ""
}

// waitHealthy waits until every node is running and every partition of the
// soak topic has a leader and all three replicas in its ISR, as every
// node's metadata shows it.
func waitHealthy(t *testing.T, c *testutil.Cluster) {
	t.Helper()
	deadline := time.Now().Add(recoverTimeout)
	for {
		why := unhealthy(c)
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cluster did not recover within %v: %s", recoverTimeout, why)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// unhealthy is why the cluster is not healthy, or "".
func unhealthy(c *testutil.Cluster) string {
	for _, n := range c.Nodes() {
		if !n.Running() {
			return fmt.Sprintf("node %d is not running", n.ID)
		}
	}
	for _, n := range c.Nodes() {
		for p := range int32(partitions) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			st, err := replication.Partition(ctx, c, topic, p, n.ClientAddr())
			cancel()
			switch {
			case err != nil:
				return fmt.Sprintf("node %d: %v", n.ID, err)
			case !st.FullISR():
				return fmt.Sprintf("node %d: %s[%d] %+v", n.ID, topic, p, st)
			}
		}
	}
	return ""
}

func consumed(ms []*member) int64 {
	var n int64
	for _, m := range ms {
		n += m.consumed.Load()
	}
	return n
}

// checkChurnWorks creates and deletes a topic of replication factor 3 once
// the faults are over: both must succeed (within recoverTimeout, since the
// controller may still be catching up).
func checkChurnWorks(ctx context.Context, t *testing.T, c *testutil.Cluster, adm *kadm.Client) {
	t.Helper()
	name := churnPrefix + "after-faults"
	var err error
	attempts := 0
	c.WaitFor(t, recoverTimeout, func() bool {
		attempts++
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		err = createTopic(rctx, adm, name, 3, 3, nil)
		if errors.Is(err, kerr.TopicAlreadyExists) {
			err = nil // an earlier attempt timed out but was carried out
		}
		return err == nil
	}, "a topic created after the faults")
	c.WaitFor(t, recoverTimeout, func() bool {
		attempts++
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		err = deleteTopic(rctx, adm, name)
		return err == nil
	}, "the topic deleted after the faults")
	t.Logf("after the faults a topic was created and deleted in %d attempts", attempts)
}

// churnedTopicsOn lists the churned topics in node n's metadata.
func churnedTopicsOn(ctx context.Context, n *testutil.Node) ([]string, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.ClientAddr()), kgo.RequestRetries(0))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest() // Topics nil: every topic
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, tp := range resp.Topics {
		if tp.Topic != nil && strings.HasPrefix(*tp.Topic, churnPrefix) {
			out = append(out, *tp.Topic)
		}
	}
	slices.Sort(out)
	return out, nil
}

// waitCommittedAtEnd waits until the group's committed offset of every
// partition is the partition's end offset (the producers stopped).
func waitCommittedAtEnd(ctx context.Context, t *testing.T, c *testutil.Cluster, adm *kadm.Client) {
	t.Helper()
	last := ""
	deadline := time.Now().Add(recoverTimeout)
	for {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ends, err := adm.ListEndOffsets(rctx, topic)
		var committed kadm.OffsetResponses
		if err == nil {
			err = ends.Error()
		}
		if err == nil {
			committed, err = adm.FetchOffsets(rctx, group)
		}
		cancel()
		if err == nil {
			behind := 0
			var parts []string
			for p := range int32(partitions) {
				e, _ := ends.Lookup(topic, p)
				o, ok := committed.Lookup(topic, p)
				at := int64(-1)
				if ok && o.Err == nil {
					at = o.At
				}
				if at != e.Offset {
					behind++
				}
				parts = append(parts, fmt.Sprintf("[%d] %d of %d", p, at, e.Offset))
			}
			last = strings.Join(parts, ", ")
			if behind == 0 {
				t.Logf("group committed at the end of every partition: %s", last)
				return
			}
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			t.Fatalf("the group's committed offsets did not reach the partitions' ends within %v: %s", recoverTimeout, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// removeChurnedTopics deletes every churned topic still in the metadata (a
// creation that failed during a fault may have been carried out, and a
// deletion may not) and waits until no node's log dir holds a directory of
// one: deleted partitions' directories are renamed -delete and removed,
// and a node that was down during the deletion removes them as strays when
// it comes back.
func removeChurnedTopics(ctx context.Context, t *testing.T, c *testutil.Cluster, adm *kadm.Client) {
	t.Helper()
	start := time.Now()
	var left []string
	rounds := 0
	c.WaitFor(t, recoverTimeout, func() bool {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		left = left[:0]
		var views []string
		for _, n := range c.Nodes() {
			names, err := churnedTopicsOn(rctx, n)
			if err != nil {
				views = append(views, fmt.Sprintf("node %d: %v", n.ID, err))
				left = append(left, "?")
				continue
			}
			if len(names) > 0 {
				views = append(views, fmt.Sprintf("node %d lists %v", n.ID, names))
			}
			for _, name := range names {
				if !slices.Contains(left, name) {
					left = append(left, name)
				}
			}
		}
		if len(left) == 0 {
			return true
		}
		rounds++
		if rounds == 1 || rounds%50 == 0 {
			t.Logf("churned topics left after %v: %s", time.Since(start).Round(time.Millisecond), strings.Join(views, "; "))
		}
		left = slices.DeleteFunc(left, func(s string) bool { return s == "?" })
		if len(left) == 0 {
			return false
		}
		resps, err := adm.DeleteTopics(rctx, left...)
		if err == nil {
			err = resps.Error()
		}
		if err != nil && rounds == 1 {
			t.Logf("delete %v: %v", left, err)
		}
		return false
	}, "no churned topic in any node's metadata")
	t.Logf("no churned topic in any node's metadata after %v", time.Since(start).Round(time.Millisecond))
	var dirs []string
	var err error
	deadline := time.Now().Add(recoverTimeout)
	for {
		dirs, err = churnLeftovers(c)
		if err != nil {
			t.Fatal(err)
		}
		if len(dirs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d directories of deleted topics are still on disk %v after they were deleted: %v", len(dirs), recoverTimeout, dirs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("no churned topic left in the metadata or on disk")
}

// checkResources waits until every node holds at most fdMargin descriptors
// more than at the baseline (clients' connections close asynchronously)
// and checks its RSS is within twice rssBase's plus 128 MiB (the Go heap
// does not shrink at once).
func checkResources(t *testing.T, c *testutil.Cluster, baseline, rssBase map[int32]usage) {
	t.Helper()
	var now map[int32]usage
	over := func() []string {
		now = sampleAll(c)
		var out []string
		for id, b := range baseline {
			u, ok := now[id]
			if !ok || u.FDs > b.FDs+fdMargin {
				out = append(out, fmt.Sprintf("node %d: %d fds, baseline %d", id, u.FDs, b.FDs))
			}
		}
		return out
	}
	deadline := time.Now().Add(recoverTimeout)
	for len(over()) > 0 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	if o := over(); len(o) > 0 {
		t.Errorf("descriptors not back within %d of the baseline %v after the load stopped: %v", fdMargin, recoverTimeout, o)
	}
	for id := int32(1); id <= 3; id++ {
		b, r, u := baseline[id], rssBase[id], now[id]
		t.Logf("node %d: baseline %v; RSS baseline since its last start %.1f MiB; end %v", id, b, mib(r.RSSKiB), u)
		if limit := 2*r.RSSKiB + 128<<10; u.RSSKiB > limit {
			t.Errorf("node %d: RSS %.1f MiB at the end, over twice its baseline %.1f MiB plus 128 MiB", id, mib(u.RSSKiB), mib(r.RSSKiB))
		}
	}
}
