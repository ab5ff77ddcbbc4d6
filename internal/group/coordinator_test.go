package group

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/replica"
	"github.com/gregor-project/gregor/internal/storage"
)

// testNode is a log dir with __consumer_offsets partitions open, as a broker holds them.
type testNode struct {
	t        *testing.T
	dir      string
	logs     *storage.Manager
	replicas *replica.Manager
	n        int32
}

func openNode(t *testing.T, dir string, n int32) *testNode {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	logs, err := storage.OpenManager(storage.OS, dir, log)
	if err != nil {
		t.Fatal(err)
	}
	if logs.ClusterID() == "" {
		if err := logs.Format("test-cluster", 1); err != nil {
			t.Fatal(err)
		}
	}
	reps := replica.NewManager(storage.OS, logs, log)
	cfg := storage.DefaultConfig()
	cfg.RetentionMs, cfg.SegmentIndexBytes = -1, 1<<16
	for i := int32(0); i < n; i++ {
		if _, err := reps.Open(TopicName, i, replica.Settings{MaxMessageBytes: 1 << 20, MinInsyncReplicas: 1, Log: cfg}); err != nil {
			t.Fatal(err)
		}
	}
	return &testNode{t: t, dir: dir, logs: logs, replicas: reps, n: n}
}

func (nd *testNode) coordinator(cfg Config) *Coordinator {
	return NewCoordinator(Options{
		Config: cfg, Replicas: nd.replicas, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		EnsureTopic: func(bool) (int32, error) { return nd.n, nil },
	})
}

func (nd *testNode) close() {
	if err := nd.replicas.Close(); err != nil {
		nd.t.Fatal(err)
	}
}

func joinReq(group, member string) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version, r.Group, r.MemberID = 9, group, member
	r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = 10000, 10000
	r.ProtocolType = "consumer"
	r.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: subscription("t")}}
	return r
}

// Offsets and groups committed through one coordinator are appended to the partitions and
// rebuilt by the next one from them; until a partition is loaded its groups answer
// COORDINATOR_LOAD_IN_PROGRESS (heartbeats: NONE).
func TestCoordinatorPersistsAndReloads(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.InitialRebalanceDelayMs = 0
	ctx := context.Background()

	nd := openNode(t, dir, 3)
	c := nd.coordinator(cfg)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	waitLoaded(t, c)
	r := c.JoinGroup(ctx, joinReq("g", ""), Client{ID: "c"})
	wantCode(t, "first join", r.ErrorCode, kerr.MemberIDRequired)
	r = c.JoinGroup(ctx, joinReq("g", r.MemberID), Client{ID: "c"})
	if r.ErrorCode != 0 || r.Generation != 1 {
		t.Fatalf("join: %+v", r)
	}
	sreq := kmsg.NewPtrSyncGroupRequest()
	sreq.Group, sreq.MemberID, sreq.Generation = "g", r.MemberID, 1
	sreq.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: r.MemberID, MemberAssignment: []byte("all")}}
	if sr := c.SyncGroup(ctx, sreq); sr.ErrorCode != 0 {
		t.Fatalf("sync: %+v", sr)
	}
	creq := kmsg.NewPtrOffsetCommitRequest()
	creq.Version, creq.Group, creq.MemberID, creq.Generation = 9, "g", r.MemberID, 1
	creq.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 2, Offset: 42, LeaderEpoch: 3, Timestamp: -1}}}}
	if cr := c.CommitOffsets(ctx, creq); cr.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("commit: %+v", cr)
	}
	p := nd.replicas.Get(TopicName, PartitionFor("g", 3))
	if leo := p.Log().LogEndOffset(); leo != 2 {
		t.Fatalf("coordinator partition holds %d records, want the group and the offset", leo)
	}
	c.Close()
	nd.close()

	nd = openNode(t, dir, 3)
	defer nd.close()
	c = nd.coordinator(cfg)
	defer c.Close()
	shards, err := c.rt.Attach(3) // attached, not loaded yet
	if err != nil {
		t.Fatal(err)
	}
	fetch := func() kmsg.OffsetFetchResponseGroup {
		return c.FetchOffsets(&kmsg.OffsetFetchRequestGroup{Group: "g"}, false)
	}
	wantCode(t, "fetch while loading", fetch().ErrorCode, kerr.CoordinatorLoadInProgress)
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = "g", r.MemberID, 1
	wantCode(t, "heartbeat while loading", c.Heartbeat(ctx, hb).ErrorCode, nil)
	wantCode(t, "join while loading", c.JoinGroup(ctx, joinReq("g", ""), Client{}).ErrorCode, kerr.CoordinatorLoadInProgress)
	c.rt.LoadAll(shards)
	f := fetch()
	if f.ErrorCode != 0 || len(f.Topics) != 1 || f.Topics[0].Partitions[0].Offset != 42 || f.Topics[0].Partitions[0].LeaderEpoch != 3 {
		t.Fatalf("fetch after reload: %+v", f)
	}
	d := c.DescribeGroup("g")
	if d.State != "Stable" || len(d.Members) != 1 || string(d.Members[0].MemberAssignment) != "all" {
		t.Fatalf("describe after reload: %+v", d)
	}
	wantCode(t, "heartbeat after reload", c.Heartbeat(ctx, hb).ErrorCode, nil)
}

func waitLoaded(t *testing.T, c *Coordinator) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := c.ListGroups(nil, nil); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("coordinator did not load")
		}
		time.Sleep(time.Millisecond)
	}
}

// Closing the coordinator answers a parked JoinGroup with NOT_COORDINATOR; a JoinGroup whose
// context ends stops waiting.
func TestCoordinatorCloseAnswersParkedJoin(t *testing.T) {
	nd := openNode(t, t.TempDir(), 1)
	defer nd.close()
	cfg := testConfig() // 3 s initial delay: the join parks
	c := nd.coordinator(cfg)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	waitLoaded(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := joinReq("g", "")
	req.Version = 3 // no MEMBER_ID_REQUIRED: parks at once
	if r := c.JoinGroup(ctx, req, Client{ID: "x"}); r.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("join with a done context: %+v", r)
	}
	done := make(chan *kmsg.JoinGroupResponse)
	go func() { done <- c.JoinGroup(context.Background(), req, Client{ID: "y"}) }()
	waitFor := time.Now().Add(10 * time.Second)
	for c.DescribeGroup("g").State != "PreparingRebalance" || len(c.DescribeGroup("g").Members) != 2 {
		if time.Now().After(waitFor) {
			t.Fatal("second join never parked")
		}
		time.Sleep(time.Millisecond)
	}
	c.Close()
	if r := <-done; r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("parked join after close: %+v", r)
	}
}
