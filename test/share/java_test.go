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
	"strings"
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
	build := exec.Command("./java/build.sh")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build test/share/java: %v\n%s", err, out)
	}
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
	dir, _ := filepath.Abs("java")
	cmd := exec.CommandContext(ctx, "java", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx256m",
		"-cp", filepath.Join(dir, "target", "gregor-share-check.jar")+string(os.PathListSeparator)+filepath.Join(dir, "target", "lib", "*"),
		"gregor.share.Check", b.Addr(), "jobs", "java-share", fmt.Sprint(consumers), fmt.Sprint(records), "90")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()

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

	owner := map[int64]string{}
	done := false
	for line := range lines {
		if line == "DONE" {
			done = true
			continue
		}
		var who string
		var off int64
		var n int
		if _, err := fmt.Sscanf(line, "R %s %d %d", &who, &off, &n); err != nil {
			t.Fatalf("unexpected output %q", line)
		}
		if prev, ok := owner[off]; ok {
			t.Fatalf("offset %d received by consumers %s and %s (delivery count %d)", off, prev, who, n)
		}
		if n != 1 {
			t.Fatalf("offset %d received with delivery count %d", off, n)
		}
		owner[off] = who
	}
	if err := cmd.Wait(); err != nil || !done {
		t.Fatalf("share consumers: %v (done %v)\n%s", err, done, stderr.String())
	}
	for off := range int64(records) {
		if _, ok := owner[off]; !ok {
			t.Fatalf("offset %d never received", off)
		}
	}
	per := map[string]int{}
	for _, who := range owner {
		per[who]++
	}
	if len(per) < 2 {
		t.Fatalf("records went to %d consumer(s) only: %v", len(per), per)
	}
	t.Logf("records per consumer: %v", per)
	// The client reports a response it cannot read, or a request refused, in its log only.
	for _, bad := range []string{"Exception", " ERROR ", "couldn't complete"} {
		if strings.Contains(stderr.String(), bad) {
			t.Fatalf("the share consumers logged %q:\n%s", bad, stderr.String())
		}
	}
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
