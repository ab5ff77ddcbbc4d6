package cli

import (
	"github.com/gregor-project/gregor/internal/testutil"

	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// runCLI executes the command tree in-process, exactly as `gregor ARGS...`
// would with stdin as standard input, and returns what it wrote to standard
// output. Standard error is logged. A fresh tree is built per call so no
// flag value leaks from one run into the next.
func runCLI(t *testing.T, stdin string, args ...string) (stdout string, err error) {
	t.Helper()
	root := &cobra.Command{Use: "gregor", SilenceUsage: true, SilenceErrors: true}
	AddCommands(root)
	var out, errOut bytes.Buffer
	root.SetArgs(args)
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&out)
	root.SetErr(&errOut)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	err = root.ExecuteContext(ctx)
	if errOut.Len() > 0 || time.Since(start) > 2*time.Second {
		t.Logf("gregor %s (%v): stderr:\n%s", strings.Join(args, " "), time.Since(start).Round(time.Millisecond), errOut.String())
	}
	return out.String(), err
}

// mustRunCLI is runCLI that fails the test on error.
func mustRunCLI(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, err := runCLI(t, stdin, args...)
	if err != nil {
		t.Fatalf("gregor %s: %v\nstdout:\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// TestE2E runs every tool against a real Gregor broker started in-process (or against
// GREGOR_BROKER when it is set, to try the tools on another server).
func TestE2E(t *testing.T) {
	broker := os.Getenv("GREGOR_BROKER")
	if broker == "" {
		broker = testutil.StartBroker(t).Addr()
	}
	E2E(t, broker)
}

// E2E drives every tool against a running broker at broker (HOST:PORT):
// topic create/list/describe/alter-config/delete, produce with keys,
// headers, explicit partitions, every acks level and compression codec,
// consume with offsets, formats and JSON, and both benchmarks. It creates
// uniquely named topics with 3 partitions and replication factor 1 and
// deletes them at the end.
func E2E(t *testing.T, broker string) {
	t.Helper()
	topic := fmt.Sprintf("gregor-e2e-%d", time.Now().UnixNano())
	b := []string{"-b", broker}
	run := func(stdin string, args ...string) string {
		t.Helper()
		return mustRunCLI(t, stdin, append(args, b...)...)
	}
	runErr := func(stdin string, args ...string) (string, error) {
		t.Helper()
		return runCLI(t, stdin, append(args, b...)...)
	}
	describe := func() topicDescription {
		t.Helper()
		var d topicDescription
		out := run("", "topic", "describe", topic, "-o", "json")
		if err := json.Unmarshal([]byte(out), &d); err != nil {
			t.Fatalf("describe output: %v\n%s", err, out)
		}
		return d
	}

	// create
	var created topicCreateResult
	out := run("", "topic", "create", topic, "--partitions", "3", "--replication-factor", "1",
		"--config", "retention.ms=3600000", "-o", "json")
	if err := json.Unmarshal([]byte(out), &created); err != nil {
		t.Fatalf("create output: %v\n%s", err, out)
	}
	if created.Topic != topic || created.Partitions != 3 || created.ReplicationFactor != 1 {
		t.Fatalf("create result %+v", created)
	}
	if _, err := runErr("", "topic", "create", topic, "--partitions", "3", "--replication-factor", "1"); err == nil ||
		!strings.Contains(err.Error(), "TOPIC_ALREADY_EXISTS") {
		t.Fatalf("second create: want TOPIC_ALREADY_EXISTS, got %v", err)
	}
	if _, err := runErr("", "topic", "create", topic+"-bad", "--partitions", "0", "--replication-factor", "1"); err == nil ||
		!strings.Contains(err.Error(), "INVALID_PARTITIONS") {
		t.Errorf("create with 0 partitions: want INVALID_PARTITIONS, got %v", err)
	}
	if out := run("", "topic", "create", topic+"-table", "--partitions", "1", "--replication-factor", "1"); !strings.Contains(out, "Created topic "+topic+"-table") {
		t.Errorf("create table output: %q", out)
	}

	// list
	var list []topicListEntry
	out = run("", "topic", "list", "-o", "json")
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("list output: %v\n%s", err, out)
	}
	idx := slices.IndexFunc(list, func(e topicListEntry) bool { return e.Topic == topic })
	if idx < 0 || list[idx].Partitions != 3 || list[idx].ReplicationFactor != 1 || list[idx].Internal {
		t.Fatalf("list: topic missing or wrong: %+v", list)
	}
	for _, e := range list {
		if e.Internal {
			t.Errorf("list without --internal shows internal topic %s", e.Topic)
		}
	}
	if out := run("", "topic", "list"); !strings.Contains(out, topic) || !strings.Contains(out, "PARTITIONS") {
		t.Errorf("list table: %q", out)
	}

	// produce keyed records with headers
	const n = 30
	var in strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&in, "key-%d:value-%d:with-colon\n", i, i)
	}
	run(in.String(), "produce", topic, "--key-separator", ":", "--header", "src=e2e", "--header", "n=1")

	// consume them back with a custom format
	out = run("", "consume", topic, "--from-beginning", "--max-messages", strconv.Itoa(n),
		"--timeout-ms", "20000", "--format", `%k|%v|%p|%h\n`)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != n {
		t.Fatalf("consumed %d lines, want %d:\n%s", len(lines), n, out)
	}
	perPartition := map[int]int{}
	seen := map[string]bool{}
	for _, l := range lines {
		f := strings.Split(l, "|")
		if len(f) != 4 {
			t.Fatalf("line %q", l)
		}
		i, err := strconv.Atoi(strings.TrimPrefix(f[0], "key-"))
		if err != nil {
			t.Fatalf("line %q: key", l)
		}
		if f[1] != fmt.Sprintf("value-%d:with-colon", i) || f[3] != "src=e2e,n=1" {
			t.Errorf("line %q: wrong value or headers", l)
		}
		p, err := strconv.Atoi(f[2])
		if err != nil {
			t.Fatalf("line %q: partition", l)
		}
		if want := javaPartition([]byte(f[0]), 3); p != want {
			t.Errorf("key %s landed on partition %d, Java's partitioner picks %d", f[0], p, want)
		}
		perPartition[p]++
		seen[f[0]] = true
	}
	if len(seen) != n {
		t.Errorf("saw %d distinct keys, want %d", len(seen), n)
	}

	// JSON output: offsets per partition are 0..count-1
	out = run("", "consume", topic, "--from-beginning", "--max-messages", strconv.Itoa(n), "--timeout-ms", "20000", "-o", "json")
	offsets := map[int32][]int64{}
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		var r jsonRecord
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("json line %q: %v", l, err)
		}
		if r.Topic != topic || r.Key == nil || len(r.Headers) != 2 || r.Timestamp <= 0 {
			t.Errorf("json record %+v", r)
		}
		offsets[r.Partition] = append(offsets[r.Partition], r.Offset)
	}
	for p, os := range offsets {
		slices.Sort(os)
		for i, o := range os {
			if o != int64(i) {
				t.Errorf("partition %d offsets %v: want 0..%d", p, os, len(os)-1)
				break
			}
		}
	}

	// --partition with --offset
	var busy int
	for p, c := range perPartition {
		if c >= 2 {
			busy = p
		}
	}
	out = run("", "consume", topic, "--partition", strconv.Itoa(busy), "--offset", "1", "--max-messages", "1",
		"--timeout-ms", "20000", "--format", `%p %o`)
	if out != fmt.Sprintf("%d 1", busy) {
		t.Errorf("consume --partition %d --offset 1: got %q", busy, out)
	}
	// Starting at the end with an idle timeout prints nothing and succeeds.
	if out := run("", "consume", topic, "--timeout-ms", "1000"); out != "" {
		t.Errorf("consume from end: got %q", out)
	}
	if _, err := runErr("", "consume", topic+"-missing", "--timeout-ms", "1000"); err == nil ||
		!strings.Contains(err.Error(), "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Errorf("consume of missing topic: %v", err)
	}

	// describe
	d := describe()
	if d.Topic != topic || d.PartitionCount != 3 || d.ReplicationFactor != 1 || len(d.Partitions) != 3 ||
		d.TopicID == "" || d.TopicID == "AAAAAAAAAAAAAAAAAAAAAA" {
		t.Fatalf("describe %+v", d)
	}
	if d.Configs["retention.ms"] != "3600000" {
		t.Errorf("describe configs %v: want retention.ms=3600000", d.Configs)
	}
	var total int64
	for _, p := range d.Partitions {
		if p.Leader < 0 || len(p.Replicas) != 1 || len(p.ISR) != 1 || p.Error != "" || p.LogStartOffset != 0 {
			t.Errorf("partition %+v", p)
		}
		if int(p.LogEndOffset) != perPartition[int(p.Partition)] {
			t.Errorf("partition %d: log end offset %d, consumed %d", p.Partition, p.LogEndOffset, perPartition[int(p.Partition)])
		}
		total += p.LogEndOffset
	}
	if total != n {
		t.Errorf("log end offsets sum to %d, want %d", total, n)
	}
	if out := run("", "topic", "describe", topic); !strings.Contains(out, "Topic: "+topic) || !strings.Contains(out, "retention.ms=3600000") ||
		!strings.Contains(out, "LOG-END-OFFSET") {
		t.Errorf("describe table:\n%s", out)
	}

	// alter-config
	run("", "topic", "alter-config", topic, "--set", "retention.ms=7200000", "--set", "cleanup.policy=compact")
	if c := describe().Configs; c["retention.ms"] != "7200000" || c["cleanup.policy"] != "compact" {
		t.Errorf("after alter-config --set: %v", c)
	}
	run("", "topic", "alter-config", topic, "--delete", "cleanup.policy")
	if c := describe().Configs; c["retention.ms"] != "7200000" || c["cleanup.policy"] != "" {
		t.Errorf("after alter-config --delete: %v", c)
	}
	if _, err := runErr("", "topic", "alter-config", topic+"-missing", "--set", "retention.ms=1"); err == nil ||
		!strings.Contains(err.Error(), "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Errorf("alter-config of missing topic: %v", err)
	}

	// explicit partition, every acks level and codec; read back by offset
	const target = 2
	start := describe().Partitions[target].LogEndOffset
	var want []string
	for _, acks := range []string{"0", "1", "all"} {
		for _, c := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
			v := fmt.Sprintf("acks=%s codec=%s", acks, c)
			run(v+"\n"+v+" second\n", "produce", topic, "--partition", strconv.Itoa(target), "--acks", acks, "--compression", c)
			want = append(want, v, v+" second")
			if acks == "0" {
				// An acks=0 produce ends once sent, before the broker appends: wait for the
				// records, or the next produce (another connection) may be appended first.
				deadline := time.Now().Add(20 * time.Second)
				for describe().Partitions[target].LogEndOffset < start+int64(len(want)) {
					if time.Now().After(deadline) {
						t.Fatalf("acks=0 records of %q not appended within 20 s", v)
					}
					time.Sleep(10 * time.Millisecond) // polling a condition with a deadline
				}
			}
		}
	}
	out = run("", "consume", topic, "--partition", strconv.Itoa(target), "--offset", strconv.FormatInt(start, 10),
		"--max-messages", strconv.Itoa(len(want)), "--timeout-ms", "20000", "--format", `%v\n`)
	if got := strings.Split(strings.TrimSuffix(out, "\n"), "\n"); !slices.Equal(got, want) {
		t.Errorf("explicit partition read back:\n got %q\nwant %q", got, want)
	}
	if _, err := runErr("k-without-separator\n", "produce", topic, "--key-separator", "::"); err == nil {
		t.Error("produce of a line without the key separator succeeded")
	}

	// benchmarks
	bt := topic + "-bench"
	var pr BenchResult
	out = run("", "bench", "produce", "--topic", bt, "--partitions", "2", "--replication-factor", "1",
		"--records", "5000", "--record-size", "64", "--report-interval-ms", "0", "-o", "json")
	if err := json.Unmarshal([]byte(out), &pr); err != nil {
		t.Fatalf("bench produce output: %v\n%s", err, out)
	}
	if pr.Records != 5000 || pr.Failed != 0 || pr.Bytes != 5000*64 || pr.RecordsPerSec <= 0 || pr.Latency.Max <= 0 ||
		pr.Latency.P50 > pr.Latency.P99 {
		t.Errorf("bench produce result %+v", pr)
	}
	var cr BenchResult
	out = run("", "bench", "consume", "--topic", bt, "--report-interval-ms", "0", "-o", "json")
	if err := json.Unmarshal([]byte(out), &cr); err != nil {
		t.Fatalf("bench consume output: %v\n%s", err, out)
	}
	if cr.Records != 5000 || cr.Bytes != 5000*64 || cr.RecordsPerSec <= 0 {
		t.Errorf("bench consume result %+v", cr)
	}
	if out := run("", "bench", "produce", "--topic", bt, "--records", "100", "--acks", "1", "--compression", "lz4",
		"--throughput", "1000", "--report-interval-ms", "0"); !strings.Contains(out, "100 records sent") {
		t.Errorf("bench produce table: %q", out)
	}

	// delete
	for _, name := range []string{topic, topic + "-table", bt} {
		run("", "topic", "delete", name)
	}
	if _, err := runErr("", "topic", "delete", topic); err == nil || !strings.Contains(err.Error(), "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Errorf("second delete: want UNKNOWN_TOPIC_OR_PARTITION, got %v", err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		out := run("", "topic", "list", "-o", "json")
		if !strings.Contains(out, `"`+topic+`"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("topic %s still listed after delete:\n%s", topic, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
