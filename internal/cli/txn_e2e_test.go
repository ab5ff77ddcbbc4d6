package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/testutil"
)

// The transaction tools against a real broker: an open transaction of a franz-go producer
// is listed and described, holds the LSO that `topic describe` shows, and is not hanging
// (its coordinator knows it), even with records an hour old; a transactional batch written
// with no coordinator involved (partition verification off, as on a broker before KIP-890)
// is the hanging transaction find-hanging reports, and `txn abort` ends it, releasing the
// LSO.
func TestTxnTools(t *testing.T) {
	b := testutil.StartBroker(t, "transaction.partition.verification.enable=false")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := func(args ...string) string {
		t.Helper()
		return mustRunCLI(t, "", append(args, "-b", b.Addr())...)
	}
	runErr := func(args ...string) (string, error) {
		t.Helper()
		return runCLI(t, "", append(args, "-b", b.Addr())...)
	}
	jsonOf := func(v any, args ...string) {
		t.Helper()
		out := run(append(args, "-o", "json")...)
		if err := json.Unmarshal([]byte(out), v); err != nil {
			t.Fatalf("gregor %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	lso := func(topic string) (stable, end int64) {
		t.Helper()
		var d topicDescription
		jsonOf(&d, "topic", "describe", topic)
		return d.Partitions[0].LastStableOffset, d.Partitions[0].LogEndOffset
	}
	run("topic", "create", "txn-open", "--partitions", "1", "--replication-factor", "1")
	run("topic", "create", "txn-hang", "--partitions", "1", "--replication-factor", "1")

	// An open transaction: three records acknowledged, an hour old, not committed.
	old := time.Now().Add(-time.Hour)
	prod, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.TransactionalID("cli-open"), kgo.DefaultProduceTopic("txn-open"))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if err := prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte{byte('a' + i)}, Timestamp: old}).FirstErr(); err != nil {
			t.Fatalf("produce in the transaction: %v", err)
		}
	}

	var listed []txnListRow
	jsonOf(&listed, "txn", "list")
	i := slices.IndexFunc(listed, func(r txnListRow) bool { return r.TransactionalID == "cli-open" })
	if i < 0 || listed[i].State != "Ongoing" || listed[i].ProducerID < 0 {
		t.Fatalf("txn list: %+v, want cli-open Ongoing", listed)
	}
	var desc txnDescription
	jsonOf(&desc, "txn", "describe", "--id", "cli-open")
	if desc.State != "Ongoing" || desc.ProducerID != listed[i].ProducerID || !slices.Equal(desc.TopicPartitions, []string{"txn-open-0"}) ||
		desc.StartTimeMs < 0 || desc.DurationMs < 0 || desc.TimeoutMs <= 0 {
		t.Fatalf("txn describe: %+v", desc)
	}
	if out := run("txn", "describe", "--id", "cli-open"); !strings.Contains(out, "Ongoing") || !strings.Contains(out, "txn-open-0") {
		t.Errorf("txn describe table:\n%s", out)
	}
	if s, e := lso("txn-open"); s != 0 || e != 3 {
		t.Errorf("topic describe with an open transaction from offset 0: LSO %d, high watermark %d, want 0 and 3", s, e)
	}
	if out := run("topic", "describe", "txn-open"); !strings.Contains(out, "LAST-STABLE-OFFSET") {
		t.Errorf("topic describe table has no LSO column:\n%s", out)
	}
	if _, err := runErr("txn", "describe", "--id", "no-such-id"); err == nil || !strings.Contains(err.Error(), "TRANSACTIONAL_ID_NOT_FOUND") {
		t.Errorf("describe of an unknown id: %v, want TRANSACTIONAL_ID_NOT_FOUND", err)
	}

	// A hanging transaction: a transactional batch of an idempotent producer id that no
	// coordinator ever heard of, its records an hour old.
	adm := kadm.NewClient(prod)
	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	node := md.Brokers.NodeIDs()[0]
	pid, epoch := writeStrayTxnBatch(ctx, t, b.Addr(), "txn-hang", old)
	if s, e := lso("txn-hang"); s != 0 || e != 2 {
		t.Fatalf("the stray transactional batch: LSO %d, high watermark %d, want 0 and 2", s, e)
	}
	var hanging []hangingTxn
	jsonOf(&hanging, "txn", "find-hanging", "--broker-id", itoa(node))
	if len(hanging) != 1 || hanging[0].Topic != "txn-hang" || hanging[0].Partition != 0 || hanging[0].ProducerID != pid ||
		hanging[0].ProducerEpoch != epoch || hanging[0].StartOffset != 0 || hanging[0].TransactionalID != "" || hanging[0].DurationMinutes < 59 {
		t.Fatalf("find-hanging: %+v, want only the stray transaction of producer %d on txn-hang-0 from offset 0 (the open one of cli-open is its coordinator's)", hanging, pid)
	}
	if out := run("txn", "find-hanging", "--broker-id", itoa(node), "--max-transaction-timeout", "120"); strings.Contains(out, "txn-hang") {
		t.Errorf("find-hanging with a 2 h timeout reported an hour-old transaction:\n%s", out)
	}

	if _, err := runErr("txn", "abort", "--topic", "txn-hang", "--partition", "0", "--start-offset", "1"); err == nil ||
		!strings.Contains(err.Error(), "starting at offset 1") {
		t.Errorf("abort at an offset no transaction starts at: %v", err)
	}
	var aborted txnAbortResult
	jsonOf(&aborted, "txn", "abort", "--topic", "txn-hang", "--partition", "0", "--start-offset", "0")
	if aborted.ProducerID != pid || aborted.ProducerEpoch != epoch || aborted.Leader != node {
		t.Errorf("abort: %+v", aborted)
	}
	// The ABORT marker is offset 2; the LSO moves past it.
	if s, e := lso("txn-hang"); s != 3 || e != 3 {
		t.Errorf("after the abort: LSO %d, high watermark %d, want 3 and 3", s, e)
	}
	jsonOf(&hanging, "txn", "find-hanging", "--broker-id", itoa(node))
	if len(hanging) != 0 {
		t.Errorf("find-hanging after the abort: %+v", hanging)
	}
	// read_committed skips the aborted records.
	rc, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.ConsumeTopics("txn-hang"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if err := rc.ProduceSync(ctx, &kgo.Record{Topic: "txn-hang", Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	fs := rc.PollFetches(ctx)
	if err := fs.Err(); err != nil {
		t.Fatal(err)
	}
	if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "after" {
		t.Errorf("read_committed after the abort read %d records, want only the one written after it", len(recs))
	}

	// The open transaction commits: the LSO reaches the high watermark.
	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	jsonOf(&desc, "txn", "describe", "--id", "cli-open")
	if desc.State != "CompleteCommit" || len(desc.TopicPartitions) != 0 {
		t.Errorf("txn describe after the commit: %+v", desc)
	}
	if s, e := lso("txn-open"); s != 4 || e != 4 {
		t.Errorf("after the commit: LSO %d, high watermark %d, want 4 and 4", s, e)
	}
}

// find-hanging on a cluster reports the hanging transaction of a partition for its leader
// and for each of its followers alike.
func TestTxnFindHangingOnFollowers(t *testing.T) {
	c := testutil.StartCluster(t, testutil.ClusterOptions{Nodes: 3, Sets: []string{"transaction.partition.verification.enable=false"}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bs := strings.Join(c.Bootstrap(), ",")
	cl := c.Client(t)
	// A Metadata request of our own: kadm's BrokerMetadata answers from the client's cache.
	c.WaitFor(t, 30*time.Second, func() bool {
		req := kmsg.NewPtrMetadataRequest()
		req.Topics = []kmsg.MetadataRequestTopic{}
		resp, err := req.RequestWith(ctx, cl)
		return err == nil && len(resp.Brokers) == 3
	}, "3 brokers in the metadata")
	mustRunCLI(t, "", "topic", "create", "txn-hang", "--partitions", "1", "--replication-factor", "3", "-b", bs)
	pid, _ := writeStrayTxnBatch(ctx, t, bs, "txn-hang", time.Now().Add(-time.Hour))
	for _, n := range c.Nodes() {
		var hanging []hangingTxn
		out := mustRunCLI(t, "", "txn", "find-hanging", "--broker-id", itoa(n.ID), "-b", bs, "-o", "json")
		if err := json.Unmarshal([]byte(out), &hanging); err != nil {
			t.Fatalf("find-hanging output: %v\n%s", err, out)
		}
		if len(hanging) != 1 || hanging[0].ProducerID != pid || hanging[0].Topic != "txn-hang" {
			t.Errorf("find-hanging --broker-id %d: %+v, want the stray transaction of producer %d", n.ID, hanging, pid)
		}
	}
}

// bench produce --transactional-id commits every --txn-records records: 3000 records in 6
// transactions, all of them read_committed, the id's last transaction committed.
func TestBenchProduceTransactional(t *testing.T) {
	b := testutil.StartBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := mustRunCLI(t, "", "bench", "produce", "-b", b.Addr(), "--topic", "txn-bench", "--partitions", "3", "--records", "3000",
		"--record-size", "50", "--transactional-id", "bench-txn", "--txn-records", "500", "--report-interval-ms", "0", "-o", "json")
	var res BenchResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("bench output: %v\n%s", err, out)
	}
	if res.Records != 3000 || res.Failed != 0 || res.Transactions != 6 {
		t.Fatalf("bench result %+v, want 3000 records in 6 transactions", res)
	}
	var desc txnDescription
	if err := json.Unmarshal([]byte(mustRunCLI(t, "", "txn", "describe", "--id", "bench-txn", "-b", b.Addr(), "-o", "json")), &desc); err != nil {
		t.Fatal(err)
	}
	if desc.State != "CompleteCommit" {
		t.Errorf("the benchmark's transactional id is %s, want CompleteCommit", desc.State)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.ConsumeTopics("txn-bench"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	n := 0
	for n < 3000 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read_committed read %d of 3000 records", n)
		}
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		n += fs.NumRecords()
	}
	// bench consume read_committed reads the 3000 records (not the markers' offsets).
	var cres BenchResult
	out = mustRunCLI(t, "", "bench", "consume", "-b", b.Addr(), "--topic", "txn-bench", "--records", "3000",
		"--isolation-level", "read_committed", "--report-interval-ms", "0", "-o", "json")
	if err := json.Unmarshal([]byte(out), &cres); err != nil || cres.Records != 3000 {
		t.Errorf("bench consume read_committed: %+v %v\n%s", cres, err, out)
	}
	if _, err := runCLI(t, "", "bench", "consume", "-b", b.Addr(), "--topic", "txn-bench", "--isolation-level", "read_committed"); err == nil ||
		!strings.Contains(err.Error(), "--records") {
		t.Errorf("bench consume read_committed without --records: %v, want refused", err)
	}
	if _, err := runCLI(t, "", "bench", "produce", "-b", b.Addr(), "--topic", "txn-bench", "--records", "10",
		"--transactional-id", "bench-txn", "--acks", "1"); err == nil || !strings.Contains(err.Error(), "acks=all") {
		t.Errorf("a transactional benchmark with acks=1: %v, want refused", err)
	}
}

// writeStrayTxnBatch (addr: HOST:PORT[,HOST:PORT...]) gets an idempotent producer id (InitProducerId without a
// transactional id) and appends a transactional batch of two records with timestamp ts to
// partition 0 of topic, with no AddPartitionsToTxn: a transaction no coordinator will end.
func writeStrayTxnBatch(ctx context.Context, t *testing.T, addr, topic string, ts time.Time) (int64, int16) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(addr, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionTimeoutMillis = 60000
	iresp, err := init.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(iresp.ErrorCode)
	}
	if err != nil {
		t.Fatalf("InitProducerId: %v", err)
	}
	h := batch.Header{
		LastOffsetDelta: 1, BaseTimestamp: ts.UnixMilli(), MaxTimestamp: ts.UnixMilli(),
		ProducerID: iresp.ProducerID, ProducerEpoch: iresp.ProducerEpoch, BaseSequence: 0,
		Attributes: batch.AttrTransactional,
	}
	raw, err := batch.Build(h, []batch.Record{{OffsetDelta: 0, Value: []byte("stray-0")}, {OffsetDelta: 1, Value: []byte("stray-1")}}, batch.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = 0
	rp.Records = raw
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	// Sent to the partition's leader as the metadata names it, again while a new topic's
	// leadership is still reaching the brokers.
	var last error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		mreq := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(topic)
		mreq.Topics = append(mreq.Topics, mt)
		mresp, err := mreq.RequestWith(ctx, cl)
		if err != nil || len(mresp.Topics) != 1 || len(mresp.Topics[0].Partitions) != 1 || mresp.Topics[0].Partitions[0].Leader < 0 {
			last = fmt.Errorf("no leader in the metadata (%v)", err)
			continue
		}
		presp, err := req.RequestWith(ctx, cl.Broker(int(mresp.Topics[0].Partitions[0].Leader)))
		if err == nil {
			err = kerr.ErrorForCode(presp.Topics[0].Partitions[0].ErrorCode)
		}
		if err == nil {
			return iresp.ProducerID, iresp.ProducerEpoch
		}
		if last = err; !errors.Is(err, kerr.NotLeaderForPartition) && !errors.Is(err, kerr.UnknownTopicOrPartition) {
			break
		}
	}
	t.Fatalf("produce the stray batch: %v", last)
	return 0, 0
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }
