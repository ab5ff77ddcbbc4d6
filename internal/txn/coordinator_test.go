package txn

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/replica"
	"github.com/gregor-project/gregor/internal/storage"
)

// The edge on a real partition: one __transaction_state partition of a replica.Manager on
// disk, and a MarkerSender that records what it is asked to write (the broker's own is not
// under test here).

type testNode struct {
	t        *testing.T
	replicas *replica.Manager
}

func openNode(t *testing.T, dir string) *testNode {
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
	if _, err := reps.Open(TopicName, 0, replica.Settings{MaxMessageBytes: 1 << 20, MinInsyncReplicas: 1, Log: cfg}); err != nil {
		t.Fatal(err)
	}
	return &testNode{t: t, replicas: reps}
}

func (nd *testNode) close() {
	if err := nd.replicas.Close(); err != nil {
		nd.t.Fatal(err)
	}
}

// recordingSender records every marker request; while fail is set it writes none.
type recordingSender struct {
	mu   sync.Mutex
	sent []Markers
	fail atomic.Bool
}

func (r *recordingSender) WriteMarkers(_ context.Context, m Markers) map[TopicPartition]error {
	r.mu.Lock()
	r.sent = append(r.sent, m)
	r.mu.Unlock()
	if !r.fail.Load() {
		return nil
	}
	out := map[TopicPartition]error{}
	for _, p := range m.Partitions {
		out[p] = kerr.NotLeaderForPartition
	}
	return out
}

func (r *recordingSender) all() []Markers {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.sent)
}

func (nd *testNode) coordinator(cfg Config, sender MarkerSender, manual bool) *Coordinator {
	var next atomic.Int64
	next.Store(5000)
	return NewCoordinator(Options{
		Config: cfg, Replicas: nd.replicas, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Manual: manual,
		EnsureTopic:    func(bool) (int32, error) { return 1, nil },
		ProducerIDs:    func(context.Context) (int64, error) { return next.Add(1), nil },
		Markers:        sender,
		GroupPartition: func(string) (int32, error) { return 3, nil },
		PartitionExists: func(topic string, _ int32) bool {
			return topic != "missing"
		},
	})
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// describe returns id's state as DescribeTransactions answers it.
func describe(c *Coordinator, id string) kmsg.DescribeTransactionsResponseTransactionState {
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{id}
	return c.DescribeTransactions(req).TransactionStates[0]
}

// waitLoaded waits until id's partition answers something else than
// COORDINATOR_LOAD_IN_PROGRESS.
func waitLoaded(t *testing.T, c *Coordinator, id string) int16 {
	t.Helper()
	var code int16
	waitFor(t, "the partition to load", func() bool {
		code = describe(c, id).ErrorCode
		return code != kerr.CoordinatorLoadInProgress.Code
	})
	return code
}

func edgeInit(t *testing.T, c *Coordinator, id string) (int64, int16) {
	t.Helper()
	req := initReq(id, 60_000, 4)
	r := c.InitProducerID(context.Background(), req)
	if r.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	return r.ProducerID, r.ProducerEpoch
}

func addReq(id string, pid int64, epoch int16, version int16, topic string, parts ...int32) *kmsg.AddPartitionsToTxnRequest {
	r := kmsg.NewPtrAddPartitionsToTxnRequest()
	r.Version = version
	if version <= 3 {
		r.TransactionalID, r.ProducerID, r.ProducerEpoch = id, pid, epoch
		r.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: topic, Partitions: parts}}
		return r
	}
	r.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{{TransactionalID: id, ProducerID: pid, ProducerEpoch: epoch,
		VerifyOnly: true, Topics: []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: topic, Partitions: parts}}}}
	return r
}

func endReq(id string, pid int64, epoch int16, commit bool) *kmsg.EndTxnRequest {
	r := kmsg.NewPtrEndTxnRequest()
	r.Version, r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Commit = 4, id, pid, epoch, commit
	return r
}

// A transaction through the edge: its records are appended to the partition and replicated
// before each answer, its markers go to every partition (the group's __consumer_offsets
// partition included) and it completes; a new coordinator on the same log rebuilds the id
// (the same producer id, the next epoch), and one that finds a transaction in PrepareCommit
// (its markers never written) writes them and completes it.
func TestCoordinatorTransaction(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	nd := openNode(t, dir)
	sender := &recordingSender{}
	c := nd.coordinator(testConfig(), sender, false)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if code := waitLoaded(t, c, "a"); code != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("describe before any init: %v", kerr.ErrorForCode(code))
	}
	part := nd.replicas.Get(TopicName, 0)
	pid, epoch := edgeInit(t, c, "a")
	if part.HighWatermark() != 1 {
		t.Fatalf("high watermark %d after InitProducerId, want 1", part.HighWatermark())
	}
	ar := c.AddPartitionsToTxn(ctx, addReq("a", pid, epoch, 3, "t", 1, 0, 1))
	if len(ar.Topics) != 1 || len(ar.Topics[0].Partitions) != 2 || ar.Topics[0].Partitions[0].ErrorCode != 0 || ar.Topics[0].Partitions[1].ErrorCode != 0 {
		t.Fatalf("AddPartitionsToTxn: %+v", ar.Topics)
	}
	miss := c.AddPartitionsToTxn(ctx, kmsgAddTwo("a", pid, epoch))
	if c := partitionCodes(miss); c["missing"] != kerr.UnknownTopicOrPartition.Code || c["t"] != kerr.OperationNotAttempted.Code {
		t.Fatalf("unknown topic: %v", c)
	}
	if r := c.AddOffsetsToTxn(ctx, &kmsg.AddOffsetsToTxnRequest{Version: 3, TransactionalID: "a", ProducerID: pid, ProducerEpoch: epoch, Group: "g"}); r.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	vr := c.AddPartitionsToTxn(ctx, addReq("a", pid, epoch, 4, "t", 0, 5))
	if got := vr.Transactions[0].Topics[0].Partitions; got[0].ErrorCode != 0 || got[1].ErrorCode != kerr.InvalidTxnState.Code {
		t.Fatalf("verify: %+v", got)
	}
	d := describe(c, "a")
	if d.State != "Ongoing" || len(d.Topics) != 2 {
		t.Fatalf("describe ongoing: %+v", d)
	}
	lr := c.ListTransactions(&kmsg.ListTransactionsRequest{Version: 1, StateFilters: []string{"Ongoing", "Bogus"}, DurationFilterMillis: -1})
	if lr.ErrorCode != 0 || len(lr.TransactionStates) != 1 || !slices.Equal(lr.UnknownStateFilters, []string{"Bogus"}) {
		t.Fatalf("list: %+v", lr)
	}
	if r := c.EndTxn(ctx, endReq("a", pid, epoch, true)); r.ErrorCode != 0 {
		t.Fatalf("EndTxn: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	waitFor(t, "the commit to complete", func() bool { return describe(c, "a").State == "CompleteCommit" })
	sent := sender.all()
	if len(sent) != 1 || !sent[0].Commit || sent[0].ProducerID != pid || sent[0].CoordinatorEpoch != 0 ||
		!slices.Equal(sent[0].Partitions, []TopicPartition{{groupTopic, 3}, {"t", 0}, {"t", 1}}) {
		t.Fatalf("markers: %+v", sent)
	}
	hw := part.HighWatermark()
	// The next transaction's markers fail: it stays in PrepareCommit, retried meanwhile.
	sender.fail.Store(true)
	if r := c.AddPartitionsToTxn(ctx, addReq("a", pid, epoch, 3, "t", 2)); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatal("second add failed")
	}
	if r := c.EndTxn(ctx, endReq("a", pid, epoch, true)); r.ErrorCode != 0 {
		t.Fatalf("second EndTxn: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	waitFor(t, "a retry", func() bool { return len(sender.all()) >= 3 })
	if s := describe(c, "a").State; s != "PrepareCommit" {
		t.Fatalf("state %s with its markers failing", s)
	}
	if r := c.EndTxn(ctx, endReq("a", pid, epoch, true)); r.ErrorCode != kerr.ConcurrentTransactions.Code {
		t.Fatalf("EndTxn while the markers are retried: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	c.Close()
	if part.HighWatermark() <= hw {
		t.Fatal("the second transaction was not written")
	}
	nd.close()

	// A new coordinator on the same log completes the transaction left in PrepareCommit.
	nd = openNode(t, dir)
	defer nd.close()
	sender2 := &recordingSender{}
	c = nd.coordinator(testConfig(), sender2, false)
	defer c.Close()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	waitLoaded(t, c, "a")
	waitFor(t, "the reloaded commit to complete", func() bool { return describe(c, "a").State == "CompleteCommit" })
	if sent := sender2.all(); len(sent) != 1 || !slices.Equal(sent[0].Partitions, []TopicPartition{{"t", 2}}) {
		t.Fatalf("markers after the reload: %+v", sent)
	}
	pid2, epoch2 := edgeInit(t, c, "a")
	if pid2 != pid || epoch2 != epoch+1 {
		t.Fatalf("after the reload: %d/%d, want %d/%d", pid2, epoch2, pid, epoch+1)
	}
}

func kmsgAddTwo(id string, pid int64, epoch int16) *kmsg.AddPartitionsToTxnRequest {
	r := addReq(id, pid, epoch, 3, "t", 7)
	r.Topics = append(r.Topics, kmsg.AddPartitionsToTxnRequestTopic{Topic: "missing", Partitions: []int32{0}})
	return r
}

func partitionCodes(r *kmsg.AddPartitionsToTxnResponse) map[string]int16 {
	out := map[string]int16{}
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			out[t.Topic] = p.ErrorCode
		}
	}
	return out
}

// A transaction left open by a dead producer is aborted after its timeout, with the epoch
// bumped past the producer's.
func TestCoordinatorTimeoutAborts(t *testing.T) {
	nd := openNode(t, t.TempDir())
	defer nd.close()
	sender := &recordingSender{}
	cfg := testConfig()
	cfg.AbortTimedOutIntervalMs = 20
	c := nd.coordinator(cfg, sender, false)
	defer c.Close()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	waitLoaded(t, c, "dead")
	ctx := context.Background()
	r := c.InitProducerID(ctx, initReq("dead", 50, 4))
	if r.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(r.ErrorCode))
	}
	if a := c.AddPartitionsToTxn(ctx, addReq("dead", r.ProducerID, r.ProducerEpoch, 3, "t", 0)); a.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatal("add failed")
	}
	waitFor(t, "the timed-out transaction to be aborted", func() bool { return describe(c, "dead").State == "CompleteAbort" })
	sent := sender.all()
	if len(sent) != 1 || sent[0].Commit || sent[0].ProducerEpoch != r.ProducerEpoch+1 {
		t.Fatalf("markers: %+v", sent)
	}
	if e := c.EndTxn(ctx, endReq("dead", r.ProducerID, r.ProducerEpoch, true)); e.ErrorCode != kerr.ProducerFenced.Code {
		t.Fatalf("the dead producer's commit: %v", kerr.ErrorForCode(e.ErrorCode))
	}
}

// Leadership: no partition is coordinated before its Elect (NOT_COORDINATOR); the markers
// carry the leader epoch as the coordinator epoch; a Resign answers NOT_COORDINATOR; an
// Elect in an older epoch is ignored.
func TestCoordinatorLeadership(t *testing.T) {
	nd := openNode(t, t.TempDir())
	defer nd.close()
	nd.replicas.SetReplication(replica.ReplicationOptions{LocalID: 1})
	p := nd.replicas.Get(TopicName, 0)
	reg := replica.LeaderAndISR{Leader: 1, LeaderEpoch: 4, PartitionEpoch: 1, Replicas: []int32{1}, ISR: []int32{1}}
	if err := p.MakeLeader(reg, time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	sender := &recordingSender{}
	c := nd.coordinator(testConfig(), sender, true)
	defer c.Close()
	ctx := context.Background()
	if r := c.InitProducerID(ctx, initReq("a", 1000, 4)); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("before Elect: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	c.Elect(0, 4)
	waitLoaded(t, c, "a")
	pid, epoch := edgeInit(t, c, "a")
	c.AddPartitionsToTxn(ctx, addReq("a", pid, epoch, 3, "t", 0))
	if r := c.EndTxn(ctx, endReq("a", pid, epoch, false)); r.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(r.ErrorCode))
	}
	waitFor(t, "the abort to complete", func() bool { return describe(c, "a").State == "CompleteAbort" })
	if sent := sender.all(); len(sent) != 1 || sent[0].CoordinatorEpoch != 4 {
		t.Fatalf("markers: %+v", sent)
	}
	c.Resign(0, 5)
	if r := c.InitProducerID(ctx, initReq("a", 1000, 4)); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("after Resign: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	c.Elect(0, 4) // stale
	if code := describe(c, "a").ErrorCode; code != kerr.NotCoordinator.Code {
		t.Fatalf("after a stale Elect: %v", kerr.ErrorForCode(code))
	}
	lr := c.ListTransactions(&kmsg.ListTransactionsRequest{Version: 2, TransactionalIDPattern: ptr("(")})
	if lr.ErrorCode != kerr.InvalidRegularExpression.Code {
		t.Fatalf("bad pattern: %v", kerr.ErrorForCode(lr.ErrorCode))
	}
	// A shard elected in an epoch the partition no longer leads in cannot write.
	c.Elect(0, 6)
	waitLoaded(t, c, "a")
	if r := c.InitProducerID(ctx, initReq("a", 1000, 4)); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("in an epoch the partition does not lead in: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

func ptr[T any](v T) *T { return &v }

// Every version kmsg has of the coordinator's requests is answered, in that version's shape
// and error codes (PRODUCER_FENCED as INVALID_PRODUCER_EPOCH before KIP-588's versions).
func TestCoordinatorVersions(t *testing.T) {
	nd := openNode(t, t.TempDir())
	defer nd.close()
	c := nd.coordinator(testConfig(), &recordingSender{}, false)
	defer c.Close()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	waitLoaded(t, c, "v")
	ctx := context.Background()
	var pid int64
	var epoch int16
	for v := int16(0); v <= (&kmsg.InitProducerIDRequest{}).MaxVersion(); v++ {
		r := c.InitProducerID(ctx, initReq("v", 60_000, v))
		if r.ErrorCode != 0 || r.Version != v {
			t.Fatalf("InitProducerId v%d: %+v", v, r)
		}
		pid, epoch = r.ProducerID, r.ProducerEpoch
	}
	for v := int16(0); v <= (&kmsg.AddPartitionsToTxnRequest{}).MaxVersion(); v++ {
		req := addReq("v", pid, epoch, v, "t", int32(v))
		if v >= 5 {
			req.Transactions[0].VerifyOnly = false // a leader adding for a client of transaction version 2
		}
		r := c.AddPartitionsToTxn(ctx, req)
		var got int16 = -1
		if v <= 3 {
			got = r.Topics[0].Partitions[0].ErrorCode
		} else {
			got = r.Transactions[0].Topics[0].Partitions[0].ErrorCode
		}
		want := int16(0)
		if v == 4 { // verify only: t-4 was never added
			want = kerr.InvalidTxnState.Code
		}
		if got != want {
			t.Fatalf("AddPartitionsToTxn v%d: %v", v, kerr.ErrorForCode(got))
		}
		fenced := addReq("v", pid, epoch-1, v, "t", 0)
		r = c.AddPartitionsToTxn(ctx, fenced)
		wantFenced := kerr.ProducerFenced.Code
		if v < 2 {
			wantFenced = kerr.InvalidProducerEpoch.Code
		}
		if v <= 3 {
			got = r.Topics[0].Partitions[0].ErrorCode
		} else {
			got = r.Transactions[0].Topics[0].Partitions[0].ErrorCode
		}
		if got != wantFenced {
			t.Fatalf("fenced AddPartitionsToTxn v%d: %v", v, kerr.ErrorForCode(got))
		}
	}
	for v := int16(0); v <= (&kmsg.AddOffsetsToTxnRequest{}).MaxVersion(); v++ {
		r := c.AddOffsetsToTxn(ctx, &kmsg.AddOffsetsToTxnRequest{Version: v, TransactionalID: "v", ProducerID: pid, ProducerEpoch: epoch - 1, Group: "g"})
		want := kerr.ProducerFenced.Code
		if v < 2 {
			want = kerr.InvalidProducerEpoch.Code
		}
		if r.ErrorCode != want || r.Version != v {
			t.Fatalf("fenced AddOffsetsToTxn v%d: %v", v, kerr.ErrorForCode(r.ErrorCode))
		}
	}
	for v := int16(0); v <= (&kmsg.EndTxnRequest{}).MaxVersion(); v++ {
		req := endReq("v", pid, epoch-1, false)
		req.Version = v
		want := kerr.ProducerFenced.Code
		if v < 2 {
			want = kerr.InvalidProducerEpoch.Code
		}
		if r := c.EndTxn(ctx, req); r.ErrorCode != want || r.ProducerID != -1 {
			t.Fatalf("fenced EndTxn v%d: %+v", v, r)
		}
	}
	req := endReq("v", pid, epoch, true)
	req.Version = 5
	if r := c.EndTxn(ctx, req); r.ErrorCode != 0 || r.ProducerID != pid || r.ProducerEpoch != epoch+1 {
		t.Fatalf("EndTxn v5: %+v", r)
	}
	for v := int16(0); v <= (&kmsg.ListTransactionsRequest{}).MaxVersion(); v++ {
		req := kmsg.NewPtrListTransactionsRequest()
		req.Version = v
		req.TransactionalIDPattern = ptr("v|w")
		if r := c.ListTransactions(req); r.ErrorCode != 0 || len(r.TransactionStates) != 1 || r.TransactionStates[0].ProducerID != pid {
			t.Fatalf("ListTransactions v%d: %+v", v, r)
		}
	}
	d := c.DescribeTransactions(&kmsg.DescribeTransactionsRequest{TransactionalIDs: []string{"v", "", "nope"}})
	if len(d.TransactionStates) != 3 || d.TransactionStates[0].ErrorCode != 0 ||
		d.TransactionStates[1].ErrorCode != kerr.InvalidRequest.Code || d.TransactionStates[2].ErrorCode != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("DescribeTransactions: %+v", d.TransactionStates)
	}
}

// While a partition loads, its ids answer COORDINATOR_LOAD_IN_PROGRESS, and ListTransactions
// too, as Kafka does.
func TestCoordinatorLoading(t *testing.T) {
	nd := openNode(t, t.TempDir())
	defer nd.close()
	c := nd.coordinator(testConfig(), &recordingSender{}, true)
	defer c.Close()
	if _, err := c.rt.Attach(1); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.rt.Install(0, 0); !ok { // elected, not yet loaded
		t.Fatal("the election was ignored")
	}
	ctx := context.Background()
	if r := c.InitProducerID(ctx, initReq("a", 1000, 4)); r.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("InitProducerId while loading: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := c.EndTxn(ctx, endReq("a", 1, 0, true)); r.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("EndTxn while loading: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := c.ListTransactions(kmsg.NewPtrListTransactionsRequest()); r.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("ListTransactions while loading: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if code := describe(c, "a").ErrorCode; code != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("DescribeTransactions while loading: %v", kerr.ErrorForCode(code))
	}
}
