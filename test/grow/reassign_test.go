// Package grow tests a cluster that changes shape under load: a broker joins and takes
// replicas by reassignment while a producer and a consumer run, and leadership moves by
// preferred, unclean and automatic elections. Every test runs real `gregor server` processes
// (testutil.StartCluster) and real clients over TCP.
package grow

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/cli"
	"github.com/gregor-project/gregor/internal/testutil"
)

// Metadata here is always asked of a broker: kadm's Metadata answers from the client's
// cache, which may be seconds old and never learns of a broker that joins later.

// metadata asks any broker for the brokers and topics (no topics: none).
func metadata(ctx context.Context, cl *kgo.Client, topics ...string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{}
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	return req.RequestWith(ctx, cl)
}

// brokerMetadata asks broker id itself (not any broker) for topic's metadata.
func brokerMetadata(ctx context.Context, cl *kgo.Client, id int32, topic string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := cl.Broker(int(id)).RetriableRequest(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.MetadataResponse), nil
}

// waitBrokers waits until Metadata lists n brokers.
func waitBrokers(ctx context.Context, t *testing.T, c *testutil.Cluster, cl *kgo.Client, n int) {
	t.Helper()
	c.WaitFor(t, 30*time.Second, func() bool {
		m, err := metadata(ctx, cl)
		return err == nil && len(m.Brokers) == n
	}, fmt.Sprintf("%d brokers in metadata", n))
}

// partitions reads a topic's partitions from Metadata, by partition number.
func partitions(ctx context.Context, cl *kgo.Client, topic string) ([]kmsg.MetadataResponseTopicPartition, error) {
	md, err := metadata(ctx, cl, topic)
	if err != nil {
		return nil, err
	}
	if len(md.Topics) != 1 {
		return nil, fmt.Errorf("topic %s: %d topics in the answer", topic, len(md.Topics))
	}
	if err := kerr.ErrorForCode(md.Topics[0].ErrorCode); err != nil {
		return nil, fmt.Errorf("topic %s: %w", topic, err)
	}
	ps := md.Topics[0].Partitions
	slices.SortFunc(ps, func(a, b kmsg.MetadataResponseTopicPartition) int { return int(a.Partition - b.Partition) })
	return ps, nil
}

// fullyReplicated reports whether every partition of topic has a leader and an ISR equal
// to its replicas.
func fullyReplicated(ctx context.Context, cl *kgo.Client, topic string, n int) bool {
	ps, err := partitions(ctx, cl, topic)
	if err != nil || len(ps) != n {
		return false
	}
	for _, p := range ps {
		if p.ErrorCode != 0 || p.Leader < 0 || !sameSet(p.ISR, p.Replicas) {
			return false
		}
	}
	return true
}

func sameSet(a, b []int32) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// workload is a producer (acks=all, idempotent) writing numbered records, and a consumer
// reading the topic from the start, both until stop. Each record's value is its 8-byte
// number followed by padding. The producer writes as fast as a small window of in-flight
// records allows until pace is called, then at a fixed rate: a reassignment whose throttle
// is below the rate at which its partitions grow never completes (in Kafka too).
type workload struct {
	topic   string
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	prod    *kgo.Client
	padding int
	perTick atomic.Int64 // records per 10 ms once paced; 0: unpaced

	mu struct {
		sync.Mutex
		acked     map[uint64]bool
		failed    int
		prodErrs  map[string]int // first errors of failed records, by text
		consumed  int
		fetchErrs []error // non-retriable errors the consumer saw
		retriable int     // retriable errors the consumer saw
	}
}

func startWorkload(t *testing.T, c *testutil.Cluster, topic string, padding int) *workload {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &workload{topic: topic, cancel: cancel, padding: padding}
	w.mu.acked = map[uint64]bool{}
	w.mu.prodErrs = map[string]int{}
	w.prod = c.Client(t, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(60*time.Second), kgo.ProducerLinger(2*time.Millisecond),
		kgo.MaxBufferedRecords(256), kgo.ProducerBatchCompression(kgo.NoCompression())) // the bytes are real
	cons := c.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond))
	w.wg.Add(2)
	go func() {
		defer w.wg.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		sent := int64(0)
		for seq := uint64(1); ctx.Err() == nil; seq++ {
			if n := w.perTick.Load(); n > 0 {
				if sent >= n {
					select {
					case <-tick.C:
					case <-ctx.Done():
						return
					}
					sent = 0
				}
				sent++
			}
			v := binary.BigEndian.AppendUint64(make([]byte, 0, 8+padding), seq)
			v = append(v, bytes.Repeat([]byte{'x'}, padding)...)
			// Produce blocks while MaxBufferedRecords are in flight: that paces the loop.
			// The record's context is not ctx: stopping must not cancel buffered records.
			w.prod.Produce(context.Background(), &kgo.Record{Value: v}, func(r *kgo.Record, err error) {
				w.mu.Lock()
				defer w.mu.Unlock()
				if err == nil {
					w.mu.acked[seq] = true
				} else {
					w.mu.failed++
					w.mu.prodErrs[err.Error()]++
				}
			})
		}
	}()
	go func() {
		defer w.wg.Done()
		for ctx.Err() == nil {
			fs := cons.PollFetches(ctx)
			fs.EachError(func(_ string, _ int32, err error) {
				if errors.Is(err, context.Canceled) || errors.Is(err, kgo.ErrClientClosed) {
					return
				}
				w.mu.Lock()
				defer w.mu.Unlock()
				if kerr.IsRetriable(err) {
					w.mu.retriable++
				} else {
					w.mu.fetchErrs = append(w.mu.fetchErrs, err)
				}
			})
			w.mu.Lock()
			w.mu.consumed += fs.NumRecords()
			w.mu.Unlock()
		}
	}()
	return w
}

// pace limits the producer to perSecond records a second from now on.
func (w *workload) pace(perSecond int64) { w.perTick.Store(max(perSecond/100, 1)) }

// ackedCount is how many records have been acknowledged so far.
func (w *workload) ackedCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.mu.acked)
}

// stop flushes what is buffered, then stops both goroutines.
func (w *workload) stop(t *testing.T) {
	t.Helper()
	fctx, fcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer fcancel()
	w.cancel()
	w.wg.Wait()
	if err := w.prod.Flush(fctx); err != nil {
		t.Errorf("flushing the producer: %v", err)
	}
}

// readBack reads every record of topic up to its end offsets and returns how many times
// each record number occurs.
func readBack(ctx context.Context, t *testing.T, c *testutil.Cluster, adm *kadm.Client, topic string) map[uint64]int {
	t.Helper()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("end offsets: %v", err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Fatalf("end offset of %s-%d: %v", o.Topic, o.Partition, o.Err)
		}
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	cl := c.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[uint64]int{}
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading back %s: %v (partitions left: %v)", topic, ctx.Err(), want)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("read back %s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if len(r.Value) >= 8 {
				seen[binary.BigEndian.Uint64(r.Value)]++
			}
			if end, ok := want[r.Partition]; ok && r.Offset+1 >= end {
				delete(want, r.Partition)
			}
		})
	}
	return seen
}

// dynamicConfigs returns the keys of the throttle configs set on any of the resources.
func throttleLeft(ctx context.Context, t *testing.T, adm *kadm.Client, topic string, brokers []int32) []string {
	t.Helper()
	var left []string
	rcs, err := adm.DescribeBrokerConfigs(ctx, brokers...)
	if err != nil {
		t.Fatalf("describe broker configs: %v", err)
	}
	trcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatalf("describe topic configs: %v", err)
	}
	for _, rc := range append(rcs, trcs...) {
		if rc.Err != nil {
			t.Fatalf("configs of %s: %v", rc.Name, rc.Err)
		}
		for _, cf := range rc.Configs {
			if !strings.Contains(cf.Key, "replication.throttled") {
				continue
			}
			switch cf.Source {
			case kmsg.ConfigSourceDynamicBrokerConfig, kmsg.ConfigSourceDynamicTopicConfig, kmsg.ConfigSourceDynamicDefaultBrokerConfig:
				left = append(left, fmt.Sprintf("%s %s=%s", rc.Name, cf.Key, kadmValue(cf.Value)))
			}
		}
	}
	return left
}

func kadmValue(v *string) string {
	if v == nil {
		return "<nil>"
	}
	return *v
}

// logWriter sends what the reassignment prints to the test log, a line at a time.
type logWriter struct {
	t   *testing.T
	buf bytes.Buffer
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.buf.Write(p)
	for {
		line, err := w.buf.ReadString('\n')
		if err != nil {
			w.buf.WriteString(line)
			return len(p), nil
		}
		w.t.Logf("reassign: %s", strings.TrimRight(line, "\n"))
	}
}

// A fourth broker joins a loaded three-node cluster, gets nothing until asked, then takes
// its share of a topic's replicas by a throttled reassignment while a producer (acks=all,
// idempotent) and a consumer keep running. Nothing acknowledged is lost or duplicated, the
// new assignment and full ISRs are in every broker's metadata, and the reassignment leaves
// no trace (no listed reassignment, no throttle config).
func TestAddBrokerAndReassignUnderLoad(t *testing.T) {
	const (
		topic = "grow"
		parts = 6
	)
	c := testutil.StartCluster(t, testutil.ClusterOptions{Nodes: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	admCl := c.Client(t)
	adm := kadm.NewClient(admCl)
	waitBrokers(ctx, t, c, admCl, 3)
	if resp, err := adm.CreateTopic(ctx, parts, 2, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	c.WaitFor(t, 30*time.Second, func() bool { return fullyReplicated(ctx, admCl, topic, parts) }, "a full ISR on every partition")

	w := startWorkload(t, c, topic, 1000)
	c.WaitFor(t, 60*time.Second, func() bool { return w.ackedCount() >= 40_000 }, "40,000 records (40 MB) acknowledged before the new broker joins")

	// From here 3,000 records (3 MB) a second: the partitions moving to broker 4 grow by
	// about 1.5 MB/s, well under the 10 MB/s throttle.
	w.pace(3000)
	b4 := c.AddBroker(4)
	waitBrokers(ctx, t, c, admCl, 4)
	// It is in the cluster but holds nothing: no replica in metadata, no partition on disk.
	ps, err := partitions(ctx, admCl, topic)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if slices.Contains(p.Replicas, 4) {
			t.Fatalf("%s-%d got broker 4 (replicas %v) before any reassignment", topic, p.Partition, p.Replicas)
		}
	}
	if ents, err := os.ReadDir(b4.Dir); err == nil {
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), topic+"-") {
				t.Fatalf("broker 4 has a partition directory %s before any reassignment", filepath.Join(b4.Dir, e.Name()))
			}
		}
	}

	gen, err := cli.GenerateReassignment(ctx, admCl, []string{topic}, []int32{1, 2, 3, 4}, 0)
	if err != nil {
		t.Fatalf("generate: %v", err)
	}
	t.Logf("plan moves %d replicas: %s", gen.Moves, gen.Proposed.MarshalCompact())
	onFour := 0
	for _, e := range gen.Proposed.Partitions {
		if slices.Contains(e.Replicas, 4) {
			onFour++
		}
	}
	if onFour < 2 || gen.Moves == 0 {
		t.Fatalf("a balanced plan over 4 brokers puts %d of %d partitions on broker 4 (moves %d)", onFour, parts, gen.Moves)
	}

	// While the reassignment runs, watch for its throttle on the new broker.
	watchCtx, stopWatch := context.WithCancel(ctx)
	throttleSeen := make(chan string, 1)
	go func() {
		for watchCtx.Err() == nil {
			rcs, err := adm.DescribeBrokerConfigs(watchCtx, 4)
			if err == nil && len(rcs) == 1 {
				for _, cf := range rcs[0].Configs {
					if cf.Key == "follower.replication.throttled.rate" && cf.Source == kmsg.ConfigSourceDynamicBrokerConfig {
						throttleSeen <- kadmValue(cf.Value)
						return
					}
				}
			}
		}
	}()
	ackedBefore := w.ackedCount()
	start := time.Now()
	err = cli.ExecuteReassignment(ctx, admCl, gen.Proposed, cli.ExecuteOptions{
		Throttle: 10 << 20, Wait: true, Interval: 200 * time.Millisecond,
	}, &logWriter{t: t})
	stopWatch()
	if err != nil {
		t.Fatalf("execute: %v", err)
	}
	select {
	case v := <-throttleSeen:
		if v != "10485760" {
			t.Errorf("broker 4's follower throttle was %s during the reassignment, want 10485760", v)
		}
	default:
		t.Error("no follower throttle on broker 4 was seen during the reassignment")
	}
	t.Logf("reassignment done in %v; %d records acknowledged meanwhile", time.Since(start).Round(time.Millisecond), w.ackedCount()-ackedBefore)
	// The workload keeps going over the new assignment.
	ackedAfter := w.ackedCount()
	c.WaitFor(t, 30*time.Second, func() bool { return w.ackedCount() >= ackedAfter+1000 }, "1,000 more records acknowledged after the reassignment")

	// Every broker's metadata has the plan's replicas, and every ISR is full.
	want := gen.Proposed.Assignment()[topic]
	for _, n := range c.Nodes() {
		c.WaitFor(t, 30*time.Second, func() bool {
			md, err := brokerMetadata(ctx, admCl, n.ID, topic)
			if err != nil || len(md.Topics) != 1 || len(md.Topics[0].Partitions) != parts {
				return false
			}
			for _, p := range md.Topics[0].Partitions {
				if !slices.Equal(p.Replicas, want[p.Partition]) || !sameSet(p.ISR, p.Replicas) || p.Leader < 0 {
					return false
				}
			}
			return true
		}, fmt.Sprintf("broker %d's metadata to show the plan's replicas with full ISRs", n.ID))
	}
	md, err := brokerMetadata(ctx, admCl, 4, topic)
	if err != nil {
		t.Fatal(err)
	}
	inISR := 0
	for _, p := range md.Topics[0].Partitions {
		if slices.Contains(p.Replicas, 4) && slices.Contains(p.ISR, 4) {
			inISR++
		}
		t.Logf("%s-%d: leader %d replicas %v isr %v", topic, p.Partition, p.Leader, p.Replicas, p.ISR)
	}
	if inISR != onFour {
		t.Fatalf("broker 4 is in the ISR of %d partitions, a replica of %d", inISR, onFour)
	}

	w.stop(t)

	// Nothing is being reassigned, and the throttle is gone.
	lreq := kmsg.NewPtrListPartitionReassignmentsRequest()
	lreq.TimeoutMillis = 10_000
	lresp, err := lreq.RequestWith(ctx, admCl)
	if err != nil {
		t.Fatalf("list reassignments: %v", err)
	}
	if err := kerr.ErrorForCode(lresp.ErrorCode); err != nil {
		t.Fatalf("list reassignments: %v", err)
	}
	for _, lt := range lresp.Topics {
		for _, lp := range lt.Partitions {
			t.Errorf("%s-%d is still being reassigned: adding %v removing %v", lt.Topic, lp.Partition, lp.AddingReplicas, lp.RemovingReplicas)
		}
	}
	if left := throttleLeft(ctx, t, adm, topic, []int32{1, 2, 3, 4}); len(left) > 0 {
		t.Errorf("throttle configs left after the reassignment: %v", left)
	}

	// Every acknowledged record is in the topic exactly once; so is every other record.
	seen := readBack(ctx, t, c, adm, topic)
	w.mu.Lock()
	defer w.mu.Unlock()
	lost, dups := 0, 0
	for seq := range w.mu.acked {
		if seen[seq] == 0 {
			lost++
		}
	}
	for _, n := range seen {
		if n > 1 {
			dups++
		}
	}
	t.Logf("acknowledged %d, failed %d, in the log %d distinct; consumer read %d with %d retriable errors",
		len(w.mu.acked), w.mu.failed, len(seen), w.mu.consumed, w.mu.retriable)
	if lost > 0 {
		t.Errorf("%d acknowledged records are missing from the topic", lost)
	}
	if dups > 0 {
		t.Errorf("%d records are in the topic more than once", dups)
	}
	if w.mu.failed > 0 {
		t.Errorf("%d records failed to produce: %v", w.mu.failed, w.mu.prodErrs)
	}
	if len(w.mu.fetchErrs) > 0 {
		t.Errorf("the consumer saw %d non-retriable errors, first %v", len(w.mu.fetchErrs), w.mu.fetchErrs[0])
	}
	if w.mu.consumed < len(w.mu.acked)/2 {
		t.Errorf("the consumer read %d records while %d were acknowledged", w.mu.consumed, len(w.mu.acked))
	}
}
