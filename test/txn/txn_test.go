//go:build linux

// Package txn runs a consume-transform-produce pipeline against real broker processes
// (replication factor 3, min.insync.replicas 2) while kill -9 hits the transaction
// coordinator, a leader of an output partition and the pipeline itself, and proves with a
// read_committed checker that the copy is exactly once; a negative control runs the same
// pipeline without transactions and shows the checker finding its duplicates.
package txn

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
	"github.com/gregor-project/gregor/test/replication"
)

const (
	inTopic    = "txn-in"
	outTopic   = "txn-out"
	partitions = 3
	group      = "txn-pipeline"
	txnID      = "txn-pipeline"
	kills      = 10
	inputRate  = 300 // input records a second
	progress   = 100 // committed input records the pipeline must advance by around a kill
)

// Ten kills, in turn: the transaction coordinator of the pipeline's transactional.id, the
// leader of an output partition, the pipeline process.
var killPlan = []string{"coordinator", "leader", "pipeline", "coordinator", "leader", "pipeline", "coordinator", "leader", "pipeline", "coordinator"}

// The pipeline copies input to output in transactions through ten kill -9s. At each kill of
// the pipeline, and at the end, the group's committed offsets and the read_committed output
// agree exactly: every input record below the offsets is in the output once, in order, and
// nothing beyond them is (an aborted record read would be a duplicate of its retry; an
// offset moved without its transaction's records, or records without their offsets, a gap
// or an excess). At the end the offsets stand at the input's end.
func TestExactlyOnceUnderKills(t *testing.T) {
	r := runFaults(t, "txn")
	if probs := r.final.problems(); len(probs) > 0 {
		t.Errorf("the copy is not exactly once: %s", strings.Join(probs, "; "))
	}
	for i, q := range r.quiesced {
		if probs := q.problems(); len(probs) > 0 {
			t.Errorf("pipeline kill %d: the committed output and the committed offsets disagree: %s", i+1, strings.Join(probs, "; "))
		}
	}
	// Each pipeline kill hit an open transaction, which the fence aborted: read_committed
	// had aborted records to skip.
	if r.final.aborted == 0 {
		t.Errorf("no aborted record in the output: the pipeline kills left no aborted transaction to check read_committed against")
	}
	if r.final.lagging > 0 {
		t.Errorf("the group's committed offsets stop %d records short of the input's end", r.final.lagging)
	}
}

// The negative control: the same pipeline without transactions, the same kills; the checker
// must find duplicates (records processed after the last offset commit are copied again
// after a restart).
func TestNegativeControlFindsDuplicates(t *testing.T) {
	r := runFaults(t, "plain")
	if r.final.duplicates == 0 {
		t.Errorf("the checker found no duplicate in the output of a pipeline without transactions killed %d times: it cannot tell at-least-once from exactly-once", kills)
	}
	if r.final.missing > 0 {
		t.Errorf("%d input records missing from the output of the at-least-once pipeline", r.final.missing)
	}
}

// faultRun is what one run saw: the check after each pipeline kill and the final one.
type faultRun struct {
	quiesced []check
	final    check
}

func runFaults(t *testing.T, mode string) faultRun {
	c := testutil.StartCluster(t, testutil.ClusterOptions{Nodes: 3, Sets: []string{
		"transaction.state.log.replication.factor=3", "transaction.state.log.min.isr=2",
		"transaction.state.log.num.partitions=3",
		"offsets.topic.replication.factor=3", "offsets.topic.num.partitions=3",
		"min.insync.replicas=2", "default.replication.factor=3",
		"transaction.abort.timed.out.transaction.cleanup.interval.ms=1000",
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cl := c.Client(t)
	// A Metadata request of our own (kadm's answers from the client's cache): every broker
	// registered before the topics of replication factor 3 are created.
	c.WaitFor(t, 30*time.Second, func() bool {
		req := kmsg.NewPtrMetadataRequest()
		req.Topics = []kmsg.MetadataRequestTopic{}
		resp, err := req.RequestWith(ctx, cl)
		return err == nil && len(resp.Brokers) == 3
	}, "3 brokers in the metadata")
	adm := kadm.NewClient(cl)
	for _, topic := range []string{inTopic, outTopic} {
		resp, err := adm.CreateTopic(ctx, partitions, 3, map[string]*string{"min.insync.replicas": ptr("2")}, topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			t.Fatalf("create %s: %v", topic, err)
		}
		waitFullISR(t, c, topic)
	}
	// The test's own input producer, writing all along: idempotent, acks=all, explicit
	// partitions, inputRate records a second, so that a kill always finds the pipeline busy
	// (in a transaction, or with records copied since its last offset commit).
	prod := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordDeliveryTimeout(time.Minute))
	var acked, failed atomic.Int64
	pctx, stopInput := context.WithCancel(ctx)
	inputDone := make(chan struct{})
	go func() {
		defer close(inputDone)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		seq := 0
		for {
			select {
			case <-pctx.Done():
				return
			case <-tick.C:
			}
			for range inputRate / 100 {
				r := &kgo.Record{Topic: inTopic, Partition: int32(seq % partitions), Value: fmt.Appendf(nil, "in-%06d", seq)}
				seq++
				prod.Produce(ctx, r, func(_ *kgo.Record, err error) {
					if err != nil {
						failed.Add(1)
					} else {
						acked.Add(1)
					}
				})
			}
		}
	}()

	p := startPipeline(t, mode, c.Bootstrap(), inTopic, outTopic, group, txnID)
	var run faultRun
	start := time.Now()
	counts := map[string]int{}
	for round, what := range killPlan {
		base := committedTotal(ctx, t, c)
		waitCommitted(t, c, base+progress, 60*time.Second, "the pipeline's progress before the kill")
		switch what {
		case "pipeline":
			adm := adminOf(t, c)
			if mode == "txn" {
				// Killed inside a transaction: one is open on the output.
				c.WaitFor(t, 30*time.Second, func() bool { return openTxn(ctx, adm) }, "an open transaction of the pipeline")
			} else {
				// Killed with records copied since the last offset commit (the output, which
				// holds no transaction, is ahead of the offsets).
				c.WaitFor(t, 30*time.Second, func() bool {
					out, err := endSum(ctx, adm, outTopic)
					return err == nil && out >= committedTotal(ctx, t, c)+progress/2
				}, "copies past the pipeline's committed offsets")
			}
			p.kill()
			q := quiesce(ctx, t, c, fmt.Sprintf("q%d", round))
			run.quiesced = append(run.quiesced, q)
			t.Logf("round %d: killed the pipeline at %d committed input offsets; then: %s", round, base, q)
			p.start()
		default:
			victim := coordinatorOf(ctx, t, c)
			if what == "leader" {
				victim = replication.WaitPartition(t, c, outTopic, int32(counts["leader"]%partitions), 30*time.Second,
					func(s replication.PartitionState) bool { return s.Leader >= 0 }, "a leader").Leader
			}
			before := acked.Load()
			c.Node(victim).Kill()
			// The pipeline goes on through the survivors before the node returns: it copies
			// everything written before the kill and more.
			waitCommitted(t, c, before+progress, 90*time.Second, fmt.Sprintf("the pipeline's progress with %s node %d down", what, victim))
			t.Logf("round %d: killed node %d (%s) at %d committed input offsets; past %d with it down", round, victim, what, base, before+progress)
			c.Node(victim).Start()
			waitFullISR(t, c, inTopic)
			waitFullISR(t, c, outTopic)
		}
		counts[what]++
	}
	stopInput()
	<-inputDone
	if err := prod.Flush(ctx); err != nil {
		t.Fatalf("flush the input: %v", err)
	}
	total := acked.Load()
	if n := failed.Load(); n > 0 {
		t.Logf("%d input records failed to be written (the checker reads the input as it is)", n)
	}
	waitCommitted(t, c, inputEnd(ctx, t, c), 90*time.Second, "the pipeline to catch up with the input")
	if err := p.stop(30 * time.Second); err != nil {
		t.Errorf("stop the pipeline: %v", err)
	}
	run.final = quiesce(ctx, t, c, "final")
	t.Logf("%s pipeline: %d kills (%v) in %v, %d restarts of its own; input %d records acknowledged; final check: %s",
		mode, len(killPlan), counts, time.Since(start).Round(time.Millisecond), p.ownRestarts(), total, run.final)
	return run
}

// adminOf is a fresh admin client of the running brokers, closed when the test ends.
func adminOf(t *testing.T, c *testutil.Cluster) *kadm.Client {
	return kadm.NewClient(c.Client(t, kgo.RetryTimeout(5*time.Second)))
}

// openTxn reports whether a transaction is open on the output (its LSO below its high
// watermark on some partition).
func openTxn(ctx context.Context, adm *kadm.Client) bool {
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	lso, err := adm.ListCommittedOffsets(sctx, outTopic)
	if err != nil || lso.Error() != nil {
		return false
	}
	hw, err := adm.ListEndOffsets(sctx, outTopic)
	if err != nil || hw.Error() != nil {
		return false
	}
	open := false
	lso.Each(func(o kadm.ListedOffset) {
		if h, ok := hw.Lookup(outTopic, o.Partition); ok && o.Offset < h.Offset {
			open = true
		}
	})
	return open
}

// endSum is the sum of topic's high watermarks.
func endSum(ctx context.Context, adm *kadm.Client, topic string) (int64, error) {
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	hw, err := adm.ListEndOffsets(sctx, topic)
	if err == nil {
		err = hw.Error()
	}
	var n int64
	hw.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n, err
}

// inputEnd is the number of records in the input (the sum of its high watermarks: it holds
// no transaction).
func inputEnd(ctx context.Context, t *testing.T, c *testutil.Cluster) int64 {
	t.Helper()
	var n int64
	adm := adminOf(t, c)
	c.WaitFor(t, 30*time.Second, func() bool {
		var err error
		n, err = endSum(ctx, adm, inTopic)
		return err == nil
	}, "the input's end offsets")
	return n
}

// check is the checker's result at one quiet moment: the group's committed offsets against
// the output as read_committed reads it. For every input partition, the output partition
// must hold exactly the input's records below the committed offset, once each, in order.
type check struct {
	input, output int // records
	committed     int64
	aborted       int // records in the output that read_uncommitted reads and read_committed does not
	missing       int // below the committed offset, not in the output
	duplicates    int // in the output more than once
	ahead         int // in the output, at or above the committed offset (offsets behind the output)
	disorder      int // partitions whose output order differs from the input's
	unknown       int // in the output, in no input partition
	lagging       int64
}

func (q check) String() string {
	return fmt.Sprintf("input %d, committed offsets %d, output %d read_committed (%d more aborted), missing %d, duplicates %d, ahead of the offsets %d, out of order %d partitions, unknown %d",
		q.input, q.committed, q.output, q.aborted, q.missing, q.duplicates, q.ahead, q.disorder, q.unknown)
}

func (q check) problems() []string {
	var p []string
	for _, v := range []struct {
		n    int
		what string
	}{{q.missing, "missing"}, {q.duplicates, "duplicated"}, {q.ahead, "in the output beyond the committed offsets"}, {q.disorder, "partitions out of order"}, {q.unknown, "unknown"}} {
		if v.n > 0 {
			p = append(p, fmt.Sprintf("%d %s", v.n, v.what))
		}
	}
	return p
}

// quiesce brings the pipeline's state to rest and checks it: the pipeline is dead or
// stopped; an InitProducerId of its transactional.id fences it and aborts its open
// transaction (as its restart would); then, once no transaction is open on the output and
// no offset commit pending, it compares the committed offsets and the committed output.
func quiesce(ctx context.Context, t *testing.T, c *testutil.Cluster, tag string) check {
	t.Helper()
	cl := c.Client(t)
	fence(ctx, t, cl)
	c.WaitFor(t, 60*time.Second, func() bool { return stable(ctx, cl) }, "the output's LSO at its high watermark and no pending offset commit")
	offsets := mustCommitted(ctx, t, c)
	in := readPartitions(ctx, t, c, inTopic, "", false)
	out := readPartitions(ctx, t, c, outTopic, tag+"-committed", true)
	all := readPartitions(ctx, t, c, outTopic, tag+"-uncommitted", false)
	var q check
	owner := map[string]int32{}
	for p, ids := range in {
		q.input += len(ids)
		for _, id := range ids {
			owner[id] = p
		}
	}
	for p := range int32(partitions) {
		q.committed += offsets[p]
		q.output += len(out[p])
		q.aborted += len(all[p]) - len(out[p])
		q.lagging += int64(len(in[p])) - offsets[p]
		below := in[p][:min(int(offsets[p]), len(in[p]))]
		want := map[string]bool{}
		for _, id := range below {
			want[id] = true
		}
		seen := map[string]int{}
		for _, id := range out[p] {
			seen[id]++
			switch {
			case seen[id] > 1:
				q.duplicates++
			case want[id]:
			case owner[id] == p && strings.HasPrefix(id, "in-"):
				q.ahead++
			default:
				q.unknown++
			}
		}
		for _, id := range below {
			if seen[id] == 0 {
				q.missing++
			}
		}
		if !slices.Equal(out[p], below) {
			q.disorder++
		}
	}
	if q.missing+q.duplicates+q.ahead+q.unknown > 0 {
		q.disorder = 0 // counted only when the records are right and their order is not
	}
	return q
}

func ptr(s string) *string { return &s }

// waitFullISR waits until every partition of topic has a leader and a full ISR.
func waitFullISR(t *testing.T, c *testutil.Cluster, topic string) {
	t.Helper()
	for p := range int32(partitions) {
		replication.WaitPartition(t, c, topic, p, 60*time.Second, replication.PartitionState.FullISR, "a full ISR")
	}
}

// coordinatorOf is the node that coordinates the pipeline's transactional.id.
func coordinatorOf(ctx context.Context, t *testing.T, c *testutil.Cluster) int32 {
	t.Helper()
	cl := c.Client(t)
	var node int32 = -1
	c.WaitFor(t, 30*time.Second, func() bool {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType = 1
		req.CoordinatorKeys = []string{txnID}
		req.CoordinatorKey = txnID
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return false
		}
		code, id := resp.ErrorCode, resp.NodeID
		if len(resp.Coordinators) == 1 { // v4+
			code, id = resp.Coordinators[0].ErrorCode, resp.Coordinators[0].NodeID
		}
		node = id
		return code == 0 && node >= 0
	}, "the transaction coordinator")
	return node
}

// committed is the group's committed offset of every input partition (0 when none), as a
// fresh client finds it (a client of its own each time: kgo keeps a coordinator it has
// cached while that broker is down).
func committed(ctx context.Context, c *testutil.Cluster) (map[int32]int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...), kgo.RetryTimeout(5*time.Second))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).FetchOffsets(cctx, group)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for p := range int32(partitions) {
		if o, found := resp.Lookup(inTopic, p); found {
			out[p] = o.At
		}
	}
	return out, nil
}

// mustCommitted is committed, retried for up to 30 s.
func mustCommitted(ctx context.Context, t *testing.T, c *testutil.Cluster) map[int32]int64 {
	t.Helper()
	var out map[int32]int64
	var last error
	c.WaitFor(t, 30*time.Second, func() bool {
		out, last = committed(ctx, c)
		return last == nil
	}, "the group's committed offsets")
	return out
}

func committedTotal(ctx context.Context, t *testing.T, c *testutil.Cluster) int64 {
	t.Helper()
	var n int64
	for _, o := range mustCommitted(ctx, t, c) {
		n += o
	}
	return n
}

func waitCommitted(t *testing.T, c *testutil.Cluster, want int64, timeout time.Duration, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var got int64
	var last error
	for ctx.Err() == nil {
		var offs map[int32]int64
		offs, last = committed(ctx, c)
		got = 0
		for _, o := range offs {
			got += o
		}
		if last == nil && got >= want {
			return
		}
		time.Sleep(50 * time.Millisecond) // polling a condition with a deadline
	}
	t.Fatalf("%s: %d committed input offsets of %d wanted after %v (last error %v)", what, got, want, timeout, last)
}

// fence sends InitProducerId for the pipeline's transactional.id until it succeeds: the
// coordinator aborts the open transaction of the previous epoch first (answering
// CONCURRENT_TRANSACTIONS meanwhile).
func fence(ctx context.Context, t *testing.T, cl *kgo.Client) {
	t.Helper()
	var last error
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		req := kmsg.NewPtrInitProducerIDRequest()
		id := txnID
		req.TransactionalID = &id
		req.TransactionTimeoutMillis = 10000
		req.ProducerID, req.ProducerEpoch = -1, -1
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := req.RequestWith(rctx, cl)
		cancel()
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err == nil {
			return
		}
		last = err
		time.Sleep(100 * time.Millisecond) // a retry backoff, not synchronisation
	}
	t.Fatalf("InitProducerId %s: %v", txnID, last)
}

// stable reports whether no transaction is open on the output (its LSO is its high
// watermark on every partition) and no transactional offset commit of the group is pending
// (OffsetFetch with require_stable answers no UNSTABLE_OFFSET_COMMIT).
func stable(ctx context.Context, cl *kgo.Client) bool {
	adm := kadm.NewClient(cl)
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	lso, err := adm.ListCommittedOffsets(sctx, outTopic)
	if err != nil || lso.Error() != nil {
		return false
	}
	hw, err := adm.ListEndOffsets(sctx, outTopic)
	if err != nil || hw.Error() != nil {
		return false
	}
	for p := range int32(partitions) {
		a, ok1 := lso.Lookup(outTopic, p)
		b, ok2 := hw.Lookup(outTopic, p)
		if !ok1 || !ok2 || a.Offset != b.Offset {
			return false
		}
	}
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	req.RequireStable = true
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = group
	req.Groups = append(req.Groups, g)
	resp, err := req.RequestWith(sctx, cl)
	if err != nil {
		return false
	}
	if resp.ErrorCode != 0 {
		return false
	}
	for _, g := range resp.Groups {
		if g.ErrorCode != 0 {
			return false
		}
		for _, tp := range g.Topics {
			for _, p := range tp.Partitions {
				if p.ErrorCode != 0 {
					return false
				}
			}
		}
	}
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			if p.ErrorCode != 0 {
				return false
			}
		}
	}
	return true
}

// readPartitions reads every record of topic, each partition in offset order, as ids (the
// values). With a tag it first writes a non-transactional sentinel record "sentinel-<tag>"
// to each partition and reads until it has met every sentinel (so nothing committed lies
// beyond what it read, whatever control records end the log); without one it reads up to
// the high watermarks (for a topic that holds no transaction). Sentinels are left out of
// the result, as are those of earlier reads.
func readPartitions(ctx context.Context, t *testing.T, c *testutil.Cluster, topic, tag string, readCommitted bool) map[int32][]string {
	t.Helper()
	want := map[int32]int64{} // without a tag: read up to these offsets
	if tag != "" {
		cl := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		for p := range int32(partitions) {
			rec := &kgo.Record{Topic: topic, Partition: p, Value: []byte("sentinel-" + tag)}
			if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
				t.Fatalf("sentinel to %s[%d]: %v", topic, p, err)
			}
		}
	} else {
		hw, err := kadm.NewClient(c.Client(t)).ListEndOffsets(ctx, topic)
		if err == nil {
			err = hw.Error()
		}
		if err != nil {
			t.Fatalf("end offsets of %s: %v", topic, err)
		}
		hw.Each(func(o kadm.ListedOffset) { want[o.Partition] = o.Offset })
	}
	iso := kgo.ReadUncommitted()
	if readCommitted {
		iso = kgo.ReadCommitted()
	}
	cl := c.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(iso),
		kgo.FetchMaxWait(200*time.Millisecond))
	out := map[int32][]string{}
	done := map[int32]bool{}
	for p := range int32(partitions) {
		if tag == "" && want[p] == 0 {
			done[p] = true
		}
	}
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for len(done) < partitions {
		fs := cl.PollFetches(rctx)
		if rctx.Err() != nil {
			t.Fatalf("read %s (read_committed %v): %d of %d partitions read before the timeout", topic, readCommitted, len(done), partitions)
		}
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				t.Logf("fetch %s[%d]: %v", topic, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			switch {
			case tag != "" && v == "sentinel-"+tag:
				done[r.Partition] = true
			case strings.HasPrefix(v, "sentinel-"):
			default:
				out[r.Partition] = append(out[r.Partition], v)
			}
			if tag == "" && r.Offset+1 >= want[r.Partition] {
				done[r.Partition] = true
			}
		})
	}
	return out
}
