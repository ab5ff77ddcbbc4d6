package group

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/replica"
)

// While one group's append waits for the ISR, the shard's other groups are served: the wait
// holds no lock. Their writes are appended behind it at once, and each write is answered
// (and applied) only once the ISR has it. The partition is the real one of
// replicated_append_test.go, with broker 99 played by the test.

// within runs f in the background and returns its result, failing the test if it does not
// return within d.
func within[T any](t *testing.T, what string, d time.Duration, f func() T) T {
	t.Helper()
	ch := make(chan T, 1)
	go func() { ch <- f() }()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("%s: not answered within %v", what, d)
		var zero T
		return zero
	}
}

// appendedCommit commits offset for group in the background and returns once the commit's
// record is in the log (its answer waits for broker 99).
func appendedCommit(t *testing.T, p *replica.Partition, c *Coordinator, group string, offset int64) <-chan int16 {
	t.Helper()
	leo := p.Log().LogEndOffset()
	ch := make(chan int16, 1)
	go func() { ch <- commit(c, group, 0, offset) }()
	waitAppended(t, p, leo)
	return ch
}

// answered waits for a background commit's error code, failing the test after 10 s.
func answered(t *testing.T, what string, ch <-chan int16) int16 {
	t.Helper()
	select {
	case code := <-ch:
		return code
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not answered within 10s", what)
		return 0
	}
}

func TestCoordinatorReplicationWaitDoesNotBlockShard(t *testing.T) {
	_, p, c := replicatedNode(t, 60_000)
	const other = "h" // with one partition, every group shares the shard
	if PartitionFor(other, 1) != PartitionFor("g", 1) {
		t.Fatal("the groups must share a partition")
	}
	resG := appendedCommit(t, p, c, "g", 7)

	// g's commit waits for broker 99; h's requests are answered meanwhile.
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = other, "nobody", 1
	code := within(t, "heartbeat of another group", 10*time.Second, func() int16 {
		return c.Heartbeat(context.Background(), hb).ErrorCode
	})
	wantCode(t, "heartbeat of an unknown member of another group", code, kerr.UnknownMemberID)
	code = within(t, "offset fetch of another group", 10*time.Second, func() int16 {
		return c.FetchOffsets(&kmsg.OffsetFetchRequestGroup{Group: other}, false).ErrorCode
	})
	wantCode(t, "offset fetch of another group", code, nil)

	// Not yet durable: g's commit is not applied, and a stable fetch says it is pending.
	if got := committed(t, c, "g"); len(got) != 0 {
		t.Fatalf("g's unreplicated commit is visible: %v", got)
	}
	stable := c.FetchOffsets(&kmsg.OffsetFetchRequestGroup{Group: "g", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}}}, true)
	wantCode(t, "stable fetch of a pending commit", stable.Topics[0].Partitions[0].ErrorCode, kerr.UnstableOffsetCommit)

	// h's commit is appended behind g's at once and, like it, waits for broker 99.
	resH := appendedCommit(t, p, c, other, 3)
	select {
	case code := <-resG:
		t.Fatalf("g's commit answered (%v) before broker 99 had it", kerr.ErrorForCode(code))
	case code := <-resH:
		t.Fatalf("h's commit answered (%v) before broker 99 had it", kerr.ErrorForCode(code))
	default:
	}

	end := p.Log().LogEndOffset()
	if _, err := p.FollowerFetch(replicatedFollower, -1, end, 0, -1, time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "g's commit once replicated", answered(t, "g's commit", resG), nil)
	wantCode(t, "h's commit once replicated", answered(t, "h's commit", resH), nil)
	if got := committed(t, c, "g"); got[0] != 7 {
		t.Fatalf("g committed %v, want 0:7", got)
	}
	if got := committed(t, c, other); got[0] != 3 {
		t.Fatalf("h committed %v, want 0:3", got)
	}
}

// A resignation while appends wait answers all of them NOT_COORDINATOR at once, and later
// requests too.
func TestCoordinatorResignFailsEveryWaitingAppend(t *testing.T) {
	_, p, c := replicatedNode(t, 60_000)
	resG := appendedCommit(t, p, c, "g", 7)
	resH := appendedCommit(t, p, c, "h", 3)
	c.Resign(0, 2)
	wantCode(t, "g's commit waiting at the resignation", answered(t, "g's commit", resG), kerr.NotCoordinator)
	wantCode(t, "h's commit waiting at the resignation", answered(t, "h's commit", resH), kerr.NotCoordinator)
	wantCode(t, "commit after the resignation", commit(c, "g", 0, 8), kerr.NotCoordinator)
}
