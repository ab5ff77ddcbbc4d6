package quorum

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/gregor-project/gregor/internal/controller/state"
)

// BenchmarkQuorumCreateTopics10k is one CreateTopics of 10,000 partitions (RF 3) through a
// three-controller quorum over loopback: placement, a ~340 KB raft entry persisted and
// fsynced on every node, replicated, committed and applied.
func BenchmarkQuorumCreateTopics10k(b *testing.B) {
	c := newCluster(b, 3, nil)
	n := c.nodes[c.waitActive(10*time.Second)]
	for i := range 3 {
		registerBroker(b, n, int32(i))
	}
	i := 0
	for b.Loop() {
		if _, err := createTopic(context.Background(), n, fmt.Sprintf("big%d", i), 10_000, 3); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkControllerRestart100k restarts a controller whose metadata holds 100,000
// partitions (1,000 topics × 100, RF 3): open the WAL and snapshot, restore the image
// (open+restore-ms), then elect itself and become active (ns/op; the election waits out a
// randomized 50-100 ms election timeout at this test's 10 ms tick).
func BenchmarkControllerRestart100k(b *testing.B) {
	dir := b.TempDir()
	port := freePortB(b)
	cfg := killConfig(dir, port)
	cfg.SnapshotEntries = 4 // the restart reads a snapshot, not a long log
	node, err := Start(cfg)
	if err != nil {
		b.Fatal(err)
	}
	waitActiveNodeB(b, node)
	for i := range 3 {
		registerBroker(b, node, int32(i))
	}
	for batch := range 10 { // 10 commands of 100 topics × 100 partitions
		topics := make([]state.CreatableTopic, 100)
		for j := range topics {
			topics[j] = state.CreatableTopic{Name: fmt.Sprintf("t%d-%03d", batch, j), NumPartitions: 100, ReplicationFactor: 3}
		}
		if _, err := Do(context.Background(), node, func(c *state.Controller, _ int64) ([]state.Record, []state.CreateTopicResult) {
			return c.CreateTopics(state.CreateTopicsRequest{Topics: topics})
		}); err != nil {
			b.Fatal(err)
		}
	}
	if err := node.Close(); err != nil {
		b.Fatal(err)
	}
	var openNs time.Duration
	for b.Loop() {
		cfg := killConfig(dir, freePortB(b)) // voter addresses are not stored: any port will do
		cfg.SnapshotEntries = 4
		t0 := time.Now()
		n, err := Start(cfg)
		if err != nil {
			b.Fatal(err)
		}
		openNs += time.Since(t0)
		waitActiveNodeB(b, n)
		b.StopTimer()
		var parts int
		n.Read(context.Background(), func(c *state.Controller) { parts = c.Image().NumPartitions() })
		if parts != 100_000 {
			b.Fatalf("%d partitions after restart", parts)
		}
		n.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64((openNs/time.Duration(b.N)).Microseconds())/1000, "open+restore-ms")
}

func waitActiveNodeB(b *testing.B, n *Node) {
	deadline := time.Now().Add(10 * time.Second)
	for !n.Status().Active {
		if time.Now().After(deadline) {
			b.Fatal("not active")
		}
		time.Sleep(time.Millisecond)
	}
}

func freePortB(b *testing.B) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
