package group

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregor-project/gregor/internal/replica"
)

// The coordinator's appends wait for the ISR: on a __consumer_offsets partition led here with
// broker 99 (played by the test through the leader's FollowerFetch) in its ISR, an offset
// commit is answered only once broker 99 has the record; without broker 99 it is answered
// COORDINATOR_NOT_AVAILABLE (REQUEST_TIMED_OUT) at offsets.commit.timeout.ms; and a
// resignation ends the wait at once with NOT_COORDINATOR.

const replicatedFollower = 99

// replicatedNode opens one __consumer_offsets partition led by broker 1 in leader epoch 1
// with broker 99 in the ISR, runs the replication loop (the purgatory's deadlines), and
// elects a coordinator with the given commit timeout.
func replicatedNode(t *testing.T, commitTimeoutMs int64) (*testNode, *replica.Partition, *Coordinator) {
	t.Helper()
	nd := openNode(t, t.TempDir(), 1)
	t.Cleanup(nd.close)
	nd.replicas.SetReplication(replica.ReplicationOptions{LocalID: 1})
	p := nd.replicas.Get(TopicName, 0)
	reg := replica.LeaderAndISR{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1, replicatedFollower}, ISR: []int32{1, replicatedFollower}}
	if err := p.MakeLeader(reg, time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		nd.replicas.RunReplication(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	cfg := testConfig()
	cfg.CommitTimeoutMs = commitTimeoutMs
	c := nd.manualCoordinator(cfg)
	t.Cleanup(c.Close)
	c.Elect(0, 1)
	waitGroupLoaded(t, c, "g")
	return nd, p, c
}

// asyncCommit commits offset for group g in the background.
func asyncCommit(c *Coordinator, offset int64) <-chan int16 {
	ch := make(chan int16, 1)
	go func() { ch <- commit(c, "g", 0, offset) }()
	return ch
}

// waitAppended polls until the partition's log ends past leo.
func waitAppended(t *testing.T, p *replica.Partition, leo int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for p.Log().LogEndOffset() <= leo {
		if time.Now().After(deadline) {
			t.Fatal("the commit was not appended")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestCoordinatorCommitWaitsForISR(t *testing.T) {
	_, p, c := replicatedNode(t, 30_000)
	leo := p.Log().LogEndOffset()
	res := asyncCommit(c, 7)
	waitAppended(t, p, leo)
	// Appended but not replicated: not answered, however long broker 99 takes (well below
	// the timeout).
	select {
	case code := <-res:
		t.Fatalf("commit answered (%v) before the follower had it", kerr.ErrorForCode(code))
	case <-time.After(200 * time.Millisecond):
	}
	end := p.Log().LogEndOffset()
	if _, err := p.FollowerFetch(replicatedFollower, -1, end, 0, -1, time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-res:
		wantCode(t, "commit once replicated", code, nil)
	case <-time.After(10 * time.Second):
		t.Fatal("commit not answered after the follower caught up")
	}
	if got := committed(t, c, "g"); got[0] != 7 {
		t.Fatalf("committed %v, want 0:7", got)
	}
}

func TestCoordinatorCommitTimesOutWithoutISR(t *testing.T) {
	_, p, c := replicatedNode(t, 300)
	start := time.Now()
	res := asyncCommit(c, 7)
	select {
	case code := <-res:
		wantCode(t, "commit the follower never fetches", code, kerr.CoordinatorNotAvailable)
	case <-time.After(10 * time.Second):
		t.Fatal("commit not answered after offsets.commit.timeout.ms")
	}
	d := time.Since(start)
	t.Logf("timed out after %v (offsets.commit.timeout.ms 300)", d)
	// Loosely: the deadline is counted in whole milliseconds from the append, a little
	// before start was read; an answer that did not wait at all would come in microseconds.
	if d < 200*time.Millisecond {
		t.Fatalf("answered after %v, long before the commit timeout", d)
	}
	if p.HighWatermark() >= p.Log().LogEndOffset() {
		t.Fatal("the high watermark passed a record broker 99 never fetched")
	}
	if got := committed(t, c, "g"); len(got) != 0 {
		t.Fatalf("an unreplicated commit is visible: %v", got)
	}
}

func TestCoordinatorResignEndsReplicationWait(t *testing.T) {
	_, p, c := replicatedNode(t, 30_000)
	leo := p.Log().LogEndOffset()
	res := asyncCommit(c, 7)
	waitAppended(t, p, leo)
	start := time.Now()
	c.Resign(0, 2)
	select {
	case code := <-res:
		wantCode(t, "commit waiting when the coordinator resigned", code, kerr.NotCoordinator)
	case <-time.After(10 * time.Second):
		t.Fatal("commit not answered after the resignation")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the resignation waited %v behind the append", d)
	}
}
