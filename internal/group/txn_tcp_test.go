package group_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/gregor-project/gregor/internal/group"
	"github.com/gregor-project/gregor/internal/replica"
	"github.com/gregor-project/gregor/internal/testutil"
)

// txnCommit sends a TxnOffsetCommit of t-0 at offset for producer pid and epoch and returns
// its error code.
func txnCommit(t *testing.T, cl *kgo.Client, pid int64, epoch int16, offset int64) int16 {
	t.Helper()
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group = "tx", "g"
	req.ProducerID, req.ProducerEpoch = pid, epoch
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := request(t, cl, req).(*kmsg.TxnOffsetCommitResponse)
	if resp.Version != 4 {
		t.Fatalf("TxnOffsetCommit answered in v%d, want v4 (the client's cap)", resp.Version)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

// txnV4 caps a client's TxnOffsetCommit at v4: these tests write the transactions' markers
// themselves, with producer ids no transaction coordinator knows, and v5 (transaction
// version 2) would first have the coordinator add the group's partition to the transaction.
func txnV4() kgo.Opt {
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(kmsg.TxnOffsetCommit.Int16(), 4)
	return kgo.MaxVersions(vs)
}

// fetchT0 returns group g's offset of t-0 and its error code, with or without
// require_stable.
func fetchT0(t *testing.T, cl *kgo.Client, requireStable bool) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.RequireStable = requireStable
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = "g"
	g.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}}
	req.Groups = append(req.Groups, g)
	resp := request(t, cl, req).(*kmsg.OffsetFetchResponse)
	rg := resp.Groups[0]
	if rg.ErrorCode != 0 {
		return -1, rg.ErrorCode
	}
	p := rg.Topics[0].Partitions[0]
	return p.Offset, p.ErrorCode
}

func wantFetch(t *testing.T, what string, cl *kgo.Client, requireStable bool, want int64, wantCode error) {
	t.Helper()
	off, code := fetchT0(t, cl, requireStable)
	wantErr(t, what, code, wantCode)
	if wantCode == nil && off != want {
		t.Fatalf("%s: offset %d, want %d", what, off, want)
	}
}

// endTxn writes the transaction marker of pid to __consumer_offsets-0, as the partition's
// leader does for the transaction coordinator's WriteTxnMarkers, and reports it to the group
// coordinator, as the broker does once the marker is written.
func endTxn(t *testing.T, b *testutil.Broker, pid int64, epoch int16, commit bool) {
	t.Helper()
	p := b.Handler().Replicas.Get(group.TopicName, 0)
	res, err := p.WriteTxnMarker(replica.TxnMarker{ProducerID: pid, ProducerEpoch: epoch, Commit: commit}, time.Now().UnixMilli(), 5000)
	if err == nil && res.Wait != nil {
		err = <-res.Wait
	}
	if err != nil {
		t.Fatalf("marker of producer %d: %v", pid, err)
	}
	b.Handler().Groups.CompleteTxn(0, pid, commit)
}

// Over TCP: a transaction's offsets (TxnOffsetCommit) go to the group's partition as a
// transactional batch of the producer (the partition holds the transaction open), stay out
// of OffsetFetch (UNSTABLE_OFFSET_COMMIT with require_stable) until the COMMIT marker, are
// dropped by an ABORT, are refused for a fenced producer epoch, and survive a restart as they
// were: committed ones committed, an open transaction's still pending until its marker.
func TestTxnOffsetCommitOverTCP(t *testing.T) {
	b := testutil.StartBroker(t, "offsets.topic.num.partitions=1")
	cl, adm := newClient(t, b.Addr(), txnV4())
	createTopic(t, adm, "t")
	ctx := context.Background()
	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: "t", Partition: 0, At: 5, LeaderEpoch: -1})
	if resp, err := adm.CommitOffsets(ctx, "g", offsets); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}

	wantErr(t, "txn commit", txnCommit(t, cl, 1000, 0, 42), nil)
	wantFetch(t, "fetch with a transaction open", cl, false, 5, nil)
	wantFetch(t, "require_stable with a transaction open", cl, true, -1, kerr.UnstableOffsetCommit)
	p := b.Handler().Replicas.Get(group.TopicName, 0)
	var open bool
	for _, pi := range p.ActiveProducers() {
		open = open || pi.ProducerID == 1000 && pi.TxnStartOffset >= 0
	}
	if !open || p.LastStableOffset() >= p.HighWatermark() {
		t.Fatalf("the partition holds no open transaction of producer 1000: producers %+v, LSO %d, HW %d", p.ActiveProducers(), p.LastStableOffset(), p.HighWatermark())
	}
	wantErr(t, "second txn commit of the transaction", txnCommit(t, cl, 1000, 0, 43), nil)
	endTxn(t, b, 1000, 0, true)
	wantFetch(t, "fetch after COMMIT", cl, false, 43, nil)
	wantFetch(t, "require_stable after COMMIT", cl, true, 43, nil)

	wantErr(t, "txn commit to abort", txnCommit(t, cl, 1001, 0, 99), nil)
	endTxn(t, b, 1001, 0, false)
	wantFetch(t, "fetch after ABORT", cl, true, 43, nil)

	// Producer 1000 in a newer epoch fences its older one at the partition.
	wantErr(t, "txn commit in a new epoch", txnCommit(t, cl, 1000, 1, 50), nil)
	wantErr(t, "txn commit in the fenced epoch", txnCommit(t, cl, 1000, 0, 51), kerr.InvalidProducerEpoch)
	endTxn(t, b, 1000, 1, false)
	// The fenced write was refused by the partition, so the coordinator replays its state
	// from the log (rollbackLocked): until then its requests get COORDINATOR_LOAD_IN_PROGRESS,
	// which a client retries.
	waitUntil(t, "offsets replayed after the refused write", func() bool {
		_, code := fetchT0(t, cl, false)
		return code != kerr.CoordinatorLoadInProgress.Code
	})

	wantErr(t, "txn commit left open", txnCommit(t, cl, 1002, 0, 77), nil)
	b = b.Restart()
	cl, _ = newClient(t, b.Addr(), txnV4())
	waitUntil(t, "offsets loaded after the restart", func() bool {
		_, code := fetchT0(t, cl, false)
		return code != kerr.CoordinatorLoadInProgress.Code
	})
	wantFetch(t, "fetch after restart", cl, false, 43, nil)
	wantFetch(t, "require_stable after restart", cl, true, -1, kerr.UnstableOffsetCommit)
	endTxn(t, b, 1002, 0, true)
	wantFetch(t, "fetch after the open transaction committed", cl, true, 77, nil)
}
