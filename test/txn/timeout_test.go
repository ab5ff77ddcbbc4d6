//go:build linux

package txn

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/internal/testutil"
)

// A transaction left open by a producer that died (a process killed with kill -9 mid
// transaction) is aborted by its coordinator once transaction.timeout.ms has passed: the LSO
// moves to the high watermark, read_committed reads nothing of it, the id's epoch is bumped,
// and the producer's old epoch is fenced.
func TestDeadProducerTimesOut(t *testing.T) {
	c := testutil.StartCluster(t, testutil.ClusterOptions{Nodes: 1, Sets: []string{
		"transaction.abort.timed.out.transaction.cleanup.interval.ms=200",
	}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const topic = "txn-timeout"
	adm := kadm.NewClient(c.Client(t))
	if resp, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}

	// The producer: a process of its own, killed once its records are acknowledged.
	p := startProducerProc(t, c.Bootstrap(), topic, "dead-producer")
	hw := func() (lso, end int64) {
		l, err := adm.ListCommittedOffsets(ctx, topic)
		if err == nil {
			err = l.Error()
		}
		e, err2 := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = errors.Join(err2, e.Error())
		}
		if err != nil {
			return -1, -1
		}
		lo, _ := l.Lookup(topic, 0)
		eo, _ := e.Lookup(topic, 0)
		return lo.Offset, eo.Offset
	}
	c.WaitFor(t, 30*time.Second, func() bool { _, e := hw(); return e >= 5 }, "the producer's 5 records")
	p.kill()
	if l, e := hw(); l != 0 {
		t.Fatalf("with the transaction open: LSO %d, high watermark %d, want LSO 0", l, e)
	}
	d0 := describe(ctx, t, adm, "dead-producer")
	if d0.State != "Ongoing" {
		t.Fatalf("the dead producer's transaction is %s, want Ongoing", d0.State)
	}
	start := time.Now()
	c.WaitFor(t, 30*time.Second, func() bool { l, e := hw(); return l == e && e > 5 }, "the LSO to move past the aborted transaction")
	t.Logf("the open transaction (timeout 2 s) was aborted %v after the producer died", time.Since(start).Round(10*time.Millisecond))
	d1 := describe(ctx, t, adm, "dead-producer")
	if d1.State != "CompleteAbort" || d1.ProducerID != d0.ProducerID || d1.ProducerEpoch <= d0.ProducerEpoch {
		t.Errorf("after the timeout: %+v; before: %+v; want CompleteAbort with the epoch bumped", d1, d0)
	}

	// read_committed reads none of the aborted records (a record written after them marks
	// the end of the read).
	cl := c.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) == 0 || got[len(got)-1] != "after" {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read_committed: %v before the timeout", got)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if len(got) != 1 {
		t.Errorf("read_committed read %q, want only the record written after the abort", got)
	}

	// The zombie: the same id's old epoch is fenced. A producer that comes back with the
	// same transactional id gets a bumped epoch and works.
	z, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...), kgo.TransactionalID("dead-producer"), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	if err := z.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := z.ProduceSync(ctx, &kgo.Record{Value: []byte("revived")}).FirstErr(); err != nil {
		t.Fatalf("a new producer of the id: %v", err)
	}
	if err := z.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("a new producer of the id: commit: %v", err)
	}
	// EndTxn answers once PrepareCommit is written; the markers complete it.
	var d kadm.DescribedTransaction
	c.WaitFor(t, 30*time.Second, func() bool { d = describe(ctx, t, adm, "dead-producer"); return d.State == "CompleteCommit" },
		"the revived id's transaction to complete its commit")
	if d.ProducerEpoch <= d1.ProducerEpoch {
		t.Errorf("the revived id: %+v, want a newer epoch than %d", d, d1.ProducerEpoch)
	}
}

func describe(ctx context.Context, t *testing.T, adm *kadm.Client, id string) kadm.DescribedTransaction {
	t.Helper()
	ds, err := adm.DescribeTransactions(ctx, id)
	if err != nil {
		t.Fatalf("describe %s: %v", id, err)
	}
	d, err := ds.On(id, nil)
	if err == nil {
		err = d.Err
	}
	if err != nil && !errors.Is(err, kerr.TransactionalIDNotFound) {
		t.Fatalf("describe %s: %v", id, err)
	}
	return d
}
