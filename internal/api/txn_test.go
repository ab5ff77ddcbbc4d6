package api_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/testutil"
)

// txnProducer is a transactional franz-go producer of topic. As the broker finalizes
// transaction.version 2, franz-go runs transactions of KIP-890 part 2 unless opts hold tv1.
func txnProducer(t *testing.T, addr, id, topic string, opts ...kgo.Opt) *kgo.Client {
	return newClient(t, addr, append([]kgo.Opt{kgo.TransactionalID(id), kgo.DefaultProduceTopic(topic), kgo.TransactionTimeout(10 * time.Second)}, opts...)...)
}

// tv1 caps a client below the requests of transaction version 2 (Produce v11, EndTxn v4,
// TxnOffsetCommit v4): franz-go then runs the older protocol (AddPartitionsToTxn,
// AddOffsetsToTxn, one epoch for every transaction), as a client that does not look at the
// transaction.version feature does.
func tv1() kgo.Opt {
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(kmsg.Produce.Int16(), 11)
	vs.SetMaxKeyVersion(kmsg.EndTxn.Int16(), 4)
	vs.SetMaxKeyVersion(kmsg.TxnOffsetCommit.Int16(), 4)
	return kgo.MaxVersions(vs)
}

// transactionVersions runs test once for a client of transaction version 1 and once for
// one of version 2.
func transactionVersions(t *testing.T, test func(t *testing.T, opts ...kgo.Opt)) {
	t.Run("tv1", func(t *testing.T) { test(t, tv1()) })
	t.Run("tv2", func(t *testing.T) { test(t) })
}

// inTxn produces values in one transaction and commits or aborts it.
func inTxn(t *testing.T, cl *kgo.Client, commit bool, values ...string) {
	t.Helper()
	ctx := ctxT(t)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatalf("begin: %v", err)
	}
	for _, v := range values {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatalf("end (commit %v): %v", commit, err)
	}
}

// waitTxnComplete waits until the coordinator has written every marker of the transactional
// id's last transaction (EndTxn answers once the transaction is prepared; the markers follow).
func waitTxnComplete(t *testing.T, addr, id string) {
	t.Helper()
	adm := newAdmin(t, addr) // DescribeTransactions goes to the id's coordinator
	deadline := time.Now().Add(10 * time.Second)
	for {
		d, err := adm.DescribeTransactions(ctxT(t), id)
		st := d[id]
		if err == nil && st.Err == nil && (st.State == "CompleteCommit" || st.State == "CompleteAbort") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("transaction of %s still %q after 10s (%v %v)", id, st.State, err, st.Err)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition, bounded by the deadline
	}
}

// consumeUntil reads topic from the start until it has read the record of value last,
// returning the values read in order.
func consumeUntil(t *testing.T, addr, topic, last string, opts ...kgo.Opt) []string {
	t.Helper()
	cl := newClient(t, addr, append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	ctx := ctxT(t)
	var out []string
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %v before the deadline, never %s", out, last)
		}
		for _, e := range fs.Errors() {
			t.Fatalf("fetch error: %v", e.Err)
		}
		for _, r := range fs.Records() {
			out = append(out, string(r.Value))
			if string(r.Value) == last {
				return out
			}
		}
	}
}

// A transactional producer commits and aborts: read_committed sees exactly the committed
// records in order, read_uncommitted every record, and ListOffsets read_committed stops
// at the first record of a transaction still open while the high watermark passes it. For
// clients of transaction version 1 and 2.
func TestTransactionsCommitAbort(t *testing.T) {
	transactionVersions(t, testTransactionsCommitAbort)
}

func testTransactionsCommitAbort(t *testing.T, opts ...kgo.Opt) {
	b := testutil.StartBroker(t)
	createTopic(t, b.Addr(), "txn", 1, nil)
	p := txnProducer(t, b.Addr(), "txn-commit-abort", "txn", opts...)
	inTxn(t, p, true, "c0", "c1", "c2")
	inTxn(t, p, false, "a0", "a1")
	inTxn(t, p, true, "c3", "c4")
	waitTxnComplete(t, b.Addr(), "txn-commit-abort")

	committed := consumeUntil(t, b.Addr(), "txn", "c4", kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if got := strings.Join(committed, ","); got != "c0,c1,c2,c3,c4" {
		t.Fatalf("read_committed read %s, want c0,c1,c2,c3,c4", got)
	}
	all := consumeUntil(t, b.Addr(), "txn", "c4", kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
	if got := strings.Join(all, ","); got != "c0,c1,c2,a0,a1,c3,c4" {
		t.Fatalf("read_uncommitted read %s, want c0,c1,c2,a0,a1,c3,c4", got)
	}

	// An open transaction: 3 + 1 + 2 + 1 + 2 + 1 records and markers so far.
	adm := newAdmin(t, b.Addr())
	before, err := adm.ListCommittedOffsets(ctxT(t), "txn")
	if err != nil {
		t.Fatal(err)
	}
	lso, _ := before.Lookup("txn", 0)
	if lso.Offset != 10 {
		t.Fatalf("LSO %d with no transaction open, want 10 (7 records, 3 markers)", lso.Offset)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctxT(t), &kgo.Record{Value: []byte("o0")}, &kgo.Record{Value: []byte("o1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	end, err := adm.ListEndOffsets(ctxT(t), "txn")
	if err != nil {
		t.Fatal(err)
	}
	hw, _ := end.Lookup("txn", 0)
	open, err := adm.ListCommittedOffsets(ctxT(t), "txn")
	if err != nil {
		t.Fatal(err)
	}
	lso, _ = open.Lookup("txn", 0)
	if hw.Offset != 12 || lso.Offset != 10 {
		t.Fatalf("open transaction: high watermark %d (want 12), LSO %d (want 10)", hw.Offset, lso.Offset)
	}
	// DescribeProducers shows the open transaction's first offset.
	dp := kmsg.NewPtrDescribeProducersRequest()
	dp.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "txn", Partitions: []int32{0}}}
	pid, _, err := p.ProducerID(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	dpp := request[*kmsg.DescribeProducersResponse](t, newClient(t, b.Addr()), dp).Topics[0].Partitions[0]
	if dpp.ErrorCode != 0 || len(dpp.ActiveProducers) != 1 || dpp.ActiveProducers[0].ProducerID != pid || dpp.ActiveProducers[0].CurrentTxnStartOffset != 10 {
		t.Fatalf("DescribeProducers during the open transaction: %v %+v", kerr.ErrorForCode(dpp.ErrorCode), dpp.ActiveProducers)
	}

	// A read_committed consumer parked at the LSO gets the records once they commit.
	cl := newClient(t, b.Addr(), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"txn": {0: kgo.NewOffset().At(10)}}))
	got := make(chan []string, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var vs []string
		for len(vs) < 2 && ctx.Err() == nil {
			for _, r := range cl.PollFetches(ctx).Records() {
				vs = append(vs, string(r.Value))
			}
		}
		got <- vs
	}()
	if err := p.EndTransaction(ctxT(t), kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if vs := <-got; strings.Join(vs, ",") != "o0,o1" {
		t.Fatalf("parked read_committed consumer read %v, want o0,o1", vs)
	}
}

// A client may not write control batches, nor transactional batches without a producer id.
func TestProduceForgedControlBatch(t *testing.T) {
	b := testutil.StartBroker(t)
	createTopic(t, b.Addr(), "forged", 1, nil)
	cl := newClient(t, b.Addr())
	pid, epoch := initProducerID(t, cl)
	build := func(h batch.Header) []byte {
		h.BaseTimestamp, h.MaxTimestamp = 1000, 1000
		// A COMMIT marker's record: key version 0, type 1; value version 0, coordinator epoch 0.
		b, err := batch.Build(h, []batch.Record{{Key: []byte{0, 0, 0, 1}, Value: []byte{0, 0, 0, 0, 0, 0}}}, batch.CodecNone)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for name, h := range map[string]batch.Header{
		"control batch":                 {ProducerID: pid, ProducerEpoch: epoch, Attributes: batch.AttrControl | batch.AttrTransactional},
		"transactional, no producer id": {ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Attributes: batch.AttrTransactional},
		"producer id, no sequence":      {ProducerID: pid, ProducerEpoch: epoch, BaseSequence: -1},
	} {
		if r := produceRaw(t, cl, "forged", build(h)); r.ErrorCode != kerr.InvalidRecord.Code {
			t.Errorf("%s: %v, want INVALID_RECORD", name, kerr.ErrorForCode(r.ErrorCode))
		}
	}
	end, _ := newAdmin(t, b.Addr()).ListEndOffsets(ctxT(t), "forged")
	if o, _ := end.Lookup("forged", 0); o.Offset != 0 {
		t.Fatalf("end offset %d after refused batches, want 0", o.Offset)
	}
}

// v11Client is a client that sends Produce at v11 at most: kgo raises a request's version
// to the broker's newest, and from v12 (transaction version 2) a produce adds its partition
// to the transaction instead of having it verified.
func v11Client(t *testing.T, addr string) *kgo.Client {
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(kmsg.Produce.Int16(), 11)
	return newClient(t, addr, kgo.MaxVersions(vs))
}

// txnProduceRaw sends one transactional batch of the producer to partition 0.
func txnProduceRaw(t *testing.T, cl *kgo.Client, txnID *string, topic string, pid int64, epoch int16, seq int32) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	return request[*kmsg.ProduceResponse](t, cl, txnProduceRequest(t, txnID, topic, 0, pid, epoch, seq)).Topics[0].Partitions[0]
}

// txnProduceRequest is a Produce v11 (transaction version 1: the partition must have been
// added with AddPartitionsToTxn) of one transactional batch of the producer.
func txnProduceRequest(t *testing.T, txnID *string, topic string, part int32, pid int64, epoch int16, seq int32) *kmsg.ProduceRequest {
	t.Helper()
	h := batch.Header{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, BaseTimestamp: 1000, MaxTimestamp: 1000, Attributes: batch.AttrTransactional}
	recs, err := batch.Build(h, []batch.Record{{Value: []byte(fmt.Sprint("late-", seq))}}, batch.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(11)
	req.TransactionID = txnID
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = part, recs
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// KIP-890: a transactional write arriving after its transaction ended (a late retry, a
// zombie's batch) is refused INVALID_TXN_STATE, with or without the request's
// transactional id, and opens no transaction: the LSO stays at the end of the log. The
// producer is of transaction version 1, whose next transaction has the same epoch (under
// version 2 the late write's epoch is fenced: TestTransactionVersion2Raw).
func TestLateTransactionalWriteRefused(t *testing.T) {
	b := testutil.StartBroker(t)
	createTopic(t, b.Addr(), "late", 1, nil)
	const id = "txn-late"
	p := txnProducer(t, b.Addr(), id, "late", tv1())
	inTxn(t, p, true, "v0", "v1")
	waitTxnComplete(t, b.Addr(), id)
	pid, epoch, err := p.ProducerID(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	cl := v11Client(t, b.Addr())
	txnID := id
	if r := txnProduceRaw(t, cl, &txnID, "late", pid, epoch, 2); r.ErrorCode != kerr.InvalidTxnState.Code {
		t.Fatalf("late write with its transactional id: %v, want INVALID_TXN_STATE", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := txnProduceRaw(t, cl, nil, "late", pid, epoch, 2); r.ErrorCode != kerr.InvalidTxnState.Code {
		t.Fatalf("late write without a transactional id: %v, want INVALID_TXN_STATE", kerr.ErrorForCode(r.ErrorCode))
	}
	adm := newAdmin(t, b.Addr())
	end, err := adm.ListEndOffsets(ctxT(t), "late")
	if err != nil {
		t.Fatal(err)
	}
	lso, err := adm.ListCommittedOffsets(ctxT(t), "late")
	if err != nil {
		t.Fatal(err)
	}
	e, _ := end.Lookup("late", 0)
	l, _ := lso.Lookup("late", 0)
	if e.Offset != 3 || l.Offset != 3 {
		t.Fatalf("end offset %d, LSO %d after the refused writes, want 3 and 3 (2 records, 1 marker)", e.Offset, l.Offset)
	}
	// The producer goes on as before.
	inTxn(t, p, true, "v2")
	if got := strings.Join(consumeUntil(t, b.Addr(), "late", "v2", kgo.FetchIsolationLevel(kgo.ReadCommitted())), ","); got != "v0,v1,v2" {
		t.Fatalf("read_committed read %s, want v0,v1,v2", got)
	}
}
