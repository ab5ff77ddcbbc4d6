package compat_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/compat"
)

// TxnClient is a client with a transactional API, driven through the transactional scenario
// of issue 10 (compat.TxnSteps). Every method uses the client's ordinary transactional
// configuration; records carry explicit partitions.
type TxnClient interface {
	Info() compat.ClientInfo
	// TxnProduce writes recs in one transaction of transactional.id txnID and, once every
	// record is acknowledged, commits it (commit) or aborts it.
	TxnProduce(ctx context.Context, addr, topic, txnID string, recs []Rec, commit bool) error
	// TxnConsume reads n records of topic from the beginning of every partition with
	// isolation.level read_committed (committed) or read_uncommitted.
	TxnConsume(ctx context.Context, addr, topic string, n int, committed bool) ([]Rec, error)
	// Transform is one member of group reading in (read_committed, from the beginning) and
	// copying each record (key, value, headers) to the same partition of out, in
	// transactions of txnID that also commit the group's offsets (the client's
	// send-offsets-to-transaction), until n records were copied in committed transactions.
	Transform(ctx context.Context, addr, in, out, group, txnID string, n int) error
	// Fence: producer A of txnID begins a transaction and writes first (acknowledged);
	// producer B of the same transactional.id initialises, which fences A, writes second in
	// a transaction and commits it; then A writes third and tries to commit. It returns
	// what A's last write and its commit reported (nil: they succeeded).
	Fence(ctx context.Context, addr, topic, txnID string, first, second, third Rec) (FenceResult, error)
	// ExpectFenced is what the client reports against Kafka for a fenced producer's write
	// and commit.
	ExpectFenced() (write, commit Expectation)
}

// FenceResult is what a fenced producer reported.
type FenceResult struct {
	WriteErr, CommitErr error
}

// TestTxnNoAPI records the clients of the suite without a transactional API.
func TestTxnNoAPI(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		info func() compat.ClientInfo
		why  string
	}{
		{kafkaGoClient{}.Info, "segmentio/kafka-go has no transactional producer"},
		{kcatClient{}.Info, "kcat has no transactional producer"},
		{kafkaPython(nil, "kafka-python").Info, "kafka-python 2.0.2 has no transactional producer (it came in 2.1)"},
	} {
		info := c.info()
		recordClient(info)
		t.Run(info.Name, func(t *testing.T) {
			for _, s := range compat.TxnSteps {
				step(t, compat.SectionTxn, info.Name, s.ID, func(t *stepT) {
					t.check(notSupported("%s", c.why), s.ID)
				})
			}
		})
	}
}

// The transactional scenario's topics: "txn" holds three transactions of 12 records each
// (4 per partition): committed, aborted, committed, so that every aborted record lies before
// a committed one in its partition and a reader that handed an aborted record (or a
// control record) to the application would miss one of the committed records it was told
// to expect.
const (
	txnTopic    = "txn"
	txnPerBatch = 12
)

// runTxnScenario runs compat.TxnSteps for c against a fresh broker.
func runTxnScenario(t *testing.T, c TxnClient) {
	info := c.Info()
	recordClient(info)
	name := info.Name
	sec := compat.SectionTxn
	b := startBroker(t)
	addr := b.Addr()
	createTopic(t, addr, txnTopic, 3, nil)
	part := func(i int) int32 { return int32(i % 3) }
	gen := func(prefix string) []Rec {
		return genRecords(genOpts{prefix: prefix, n: txnPerBatch, partition: part, headers: true, textHeaders: true})
	}
	commit1, aborted, commit2 := gen("commit1"), gen("aborted"), gen("commit2")
	txnID := "compat-txn-" + name
	noTS := cmpOpts{noTimestamps: true, noPosition: true}

	step(t, sec, name, "commit", func(t *stepT) {
		t.check(c.TxnProduce(ctxFor(t, time.Minute), addr, txnTopic, txnID, commit1, true), "produce in a transaction and commit")
		checkSame(t, commit1, refReadIso(t, addr, txnTopic, len(commit1), true), noTS)
	})

	// refCommitted and refAll are the topic as franz-go reads it with each isolation level.
	var refCommitted, refAll []Rec
	step(t, sec, name, "abort", func(t *stepT) {
		t.check(c.TxnProduce(ctxFor(t, time.Minute), addr, txnTopic, txnID, aborted, false), "produce in a transaction and abort")
		t.check(c.TxnProduce(ctxFor(t, time.Minute), addr, txnTopic, txnID, commit2, true), "produce in a transaction and commit after the abort")
		// The aborted records were written (read_uncommitted reads them) ...
		all := append(append(append([]Rec(nil), commit1...), aborted...), commit2...)
		got := refReadIso(t, addr, txnTopic, len(all), false)
		checkSame(t, all, got, noTS)
		// ... and read_committed skips them.
		want := append(append([]Rec(nil), commit1...), commit2...)
		gotC := refReadIso(t, addr, txnTopic, len(want), true)
		checkSame(t, want, gotC, noTS)
		if !t.Failed() {
			refAll, refCommitted = got, gotC
		}
	})

	step(t, sec, name, "read-committed", func(t *stepT) {
		if refCommitted == nil {
			t.Fatal("the abort step did not leave committed and aborted transactions to read")
		}
		got, err := c.TxnConsume(ctxFor(t, time.Minute), addr, txnTopic, len(refCommitted), true)
		t.check(err, "read_committed consume")
		checkSame(t, refCommitted, got, cmpOpts{})
	})

	step(t, sec, name, "read-uncommitted", func(t *stepT) {
		if refAll == nil {
			t.Fatal("the abort step did not leave committed and aborted transactions to read")
		}
		got, err := c.TxnConsume(ctxFor(t, time.Minute), addr, txnTopic, len(refAll), false)
		t.check(err, "read_uncommitted consume")
		checkSame(t, refAll, got, cmpOpts{})
	})

	step(t, sec, name, "transform", func(t *stepT) {
		createTopic(t, addr, "txn-in", 3, nil)
		createTopic(t, addr, "txn-out", 3, nil)
		in := refProduce(t, addr, "txn-in", genRecords(genOpts{prefix: "in", n: 30, partition: part, headers: true, textHeaders: true}))
		group := "compat-txn-group-" + name
		t.check(c.Transform(ctxFor(t, 90*time.Second), addr, "txn-in", "txn-out", group, txnID+"-transform", len(in)), "consume-transform-produce")
		out := refReadAllCommitted(t, addr, "txn-out", 3)
		checkSame(t, in, out, noTS)
		if len(out) != len(in) {
			t.Errorf("the output holds %d records, the input %d", len(out), len(in))
		}
		byID := map[string]int32{}
		for _, r := range in {
			byID[r.id()] = r.Partition
		}
		for _, r := range out {
			if p, ok := byID[r.id()]; ok && p != r.Partition {
				t.Errorf("record %s copied to partition %d, read from %d", r.id(), r.Partition, p)
			}
		}
		// Each partition of the input holds 10 records: the offsets committed in the
		// transactions stand at its end.
		checkCommitted(t, addr, group, "txn-in", 10, "after the transform")
	})

	step(t, sec, name, "fencing", func(t *stepT) {
		createTopic(t, addr, "txn-fence", 1, nil)
		mk := func(id string) Rec { return Rec{Partition: 0, Key: []byte("k"), Value: []byte(id + "|fence")} }
		first, second, third := mk("first"), mk("second"), mk("third")
		res, err := c.Fence(ctxFor(t, 90*time.Second), addr, "txn-fence", txnID+"-fence", first, second, third)
		t.check(err, "fencing")
		t.Logf("the fenced producer's write: %v; its commit: %v", res.WriteErr, res.CommitErr)
		expW, expC := c.ExpectFenced()
		if res.WriteErr == nil || !expW.Match(res.WriteErr) {
			t.Errorf("the fenced producer's write: got %v, want %s", res.WriteErr, expW.Desc)
		}
		if res.CommitErr == nil || !expC.Match(res.CommitErr) {
			t.Errorf("the fenced producer's commit: got %v, want %s", res.CommitErr, expC.Desc)
		}
		// The fenced producer's open transaction was aborted (its first record is in the
		// log, before the second producer's), and its third record is nowhere.
		checkSame(t, []Rec{first, second}, refReadIso(t, addr, "txn-fence", 2, false), noTS)
		checkSame(t, []Rec{second}, refReadIso(t, addr, "txn-fence", 1, true), noTS)
		t.Note("write: %s; commit: %s", expW.Desc, expC.Desc)
	})
}

// refReadIso reads n records of topic from the start of every partition with franz-go at
// the given isolation level.
func refReadIso(t testing.TB, addr, topic string, n int, committed bool) []Rec {
	t.Helper()
	got, err := franzClient{}.TxnConsume(ctxFor(t, 30*time.Second), addr, topic, n, committed)
	if err != nil {
		t.Fatalf("reference read (read_committed %v): %v", committed, err)
	}
	return got
}

// refReadAllCommitted reads everything committed in topic with franz-go's read_committed
// consumer: it first writes a (non-transactional) sentinel record to each partition and
// reads until it has seen every sentinel, so no committed record can lie beyond what it
// read, and an open transaction (which holds the sentinel back) fails the read.
func refReadAllCommitted(t testing.TB, addr, topic string, partitions int32) []Rec {
	t.Helper()
	var sentinels []Rec
	for p := range partitions {
		sentinels = append(sentinels, Rec{Partition: p, Value: fmt.Appendf(nil, "sentinel-%d|", p)})
	}
	refProduce(t, addr, topic, sentinels)
	ctx := ctxFor(t, 30*time.Second)
	cl := refClient(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	var out []Rec
	seen := map[int32]bool{}
	for len(seen) < int(partitions) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read_committed read of %s: %d records and %d of %d sentinels before the timeout", topic, len(out), len(seen), partitions)
		}
		if err := fs.Err(); err != nil {
			t.Fatalf("read_committed read of %s: %v", topic, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			rec := fromKgo(r)
			if rec.id() == fmt.Sprintf("sentinel-%d", r.Partition) {
				seen[r.Partition] = true
				return
			}
			out = append(out, rec)
		})
	}
	return out
}

// --- franz-go ---

func TestFranzGoTxn(t *testing.T) {
	t.Parallel()
	runTxnScenario(t, franzClient{})
}

func (franzClient) TxnProduce(ctx context.Context, addr, topic, txnID string, recs []Rec, commit bool) error {
	cl, err := franzNew(addr, kgo.TransactionalID(txnID), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := cl.BeginTransaction(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	rs := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		rs[i] = toKgo(topic, r)
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		return errors.Join(fmt.Errorf("produce: %w", err), cl.EndTransaction(ctx, kgo.TryAbort))
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		return fmt.Errorf("end transaction (commit %v): %w", commit, err)
	}
	return nil
}

func (franzClient) TxnConsume(ctx context.Context, addr, topic string, n int, committed bool) ([]Rec, error) {
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl, err := franzNew(addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(iso))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	return franzPoll(ctx, cl, n)
}

// Transform runs franz-go's GroupTransactSession, its consume-transform-produce helper.
func (franzClient) Transform(ctx context.Context, addr, in, out, group, txnID string, n int) error {
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(addr), kgo.TransactionalID(txnID),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(in), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequireStableFetchOffsets(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer sess.Close()
	copied := 0
	for copied < n {
		fs := sess.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%d of %d records copied: %w", copied, n, err)
		}
		if err := fs.Err(); err != nil {
			return fmt.Errorf("poll: %w", err)
		}
		if fs.NumRecords() == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		var rs []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) {
			rs = append(rs, &kgo.Record{Topic: out, Partition: r.Partition, Key: r.Key, Value: r.Value, Headers: r.Headers})
		})
		perr := sess.ProduceSync(ctx, rs...).FirstErr()
		committed, err := sess.End(ctx, kgo.TransactionEndTry(perr == nil))
		if err != nil {
			return fmt.Errorf("end transaction: %w", err)
		}
		if perr != nil {
			return fmt.Errorf("produce: %w", perr)
		}
		if committed {
			copied += len(rs)
		}
	}
	return nil
}

func (franzClient) Fence(ctx context.Context, addr, topic, txnID string, first, second, third Rec) (FenceResult, error) {
	var res FenceResult
	open := func() (*kgo.Client, error) {
		return franzNew(addr, kgo.TransactionalID(txnID), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.RecordRetries(3))
	}
	a, err := open()
	if err != nil {
		return res, err
	}
	defer a.Close()
	if err := a.BeginTransaction(); err != nil {
		return res, fmt.Errorf("A begin: %w", err)
	}
	if err := a.ProduceSync(ctx, toKgo(topic, first)).FirstErr(); err != nil {
		return res, fmt.Errorf("A first write: %w", err)
	}
	b, err := open()
	if err != nil {
		return res, err
	}
	defer b.Close()
	if err := b.BeginTransaction(); err != nil {
		return res, fmt.Errorf("B begin: %w", err)
	}
	// B's first produce initialises its producer id: InitProducerId fences A.
	if err := b.ProduceSync(ctx, toKgo(topic, second)).FirstErr(); err != nil {
		return res, fmt.Errorf("B write: %w", err)
	}
	if err := b.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return res, fmt.Errorf("B commit: %w", err)
	}
	res.WriteErr = a.ProduceSync(ctx, toKgo(topic, third)).FirstErr()
	res.CommitErr = a.EndTransaction(ctx, kgo.TryCommit)
	return res, nil
}

func (franzClient) ExpectFenced() (write, commit Expectation) {
	fenced := func(err error) bool {
		return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch)
	}
	return Expectation{Desc: "kerr.InvalidProducerEpoch or kerr.ProducerFenced", Match: fenced},
		Expectation{Desc: "kerr.OperationNotAttempted: franz-go does not send the commit of a producer whose id failed (its documented next step, an abort, then reinitialises the id)",
			Match: func(err error) bool { return errors.Is(err, kerr.OperationNotAttempted) }}
}

// --- the script clients ---

func TestKafkajsTxn(t *testing.T) {
	t.Parallel()
	runTxnScenario(t, kafkajs())
}

func TestConfluentKafkaPythonTxn(t *testing.T) {
	t.Parallel()
	runTxnScenario(t, confluentPython())
}

// scriptErrAny matches a scriptError of type typ whose code is one of codes.
func scriptErrAny(typ string, codes ...string) func(error) bool {
	return func(err error) bool {
		for _, c := range codes {
			if scriptErr(typ, c)(err) {
				return true
			}
		}
		return false
	}
}
