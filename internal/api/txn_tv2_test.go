package api_test

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/testutil"
)

// Transaction version 2 (KIP-890 part 2) with raw requests, as a Kafka 4.x client sends
// them: the broker finalizes transaction.version 2 in ApiVersions; Produce v12 and
// TxnOffsetCommit v5 add their partitions to the transaction with no AddPartitionsToTxn or
// AddOffsetsToTxn; EndTxn v5 answers the bumped epoch, in which the next transaction runs,
// while writes in the old epoch are fenced and open nothing; read_committed sees exactly the
// committed records and the group exactly the committed offset.

// tv2Batch is a Produce v12 of one transactional batch of values for partition 0.
func tv2Batch(t *testing.T, id, topic string, pid int64, epoch int16, seq int32, values ...string) *kmsg.ProduceRequest {
	t.Helper()
	h := batch.Header{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, BaseTimestamp: 1000, MaxTimestamp: 1000, Attributes: batch.AttrTransactional, LastOffsetDelta: int32(len(values) - 1)}
	var rs []batch.Record
	for i, v := range values {
		rs = append(rs, batch.Record{OffsetDelta: int32(i), Value: []byte(v)})
	}
	raw, err := batch.Build(h, rs, batch.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(12)
	req.TransactionID = &id
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 0, raw
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func tv2Produce(t *testing.T, cl *kgo.Client, req *kmsg.ProduceRequest) error {
	t.Helper()
	resp := request[*kmsg.ProduceResponse](t, cl, req)
	if resp.Version != 12 {
		t.Fatalf("Produce answered in v%d, want v12", resp.Version)
	}
	return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
}

// tv2CommitOffset is a TxnOffsetCommit v5 of topic-0 at offset for a group with no members.
func tv2CommitOffset(t *testing.T, cl *kgo.Client, id, group, topic string, pid int64, epoch int16, offset int64) error {
	t.Helper()
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = id, group, pid, epoch
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := request[*kmsg.TxnOffsetCommitResponse](t, cl, req)
	if resp.Version != 5 {
		t.Fatalf("TxnOffsetCommit answered in v%d, want v5", resp.Version)
	}
	return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
}

func tv2End(t *testing.T, cl *kgo.Client, id string, pid int64, epoch int16, commit bool) *kmsg.EndTxnResponse {
	t.Helper()
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, commit
	resp := request[*kmsg.EndTxnResponse](t, cl, req)
	if resp.Version != 5 {
		t.Fatalf("EndTxn answered in v%d, want v5", resp.Version)
	}
	return resp
}

// describeTxn returns the transactional id's state and partitions as "topic-p" strings.
func describeTxn(t *testing.T, cl *kgo.Client, id string) (string, []string) {
	t.Helper()
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{id}
	st := request[*kmsg.DescribeTransactionsResponse](t, cl, req).TransactionStates[0]
	if st.ErrorCode != 0 {
		t.Fatalf("DescribeTransactions %s: %v", id, kerr.ErrorForCode(st.ErrorCode))
	}
	var parts []string
	for _, tp := range st.Topics {
		for _, p := range tp.Partitions {
			parts = append(parts, tp.Topic+"-"+string(rune('0'+p)))
		}
	}
	return st.State, parts
}

// groupOffset is the group's committed offset of topic-0 (OffsetFetch with require_stable)
// and its error.
func groupOffset(t *testing.T, cl *kgo.Client, group, topic string) (int64, error) {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.RequireStable = true
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = group
	g.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: topic, Partitions: []int32{0}}}
	req.Groups = append(req.Groups, g)
	rg := request[*kmsg.OffsetFetchResponse](t, cl, req).Groups[0]
	if err := kerr.ErrorForCode(rg.ErrorCode); err != nil {
		return -1, err
	}
	p := rg.Topics[0].Partitions[0]
	return p.Offset, kerr.ErrorForCode(p.ErrorCode)
}

func TestTransactionVersion2Raw(t *testing.T) {
	b := testutil.StartBroker(t, "offsets.topic.num.partitions=1", "transaction.state.log.num.partitions=1")
	createTopic(t, b.Addr(), "tv2", 1, nil)
	cl := newClient(t, b.Addr())

	// The feature, as Kafka 4.x advertises it.
	av, err := cl.SeedBrokers()[0].Request(ctxT(t), kmsg.NewPtrApiVersionsRequest())
	if err != nil {
		t.Fatal(err)
	}
	avr := av.(*kmsg.ApiVersionsResponse)
	var supported, finalized bool
	for _, f := range avr.SupportedFeatures {
		supported = supported || f.Name == "transaction.version" && f.MinVersion == 0 && f.MaxVersion == 2
	}
	for _, f := range avr.FinalizedFeatures {
		finalized = finalized || f.Name == "transaction.version" && f.MaxVersionLevel == 2
	}
	if avr.Version < 3 || !supported || !finalized || avr.FinalizedFeaturesEpoch < 0 {
		t.Fatalf("ApiVersions v%d: supported %+v, finalized %+v epoch %d: want transaction.version 0-2 finalized at 2",
			avr.Version, avr.SupportedFeatures, avr.FinalizedFeatures, avr.FinalizedFeaturesEpoch)
	}

	const id, grp = "tv2-raw", "tv2-group"
	init := kmsg.NewPtrInitProducerIDRequest()
	txnID := id
	init.TransactionalID, init.TransactionTimeoutMillis = &txnID, 10_000
	var ir *kmsg.InitProducerIDResponse
	deadline := time.Now().Add(10 * time.Second)
	for {
		ir = request[*kmsg.InitProducerIDResponse](t, cl, init)
		err := kerr.ErrorForCode(ir.ErrorCode)
		if err == nil {
			break
		}
		if !kerr.IsRetriable(err) || time.Now().After(deadline) {
			t.Fatalf("InitProducerId: %v", err)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, bounded by the deadline
	}
	pid, e := ir.ProducerID, ir.ProducerEpoch

	// Transaction 1: records and offsets, no AddPartitionsToTxn nor AddOffsetsToTxn.
	if err := tv2Produce(t, cl, tv2Batch(t, id, "tv2", pid, e, 0, "c0", "c1")); err != nil {
		t.Fatalf("Produce v12 with no AddPartitionsToTxn: %v", err)
	}
	if err := tv2CommitOffset(t, cl, id, grp, "tv2", pid, e, 2); err != nil {
		t.Fatalf("TxnOffsetCommit v5 with no AddOffsetsToTxn: %v", err)
	}
	if st, parts := describeTxn(t, cl, id); st != "Ongoing" || strings.Join(parts, ",") != "__consumer_offsets-0,tv2-0" {
		t.Fatalf("transaction %s with partitions %v, want Ongoing with __consumer_offsets-0,tv2-0 added by the broker", st, parts)
	}
	if _, err := groupOffset(t, cl, grp, "tv2"); err != kerr.UnstableOffsetCommit {
		t.Fatalf("require_stable with the offset pending: %v, want UNSTABLE_OFFSET_COMMIT", err)
	}
	r := tv2End(t, cl, id, pid, e, true)
	if r.ErrorCode != 0 || r.ProducerID != pid || r.ProducerEpoch != e+1 {
		t.Fatalf("EndTxn v5 commit: %v, producer %d epoch %d, want %d epoch %d", kerr.ErrorForCode(r.ErrorCode), r.ProducerID, r.ProducerEpoch, pid, e+1)
	}
	waitTxnComplete(t, b.Addr(), id)

	// The old epoch is fenced everywhere, and its writes open no transaction.
	if err := tv2Produce(t, cl, tv2Batch(t, id, "tv2", pid, e, 2, "late")); err != kerr.InvalidProducerEpoch {
		t.Fatalf("Produce v12 in the epoch before the commit: %v, want INVALID_PRODUCER_EPOCH", err)
	}
	if err := tv2CommitOffset(t, cl, id, grp, "tv2", pid, e, 50); err != kerr.InvalidProducerEpoch {
		t.Fatalf("TxnOffsetCommit v5 in the epoch before the commit: %v, want INVALID_PRODUCER_EPOCH", err)
	}
	if st, parts := describeTxn(t, cl, id); st != "CompleteCommit" || len(parts) != 0 {
		t.Fatalf("after the fenced writes: %s with %v, want CompleteCommit with no partitions", st, parts)
	}
	// A retry of the commit is recognised by the bumped epoch; an older epoch is fenced.
	if r := tv2End(t, cl, id, pid, e, true); r.ErrorCode != 0 || r.ProducerEpoch != e+1 {
		t.Fatalf("retried EndTxn v5: %v epoch %d, want NONE and %d", kerr.ErrorForCode(r.ErrorCode), r.ProducerEpoch, e+1)
	}
	if e > 0 {
		if r := tv2End(t, cl, id, pid, e-1, true); r.ErrorCode != kerr.ProducerFenced.Code {
			t.Fatalf("EndTxn v5 in an older epoch: %v, want PRODUCER_FENCED", kerr.ErrorForCode(r.ErrorCode))
		}
	}

	// Transaction 2, in the bumped epoch (sequences start again), aborted.
	e++
	if err := tv2Produce(t, cl, tv2Batch(t, id, "tv2", pid, e, 0, "a0")); err != nil {
		t.Fatalf("Produce v12 in the bumped epoch: %v", err)
	}
	if err := tv2CommitOffset(t, cl, id, grp, "tv2", pid, e, 99); err != nil {
		t.Fatalf("TxnOffsetCommit v5 in the bumped epoch: %v", err)
	}
	if r := tv2End(t, cl, id, pid, e, false); r.ErrorCode != 0 || r.ProducerEpoch != e+1 {
		t.Fatalf("EndTxn v5 abort: %v epoch %d, want epoch %d", kerr.ErrorForCode(r.ErrorCode), r.ProducerEpoch, e+1)
	}
	waitTxnComplete(t, b.Addr(), id)

	// Transaction 3 commits one more record, so that read_committed has an end to read to.
	e++
	if err := tv2Produce(t, cl, tv2Batch(t, id, "tv2", pid, e, 0, "c2")); err != nil {
		t.Fatalf("Produce v12 in transaction 3: %v", err)
	}
	if r := tv2End(t, cl, id, pid, e, true); r.ErrorCode != 0 || r.ProducerEpoch != e+1 {
		t.Fatalf("EndTxn v5 commit 3: %v epoch %d", kerr.ErrorForCode(r.ErrorCode), r.ProducerEpoch)
	}
	waitTxnComplete(t, b.Addr(), id)

	if got := strings.Join(consumeUntil(t, b.Addr(), "tv2", "c2", kgo.FetchIsolationLevel(kgo.ReadCommitted())), ","); got != "c0,c1,c2" {
		t.Fatalf("read_committed read %s, want c0,c1,c2", got)
	}
	if got := strings.Join(consumeUntil(t, b.Addr(), "tv2", "c2", kgo.FetchIsolationLevel(kgo.ReadUncommitted())), ","); got != "c0,c1,a0,c2" {
		t.Fatalf("read_uncommitted read %s, want c0,c1,a0,c2", got)
	}
	if off, err := groupOffset(t, cl, grp, "tv2"); err != nil || off != 2 {
		t.Fatalf("the group's offset: %d %v, want 2 (the committed transaction's; the aborted one's 99 dropped)", off, err)
	}
}

// A consume-transform-produce loop with franz-go's GroupTransactSession, as a client of
// transaction version 1 and of version 2 (franz-go runs version 2 once the broker finalizes
// it: Produce v12 and TxnOffsetCommit v5 with no AddPartitionsToTxn or AddOffsetsToTxn,
// an epoch bump at every EndTxn): the output holds each input record once under
// read_committed and the group's offset moves with the transaction.
func TestGroupTransactSession(t *testing.T) {
	transactionVersions(t, testGroupTransactSession)
}

func testGroupTransactSession(t *testing.T, opts ...kgo.Opt) {
	tv2 := len(opts) == 0
	b := testutil.StartBroker(t, "offsets.topic.num.partitions=1", "transaction.state.log.num.partitions=1", "group.initial.rebalance.delay.ms=0")
	createTopic(t, b.Addr(), "in", 1, nil)
	createTopic(t, b.Addr(), "out", 1, nil)
	in := newClient(t, b.Addr(), kgo.DefaultProduceTopic("in"))
	produceSync(t, in, &kgo.Record{Value: []byte("r0")}, &kgo.Record{Value: []byte("r1")}, &kgo.Record{Value: []byte("r2")})

	s, err := kgo.NewGroupTransactSession(append([]kgo.Opt{
		kgo.SeedBrokers(b.Addr()), kgo.TransactionalID("ctp"), kgo.TransactionTimeout(10 * time.Second),
		kgo.ConsumerGroup("ctp-group"), kgo.ConsumeTopics("in"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.DefaultProduceTopic("out"),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	ctx := ctxT(t)
	copied, epochs := 0, map[int16]bool{}
	for copied < 3 {
		fs := s.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("copied %d of 3 records before the deadline", copied)
		}
		if err := s.Begin(); err != nil {
			t.Fatal(err)
		}
		for _, r := range fs.Records() {
			if err := s.ProduceSync(ctx, &kgo.Record{Value: append([]byte("copy-"), r.Value...)}).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
			copied++
		}
		if _, err := s.End(ctx, kgo.TryCommit); err != nil {
			t.Fatalf("end: %v", err)
		}
		if _, epoch, err := s.Client().ProducerID(ctx); err == nil {
			epochs[epoch] = true
		}
	}
	waitTxnComplete(t, b.Addr(), "ctp")
	if got := strings.Join(consumeUntil(t, b.Addr(), "out", "copy-r2", kgo.FetchIsolationLevel(kgo.ReadCommitted())), ","); got != "copy-r0,copy-r1,copy-r2" {
		t.Fatalf("read_committed output %s, want copy-r0,copy-r1,copy-r2", got)
	}
	offs, err := newAdmin(t, b.Addr()).FetchOffsets(ctx, "ctp-group")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup("in", 0); !ok || o.Err != nil || o.At != 3 {
		t.Fatalf("the group's committed offset: %+v, want 3", o)
	}
	// Under version 2 every committed transaction ended with a new epoch; under version 1
	// the epoch is the one InitProducerId gave.
	_, epoch, err := s.Client().ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tv2 && epoch == 0 || !tv2 && epoch != 0 {
		t.Fatalf("epoch %d after the transactions (seen %v): transaction version 2 %v", epoch, epochs, tv2)
	}
}
