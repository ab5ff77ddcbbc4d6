package group_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/group"
	"github.com/gregor-project/gregor/internal/replica"
	"github.com/gregor-project/gregor/internal/testutil"
)

// These tests move the coordination of __consumer_offsets' single partition away from a
// running broker and back with Resign and Elect, as the broker's metadata loop does when
// the partition's leadership changes, and watch real clients over TCP.

// waitUntil polls cond until it holds or 10 s pass.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not synchronisation
	}
}

func newClient(t *testing.T, addr string, opts ...kgo.Opt) (*kgo.Client, *kadm.Client) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl, kadm.NewClient(cl)
}

func createTopic(t *testing.T, adm *kadm.Client, topic string) {
	t.Helper()
	resp, err := adm.CreateTopics(context.Background(), 1, 1, nil, topic)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// request sends req straight to the broker (no coordinator lookup, no retries).
func request(t *testing.T, cl *kgo.Client, req kmsg.Request) kmsg.Response {
	t.Helper()
	resp, err := cl.SeedBrokers()[0].Request(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func wantErr(t *testing.T, what string, code int16, want error) {
	t.Helper()
	if got := kerr.ErrorForCode(code); got != want {
		t.Fatalf("%s: %v, want %v", what, got, want)
	}
}

// A JoinGroup parked on the broker when the coordinator resigns is answered NOT_COORDINATOR,
// as are later group requests; elected again in a newer epoch, the broker serves the
// offsets committed before.
func TestResignAndElectOverTCP(t *testing.T) {
	b := testutil.StartBroker(t, "offsets.topic.num.partitions=1", "group.initial.rebalance.delay.ms=30000")
	cl, adm := newClient(t, b.Addr())
	createTopic(t, adm, "t")
	ctx := context.Background()
	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: "t", Partition: 0, At: 42, LeaderEpoch: -1})
	if resp, err := adm.CommitOffsets(ctx, "g", offsets); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}

	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.ProtocolType = "g", "consumer"
	join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 30000, 30000
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 0, 0, 0, 0, 1, 0, 1, 't', 0, 0, 0, 0}}}
	if r := request(t, cl, join).(*kmsg.JoinGroupResponse); r.ErrorCode == kerr.MemberIDRequired.Code {
		join.MemberID = r.MemberID
	}
	parked := make(chan *kmsg.JoinGroupResponse, 1)
	go func() {
		resp, err := cl.SeedBrokers()[0].Request(ctx, join)
		if err != nil {
			parked <- nil
			return
		}
		parked <- resp.(*kmsg.JoinGroupResponse)
	}()
	groups := b.Handler().Groups
	waitUntil(t, "join parked", func() bool {
		d := groups.DescribeGroup("g")
		return d.State == "PreparingRebalance" && len(d.Members) == 1
	})

	groups.Resign(0, 1)
	select {
	case r := <-parked:
		if r == nil {
			t.Fatal("parked join: connection failed")
		}
		wantErr(t, "parked join after resign", r.ErrorCode, kerr.NotCoordinator)
	case <-time.After(10 * time.Second):
		t.Fatal("parked join not answered after resign")
	}

	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = "g", join.MemberID, 1
	wantErr(t, "heartbeat after resign", request(t, cl, hb).(*kmsg.HeartbeatResponse).ErrorCode, kerr.NotCoordinator)
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Group = "g"                                           // v0-v7
	fetch.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g"}} // v8+
	fr := request(t, cl, fetch).(*kmsg.OffsetFetchResponse)
	if fr.Version >= 8 {
		fr.ErrorCode = fr.Groups[0].ErrorCode
	}
	wantErr(t, "offset fetch after resign", fr.ErrorCode, kerr.NotCoordinator)
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.Generation = "g", -1
	commit.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 99, LeaderEpoch: -1}}}}
	cr := request(t, cl, commit).(*kmsg.OffsetCommitResponse)
	wantErr(t, "offset commit after resign", cr.Topics[0].Partitions[0].ErrorCode, kerr.NotCoordinator)

	groups.Elect(0, 2)
	got, err := adm.FetchOffsets(ctx, "g") // the client retries while the partition loads
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := got.Lookup("t", 0); !ok || o.Err != nil || o.At != 42 {
		t.Fatalf("offset after re-election: %+v (found %v), want 42", o, ok)
	}
}

// findCoordinatorCounter counts the FindCoordinator requests a client writes.
type findCoordinatorCounter struct{ n atomic.Int64 }

func (c *findCoordinatorCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == kmsg.FindCoordinator.Int16() && err == nil {
		c.n.Add(1)
	}
}

// A consumer group member rides out its coordinator moving away and back: told
// NOT_COORDINATOR, the client looks the coordinator up again, and once the partition is
// elected again (reloading the group from the log) its commit goes through.
func TestConsumerSurvivesCoordinatorMove(t *testing.T) {
	b := testutil.StartBroker(t, "offsets.topic.num.partitions=1", "group.initial.rebalance.delay.ms=0")
	prod, adm := newClient(t, b.Addr())
	createTopic(t, adm, "t")
	ctx := context.Background()
	produce := func(n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	consume := func(cl *kgo.Client, n int) {
		t.Helper()
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		for got := 0; got < n; {
			fs := cl.PollFetches(pctx)
			if err := pctx.Err(); err != nil {
				t.Fatalf("consumed %d of %d records: %v", got, n, err)
			}
			fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s-%d: %v", topic, p, err) })
			got += fs.NumRecords()
		}
	}
	committedOffset := func() int64 {
		t.Helper()
		got, err := adm.FetchOffsets(ctx, "cg")
		if err != nil {
			t.Fatal(err)
		}
		o, _ := got.Lookup("t", 0)
		return o.At
	}

	finds := &findCoordinatorCounter{}
	cl, _ := newClient(t, b.Addr(), kgo.ConsumerGroup("cg"), kgo.ConsumeTopics("t"), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.WithHooks(finds))
	produce(5)
	consume(cl, 5)
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	if got := committedOffset(); got != 5 {
		t.Fatalf("committed %d, want 5", got)
	}

	groups := b.Handler().Groups
	offsets := b.Handler().Replicas.Get(group.TopicName, 0)
	leader, epoch, _ := offsets.Role()
	// The partition moves to broker 2 in the next leader epoch and back in the one after, as
	// the broker's metadata loop applies it: the coordinator's appends carry the epoch it was
	// elected in, which the partition checks.
	away := replica.LeaderAndISR{Leader: 2, LeaderEpoch: epoch + 1, PartitionEpoch: epoch + 1, Replicas: []int32{leader, 2}, ISR: []int32{2}}
	if err := offsets.MakeFollower(away); err != nil {
		t.Fatal(err)
	}
	groups.Resign(0, epoch+1)
	produce(5)
	consume(cl, 5) // fetching needs no coordinator
	before := finds.n.Load()
	done := make(chan error, 1)
	go func() { done <- cl.CommitUncommittedOffsets(ctx) }()
	// The commit meets NOT_COORDINATOR: the client looks the coordinator up again.
	waitUntil(t, "client re-finding its coordinator", func() bool { return finds.n.Load() > before })
	back := replica.LeaderAndISR{Leader: leader, LeaderEpoch: epoch + 2, PartitionEpoch: epoch + 2, Replicas: []int32{leader}, ISR: []int32{leader}}
	if err := offsets.MakeLeader(back, time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	groups.Elect(0, epoch+2)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("commit across the move: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("commit across the move never finished")
	}
	if got := committedOffset(); got != 10 {
		t.Fatalf("committed %d after the move, want 10", got)
	}
}
