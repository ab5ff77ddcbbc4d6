package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestProgressOutput(t *testing.T) {
	if got := progressBar(3, 10, 10); got != "[###-------] 3/10 partitions reassigned" {
		t.Errorf("progressBar = %q", got)
	}
	if got := progressBar(0, 0, 4); got != "[----] 0/0 partitions reassigned" {
		t.Errorf("progressBar(0, 0) = %q", got)
	}
	p := ReassignmentProgress{Topic: "t", Partition: 2, Replicas: []int32{1, 2, 3}, Adding: []int32{3}, Removing: []int32{}, Target: []int32{1, 3}, State: stateInProgress}
	if got := progressLine(p); got != "t-2: in progress, replicas 1,2,3, adding 3, removing -" {
		t.Errorf("progressLine = %q", got)
	}
	p.State, p.Replicas = stateComplete, []int32{1, 3}
	if got := progressLine(p); got != "t-2: complete, replicas 1,3" {
		t.Errorf("progressLine = %q", got)
	}
	p.State, p.Replicas = stateFailed, []int32{1, 2}
	if got := progressLine(p); got != "t-2: failed: replicas 1,2, plan 1,3" {
		t.Errorf("progressLine = %q", got)
	}

	var buf bytes.Buffer
	if err := PrintReassignmentStatus(&buf, outputTable, []ReassignmentProgress{p}, true); err != nil {
		t.Fatal(err)
	}
	if want := "t      2          1,2       3       -         1,3     failed"; !strings.Contains(buf.String(), want) {
		t.Errorf("status table lacks %q:\n%s", want, buf.String())
	}
	buf.Reset()
	if err := PrintReassignmentStatus(&buf, outputTable, nil, false); err != nil || buf.String() != "No partition reassignments in progress.\n" {
		t.Errorf("empty status: %q %v", buf.String(), err)
	}
}

// reassignTopic creates topic with partitions on the test broker and returns
// the plan that keeps its current assignment.
func reassignTopic(t *testing.T, addr, topic string, partitions int) ReassignmentPlan {
	t.Helper()
	mustRunCLI(t, "", "topic", "create", topic, "-b", addr, "--partitions", fmt.Sprint(partitions), "--replication-factor", "1")
	var g GeneratedPlan
	out := mustRunCLI(t, "", "reassign", "generate", "-b", addr, "--topics", topic, "--brokers", fmt.Sprint(testNodeID), "-o", "json")
	if err := json.Unmarshal([]byte(out), &g); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(g.Current.Partitions) != partitions || g.Proposed.MarshalCompact() != g.Current.MarshalCompact() || g.Moves != 0 {
		t.Fatalf("generate on one broker: %+v", g)
	}
	for _, e := range g.Current.Partitions {
		if len(e.Replicas) != 1 || e.Replicas[0] != testNodeID {
			t.Fatalf("current assignment %+v", g.Current)
		}
	}
	return g.Current
}

// Plans that do not match the cluster are refused with an error naming the
// entry, before anything is sent: the single-node broker does not serve
// the reassignment APIs, so any request would fail differently.
func TestReassignPlanChecksE2E(t *testing.T) {
	addr := startTestBroker(t)
	plan := reassignTopic(t, addr, "rp", 2)
	dir := t.TempDir()

	table := mustRunCLI(t, "", "reassign", "generate", "-b", addr, "--topics", "rp", "--brokers", fmt.Sprint(testNodeID))
	if !strings.Contains(table, "Current partition replica assignment\n"+plan.MarshalCompact()) ||
		!strings.Contains(table, "Proposed partition reassignment configuration (0 replica(s) move)\n"+plan.MarshalCompact()) {
		t.Errorf("generate output:\n%s", table)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--topics", "nosuch", "--brokers", fmt.Sprint(testNodeID)}, "topic nosuch: UNKNOWN_TOPIC_OR_PARTITION"},
		{[]string{"--topics", "rp", "--brokers", "99"}, "broker 99 is not in the cluster"},
	} {
		if _, err := runCLI(t, "", append([]string{"reassign", "generate", "-b", addr}, tt.args...)...); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("generate %v: error %v, want %q", tt.args, err, tt.want)
		}
	}

	for i, tt := range []struct {
		plan string
		want string
	}{
		{`{"version":1,"partitions":[{"topic":"nosuch","partition":0,"replicas":[7]}]}`, "partitions[0] (nosuch-0): unknown topic nosuch"},
		{`{"version":1,"partitions":[{"topic":"rp","partition":0,"replicas":[7]},{"topic":"rp","partition":5,"replicas":[7]}]}`,
			"partitions[1] (rp-5): unknown partition: topic rp has 2 partition(s)"},
		{`{"version":1,"partitions":[{"topic":"rp","partition":1,"replicas":[7,99]}]}`, "partitions[0] (rp-1): broker 99 is not in the cluster (brokers: 7)"},
		{`{"version":1,"partitions":[{"topic":"rp","partition":1,"replicas":[7]}`, "malformed"},
	} {
		file := fmt.Sprintf("%s/plan%d.json", dir, i)
		writeFile(t, file, tt.plan)
		for _, cmd := range [][]string{{"execute", "--throttle", "1000"}, {"execute", "--wait"}, {"status"}} {
			out, err := runCLI(t, "", append([]string{"reassign", "-b", addr, "--plan", file}, cmd...)...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("reassign %v with plan %s: error %v, want %q", cmd, tt.plan, err, tt.want)
			}
			if strings.Contains(out, "Successfully started") || strings.Contains(out, "Throttle set") {
				t.Errorf("reassign %v with a bad plan sent something:\n%s", cmd, out)
			}
		}
	}
	// The assignment is untouched.
	if again := reassignTopic(t, addr, "rp2", 1); again.Partitions[0].Replicas[0] != testNodeID {
		t.Fatal(again)
	}
	var d topicDescription
	if err := json.Unmarshal([]byte(mustRunCLI(t, "", "topic", "describe", "rp", "-b", addr, "-o", "json")), &d); err != nil {
		t.Fatal(err)
	}
	for _, p := range d.Partitions {
		if len(p.Replicas) != 1 || p.Replicas[0] != testNodeID {
			t.Errorf("partition %d replicas changed: %v", p.Partition, p.Replicas)
		}
	}
}

// A plan that keeps the current assignment runs to completion on one node:
// execute --wait, status (complete), cancel (nothing to cancel).
func TestReassignExecuteE2E(t *testing.T) {
	addr := startTestBroker(t)
	plan := reassignTopic(t, addr, "rx", 3)
	file := t.TempDir() + "/plan.json"
	writeFile(t, file, plan.MarshalCompact())

	out := mustRunCLI(t, "", "reassign", "execute", "-b", addr, "--plan", file, "--wait", "--interval", "50ms")
	for _, w := range []string{"Current partition replica assignment\n" + plan.MarshalCompact(),
		"Successfully started partition reassignment(s) for rx-0,rx-1,rx-2", "rx-2: complete, replicas 7"} {
		if !strings.Contains(out, w) {
			t.Errorf("execute output lacks %q:\n%s", w, out)
		}
	}

	var st []ReassignmentProgress
	out = mustRunCLI(t, "", "reassign", "status", "-b", addr, "--plan", file, "-o", "json")
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(st) != 3 {
		t.Fatalf("status: %+v", st)
	}
	for _, p := range st {
		if p.State != stateComplete {
			t.Errorf("status %+v: want complete", p)
		}
	}
	if out := mustRunCLI(t, "", "reassign", "status", "-b", addr); !strings.Contains(out, "No partition reassignments in progress.") {
		t.Errorf("status without a plan:\n%s", out)
	}

	var cancelled []CancelResult
	out = mustRunCLI(t, "", "reassign", "cancel", "-b", addr, "--plan", file, "-o", "json")
	if err := json.Unmarshal([]byte(out), &cancelled); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(cancelled) != 3 || cancelled[0].Result != "not-reassigning" {
		t.Errorf("cancel with nothing moving: %+v", cancelled)
	}

	// The Go entry point checks the plan as the command does.
	bad := ReassignmentPlan{Version: 1, Partitions: []PlanPartition{{Topic: "rx", Partition: 0, Replicas: []int32{99}}}}
	cl := newTestClient(t, addr)
	var buf bytes.Buffer
	if err := ExecuteReassignment(t.Context(), cl, bad, ExecuteOptions{}, &buf); err == nil || !strings.Contains(err.Error(), "broker 99") {
		t.Errorf("ExecuteReassignment with an unknown broker: %v\n%s", err, buf.String())
	}
}

// The whole reassignment cycle against a fake three-broker cluster: generate
// a balanced plan, execute it throttled and waiting, check it, and the
// throttle configs Kafka's tool sets come and go.
func TestReassignCycleFake(t *testing.T) {
	f := startFakeCluster(t, map[string][][]int32{"f": {{1, 2}, {2, 1}, {1, 2}, {2, 1}, {1, 2}, {2, 1}}})
	b := []string{"-b", f.addr()}
	var g GeneratedPlan
	out := mustRunCLI(t, "", append([]string{"reassign", "generate", "--topics", "f", "--brokers", "1,2,3", "-o", "json"}, b...)...)
	if err := json.Unmarshal([]byte(out), &g); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	checkBalanced(t, "generate", g.Current.Assignment(), g.Proposed.Assignment(), []int32{1, 2, 3}, 0)
	if g.Moves != 4 { // 12 replicas, 4 per broker: broker 3 receives 4
		t.Errorf("generate moves %d replicas, want 4: %s", g.Moves, g.Proposed.MarshalCompact())
	}
	file := t.TempDir() + "/plan.json"
	writeFile(t, file, g.Proposed.MarshalCompact())

	out = mustRunCLI(t, "", append([]string{"reassign", "execute", "--plan", file, "--throttle", "5000", "--wait", "--interval", "1ms"}, b...)...)
	for _, w := range []string{
		"Current partition replica assignment\n" + g.Current.MarshalCompact(),
		"Throttle set to 5000 B/s on broker(s) 1,2,3.",
		"Successfully started partition reassignment(s) for f-0,f-1,f-2,f-3,f-4,f-5",
		"in progress, replicas", "adding 3",
		"Throttle removed.",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("execute output lacks %q:\n%s", w, out)
		}
	}
	for _, e := range g.Proposed.Partitions {
		if !strings.Contains(out, fmt.Sprintf("%s: complete, replicas %s", e.name(), joinInt32s(e.Replicas))) {
			t.Errorf("execute output lacks %s complete:\n%s", e.name(), out)
		}
	}
	if got := f.assignment(); got.Plan().MarshalCompact() != g.Proposed.MarshalCompact() {
		t.Fatalf("cluster assignment %s, want the plan %s", got.Plan().MarshalCompact(), g.Proposed.MarshalCompact())
	}
	log := strings.Join(f.configLog(), "\n")
	th := planThrottle(g.Proposed, g.Current.Assignment())
	for _, w := range []string{
		"SET broker 1 leader.replication.throttled.rate=5000", "SET broker 3 follower.replication.throttled.rate=5000",
		"SET topic f leader.replication.throttled.replicas=" + th.leaders["f"],
		"SET topic f follower.replication.throttled.replicas=" + th.follows["f"],
		"DELETE broker 2 leader.replication.throttled.rate", "DELETE topic f follower.replication.throttled.replicas",
	} {
		if !strings.Contains(log, w+"\n") && !strings.HasSuffix(log, w) {
			t.Errorf("config changes lack %q:\n%s", w, log)
		}
	}
	if strings.Index(log, "DELETE") < strings.LastIndex(log, "SET") {
		t.Errorf("throttle removed before it was set:\n%s", log)
	}

	var st []ReassignmentProgress
	if err := json.Unmarshal([]byte(mustRunCLI(t, "", append([]string{"reassign", "status", "--plan", file, "-o", "json"}, b...)...)), &st); err != nil {
		t.Fatal(err)
	}
	for _, p := range st {
		if p.State != stateComplete {
			t.Errorf("status after --wait: %+v", p)
		}
	}

	// Rolling back without --wait: the first status shows it moving, the
	// next finds it done and removes the throttle.
	f.setSteps(3) // the refused second execute and the status below each list it once
	back := t.TempDir() + "/back.json"
	writeFile(t, back, g.Current.MarshalCompact())
	out = mustRunCLI(t, "", append([]string{"reassign", "execute", "--plan", back, "--throttle", "100"}, b...)...)
	if !strings.Contains(out, "The throttle stays") {
		t.Errorf("execute without --wait:\n%s", out)
	}
	if _, err := runCLI(t, "", append([]string{"reassign", "execute", "--plan", file}, b...)...); err == nil || !strings.Contains(err.Error(), "being reassigned already") {
		t.Errorf("second execute while moving: %v", err)
	}
	out = mustRunCLI(t, "", append([]string{"reassign", "status"}, b...)...)
	if !strings.Contains(out, "ADDING") || !strings.Contains(out, "f      ") {
		t.Errorf("status of ongoing reassignments:\n%s", out)
	}
	before := len(f.configLog())
	out = mustRunCLI(t, "", append([]string{"reassign", "status", "--plan", back}, b...)...)
	if !strings.Contains(out, "Reassignment complete; throttle removed.") || len(f.configLog()) == before {
		t.Errorf("status of a complete plan:\n%s", out)
	}
	if got := f.assignment(); got.Plan().MarshalCompact() != g.Current.MarshalCompact() {
		t.Fatalf("rollback left %s", got.Plan().MarshalCompact())
	}

	// Cancel puts a moving partition back; a not-moving one is reported.
	one := t.TempDir() + "/one.json"
	writeFile(t, one, `{"version":1,"partitions":[{"topic":"f","partition":0,"replicas":[3,2]}]}`)
	mustRunCLI(t, "", append([]string{"reassign", "execute", "--plan", one}, b...)...)
	out = mustRunCLI(t, "", append([]string{"reassign", "cancel", "--plan", one}, b...)...)
	if !strings.Contains(out, "f      0          cancelled") {
		t.Errorf("cancel:\n%s", out)
	}
	if rs, _ := f.assignment().Lookup("f", 0); !slices.Equal(rs, []int32{1, 2}) {
		t.Errorf("after cancel f-0 has %v, want 1,2", rs)
	}
	out = mustRunCLI(t, "", append([]string{"reassign", "cancel", "--plan", one, "-o", "json"}, b...)...)
	if !strings.Contains(out, `"result": "not-reassigning"`) {
		t.Errorf("second cancel:\n%s", out)
	}
	// status of a plan that is neither moving nor done fails.
	if _, err := runCLI(t, "", append([]string{"reassign", "status", "--plan", one}, b...)...); err == nil || !strings.Contains(err.Error(), "not moving") {
		t.Errorf("status of a cancelled plan: %v", err)
	}
}

// A partition the broker refuses is printed and fails the command, while
// the others start and are waited for.
func TestReassignPartitionErrorFake(t *testing.T) {
	f := startFakeCluster(t, map[string][][]int32{"e": {{1}, {2}}})
	f.refuseReassignment("e", 0)
	plan := ReassignmentPlan{Version: 1, Partitions: []PlanPartition{
		{Topic: "e", Partition: 0, Replicas: []int32{2}},
		{Topic: "e", Partition: 1, Replicas: []int32{3}},
	}}
	var buf bytes.Buffer
	err := ExecuteReassignment(t.Context(), newTestClient(t, f.addr()), plan, ExecuteOptions{Wait: true, Interval: time.Millisecond}, &buf)
	if err == nil || !strings.Contains(err.Error(), "1 partition reassignment(s) failed") {
		t.Errorf("error %v, want one failed partition", err)
	}
	for _, w := range []string{"Error reassigning e-0: INVALID_REPLICA_ASSIGNMENT", "started partition reassignment(s) for e-1\n", "e-1: complete, replicas 3"} {
		if !strings.Contains(buf.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, buf.String())
		}
	}
	a := f.assignment()
	if rs, _ := a.Lookup("e", 0); !slices.Equal(rs, []int32{1}) {
		t.Errorf("refused e-0 has %v", rs)
	}
	if rs, _ := a.Lookup("e", 1); !slices.Equal(rs, []int32{3}) {
		t.Errorf("e-1 has %v, want 3", rs)
	}
}
