package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/internal/testutil"
)

// consumeGroup runs `gregor consume --group` for n records and returns the values printed.
func consumeGroup(t *testing.T, broker, group, topic string, n int, extra ...string) []string {
	t.Helper()
	args := append([]string{"consume", topic, "-b", broker, "--group", group, "--max-messages", fmt.Sprint(n),
		"--timeout-ms", "10000", "--format", "%v\n"}, extra...)
	out := mustRunCLI(t, "", args...)
	lines := strings.Fields(out)
	if len(lines) != n {
		t.Fatalf("consume --group %s: got %d records, want %d:\n%s", group, len(lines), n, out)
	}
	return lines
}

func TestGroupCommandsE2E(t *testing.T) {
	broker := testutil.StartBroker(t, "group.initial.rebalance.delay.ms=0").Addr()
	mustRunCLI(t, "", "topic", "create", "gt", "-b", broker, "--partitions", "3", "--replication-factor", "1")
	var in strings.Builder
	for i := 0; i < 30; i++ {
		fmt.Fprintf(&in, "k%d:v%02d\n", i, i)
	}
	mustRunCLI(t, in.String(), "produce", "gt", "-b", broker, "--key-separator", ":")

	// Two runs of one group read every record once: the second resumes after the commit
	// (--from-beginning only applies to partitions with no committed offset, as in Kafka).
	first := consumeGroup(t, broker, "g1", "gt", 10, "--from-beginning")
	second := consumeGroup(t, broker, "g1", "gt", 20, "--from-beginning")
	all := append(append([]string{}, first...), second...)
	sort.Strings(all)
	for i, v := range all {
		if v != fmt.Sprintf("v%02d", i) {
			t.Fatalf("record %d is %q: the group skipped or repeated records: %v", i, v, all)
		}
	}

	// list and describe: the group is Empty with no lag.
	if out := mustRunCLI(t, "", "group", "list", "-b", broker); !strings.Contains(out, "g1") || !strings.Contains(out, "Empty") {
		t.Fatalf("group list:\n%s", out)
	}
	var desc struct {
		State      string        `json:"state"`
		Partitions []groupLagRow `json:"partitions"`
	}
	if err := json.Unmarshal([]byte(mustRunCLI(t, "", "group", "describe", "g1", "-b", broker, "-o", "json")), &desc); err != nil {
		t.Fatal(err)
	}
	if len(desc.Partitions) != 3 {
		t.Fatalf("describe: %+v", desc)
	}
	for _, p := range desc.Partitions {
		if p.Lag != 0 || p.CurrentOffset != p.LogEndOffset {
			t.Fatalf("describe: partition %d lag %d (committed %d, end %d)", p.Partition, p.Lag, p.CurrentOffset, p.LogEndOffset)
		}
	}

	// reset-offsets: each mode, then consumption starts where it says.
	committed := func() int64 {
		var d struct{ Partitions []groupLagRow }
		if err := json.Unmarshal([]byte(mustRunCLI(t, "", "group", "describe", "g1", "-b", broker, "-o", "json")), &d); err != nil {
			t.Fatal(err)
		}
		total := int64(0)
		for _, p := range d.Partitions {
			total += p.CurrentOffset
		}
		return total
	}
	reset := func(args ...string) {
		t.Helper()
		mustRunCLI(t, "", append([]string{"group", "reset-offsets", "g1", "-b", broker, "--topic", "gt"}, args...)...)
	}
	reset("--to-earliest", "--dry-run")
	if c := committed(); c != 30 {
		t.Fatalf("--dry-run changed the offsets: sum %d", c)
	}
	reset("--to-earliest")
	if c := committed(); c != 0 {
		t.Fatalf("--to-earliest: committed sum %d", c)
	}
	consumeGroup(t, broker, "g1", "gt", 30)
	reset("--to-offset", "2")
	if c := committed(); c != 6 {
		t.Fatalf("--to-offset 2 over 3 partitions: sum %d", c)
	}
	reset("--shift-by", "-1")
	if c := committed(); c != 3 {
		t.Fatalf("--shift-by -1: sum %d", c)
	}
	consumeGroup(t, broker, "g1", "gt", 27)
	reset("--to-datetime", time.Now().Add(-time.Hour).UTC().Format(time.RFC3339))
	if c := committed(); c != 0 {
		t.Fatalf("--to-datetime an hour ago: sum %d", c)
	}
	reset("--to-latest")
	if c := committed(); c != 30 {
		t.Fatalf("--to-latest: sum %d", c)
	}

	// Refused while the group has a member.
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.ConsumerGroup("g1"), kgo.ConsumeTopics("gt"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for { // polling joins the group; wait until it is Stable
		pollCtx, pollCancel := context.WithTimeout(ctx, 100*time.Millisecond)
		cl.PollRecords(pollCtx, 1)
		pollCancel()
		if out, _ := runCLI(t, "", "group", "describe", "g1", "-b", broker); strings.Contains(out, "Stable") {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the group never became Stable with one member")
		}
	}
	if _, err := runCLI(t, "", "group", "reset-offsets", "g1", "-b", broker, "--topic", "gt", "--to-earliest"); err == nil {
		t.Fatal("reset-offsets of a group with an active member succeeded")
	}
	if _, err := runCLI(t, "", "group", "delete", "g1", "-b", broker); err == nil {
		t.Fatal("delete of a group with an active member succeeded")
	}
	cl.Close()
	mustRunCLI(t, "", "group", "delete", "g1", "-b", broker)
	if out := mustRunCLI(t, "", "group", "list", "-b", broker); strings.Contains(out, "g1") {
		t.Fatalf("group still listed after delete:\n%s", out)
	}
}
