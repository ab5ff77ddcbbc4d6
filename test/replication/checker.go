// Package replication puts real broker clusters (internal/testutil.StartCluster)
// through faults while a producer writes, and checks what replication
// promises: no acknowledged record is lost or written twice, offsets are
// contiguous, and the replicas' logs are byte-identical below the high
// watermark.
//
// The checker is two halves:
//
//   - a Producer (StartProducer ... Stop): one franz-go client writing values
//     "w<writer>-<n>" (n = 0, 1, 2, ...) to one partition at a steady rate,
//     idempotent with acks=all by default, recording for every record whether
//     it was acknowledged (and at which offset) or failed. Stop returns the
//     Result.
//   - a verifier (Check, Verify): once the faults are over, it waits for the
//     partition to settle (a leader, every replica in the ISR, a high
//     watermark that stops moving), reads the partition through its leader
//     from offset 0 to the high watermark, then kills every node and reads
//     each replica's segment files from its log dir, comparing the batches
//     below the high watermark byte for byte. It returns a Report of counts.
//     Verify also fails the test on any loss, duplicate, misplaced record,
//     gap or divergent replica; Check only reports (for a negative control
//     that must see a loss).
//
// A typical test:
//
//	c := testutil.StartCluster(t, testutil.ClusterOptions{Nodes: 3})
//	CreateTopic(t, c, "t", 3, map[string]string{"min.insync.replicas": "2"})
//	p := StartProducer(t, c, "t", ProducerOptions{})
//	p.WaitAcked(t, 500, 30*time.Second)
//	... faults ...
//	res := p.Stop()
//	Verify(t, c, "t", res)
//
// Check and Verify end the cluster: every node is killed so that its files
// are a still snapshot. Call them last. CheckTopic and VerifyTopic check
// several partitions of a topic before killing the nodes once.
package replication

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/storage"
	"github.com/gregor-project/gregor/internal/testutil"
)

// ProducerOptions configure StartProducer; the zero value is an idempotent
// acks=all producer of 500 records a second to partition 0 through every
// running broker.
type ProducerOptions struct {
	// Writer names the producer in its values, "w<Writer>-<n>"; give
	// concurrent producers different ones.
	Writer int
	// Partition is the partition written (default 0).
	Partition int32
	// Seeds are the brokers the client starts from (default c.Bootstrap()).
	// A single node's ClientAddr pins the client's first contact to it.
	Seeds []string
	// Acks defaults to kgo.AllISRAcks(). With anything else the client is
	// not idempotent (franz-go requires acks=all for idempotence).
	Acks *kgo.Acks
	// Rate is records per second (default 500). Records are produced in
	// ticks of 10 ms.
	Rate int
	// DeliveryTimeout bounds each record's retries (default 20 s); a record
	// that runs out of it is Failed.
	DeliveryTimeout time.Duration
	// Opts are extra client options, applied last.
	Opts []kgo.Opt
}

// Producer writes sequential values to one partition; see StartProducer.
//
// Lock rule: mu guards the outcome maps, written by the client's promise
// callbacks and read by Acked and Stop.
type Producer struct {
	t         testing.TB
	topic     string
	partition int32
	writer    int
	cl        *kgo.Client
	cancel    context.CancelFunc
	loopDone  chan struct{}
	pending   sync.WaitGroup // records produced whose promise has not run

	mu struct {
		sync.Mutex
		sent   int
		acked  map[string]int64
		failed map[string]error
	}
}

// Result is what a Producer saw: every record it produced is in exactly
// one of Acked and Failed.
type Result struct {
	Topic     string
	Partition int32
	Writer    int
	Sent      int
	// Acked maps each acknowledged value to the offset the broker gave it.
	Acked map[string]int64
	// Failed maps each failed value to its error. A failed record may or
	// may not be in the log.
	Failed map[string]error
}

// ErrorCounts counts the failed records by error (a Kafka error's name, or
// the error text).
func (r Result) ErrorCounts() map[string]int {
	out := map[string]int{}
	for _, err := range r.Failed {
		out[errorName(err)]++
	}
	return out
}

// errorName is a Kafka error's name (e.g. NOT_LEADER_OR_FOLLOWER) or the
// error's text.
func errorName(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	return err.Error()
}

// producerTick is how often the producer loop hands records to the client.
const producerTick = 10 * time.Millisecond

// StartProducer starts a producer writing to topic (which must exist) until
// Stop. It fails the test if the client cannot be made. The client buffers at
// most a second's worth of records: while the partition has no leader,
// production blocks rather than piling up.
func StartProducer(t testing.TB, c *testutil.Cluster, topic string, opt ProducerOptions) *Producer {
	t.Helper()
	if opt.Rate <= 0 {
		opt.Rate = 500
	}
	if opt.DeliveryTimeout <= 0 {
		opt.DeliveryTimeout = 20 * time.Second
	}
	seeds := opt.Seeds
	if len(seeds) == 0 {
		seeds = c.Bootstrap()
	}
	acks := kgo.AllISRAcks()
	if opt.Acks != nil {
		acks = *opt.Acks
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(acks),
		kgo.RecordDeliveryTimeout(opt.DeliveryTimeout),
		kgo.ProducerLinger(2 * time.Millisecond),
		kgo.MaxBufferedRecords(max(opt.Rate, 100)),
		kgo.MetadataMinAge(100 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
	}
	if acks != kgo.AllISRAcks() {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	opts = append(opts, opt.Opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatalf("producer client: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Producer{
		t: t, topic: topic, partition: opt.Partition, writer: opt.Writer,
		cl: cl, cancel: cancel, loopDone: make(chan struct{}),
	}
	p.mu.acked = map[string]int64{}
	p.mu.failed = map[string]error{}
	t.Cleanup(func() {
		// A test that failed before Stop: end the loop and the client.
		cancel()
		<-p.loopDone
		cl.Close()
	})
	perTick := max(opt.Rate*int(producerTick)/int(time.Second), 1)
	go p.loop(ctx, perTick)
	return p
}

// loop produces perTick records every producerTick until ctx ends.
func (p *Producer) loop(ctx context.Context, perTick int) {
	defer close(p.loopDone)
	tick := time.NewTicker(producerTick)
	defer tick.Stop()
	n := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for range perTick {
			if ctx.Err() != nil {
				return
			}
			v := fmt.Sprintf("w%d-%d", p.writer, n)
			n++
			p.mu.Lock()
			p.mu.sent++
			p.mu.Unlock()
			p.pending.Add(1)
			// Produce blocks while the buffer is full; a cancelled ctx makes
			// it fail the record at once.
			p.cl.Produce(ctx, &kgo.Record{Partition: p.partition, Value: []byte(v)}, p.done)
		}
	}
}

// done is every record's promise.
func (p *Producer) done(r *kgo.Record, err error) {
	defer p.pending.Done()
	v := string(r.Value)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.mu.failed[v] = err
		return
	}
	p.mu.acked[v] = r.Offset
}

// Acked is the number of records acknowledged so far.
func (p *Producer) Acked() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.mu.acked)
}

// Failed is the number of records failed so far.
func (p *Producer) Failed() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.mu.failed)
}

// WaitAcked waits until at least n records are acknowledged, failing the
// test after timeout.
func (p *Producer) WaitAcked(t testing.TB, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for p.Acked() < n {
		if time.Now().After(deadline) {
			t.Fatalf("producer w%d: %d records acknowledged (%d failed) after %v, want %d",
				p.writer, p.Acked(), p.Failed(), timeout, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// WaitMoreAcked waits until n more records than now are acknowledged:
// proof that the partition takes writes again after a fault.
func (p *Producer) WaitMoreAcked(t testing.TB, n int, timeout time.Duration) {
	t.Helper()
	p.WaitAcked(t, p.Acked()+n, timeout)
}

// stopFlushTimeout bounds how long Stop waits for records in flight
// before failing them by closing the client.
const stopFlushTimeout = 30 * time.Second

// Stop ends production, waits up to stopFlushTimeout for the records in
// flight to be acknowledged or to fail (closing the client fails the rest),
// and returns the outcome of every record produced.
func (p *Producer) Stop() Result {
	p.cancel()
	<-p.loopDone
	ctx, cancel := context.WithTimeout(context.Background(), stopFlushTimeout)
	err := p.cl.Flush(ctx)
	cancel()
	if err != nil {
		p.t.Logf("producer w%d: flush: %v; failing the records still in flight", p.writer, err)
	}
	p.cl.Close()
	p.pending.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	return Result{
		Topic: p.topic, Partition: p.partition, Writer: p.writer, Sent: p.mu.sent,
		Acked: maps.Clone(p.mu.acked), Failed: maps.Clone(p.mu.failed),
	}
}

// Report is what the verifier found. Lost, Duplicated, Misplaced, Gaps and
// Diverged must all be empty for a correct broker.
type Report struct {
	Topic     string
	Partition int32
	// HighWatermark is the settled partition's high watermark; the log read
	// is [0, HighWatermark).
	HighWatermark int64
	// Records is the number of records read through the leader.
	Records int
	Acked   int // records acknowledged, over all results
	Failed  int // records failed, over all results
	// FailedPresent is how many failed records are in the log anyway (an
	// outcome the producer could not know; not an error).
	FailedPresent int
	// Lost are acknowledged values not in the log.
	Lost []string
	// Duplicated are values that occur more than once in the log.
	Duplicated []string
	// Misplaced are acknowledged values found at another offset than the
	// one acknowledged.
	Misplaced []string
	// Gaps describe breaks in the offsets read (they must be 0..HW-1).
	Gaps []string
	// Diverged describe replicas whose files differ below the high
	// watermark, or end before it.
	Diverged []string
	// ReplicaBytes is, per replica, how many bytes of its log lie below the
	// high watermark (all equal when nothing diverged).
	ReplicaBytes map[int32]int64
	// Leader and ISR are the settled partition's.
	Leader int32
	ISR    []int32
	// Offsets maps every value in the log to the offsets holding it.
	Offsets map[string][]int64
}

// Problems lists every violation in the report, one line each.
func (r Report) Problems() []string {
	var out []string
	add := func(what string, vs []string) {
		if len(vs) > 0 {
			out = append(out, fmt.Sprintf("%d %s: %s", len(vs), what, sample(vs)))
		}
	}
	add("acknowledged records lost", r.Lost)
	add("records duplicated", r.Duplicated)
	add("acknowledged records at another offset than acknowledged", r.Misplaced)
	out = append(out, r.Gaps...)
	out = append(out, r.Diverged...)
	return out
}

// sample is the first few of vs, sorted by writer and sequence.
func sample(vs []string) string {
	vs = slices.Clone(vs)
	slices.SortFunc(vs, compareValues)
	if len(vs) > 10 {
		return strings.Join(vs[:10], ", ") + ", ..."
	}
	return strings.Join(vs, ", ")
}

// compareValues orders "w<writer>-<n>" values by writer then n.
func compareValues(a, b string) int {
	pa, pb := parseValue(a), parseValue(b)
	if pa[0] != pb[0] {
		return pa[0] - pb[0]
	}
	if pa[1] != pb[1] {
		return pa[1] - pb[1]
	}
	return strings.Compare(a, b)
}

func parseValue(v string) [2]int {
	w, n, _ := strings.Cut(strings.TrimPrefix(v, "w"), "-")
	wi, _ := strconv.Atoi(w)
	ni, _ := strconv.Atoi(n)
	return [2]int{wi, ni}
}

// String is the report's counts on one line.
func (r Report) String() string {
	return fmt.Sprintf("%s[%d]: hw %d, %d records in the log; acknowledged %d, failed %d (%d of them stored), lost %d, duplicated %d, misplaced %d, gaps %d, divergent replicas %d; leader %d, isr %v, bytes below hw %v",
		r.Topic, r.Partition, r.HighWatermark, r.Records, r.Acked, r.Failed, r.FailedPresent,
		len(r.Lost), len(r.Duplicated), len(r.Misplaced), len(r.Gaps), len(r.Diverged),
		r.Leader, r.ISR, r.ReplicaBytes)
}

// settleTimeout bounds the wait for a settled partition in Check.
const settleTimeout = 60 * time.Second

// Verify is Check, failing the test on every problem of the report.
func Verify(t testing.TB, c *testutil.Cluster, topic string, results ...Result) Report {
	t.Helper()
	r := Check(t, c, topic, results...)
	for _, p := range r.Problems() {
		t.Errorf("%s[%d]: %s", topic, r.Partition, p)
	}
	return r
}

// Check verifies the partition the results wrote (all must be of one
// partition; partition 0 if there are none) and logs the report's counts.
// It fails the test only when it cannot read: the partition does not settle
// within settleTimeout (every replica must be running), or a file or fetch
// fails. Check kills every node of the cluster.
func Check(t testing.TB, c *testutil.Cluster, topic string, results ...Result) Report {
	t.Helper()
	var partition int32
	if len(results) > 0 {
		partition = results[0].Partition
	}
	return CheckTopic(t, c, topic, []int32{partition}, results...)[0]
}

// VerifyTopic is CheckTopic, failing the test on every problem of the
// reports.
func VerifyTopic(t testing.TB, c *testutil.Cluster, topic string, partitions []int32, results ...Result) []Report {
	t.Helper()
	reps := CheckTopic(t, c, topic, partitions, results...)
	for _, r := range reps {
		for _, p := range r.Problems() {
			t.Errorf("%s[%d]: %s", topic, r.Partition, p)
		}
	}
	return reps
}

// CheckTopic is Check of several partitions of topic at once, each against
// the results that wrote it (every result must be of one of partitions):
// each partition is settled and read through its leader, then every node is
// killed once and each partition's replicas are compared. It returns one
// report per partition, in the order of partitions.
func CheckTopic(t testing.TB, c *testutil.Cluster, topic string, partitions []int32, results ...Result) []Report {
	t.Helper()
	byPartition := map[int32][]Result{}
	for _, res := range results {
		if res.Topic != topic || !slices.Contains(partitions, res.Partition) {
			t.Fatalf("Check %s%v: a result of %s[%d]", topic, partitions, res.Topic, res.Partition)
		}
		byPartition[res.Partition] = append(byPartition[res.Partition], res)
	}
	reps := make([]Report, len(partitions))
	states := make([]PartitionState, len(partitions))
	logs := make([][]loggedRecord, len(partitions))
	for i, p := range partitions {
		reps[i], states[i], logs[i] = checkLive(t, c, topic, p, byPartition[p])
	}
	// The replicas' files, still.
	for _, n := range c.Nodes() {
		n.Kill()
	}
	for i, p := range partitions {
		reps[i].ReplicaBytes, reps[i].Diverged = compareReplicas(t, c, topic, p, states[i].Replicas, reps[i].HighWatermark, logs[i])
		t.Logf("verify %s", reps[i])
	}
	return reps
}

// checkLive is the part of the check done with the cluster running: it
// settles the partition, reads it through its leader and matches the log
// with the results. It returns the report so far, the settled state and the
// records read.
func checkLive(t testing.TB, c *testutil.Cluster, topic string, partition int32, results []Result) (Report, PartitionState, []loggedRecord) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*settleTimeout)
	defer cancel()
	rep := Report{Topic: topic, Partition: partition}

	st, hw := Settle(t, c, topic, partition, settleTimeout)
	rep.HighWatermark, rep.Leader, rep.ISR = hw, st.Leader, st.ISR

	// The log as the leader serves it to a consumer.
	logged := consumeTo(ctx, t, c, topic, partition, hw)
	rep.Records = len(logged)
	at := map[string][]int64{} // value -> offsets holding it
	next := int64(0)
	for _, rec := range logged {
		if rec.offset != next {
			rep.Gaps = append(rep.Gaps, fmt.Sprintf("offset %d follows %d in the log read through leader %d", rec.offset, next-1, st.Leader))
		}
		next = rec.offset + 1
		at[rec.value] = append(at[rec.value], rec.offset)
	}
	rep.Offsets = at
	if next != hw {
		rep.Gaps = append(rep.Gaps, fmt.Sprintf("the log read through leader %d ends at %d, not at the high watermark %d", st.Leader, next, hw))
	}
	for v, offs := range at {
		if len(offs) > 1 {
			rep.Duplicated = append(rep.Duplicated, fmt.Sprintf("%s at %v", v, offs))
		}
	}
	for _, res := range results {
		rep.Acked += len(res.Acked)
		rep.Failed += len(res.Failed)
		for v, off := range res.Acked {
			switch offs := at[v]; {
			case len(offs) == 0:
				rep.Lost = append(rep.Lost, fmt.Sprintf("%s@%d", v, off))
			case !slices.Contains(offs, off):
				rep.Misplaced = append(rep.Misplaced, fmt.Sprintf("%s acknowledged at %d, stored at %v", v, off, offs))
			}
		}
		for v := range res.Failed {
			if len(at[v]) > 0 {
				rep.FailedPresent++
			}
		}
	}
	return rep, st, logged
}

// PartitionState is one partition as a broker's metadata shows it.
type PartitionState struct {
	Leader      int32
	LeaderEpoch int32
	Replicas    []int32
	ISR         []int32
}

// FullISR reports whether the partition has a leader and every replica in
// its ISR.
func (s PartitionState) FullISR() bool {
	return s.Leader >= 0 && len(s.Replicas) > 0 && len(s.ISR) == len(s.Replicas)
}

// InISR reports whether node id is in the ISR.
func (s PartitionState) InISR(id int32) bool { return slices.Contains(s.ISR, id) }

// Partition reads topic's partition from the metadata of the brokers at
// seeds (any running broker when seeds is empty). It is for polling: errors
// are returned, not fatal.
func Partition(ctx context.Context, c *testutil.Cluster, topic string, partition int32, seeds ...string) (PartitionState, error) {
	if len(seeds) == 0 {
		seeds = c.Bootstrap()
	}
	if len(seeds) == 0 {
		return PartitionState{}, errors.New("no broker is running")
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequestRetries(0))
	if err != nil {
		return PartitionState{}, err
	}
	defer cl.Close()
	md, err := kadm.NewClient(cl).Metadata(ctx, topic)
	if err != nil {
		return PartitionState{}, err
	}
	td, ok := md.Topics[topic]
	if !ok {
		return PartitionState{}, fmt.Errorf("topic %s not in metadata", topic)
	}
	if td.Err != nil {
		return PartitionState{}, fmt.Errorf("topic %s: %w", topic, td.Err)
	}
	pd, ok := td.Partitions[partition]
	if !ok {
		return PartitionState{}, fmt.Errorf("partition %s[%d] not in metadata", topic, partition)
	}
	if pd.Err != nil {
		return PartitionState{}, fmt.Errorf("partition %s[%d]: %w", topic, partition, pd.Err)
	}
	return PartitionState{
		Leader: pd.Leader, LeaderEpoch: pd.LeaderEpoch,
		Replicas: slices.Sorted(slices.Values(pd.Replicas)), ISR: slices.Sorted(slices.Values(pd.ISR)),
	}, nil
}

// WaitPartition polls the partition's metadata until cond holds and
// returns the state that satisfied it, failing the test with what after
// timeout. Seeds are as in Partition. The metadata of one broker may lag
// the controller's; ask the broker whose view matters.
func WaitPartition(t testing.TB, c *testutil.Cluster, topic string, partition int32, timeout time.Duration,
	cond func(PartitionState) bool, what string, seeds ...string) PartitionState {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last PartitionState
	var lastErr error
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := Partition(ctx, c, topic, partition, seeds...)
		cancel()
		if err == nil && cond(st) {
			return st
		}
		last, lastErr = st, err
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s of %s[%d]; last state %+v, error %v", timeout, what, topic, partition, last, lastErr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// CreateTopic creates topic with one partition of replication factor rf and
// configs, and waits until it has a leader and a full ISR.
func CreateTopic(t testing.TB, c *testutil.Cluster, topic string, rf int, configs map[string]string) PartitionState {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := c.Client(t)
	// A Metadata request of our own: kadm's BrokerMetadata answers from the
	// client's cache, which may keep an early, partial broker list.
	c.WaitFor(t, 30*time.Second, func() bool {
		req := kmsg.NewPtrMetadataRequest()
		req.Topics = []kmsg.MetadataRequestTopic{}
		resp, err := req.RequestWith(ctx, cl)
		return err == nil && len(resp.Brokers) >= rf
	}, fmt.Sprintf("%d brokers in metadata", rf))
	adm := kadm.NewClient(cl)
	cfg := map[string]*string{}
	for k, v := range configs {
		cfg[k] = &v
	}
	resp, err := adm.CreateTopic(ctx, 1, int16(rf), cfg, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	return WaitPartition(t, c, topic, 0, 30*time.Second, PartitionState.FullISR, "a leader and a full ISR")
}

// HighWatermark is the partition's high watermark as its leader reports it
// (ListOffsets latest).
func HighWatermark(ctx context.Context, c *testutil.Cluster, topic string, partition int32) (int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, err
	}
	o, ok := ends.Lookup(topic, partition)
	if !ok {
		return 0, fmt.Errorf("no end offset for %s[%d]", topic, partition)
	}
	return o.Offset, o.Err
}

// settleStable is how long the high watermark must stay put, with a full
// ISR, for Settle to call the partition settled.
const settleStable = time.Second

// Settle waits until the partition has a leader, every replica in its ISR
// and a high watermark unchanged for settleStable (the producers must be
// stopped), and returns the state and the high watermark. It fails the test
// after timeout.
func Settle(t testing.TB, c *testutil.Cluster, topic string, partition int32, timeout time.Duration) (PartitionState, int64) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var (
		hw      int64 = -1
		since   time.Time
		lastErr error
		st      PartitionState
	)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		var err error
		st, err = Partition(ctx, c, topic, partition)
		var h int64
		if err == nil && !st.FullISR() {
			err = fmt.Errorf("ISR %v of replicas %v, leader %d", st.ISR, st.Replicas, st.Leader)
		}
		if err == nil {
			h, err = HighWatermark(ctx, c, topic, partition)
		}
		cancel()
		switch {
		case err != nil:
			hw, lastErr = -1, err
		case h != hw:
			hw, since = h, time.Now()
		case time.Since(since) >= settleStable:
			return st, hw
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s[%d] did not settle within %v: state %+v, hw %d, last error %v", topic, partition, timeout, st, hw, lastErr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// loggedRecord is one record read from the log.
type loggedRecord struct {
	offset int64
	value  string
}

// consumeTo reads the partition from offset 0 up to hw through a consumer.
func consumeTo(ctx context.Context, t testing.TB, c *testutil.Cluster, topic string, partition int32, hw int64) []loggedRecord {
	t.Helper()
	if hw == 0 {
		return nil
	}
	cl := c.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		topic: {partition: kgo.NewOffset().At(0)},
	}), kgo.FetchMaxWait(200*time.Millisecond))
	var out []loggedRecord
	last := int64(-1)
	for last < hw-1 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s[%d]: %d records up to offset %d of hw %d: %v", topic, partition, len(out), last, hw, ctx.Err())
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s[%d]: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < hw {
				out = append(out, loggedRecord{offset: r.Offset, value: string(r.Value)})
			}
			last = max(last, r.Offset)
		})
	}
	cl.Close()
	return out
}

// compareReplicas reads each replica's segment files (the nodes stopped)
// and compares their batches below hw byte for byte, and with the records
// logged through the leader. It returns each replica's byte count below hw
// and the differences found.
func compareReplicas(t testing.TB, c *testutil.Cluster, topic string, partition int32, replicas []int32, hw int64, logged []loggedRecord) (map[int32]int64, []string) {
	t.Helper()
	sizes := map[int32]int64{}
	var diverged []string
	var ref []byte
	refID := int32(-1)
	for _, id := range replicas {
		n := c.Node(id)
		if n == nil {
			diverged = append(diverged, fmt.Sprintf("replica %d is no node of the cluster", id))
			continue
		}
		dir := filepath.Join(n.Dir, storage.TopicPartition{Topic: topic, Partition: partition}.String())
		below, end, err := ReadLogBelow(dir, hw)
		if err != nil {
			t.Fatalf("replica %d: %v", id, err)
		}
		sizes[id] = int64(len(below))
		if end < hw {
			diverged = append(diverged, fmt.Sprintf("replica %d: its log ends at %d, below the high watermark %d", id, end, hw))
		}
		if ref == nil {
			ref, refID = below, id
			if err := matchRecords(below, logged); err != nil {
				diverged = append(diverged, fmt.Sprintf("replica %d's files differ from what its leader served: %v", id, err))
			}
			continue
		}
		if !bytes.Equal(below, ref) {
			diverged = append(diverged, fmt.Sprintf("replica %d differs from replica %d below hw %d: %s", id, refID, hw, firstDifference(ref, below)))
		}
	}
	return sizes, diverged
}

// ReadLogBelow reads the segment files (*.log, in base offset order) of the
// partition directory dir and returns the bytes of the whole batches whose
// last offset is below hw, and the log end offset (one past the last whole
// batch). A torn or zero tail ends the log.
func ReadLogBelow(dir string, hw int64) (below []byte, end int64, err error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, 0, err
	}
	var names []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".log") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names) // zero-padded base offsets sort as numbers
	for _, name := range names {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, 0, err
		}
		for len(data) >= batch.HeaderSize {
			h, err := batch.ParseHeader(data)
			if err != nil || h.Size() > len(data) {
				break // torn or preallocated tail
			}
			b := data[:h.Size()]
			data = data[h.Size():]
			if _, err := batch.CheckCRC(b); err != nil {
				break
			}
			if h.LastOffset() < hw {
				below = append(below, b...)
			}
			end = h.LastOffset() + 1
		}
	}
	return below, end, nil
}

// matchRecords checks that the batches hold exactly the logged records.
func matchRecords(batches []byte, logged []loggedRecord) error {
	i := 0
	for len(batches) > 0 {
		h, err := batch.ParseHeader(batches)
		if err != nil {
			return err
		}
		b := batches[:h.Size()]
		batches = batches[h.Size():]
		if h.IsControl() {
			continue
		}
		recs, err := batch.Records(b)
		if err != nil {
			return err
		}
		for _, r := range recs {
			off := h.BaseOffset + int64(r.OffsetDelta)
			if i >= len(logged) {
				return fmt.Errorf("offset %d (%q) is past the %d records served", off, r.Value, len(logged))
			}
			if l := logged[i]; l.offset != off || l.value != string(r.Value) {
				return fmt.Errorf("offset %d holds %q, the leader served %q at %d", off, r.Value, l.value, l.offset)
			}
			i++
		}
	}
	if i != len(logged) {
		return fmt.Errorf("%d records in the files, %d served", i, len(logged))
	}
	return nil
}

// firstDifference describes where a and b first differ: the batch of a at
// that position.
func firstDifference(a, b []byte) string {
	n := min(len(a), len(b))
	pos := 0
	for pos < n && a[pos] == b[pos] {
		pos++
	}
	// Find the batch of a around pos.
	start := 0
	for start < len(a) {
		h, err := batch.ParseHeader(a[start:])
		if err != nil || start+h.Size() > pos {
			if err == nil {
				return fmt.Sprintf("byte %d (%d vs %d bytes), in the batch at offset %d, epoch %d", pos, len(a), len(b), h.BaseOffset, h.PartitionLeaderEpoch)
			}
			break
		}
		start += h.Size()
	}
	return fmt.Sprintf("byte %d (%d vs %d bytes)", pos, len(a), len(b))
}
