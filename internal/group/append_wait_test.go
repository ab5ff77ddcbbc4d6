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

// recv waits for a background request's answer, failing the test after 10 s.
func recv[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not answered within 10s", what)
		var zero T
		return zero
	}
}

// answered waits for a background commit's error code.
func answered(t *testing.T, what string, ch <-chan int16) int16 { return recv(t, what, ch) }

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

	catchUp(t, p)
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

// A consumer group heartbeat (KIP-848) is answered only once the appends made before it are
// replicated, even when it writes nothing itself, as Kafka's coordinator runtime defers it
// behind the partition's pending writes: its answer may reflect state those writes carry.
func TestCoordinatorConsumerHeartbeatWaitsForEarlierAppends(t *testing.T) {
	p, _, resG, held := heldHeartbeat(t)
	catchUp(t, p)
	wantCode(t, "heartbeat behind the replicated commit", recvHeartbeat(t, held).ErrorCode, nil)
	wantCode(t, "g's commit", answered(t, "g's commit", resG), nil)
}

// A resignation answers a held heartbeat NOT_COORDINATOR.
func TestCoordinatorResignAnswersHeldHeartbeat(t *testing.T) {
	_, c, resG, held := heldHeartbeat(t)
	c.Resign(0, 2)
	wantCode(t, "held heartbeat at the resignation", recvHeartbeat(t, held).ErrorCode, kerr.NotCoordinator)
	wantCode(t, "g's commit at the resignation", answered(t, "g's commit", resG), kerr.NotCoordinator)
}

// heldHeartbeat joins member m1 to consumer group h, then, with g's commit appended and
// waiting for broker 99, sends m1's next (steady) heartbeat and returns once the shard holds
// its answer; it fails the test if the answer comes first.
func heldHeartbeat(t *testing.T) (*replica.Partition, *Coordinator, <-chan int16, <-chan *kmsg.ConsumerGroupHeartbeatResponse) {
	t.Helper()
	_, p, c := replicatedNode(t, 60_000)
	hb := func(epoch int32) <-chan *kmsg.ConsumerGroupHeartbeatResponse {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version, req.Group, req.MemberID, req.MemberEpoch = 1, "h", "m1", epoch
		req.RebalanceTimeoutMillis = 30000
		req.SubscribedTopicNames = []string{"t"}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		ch := make(chan *kmsg.ConsumerGroupHeartbeatResponse, 1)
		go func() { ch <- c.ConsumerGroupHeartbeat(context.Background(), req, Client{ID: "c"}) }()
		return ch
	}
	leo := p.Log().LogEndOffset()
	joined := hb(0)
	waitAppended(t, p, leo)
	catchUp(t, p)
	j := recvHeartbeat(t, joined)
	wantCode(t, "join", j.ErrorCode, nil)

	resG := appendedCommit(t, p, c, "g", 7)
	leo = p.Log().LogEndOffset()
	held := hb(j.MemberEpoch)
	sh := c.shardOf(0)
	deadline := time.Now().Add(10 * time.Second)
	for !holdsReply(sh) {
		select {
		case r := <-held:
			t.Fatalf("heartbeat answered (%v) before g's commit was replicated", kerr.ErrorForCode(r.ErrorCode))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the heartbeat was neither answered nor held behind g's commit")
		}
		time.Sleep(time.Millisecond)
	}
	if got := p.Log().LogEndOffset(); got != leo {
		t.Fatalf("the steady heartbeat wrote records (log end %d, was %d)", got, leo)
	}
	return p, c, resG, held
}

// catchUp has broker 99 fetch up to the log end, which commits everything appended.
func catchUp(t *testing.T, p *replica.Partition) {
	t.Helper()
	if _, err := p.FollowerFetch(replicatedFollower, -1, p.Log().LogEndOffset(), 0, -1, time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
}

// recvHeartbeat waits for a background consumer group heartbeat's answer.
func recvHeartbeat(t *testing.T, ch <-chan *kmsg.ConsumerGroupHeartbeatResponse) *kmsg.ConsumerGroupHeartbeatResponse {
	t.Helper()
	return recv(t, "consumer group heartbeat", ch)
}

// holdsReply reports whether one of sh's pending appends holds a reply back.
func holdsReply(sh *shard) bool {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for _, pa := range sh.mu.pending {
		if len(pa.held) > 0 {
			return true
		}
	}
	return false
}
