package group

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/replica"
	"github.com/gregor-project/gregor/internal/storage"
)

// manualCoordinator is a coordinator of nd whose partitions are coordinated only once
// elected, as on a broker of a cluster.
func (nd *testNode) manualCoordinator(cfg Config) *Coordinator {
	return NewCoordinator(Options{
		Config: cfg, Replicas: nd.replicas, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		EnsureTopic: func(bool) (int32, error) { return nd.n, nil },
		Manual:      true,
	})
}

// groupIn returns a group id coordinated by partition p of n.
func groupIn(p, n int32) string {
	for i := 0; ; i++ {
		if g := fmt.Sprintf("g%d", i); PartitionFor(g, n) == p {
			return g
		}
	}
}

// waitGroupLoaded polls until group's partition has loaded (a fetch no longer answers
// COORDINATOR_LOAD_IN_PROGRESS) and returns the fetch's error code.
func waitGroupLoaded(t *testing.T, c *Coordinator, group string) int16 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		code := c.FetchOffsets(&kmsg.OffsetFetchRequestGroup{Group: group}, false).ErrorCode
		if code != kerr.CoordinatorLoadInProgress.Code {
			return code
		}
		if time.Now().After(deadline) {
			t.Fatalf("partition of %s did not load", group)
		}
		time.Sleep(time.Millisecond)
	}
}

// commit commits offset for topic "t" partition part as a group with no members (a simple
// commit, as an admin client makes) and returns the partition's error code.
func commit(c *Coordinator, group string, part int32, offset int64) int16 {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.Generation = 9, group, -1
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: part, Offset: offset, LeaderEpoch: -1, Timestamp: -1}}}}
	return c.CommitOffsets(context.Background(), req).Topics[0].Partitions[0].ErrorCode
}

// committed returns the group's committed offsets of topic "t" by partition.
func committed(t *testing.T, c *Coordinator, group string) map[int32]int64 {
	t.Helper()
	f := c.FetchOffsets(&kmsg.OffsetFetchRequestGroup{Group: group}, false)
	if f.ErrorCode != 0 {
		t.Fatalf("fetch offsets of %s: %v", group, kerr.ErrorForCode(f.ErrorCode))
	}
	out := map[int32]int64{}
	for _, tp := range f.Topics {
		for _, p := range tp.Partitions {
			out[p.Partition] = p.Offset
		}
	}
	return out
}

// parkJoin sends a first JoinGroup (v3: no MEMBER_ID_REQUIRED) that parks in the initial
// rebalance delay, and waits until the group holds it.
func parkJoin(t *testing.T, c *Coordinator, group string) <-chan *kmsg.JoinGroupResponse {
	t.Helper()
	req := joinReq(group, "")
	req.Version = 3
	done := make(chan *kmsg.JoinGroupResponse, 1)
	go func() { done <- c.JoinGroup(context.Background(), req, Client{ID: "parked"}) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		d := c.DescribeGroup(group)
		if d.State == "PreparingRebalance" && len(d.Members) == 1 {
			return done
		}
		if time.Now().After(deadline) {
			t.Fatalf("join of %s never parked: %+v", group, d)
		}
		time.Sleep(time.Millisecond)
	}
}

// errCode is err's code, 0 for nil.
func errCode(err *kerr.Error) int16 {
	if err == nil {
		return 0
	}
	return err.Code
}

// recvJoin waits for a parked JoinGroup's answer.
func recvJoin(t *testing.T, done <-chan *kmsg.JoinGroupResponse) *kmsg.JoinGroupResponse {
	t.Helper()
	return recv(t, "the parked JoinGroup", done)
}

func (c *Coordinator) shardOf(p int32) *shard {
	sh, _ := c.rt.ShardAt(p)
	return sh
}

// A manual coordinator coordinates nothing until elected: requests are NOT_COORDINATOR
// (so clients look for the coordinator again); an elected partition loads and serves its
// groups, and only its groups.
func TestCoordinatorNotCoordinatorUntilElected(t *testing.T) {
	nd := openNode(t, t.TempDir(), 3)
	defer nd.close()
	c := nd.manualCoordinator(testConfig())
	defer c.Close()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	g1, g2 := groupIn(1, 3), groupIn(2, 3)
	if p := c.PartitionFor(g1); p != 1 {
		t.Fatalf("PartitionFor(%s) = %d, want 1", g1, p)
	}
	wantCode(t, "find before election", errCode(c.FindCoordinator(g1)), kerr.NotCoordinator)
	wantCode(t, "join before election", c.JoinGroup(context.Background(), joinReq(g1, ""), Client{}).ErrorCode, kerr.NotCoordinator)
	wantCode(t, "commit before election", commit(c, g1, 0, 5), kerr.NotCoordinator)
	if gs, err := c.ListGroups(nil, nil); err != nil || len(gs) != 0 {
		t.Fatalf("list before election: %v %v", gs, err)
	}

	c.Elect(1, 4)
	wantCode(t, "fetch after election", waitGroupLoaded(t, c, g1), nil)
	wantCode(t, "find after election", errCode(c.FindCoordinator(g1)), nil)
	wantCode(t, "commit after election", commit(c, g1, 0, 5), nil)
	wantCode(t, "find of another partition's group", errCode(c.FindCoordinator(g2)), kerr.NotCoordinator)
	wantCode(t, "commit of another partition's group", commit(c, g2, 0, 5), kerr.NotCoordinator)
	if got := nd.replicas.Get(TopicName, 1).Log().LogEndOffset(); got != 1 {
		t.Fatalf("partition 1 holds %d records, want the one commit", got)
	}
}

// Resigning answers a parked JoinGroup with NOT_COORDINATOR, stops the shard's timer, and
// every later request of its groups gets NOT_COORDINATOR.
func TestCoordinatorResignAnswersParkedAndLater(t *testing.T) {
	nd := openNode(t, t.TempDir(), 1)
	defer nd.close()
	c := nd.manualCoordinator(testConfig()) // 3 s initial delay: the join parks
	defer c.Close()
	c.Elect(0, 1)
	waitGroupLoaded(t, c, "g")
	wantCode(t, "commit", commit(c, "g", 0, 7), nil)
	done := parkJoin(t, c, "g")
	sh := c.shardOf(0)

	c.Resign(0, 2)
	r := recvJoin(t, done)
	wantCode(t, "parked join after resign", r.ErrorCode, kerr.NotCoordinator)
	sh.mu.Lock()
	stopped := sh.mu.core == nil && !sh.mu.timer.Stop() // Stop reports false: already stopped
	sh.mu.Unlock()
	if !stopped {
		t.Fatal("the resigned shard's timer is still running (or its core kept)")
	}

	ctx := context.Background()
	wantCode(t, "find", errCode(c.FindCoordinator("g")), kerr.NotCoordinator)
	wantCode(t, "join", c.JoinGroup(ctx, joinReq("g", ""), Client{}).ErrorCode, kerr.NotCoordinator)
	sreq := kmsg.NewPtrSyncGroupRequest()
	sreq.Group, sreq.MemberID, sreq.Generation = "g", r.MemberID, 1
	wantCode(t, "sync", c.SyncGroup(ctx, sreq).ErrorCode, kerr.NotCoordinator)
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = "g", "m", 1
	wantCode(t, "heartbeat", c.Heartbeat(ctx, hb).ErrorCode, kerr.NotCoordinator)
	lreq := kmsg.NewPtrLeaveGroupRequest()
	lreq.Group, lreq.MemberID = "g", "m"
	wantCode(t, "leave", c.LeaveGroup(ctx, lreq).ErrorCode, kerr.NotCoordinator)
	wantCode(t, "commit", commit(c, "g", 0, 8), kerr.NotCoordinator)
	wantCode(t, "fetch", c.FetchOffsets(&kmsg.OffsetFetchRequestGroup{Group: "g"}, false).ErrorCode, kerr.NotCoordinator)
	wantCode(t, "describe", c.DescribeGroup("g").ErrorCode, kerr.NotCoordinator)
	wantCode(t, "delete", c.DeleteGroups(ctx, []string{"g"})[0].ErrorCode, kerr.NotCoordinator)
	if gs, err := c.ListGroups(nil, nil); err != nil || len(gs) != 0 {
		t.Fatalf("list after resign: %v %v", gs, err)
	}
	if got := nd.replicas.Get(TopicName, 0).Log().LogEndOffset(); got != 1 {
		t.Fatalf("partition holds %d records after resign, want only the first commit", got)
	}
}

// Electing again in the same or an older epoch changes nothing: the loaded state and a
// parked JoinGroup stay as they are. A stale resignation (older epoch) is ignored too.
func TestCoordinatorElectTwiceHarmless(t *testing.T) {
	nd := openNode(t, t.TempDir(), 1)
	defer nd.close()
	c := nd.manualCoordinator(testConfig())
	c.Elect(0, 5)
	waitGroupLoaded(t, c, "g")
	wantCode(t, "commit", commit(c, "g", 0, 7), nil)
	done := parkJoin(t, c, "p")
	sh := c.shardOf(0)

	c.Elect(0, 5)
	c.Elect(0, 3)
	c.Resign(0, 4)
	if c.shardOf(0) != sh {
		t.Fatal("a repeated, older or stale report replaced the shard")
	}
	if d := c.DescribeGroup("p"); d.State != "PreparingRebalance" || len(d.Members) != 1 {
		t.Fatalf("parked join disturbed: %+v", d)
	}
	if got := committed(t, c, "g"); got[0] != 7 {
		t.Fatalf("offsets after repeated election: %v", got)
	}
	c.Close()
	wantCode(t, "parked join at close", recvJoin(t, done).ErrorCode, kerr.NotCoordinator)
}

// Leadership moving away and back: the records another coordinator appended meanwhile (as
// a follower's log receives them) are loaded on re-election in a newer epoch, together with
// the coordinator's own earlier commits. Reports older than the resignation are ignored.
func TestCoordinatorReelectReloads(t *testing.T) {
	nd := openNode(t, t.TempDir(), 1)
	defer nd.close()
	us, them := nd.manualCoordinator(testConfig()), nd.manualCoordinator(testConfig())
	defer us.Close()
	defer them.Close()

	us.Elect(0, 1)
	waitGroupLoaded(t, us, "g")
	wantCode(t, "our commit", commit(us, "g", 0, 42), nil)
	us.Resign(0, 2)

	them.Elect(0, 2)
	waitGroupLoaded(t, them, "g")
	if got := committed(t, them, "g"); got[0] != 42 {
		t.Fatalf("the next coordinator did not load our commit: %v", got)
	}
	wantCode(t, "their commit", commit(them, "g", 1, 77), nil)
	them.Resign(0, 3)

	us.Elect(0, 2) // late report of the term we resigned for: ignored
	wantCode(t, "find after a stale election", errCode(us.FindCoordinator("g")), kerr.NotCoordinator)

	us.Elect(0, 3)
	wantCode(t, "fetch after re-election", waitGroupLoaded(t, us, "g"), nil)
	if got := committed(t, us, "g"); got[0] != 42 || got[1] != 77 {
		t.Fatalf("offsets after re-election: %v, want 0:42 1:77", got)
	}

	// A newer epoch while loaded replaces the shard with one loaded from the log.
	old := us.shardOf(0)
	us.Elect(0, 6)
	if us.shardOf(0) == old {
		t.Fatal("a newer epoch did not replace the shard")
	}
	waitGroupLoaded(t, us, "g")
	if got := committed(t, us, "g"); got[0] != 42 || got[1] != 77 {
		t.Fatalf("offsets after a newer election: %v", got)
	}

	// The partition deleted (epoch -1): its epochs start over.
	us.Resign(0, -1)
	wantCode(t, "find after deletion", errCode(us.FindCoordinator("g")), kerr.NotCoordinator)
	us.Elect(0, 0)
	wantCode(t, "fetch after re-creation", waitGroupLoaded(t, us, "g"), nil)
}

// Without Manual the coordinator elects the partitions open on this node, and a partition of
// the topic that is not open here is simply not coordinated here.
func TestCoordinatorSingleNodeSkipsPartitionsNotOpen(t *testing.T) {
	nd := openNode(t, t.TempDir(), 2)
	defer nd.close()
	c := NewCoordinator(Options{
		Config: testConfig(), Replicas: nd.replicas, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		EnsureTopic: func(bool) (int32, error) { return 3, nil }, // partition 2 lives elsewhere
	})
	defer c.Close()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	waitLoaded(t, c)
	wantCode(t, "local partition", commit(c, groupIn(1, 3), 0, 1), nil)
	wantCode(t, "partition not open here", commit(c, groupIn(2, 3), 0, 1), kerr.NotCoordinator)
	c.Elect(1, singleNodeEpoch) // a report of what Start elected changes nothing
	wantCode(t, "local partition after Elect", commit(c, groupIn(1, 3), 0, 2), nil)
}

// An append that finds the partition gone from under the shard (deleted, moved: its log
// closed) answers NOT_COORDINATOR, not an unknown error; the replica layer's not-leader
// errors map the same way.
func TestCoordinatorAppendNotLeader(t *testing.T) {
	nd := openNode(t, t.TempDir(), 1)
	defer nd.close()
	c := nd.manualCoordinator(testConfig())
	defer c.Close()
	c.Elect(0, 1)
	waitGroupLoaded(t, c, "g")
	wantCode(t, "commit", commit(c, "g", 0, 1), nil)
	if err := nd.replicas.Remove(TopicName, 0); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "commit to a removed partition", commit(c, "g", 0, 2), kerr.NotCoordinator)

	for _, err := range []error{replica.ErrNotLeaderOrFollower, replica.ErrFencedLeaderEpoch, storage.ErrLogClosed} {
		wrapped := fmt.Errorf("append: %w", err)
		if got := offsetWriteError(appendError(wrapped)); got != kerr.NotCoordinator {
			t.Errorf("offset commit failing with %v: %v, want NOT_COORDINATOR", err, got)
		}
		if got := groupWriteError(appendError(wrapped)); got != kerr.NotCoordinator {
			t.Errorf("group write failing with %v: %v, want NOT_COORDINATOR", err, got)
		}
	}
	if got := offsetWriteError(appendError(replica.ErrNotEnoughReplicasAfterAppend)); got != kerr.CoordinatorNotAvailable {
		t.Errorf("NOT_ENOUGH_REPLICAS_AFTER_APPEND: %v", got)
	}
	if got := offsetWriteError(appendError(replica.ErrRequestTimedOut)); got != kerr.CoordinatorNotAvailable {
		t.Errorf("a timed out append: %v", got)
	}
}
