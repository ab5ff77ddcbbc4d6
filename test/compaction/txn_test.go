package compaction

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
	"github.com/gregor-project/gregor/test/replication"
)

// fileBatch is a batch as a partition directory's segment files hold it.
type fileBatch struct {
	h    batch.Header
	recs []batch.Record
}

// fileBatches reads the batches of a partition directory's segment files, and the base
// offsets of its segments.
func fileBatches(dir string) ([]fileBatch, map[int64]bool, error) {
	b, _, err := replication.ReadLogBelow(dir, 1<<62)
	if err != nil {
		return nil, nil, err
	}
	var out []fileBatch
	for len(b) > 0 {
		h, err := batch.ParseHeader(b)
		if err != nil {
			return nil, nil, err
		}
		recs, err := batch.Records(b[:h.Size()])
		if err != nil {
			return nil, nil, err
		}
		out = append(out, fileBatch{h, recs})
		b = b[h.Size():]
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	bases := map[int64]bool{}
	for _, e := range ents {
		if s, ok := strings.CutSuffix(e.Name(), ".log"); ok {
			if base, err := strconv.ParseInt(s, 10, 64); err == nil {
				bases[base] = true
			}
		}
	}
	return out, bases, nil
}

// strayMarkers lists the markers left in bs with no batch of their transaction before them
// (since the producer's previous marker), but for one ending its segment (the cleaner keeps
// a segment's last batch so that the cleaned segment ends where the old ones did).
func strayMarkers(bs []fileBatch, bases map[int64]bool) []int64 {
	var out []int64
	seen := map[int64]bool{}
	for i, b := range bs {
		if !b.h.IsControl() {
			if b.h.IsTransactional() {
				seen[b.h.ProducerID] = true
			}
			continue
		}
		endsSegment := i+1 == len(bs)
		for o := b.h.LastOffset() + 1; !endsSegment && o <= bs[i+1].h.BaseOffset; o++ {
			endsSegment = bases[o]
		}
		if !seen[b.h.ProducerID] && !endsSegment {
			out = append(out, b.h.BaseOffset)
		}
		delete(seen, b.h.ProducerID)
	}
	return out
}

// TestCompactedTransactions writes the same keys in committed and aborted transactions of two
// producers, interleaved with plain writes, into a compacted topic of 2 KiB segments: after
// cleaning, a read_uncommitted and a read_committed consumer both read exactly the latest
// committed value of every key, no aborted value is left in the log, and the markers whose
// transactions' batches are gone go after delete.retention.ms.
func TestCompactedTransactions(t *testing.T) {
	b := testutil.StartBroker(t, cleanerSets...)
	const topic = "txn-changelog"
	createCompacted(t, b.Addr(), topic, map[string]string{
		"cleanup.policy": "compact", "segment.bytes": "2048",
		"min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "300",
	})
	plain := client(t, b.Addr(), kgo.DefaultProduceTopic(topic))
	txa := client(t, b.Addr(), kgo.DefaultProduceTopic(topic), kgo.TransactionalID("cleaner-a"), kgo.TransactionTimeout(20*time.Second))
	txb := client(t, b.Addr(), kgo.DefaultProduceTopic(topic), kgo.TransactionalID("cleaner-b"), kgo.TransactionTimeout(20*time.Second))
	ctx := ctxT(t, 60*time.Second)
	last := map[string]string{}
	put := func(cl *kgo.Client, key, value string, committed bool) {
		t.Helper()
		if err := cl.ProduceSync(ctx, record(topic, key, value)).FirstErr(); err != nil {
			t.Fatalf("produce %s=%s: %v", key, value, err)
		}
		if committed {
			last[key] = value
		}
	}
	const rounds = 30
	for r := range rounds {
		k := func(i int) string { return fmt.Sprintf("key-%d", (r+i)%5) }
		if err := txa.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := txb.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		put(txa, k(0), fmt.Sprintf("commit-%d", r), true)
		put(txb, k(0), fmt.Sprintf("abort-%d", r), false)
		put(plain, k(2), fmt.Sprintf("plain-%d", r), true)
		put(txb, "only-aborted", fmt.Sprintf("abort-%d", r), false)
		put(txa, k(1), fmt.Sprintf("commit-%d-2", r), true)
		if r%3 == 0 {
			put(plain, k(0), fmt.Sprintf("plain-%d-after", r), true) // after the aborted value
		}
		if err := txa.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
		if err := txb.EndTransaction(ctx, kgo.TryAbort); err != nil {
			t.Fatal(err)
		}
	}
	// Distinct keys after, so the transactions lie in sealed (cleanable) segments.
	for i := range 150 {
		put(plain, fmt.Sprintf("filler-%03d", i), "f", true)
	}

	check := func(opts ...kgo.Opt) (bool, string) {
		got := readAllWith(t, b.Addr(), topic, opts...)
		seen := map[string]string{}
		for _, r := range got {
			k, v := string(r.Key), string(r.Value)
			if strings.HasPrefix(v, "abort-") {
				return false, fmt.Sprintf("aborted value %s=%s at %d", k, v, r.Offset)
			}
			if _, dup := seen[k]; dup {
				return false, fmt.Sprintf("key %s twice among %d records", k, len(got))
			}
			seen[k] = v
		}
		for k, v := range last {
			if seen[k] != v {
				return false, fmt.Sprintf("key %s: %q, want the latest committed %q", k, seen[k], v)
			}
		}
		return len(seen) == len(last), fmt.Sprintf("%d keys of %d", len(seen), len(last))
	}
	waitFor(t, 30*time.Second, "read_uncommitted: the latest committed value per key", func() (bool, string) {
		return check(kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
	})
	if ok, state := check(kgo.FetchIsolationLevel(kgo.ReadCommitted())); !ok {
		t.Fatalf("read_committed: %s", state)
	}

	// No aborted value in the files either, and the markers of gone transactions go. A
	// marker goes in a pass that runs after its delete horizon, and a log gets a pass only
	// while it is dirty (min.cleanable.dirty.ratio), as in Kafka: the test keeps writing new
	// keys, so passes go on however early the writes above ended on a loaded machine.
	dir := filepath.Join(b.Dir, topic+"-0")
	later := 0
	waitFor(t, 30*time.Second, "markers of gone transactions removed", func() (bool, string) {
		key := fmt.Sprintf("later-%04d", later)
		later++
		if err := plain.ProduceSync(ctxT(t, 10*time.Second), record(topic, key, "l")).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", key, err)
		}
		last[key] = "l"
		bs, bases, err := fileBatches(dir)
		if err != nil {
			return false, err.Error() // a swap renamed a file away: read again
		}
		markers := 0
		for _, fb := range bs {
			if fb.h.IsControl() {
				markers++
			}
			for _, r := range fb.recs {
				if !fb.h.IsControl() && strings.HasPrefix(string(r.Value), "abort-") {
					t.Fatalf("aborted record %s=%s at %d in the files", r.Key, r.Value, fb.h.BaseOffset+int64(r.OffsetDelta))
				}
			}
		}
		stray := strayMarkers(bs, bases)
		return len(stray) == 0, fmt.Sprintf("%d markers of %d left, %d with no batch of their transaction: %v", markers, 2*rounds, len(stray), stray)
	})
	if ok, state := check(kgo.FetchIsolationLevel(kgo.ReadCommitted())); !ok {
		t.Fatalf("read_committed once the markers went: %s", state)
	}
	if ok, state := check(kgo.FetchIsolationLevel(kgo.ReadUncommitted())); !ok {
		t.Fatalf("read_uncommitted once the markers went: %s", state)
	}
}

// readAllWith is readAll from offset 0 with the consumer options opts.
func readAllWith(t *testing.T, addr, topic string, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	ctx := ctxT(t, 10*time.Second)
	adm := kadm.NewClient(client(t, addr))
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(topic, 0)
	if end.Err != nil {
		t.Fatal(end.Err)
	}
	if end.Offset == 0 {
		return nil
	}
	cl := client(t, addr, append([]kgo.Opt{kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}})}, opts...)...)
	defer cl.Close()
	var out []*kgo.Record
	// The last record written is a plain one: the consumer has read everything once it has it.
	for len(out) == 0 || out[len(out)-1].Offset < end.Offset-1 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("reading %s: %v (read %d records, up to the end at %d)", topic, err, len(out), end.Offset)
		}
		if errs := fs.Errors(); len(errs) > 0 {
			t.Fatalf("fetch: %v", errs)
		}
		out = append(out, fs.Records()...)
	}
	return out
}

// retryTxn sends req until its error (errOf) is not one a client retries.
func retryTxn[R kmsg.Response](t *testing.T, cl *kgo.Client, req kmsg.Request, errOf func(R) int16) R {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := cl.Request(ctxT(t, 10*time.Second), req)
		var code int16
		if err == nil {
			code = errOf(resp.(R))
		}
		e := kerr.ErrorForCode(code)
		if err == nil && code == 0 {
			return resp.(R)
		}
		retriable := err != nil || errors.Is(e, kerr.ConcurrentTransactions) || errors.Is(e, kerr.CoordinatorLoadInProgress) ||
			errors.Is(e, kerr.NotCoordinator) || errors.Is(e, kerr.CoordinatorNotAvailable)
		if !retriable || time.Now().After(deadline) {
			t.Fatalf("%T: %v %v", req, err, e)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition, bounded by the deadline
	}
}

// TestConsumerOffsetsKeepPlainCommitOverAbortedTxn commits group g's offset plainly, then
// commits another one in a transaction that aborts (TxnOffsetCommit, the same key of
// __consumer_offsets); once the cleaner has passed over it, and after a restart that reloads
// the coordinator from what survived, g's offset is the plain one.
func TestConsumerOffsetsKeepPlainCommitOverAbortedTxn(t *testing.T) {
	sets := append([]string{"offsets.topic.num.partitions=1", "offsets.topic.segment.bytes=16384"}, cleanerSets...)
	b := testutil.StartBroker(t, sets...)
	cl := client(t, b.Addr())
	adm := kadm.NewClient(cl)
	ctx := ctxT(t, 60*time.Second)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	commit := func(group string, at int64) error {
		var offs kadm.Offsets
		offs.Add(kadm.Offset{Topic: "orders", Partition: 0, At: at, LeaderEpoch: -1})
		resp, err := adm.CommitOffsets(ctx, group, offs)
		if err == nil {
			err = resp.Error()
		}
		return err
	}
	waitFor(t, 10*time.Second, "the group coordinator taking commits", func() (bool, string) {
		err := commit("g", 42)
		return err == nil, fmt.Sprint(err)
	})

	// A transaction commits offset 99 for g, and aborts.
	const txnID = "offsets-txn"
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.TransactionalID, ip.TransactionTimeoutMillis = kmsg.StringPtr(txnID), 20000
	ipr := retryTxn(t, cl, ip, func(r *kmsg.InitProducerIDResponse) int16 { return r.ErrorCode })
	pid, epoch := ipr.ProducerID, ipr.ProducerEpoch
	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch, ao.Group = txnID, pid, epoch, "g"
	retryTxn(t, cl, ao, func(r *kmsg.AddOffsetsToTxnResponse) int16 { return r.ErrorCode })
	tc := kmsg.NewPtrTxnOffsetCommitRequest()
	tc.TransactionalID, tc.Group, tc.ProducerID, tc.ProducerEpoch = txnID, "g", pid, epoch
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = "orders"
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, 99
	rt.Partitions = []kmsg.TxnOffsetCommitRequestTopicPartition{rp}
	tc.Topics = []kmsg.TxnOffsetCommitRequestTopic{rt}
	retryTxn(t, cl, tc, func(r *kmsg.TxnOffsetCommitResponse) int16 { return r.Topics[0].Partitions[0].ErrorCode })
	et := kmsg.NewPtrEndTxnRequest()
	et.TransactionalID, et.ProducerID, et.ProducerEpoch, et.Commit = txnID, pid, epoch, false
	retryTxn(t, cl, et, func(r *kmsg.EndTxnResponse) int16 { return r.ErrorCode })

	dir := filepath.Join(b.Dir, "__consumer_offsets-0")
	txnRecords := func() (int, int, error) {
		bs, _, err := fileBatches(dir)
		if err != nil {
			return 0, 0, err
		}
		var data, markers int
		for _, fb := range bs {
			if fb.h.ProducerID != pid {
				continue
			}
			if fb.h.IsControl() {
				markers++
			} else {
				data += len(fb.recs)
			}
		}
		return data, markers, nil
	}
	waitFor(t, 10*time.Second, "the ABORT marker in __consumer_offsets", func() (bool, string) {
		data, markers, err := txnRecords()
		return err == nil && data == 1 && markers == 1, fmt.Sprintf("%d records, %d markers of the transaction (%v)", data, markers, err)
	})
	// Plain commits of another group fill segments, so that the transaction's lie sealed.
	for i := range 600 {
		if err := commit("other", int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, "the cleaner passing over the transaction", func() (bool, string) {
		bs, _, err := fileBatches(dir)
		n := 0
		for _, fb := range bs {
			n += len(fb.recs)
		}
		return err == nil && n < 100, fmt.Sprintf("%d records (%v); files %s", n, err, segmentFiles(dir))
	})
	data, markers, err := txnRecords()
	if err != nil || data != 0 {
		t.Errorf("the aborted offset commit is still there after cleaning: %d records, %d markers of the transaction (%v)", data, markers, err)
	}

	b = b.Restart()
	adm = kadm.NewClient(client(t, b.Addr()))
	var fetched kadm.OffsetResponses
	waitFor(t, 20*time.Second, "the reloaded coordinator serving g", func() (bool, string) {
		var err error
		fetched, err = adm.FetchOffsets(ctxT(t, 5*time.Second), "g")
		if err == nil {
			err = fetched.Error()
		}
		return err == nil, fmt.Sprint(err)
	})
	if o, ok := fetched.Lookup("orders", 0); !ok || o.Err != nil || o.At != 42 {
		t.Fatalf("g's orders-0 after cleaning and a reload: %+v (found %v), want the plain commit 42", o, ok)
	}
}
