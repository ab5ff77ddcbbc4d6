package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/internal/testutil"
)

// dump-log over the files a real broker wrote: the produced records come back from the
// .log with keys, values and header keys; the index, time index, producer snapshot and
// leader epoch checkpoint decode; the log dir passes the integrity check, and fails it once
// a byte of a batch is flipped.
func TestDumpLogE2E(t *testing.T) {
	tb := testutil.StartBroker(t, "log.segment.bytes=4096", "log.index.interval.bytes=100")
	b := tb.Addr()
	mustRunCLI(t, "", "topic", "create", "dump", "--partitions", "1", "--replication-factor", "1", "-b", b)
	var lines strings.Builder
	for i := range 10 {
		lines.WriteString("key" + string(rune('a'+i%26)) + ":value-" + strings.Repeat("x", 40) + "\n")
	}
	// Several produce runs: several batches, so segments roll and the index gets entries.
	for range 8 {
		mustRunCLI(t, lines.String(), "produce", "dump", "--key-separator", ":", "--header", "trace=1", "-b", b)
	}
	// An aborted transaction: its ABORT marker is a control batch, and the segment holding
	// it gets a transaction index entry.
	txn, err := kgo.NewClient(kgo.SeedBrokers(b), kgo.TransactionalID("dump-txn"), kgo.DefaultProduceTopic("dump"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(ctx, &kgo.Record{Value: []byte("aborted")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := txn.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	txn.Close()
	// An offset commit, for the __consumer_offsets decoder.
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "dump", Partition: 0, At: 7, LeaderEpoch: -1})
	adm, err := kgo.NewClient(kgo.SeedBrokers(b))
	if err != nil {
		t.Fatal(err)
	}
	if err := kadm.NewClient(adm).CommitAllOffsets(ctx, "dump-g", offs); err != nil {
		t.Fatal(err)
	}
	adm.Close()
	mustRunCLI(t, "k:last-record\n", "produce", "dump", "--key-separator", ":", "-b", b)
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	pdir := filepath.Join(tb.Dir, "dump-0")
	segs, _ := filepath.Glob(filepath.Join(pdir, "*.log"))
	if len(segs) < 2 {
		t.Fatalf("want several segments, have %v", segs)
	}
	last := segs[len(segs)-1]

	out := mustRunCLI(t, "", "dump-log", last, "--print-data-log")
	if !strings.Contains(out, "Dumping "+last) || !strings.Contains(out, "isvalid: true") ||
		!strings.Contains(out, "key: k payload: last-record") || !strings.Contains(out, "compresscodec: none") {
		t.Fatalf("dump-log --print-data-log of the last segment:\n%s", out)
	}
	var dumps []DumpedFile
	if err := json.Unmarshal([]byte(mustRunCLI(t, "", "dump-log", segs[0], "--deep-iteration", "-o", "json")), &dumps); err != nil {
		t.Fatal(err)
	}
	if len(dumps) != 1 || len(dumps[0].Batches) == 0 || dumps[0].Batches[0].BaseOffset != 0 || len(dumps[0].Batches[0].Records) == 0 {
		t.Fatalf("dump -o json: %+v", dumps)
	}
	r := dumps[0].Batches[0].Records[0]
	if r.Offset != 0 || r.KeySize != 4 || len(r.HeaderKeys) != 1 || r.HeaderKeys[0] != "trace" || r.Key != nil {
		t.Fatalf("first record without --print-data-log: %+v", r)
	}
	if dumps[0].Batches[0].ProducerID < 0 || dumps[0].Batches[0].BaseSequence != 0 {
		t.Fatalf("the idempotent producer's batch: %+v", dumps[0].Batches[0])
	}

	all := mustRunCLI(t, "", append([]string{"dump-log", "--deep-iteration"}, segs...)...)
	if !strings.Contains(all, "isTransactional: true isControl: true") || !strings.Contains(all, "endTxnMarker: ABORT coordinatorEpoch: ") {
		t.Fatalf("no ABORT marker in the segments:\n%s", all)
	}
	txnIndexes, _ := filepath.Glob(filepath.Join(pdir, "*.txnindex"))
	if len(txnIndexes) != 1 {
		t.Fatalf("transaction indexes: %v", txnIndexes)
	}
	if out := mustRunCLI(t, "", "dump-log", txnIndexes[0]); !strings.Contains(out, "version: 0 producerId: ") || !strings.Contains(out, "firstOffset: 80 lastOffset: 81") {
		t.Fatalf("transaction index:\n%s", out)
	}

	// The internal topics' records decode as Kafka's schemas lay them out.
	decoded := func(glob string, flag string) string {
		logs, _ := filepath.Glob(filepath.Join(tb.Dir, glob, "*.log"))
		if len(logs) == 0 {
			t.Fatalf("no %s segments", glob)
		}
		return mustRunCLI(t, "", append([]string{"dump-log", flag}, logs...)...)
	}
	if out := decoded("__consumer_offsets-*", "--offsets-decoder"); !strings.Contains(out, `key: {"data":{"Version":1,"Group":"dump-g","Topic":"dump","Partition":0},"type":"1"}`) ||
		!strings.Contains(out, `"Offset":7`) {
		t.Fatalf("--offsets-decoder:\n%s", out)
	}
	if out := decoded("__transaction_state-*", "--transaction-log-decoder"); !strings.Contains(out, `"TransactionalID":"dump-txn"`) || !strings.Contains(out, `"State":`) {
		t.Fatalf("--transaction-log-decoder:\n%s", out)
	}

	// The index of a segment holding several batches has entries that name real batches.
	var indexed bool
	for _, s := range segs {
		idx := strings.TrimSuffix(s, ".log") + ".index"
		out := mustRunCLI(t, "", "dump-log", idx)
		if strings.Contains(out, "offset: ") && strings.Contains(out, "position: ") {
			indexed = true
		}
		if out := mustRunCLI(t, "", "dump-log", "--index-sanity-check", idx); !strings.Contains(out, "passed sanity check") {
			t.Fatalf("sanity check of %s: %s", idx, out)
		}
	}
	if !indexed {
		t.Fatal("no segment's index has an entry")
	}
	if out := mustRunCLI(t, "", "dump-log", strings.TrimSuffix(segs[0], ".log")+".timeindex"); !strings.Contains(out, "timestamp: ") {
		t.Fatalf("time index of a sealed segment:\n%s", out)
	}
	if out := mustRunCLI(t, "", "dump-log", filepath.Join(pdir, "leader-epoch-checkpoint")); !strings.Contains(out, "epoch: 0 startOffset: 0") {
		t.Fatalf("leader-epoch-checkpoint:\n%s", out)
	}
	snaps, _ := filepath.Glob(filepath.Join(pdir, "*.snapshot"))
	if len(snaps) == 0 {
		t.Fatal("no producer snapshot after a clean close")
	}
	if out := mustRunCLI(t, "", "dump-log", snaps[len(snaps)-1]); !strings.Contains(out, "producerId: ") || !strings.Contains(out, "lastSequence: ") {
		t.Fatalf("producer snapshot:\n%s", out)
	}

	// The whole log dir is sound.
	out = mustRunCLI(t, "", "dump-log", tb.Dir)
	if !strings.Contains(out, "no problems found") || !strings.Contains(out, "dump-0") {
		t.Fatalf("check of the log dir:\n%s", out)
	}
	var checks []DumpedFile
	if err := json.Unmarshal([]byte(mustRunCLI(t, "", "dump-log", pdir, "-o", "json")), &checks); err != nil {
		t.Fatal(err)
	}
	if c := checks[0].Check; c == nil || len(c.Partitions) != 1 || c.Partitions[0].NextOffset != 83 || c.Partitions[0].FirstOffset != 0 {
		t.Fatalf("check -o json: %+v", checks[0].Check)
	}

	// Point an index entry one byte past its batch, and flip a byte inside the first
	// batch's records (its CRC no longer matches): the check finds both.
	var corrupted bool
	for _, s := range segs {
		idx := strings.TrimSuffix(s, ".log") + ".index"
		data, err := os.ReadFile(idx)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) >= 8 && data[7] != 0 {
			data[7]++
			if err := os.WriteFile(idx, data, 0o644); err != nil {
				t.Fatal(err)
			}
			corrupted = true
			break
		}
	}
	if !corrupted {
		t.Fatal("no index entry to corrupt")
	}
	data, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	data[80] ^= 0xff
	if err := os.WriteFile(segs[0], data, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = runCLI(t, "", "dump-log", tb.Dir)
	if err == nil || !strings.Contains(out, "crc mismatch") || !strings.Contains(out, "does not point at a batch") || !strings.Contains(out, "problem(s) found") {
		t.Fatalf("check after corruption: err %v\n%s", err, out)
	}
}
