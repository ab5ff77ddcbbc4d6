package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
	if c := checks[0].Check; c == nil || len(c.Partitions) != 1 || c.Partitions[0].NextOffset != 81 || c.Partitions[0].FirstOffset != 0 {
		t.Fatalf("check -o json: %+v", checks[0].Check)
	}

	// Flip a byte inside the first batch's records: its CRC no longer matches.
	data, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	data[80] ^= 0xff
	if err := os.WriteFile(segs[0], data, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = runCLI(t, "", "dump-log", tb.Dir)
	if err == nil || !strings.Contains(out, "crc mismatch") || !strings.Contains(out, "problem(s) found") {
		t.Fatalf("check after corruption: err %v\n%s", err, out)
	}
}
