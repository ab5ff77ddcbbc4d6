// Package share_test runs Kafka's Java share consumer (KafkaShareConsumer from kafka-clients
// 4.4.0, KIP-932) against a Gregor broker: test/share/java is built with Maven by build.sh
// (offline once ~/.m2 holds its dependencies) when its sources changed.
package share_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
)

// Five KafkaShareConsumers of one group on a one-partition topic: each receives distinct
// records and together they receive every record exactly once, each on its first delivery.
func TestJavaShareConsumersEveryRecordOnce(t *testing.T) {
	buildCheck(t)
	b := testutil.StartBroker(t, "group.initial.rebalance.delay.ms=0", "offsets.topic.num.partitions=1")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.DefaultProduceTopic("jobs"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "jobs"); err != nil {
		t.Fatal(err)
	}

	const consumers, records = 5, 100
	cmd, lines, stderr := startCheck(ctx, t, b.Addr(), "jobs", "java-share", fmt.Sprint(consumers), fmt.Sprint(records), "90")

	// share.auto.offset.reset is latest: produce once every consumer joined and the
	// share-partition was started by a first fetch.
	waitShareReady(ctx, t, cl, "java-share", consumers)
	var rs []*kgo.Record
	for i := range records {
		rs = append(rs, kgo.StringRecord(fmt.Sprint(i)))
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	got := readChecks(t, cmd, lines, stderr, records)
	per := map[string]int{}
	for off, r := range got {
		if r.deliveries != 1 {
			t.Fatalf("offset %d received with delivery count %d", off, r.deliveries)
		}
		per[r.who]++
	}
	if len(per) < 2 {
		t.Fatalf("records went to %d consumer(s) only: %v", len(per), per)
	}
	t.Logf("records per consumer: %v", per)
}

// A KafkaShareConsumer killed (SIGKILL) while holding records it never acknowledged: once
// their locks expire (one second here) two other consumers receive them with the delivery
// count raised, and every record exactly once.
func TestJavaShareConsumerKilledHoldingRecords(t *testing.T) {
	buildCheck(t)
	b := testutil.StartBroker(t, "group.initial.rebalance.delay.ms=0", "offsets.topic.num.partitions=1",
		"group.share.record.lock.duration.ms=1000", "group.share.min.record.lock.duration.ms=1000")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.DefaultProduceTopic("held"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "held"); err != nil {
		t.Fatal(err)
	}
	holder, holderLines, holderErr := startCheck(ctx, t, "hold", b.Addr(), "held", "java-held")
	waitShareReady(ctx, t, cl, "java-held", 1)
	const records = 20
	var rs []*kgo.Record
	for i := range records {
		rs = append(rs, kgo.StringRecord(fmt.Sprint(i)))
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	held := map[int64]bool{}
	for line := range holderLines {
		if line == "HELD" {
			break
		}
		var off int64
		var n int
		if _, err := fmt.Sscanf(line, "H %d %d", &off, &n); err != nil || n != 1 {
			t.Fatalf("holder printed %q", line)
		}
		held[off] = true
	}
	if len(held) == 0 {
		t.Fatalf("the holder received nothing:\n%s", holderErr.String())
	}
	if err := holder.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = holder.Wait() // killed: its exit status is the signal

	cmd, lines, stderr := startCheck(ctx, t, b.Addr(), "held", "java-held", "2", fmt.Sprint(records), "90")
	got := readChecks(t, cmd, lines, stderr, records)
	for off := range held {
		if got[off].deliveries != 2 {
			t.Fatalf("held offset %d redelivered with delivery count %d, want 2", off, got[off].deliveries)
		}
	}
	for off, r := range got {
		if r.deliveries < 1 || r.deliveries > 2 {
			t.Fatalf("offset %d delivered with count %d", off, r.deliveries)
		}
	}
}

// buildCheck builds test/share/java when its sources changed.
func buildCheck(t *testing.T) {
	t.Helper()
	build := exec.Command("./java/build.sh")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build test/share/java: %v\n%s", err, out)
	}
}

// startCheck runs gregor.share.Check with args; its stdout lines arrive on the channel.
func startCheck(ctx context.Context, t *testing.T, args ...string) (*exec.Cmd, <-chan string, *strings.Builder) {
	t.Helper()
	dir, _ := filepath.Abs("java")
	cmd := exec.CommandContext(ctx, "java", append([]string{"-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx256m",
		"-cp", filepath.Join(dir, "target", "gregor-share-check.jar") + string(os.PathListSeparator) + filepath.Join(dir, "target", "lib", "*"),
		"gregor.share.Check"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &strings.Builder{}
	cmd.Stderr = &syncWriter{b: stderr}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return cmd, lines, stderr
}

// received is one record as a Check consumer printed it.
type received struct {
	who        string
	deliveries int
}

// readChecks reads a Check run's output to its end and checks that every offset below
// records was received exactly once and the run ended cleanly.
func readChecks(t *testing.T, cmd *exec.Cmd, lines <-chan string, stderr *strings.Builder, records int) map[int64]received {
	t.Helper()
	byPartition := readChecksPartitions(t, cmd, lines, stderr)
	got := byPartition[0]
	if len(byPartition) != 1 {
		t.Fatalf("records of %d partitions, want partition 0 only", len(byPartition))
	}
	for off := range int64(records) {
		if _, ok := got[off]; !ok {
			t.Fatalf("offset %d never received", off)
		}
	}
	return got
}

// readChecksPartitions reads a Check run's output to its end, checking that no record was
// received twice and the run ended cleanly, and returns what was received by partition and
// offset.
func readChecksPartitions(t *testing.T, cmd *exec.Cmd, lines <-chan string, stderr *strings.Builder) map[int32]map[int64]received {
	t.Helper()
	got := map[int32]map[int64]received{}
	done := false
	for line := range lines {
		if line == "DONE" {
			done = true
			continue
		}
		var r received
		var p int32
		var off int64
		if _, err := fmt.Sscanf(line, "R %s %d %d %d", &r.who, &p, &off, &r.deliveries); err != nil {
			t.Fatalf("unexpected output %q", line)
		}
		if got[p] == nil {
			got[p] = map[int64]received{}
		}
		if prev, ok := got[p][off]; ok {
			t.Fatalf("offset %d/%d received by consumers %s and %s (delivery count %d)", p, off, prev.who, r.who, r.deliveries)
		}
		got[p][off] = r
	}
	if err := cmd.Wait(); err != nil || !done {
		t.Fatalf("share consumers: %v (done %v)\n%s", err, done, stderr.String())
	}
	// The client reports a response it cannot read, or a request refused, in its log only.
	for _, bad := range []string{"Exception", " ERROR ", "couldn't complete"} {
		if strings.Contains(stderr.String(), bad) {
			t.Fatalf("the share consumers logged %q:\n%s", bad, stderr.String())
		}
	}
	return got
}

// syncWriter serializes writes into a strings.Builder (exec copies stderr from a goroutine).
type syncWriter struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// waitShareReady waits until group has n members and a started share-partition 0.
func waitShareReady(ctx context.Context, t *testing.T, cl *kgo.Client, group string, n int) {
	t.Helper()
	for {
		if ctx.Err() != nil {
			t.Fatalf("share group %s never had %d members and a started partition", group, n)
		}
		d := kmsg.NewPtrShareGroupDescribeRequest()
		d.Version, d.GroupIDs = 1, []string{group}
		dr, err := d.RequestWith(ctx, cl)
		members := 0
		if err == nil && len(dr.Groups) == 1 && dr.Groups[0].ErrorCode == 0 {
			members = len(dr.Groups[0].Members)
		}
		o := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		o.Version, o.Groups = 1, []kmsg.DescribeShareGroupOffsetsRequestGroup{{GroupID: group}}
		or, err := o.RequestWith(ctx, cl)
		started := err == nil && len(or.Groups) == 1 && len(or.Groups[0].Topics) == 1 &&
			len(or.Groups[0].Topics[0].Partitions) == 1 && or.Groups[0].Topics[0].Partitions[0].StartOffset >= 0
		if members == n && started {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Three brokers: the share group's coordinator is one of them and the leaders of the topic's
// three partitions are spread over them; KafkaShareConsumers heartbeat to the coordinator
// and fetch each partition from its leader, and no record reaches two of them.
func TestJavaShareConsumersThreeBrokers(t *testing.T) {
	buildCheck(t)
	c := testutil.StartCluster(t, testutil.ClusterOptions{Nodes: 3})
	bootstrap := strings.Join(c.Bootstrap(), ",")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...), kgo.DefaultProduceTopic("spread"),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 3, 1, nil, "spread"); err != nil {
		t.Fatal(err)
	}
	td, err := kadm.NewClient(cl).ListTopics(ctx, "spread")
	if err != nil {
		t.Fatal(err)
	}
	leaders := map[int32]bool{}
	for _, p := range td["spread"].Partitions {
		leaders[p.Leader] = true
	}
	if len(leaders) < 2 {
		t.Fatalf("the partitions' leaders %v are not spread over brokers", leaders)
	}
	const records = 60
	cmd, lines, stderr := startCheck(ctx, t, bootstrap, "spread", "java-spread", "3", fmt.Sprint(records), "90")
	// share.auto.offset.reset is latest and each share-partition starts at its leader's first
	// fetch: produce rounds until the consumers have seen enough, keeping their output.
	var out []string
	for done := false; !done; {
		var rs []*kgo.Record
		for i := range 30 {
			rs = append(rs, kgo.StringRecord(fmt.Sprint(i)))
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		round := time.After(200 * time.Millisecond)
		for waiting := true; waiting && !done; {
			select {
			case line, ok := <-lines:
				if !ok {
					done = true
					break
				}
				out = append(out, line)
			case <-round:
				waiting = false
			case <-ctx.Done():
				t.Fatalf("share consumers did not finish: %d lines\n%s", len(out), stderr.String())
			}
		}
	}
	replay := make(chan string, len(out))
	for _, l := range out {
		replay <- l
	}
	close(replay)
	got := readChecksPartitions(t, cmd, replay, stderr)
	if len(got) != 3 {
		t.Fatalf("records from partitions %v, want all three", got)
	}
}

// Kafka's Admin sets share.auto.offset.reset on a GROUP config resource and describes it
// back (DYNAMIC_GROUP_CONFIG), an invalid value is InvalidConfigurationException; then a new
// KafkaShareConsumer of that group reads the records produced before it joined, while one of
// a group left at the default (latest) receives only what is produced after it started.
func TestJavaShareAutoOffsetReset(t *testing.T) {
	buildCheck(t)
	b := testutil.StartBroker(t, "group.initial.rebalance.delay.ms=0", "offsets.topic.num.partitions=1")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.DefaultProduceTopic("backlog"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "backlog"); err != nil {
		t.Fatal(err)
	}
	const before = 10
	var rs []*kgo.Record
	for i := range before {
		rs = append(rs, kgo.StringRecord(fmt.Sprint(i)))
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	admin, adminLines, adminErr := startCheck(ctx, t, "groupconfig", b.Addr(), "java-early", "share.auto.offset.reset", "earliest")
	var described []string
	sawInvalid := false
	for line := range adminLines {
		switch {
		case strings.HasPrefix(line, "C "):
			described = append(described, line)
		case line == "E InvalidConfigurationException":
			sawInvalid = true
		}
	}
	if err := admin.Wait(); err != nil {
		t.Fatalf("admin: %v\n%s", err, adminErr.String())
	}
	if !slices.Contains(described, "C share.auto.offset.reset earliest DYNAMIC_GROUP_CONFIG") ||
		!slices.Contains(described, "C share.session.timeout.ms 45000 DEFAULT_CONFIG") {
		t.Fatalf("describeConfigs of the group: %v", described)
	}
	if !sawInvalid {
		t.Fatalf("an invalid share.auto.offset.reset was not refused with InvalidConfigurationException:\n%s", adminErr.String())
	}

	// earliest: the backlog is read.
	cmd, lines, stderr := startCheck(ctx, t, b.Addr(), "backlog", "java-early", "1", fmt.Sprint(before), "60")
	readChecks(t, cmd, lines, stderr, before)

	// latest (no group config): only a record produced once the consumer started.
	cmd, lines, stderr = startCheck(ctx, t, b.Addr(), "backlog", "java-late", "1", "1", "60")
	waitShareReady(ctx, t, cl, "java-late", 1)
	if err := cl.ProduceSync(ctx, kgo.StringRecord("after")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	got := readChecksPartitions(t, cmd, lines, stderr)[0]
	if len(got) != 1 {
		t.Fatalf("the default group received offsets %v, want only %d", got, before)
	}
	if _, ok := got[before]; !ok {
		t.Fatalf("the default group received offsets %v, want only %d", got, before)
	}
}
