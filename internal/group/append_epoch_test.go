package group

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/replica"
)

// A coordinator appends in the leader epoch it was elected in, so the partition's epoch check
// fences it once the partition has moved on to a newer term, even if the broker's Resign has
// not reached it yet (a commit racing the resignation): its writes are refused, nothing is
// appended, and the client is told NOT_COORDINATOR, as Kafka answers a write that finds the
// coordinator's partition led elsewhere (NOT_LEADER_OR_FOLLOWER).

// soleISRNode opens one __consumer_offsets partition led by broker 1 in leader epoch 1 with
// broker 1 alone in the ISR (acks=all appends are committed at once), and elects a
// coordinator in epoch 1.
func soleISRNode(t *testing.T) (*replica.Partition, *Coordinator) {
	t.Helper()
	nd := openNode(t, t.TempDir(), 1)
	t.Cleanup(nd.close)
	nd.replicas.SetReplication(replica.ReplicationOptions{LocalID: 1})
	p := nd.replicas.Get(TopicName, 0)
	if err := p.MakeLeader(leaderReg(1), time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	c := nd.manualCoordinator(testConfig())
	t.Cleanup(c.Close)
	c.Elect(0, 1)
	waitGroupLoaded(t, c, "g")
	return p, c
}

// leaderReg is broker 1 leading alone in epoch.
func leaderReg(epoch int32) replica.LeaderAndISR {
	return replica.LeaderAndISR{Leader: 1, LeaderEpoch: epoch, PartitionEpoch: epoch, Replicas: []int32{1}, ISR: []int32{1}}
}

func TestCoordinatorStaleEpochCommitNotCoordinator(t *testing.T) {
	p, c := soleISRNode(t)
	wantCode(t, "commit in the elected epoch", commit(c, "g", 0, 1), nil)

	// The partition enters epoch 2; the coordinator has not heard (no Elect, no Resign).
	if err := p.MakeLeader(leaderReg(2), time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	leo := p.Log().LogEndOffset()
	wantCode(t, "commit of a coordinator elected in epoch 1", commit(c, "g", 0, 2), kerr.NotCoordinator)
	if got := p.Log().LogEndOffset(); got != leo {
		t.Fatalf("the stale coordinator appended: log end %d, was %d", got, leo)
	}
	if got := committed(t, c, "g"); got[0] != 1 {
		t.Fatalf("committed %v, want 0:1 (the refused commit must not apply)", got)
	}

	del := kmsg.NewPtrOffsetDeleteRequest()
	del.Group = "g"
	del.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
	wantCode(t, "offset delete of the stale coordinator", c.DeleteOffsets(context.Background(), del).ErrorCode, kerr.NotCoordinator)
	if got := p.Log().LogEndOffset(); got != leo {
		t.Fatalf("the stale coordinator appended a tombstone: log end %d, was %d", got, leo)
	}

	// Elected in the new epoch, the broker coordinates again.
	c.Elect(0, 2)
	waitGroupLoaded(t, c, "g")
	wantCode(t, "commit after the Elect of epoch 2", commit(c, "g", 0, 3), nil)
	if got := committed(t, c, "g"); got[0] != 3 {
		t.Fatalf("committed %v, want 0:3", got)
	}
}

// A group metadata write of a stale coordinator (here: a member joining a consumer group,
// KIP-848, whose records are written before it is answered) is refused the same way.
func TestCoordinatorStaleEpochGroupWriteNotCoordinator(t *testing.T) {
	p, c := soleISRNode(t)
	if err := p.MakeLeader(leaderReg(2), time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	leo := p.Log().LogEndOffset()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version, req.Group, req.MemberID, req.MemberEpoch = 1, "g", "m1", 0
	req.RebalanceTimeoutMillis = 30000
	req.SubscribedTopicNames = []string{"t"}
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	resp := c.ConsumerGroupHeartbeat(context.Background(), req, Client{ID: "c"})
	wantCode(t, "consumer group join at a stale coordinator", resp.ErrorCode, kerr.NotCoordinator)
	if got := p.Log().LogEndOffset(); got != leo {
		t.Fatalf("the stale coordinator appended group metadata: log end %d, was %d", got, leo)
	}
}

// The replica layer's epoch refusals name NOT_LEADER_OR_FOLLOWER, which requests see as
// NOT_COORDINATOR, whichever side is behind.
func TestAppendErrorEpochRefusals(t *testing.T) {
	for _, err := range []error{replica.ErrFencedLeaderEpoch, replica.ErrUnknownLeaderEpoch} {
		wrapped := fmt.Errorf("append: %w", err)
		if got := offsetWriteError(appendError(wrapped)); got != kerr.NotCoordinator {
			t.Errorf("offset commit failing with %v: %v, want NOT_COORDINATOR", err, got)
		}
		if got := groupWriteError(appendError(wrapped)); got != kerr.NotCoordinator {
			t.Errorf("group write failing with %v: %v, want NOT_COORDINATOR", err, got)
		}
	}
}
