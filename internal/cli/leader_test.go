package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestPrintElectionResults(t *testing.T) {
	rs := []ElectionResult{
		{Topic: "a", Partition: 0, Result: electionElected},
		{Topic: "a", Partition: 1, Result: electionNotNeeded},
		{Topic: "b", Partition: 2, Result: electionFailed, Error: "PREFERRED_LEADER_NOT_AVAILABLE: x"},
	}
	var buf bytes.Buffer
	if err := PrintElectionResults(&buf, outputTable, rs); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"a      0          elected", "a      1          not-needed", "b      2          failed      PREFERRED_LEADER_NOT_AVAILABLE: x"} {
		if !strings.Contains(buf.String(), w) {
			t.Errorf("table lacks %q:\n%s", w, buf.String())
		}
	}
	if err := electionFailures(rs); err == nil || !strings.Contains(err.Error(), "1 partition") {
		t.Errorf("failures: %v", err)
	}
	if err := electionFailures(rs[:2]); err != nil {
		t.Errorf("not-needed counted as a failure: %v", err)
	}
	buf.Reset()
	if err := PrintElectionResults(&buf, outputTable, nil); err != nil || !strings.Contains(buf.String(), "No leader elections were needed") {
		t.Errorf("empty: %q %v", buf.String(), err)
	}
}

// On a single node every partition is led by its preferred (only)
// replica: every election is not needed, and none fails.
func TestLeaderElectE2E(t *testing.T) {
	addr := startTestBroker(t)
	mustRunCLI(t, "", "topic", "create", "le", "-b", addr, "--partitions", "3", "--replication-factor", "1")
	elect := func(args ...string) []ElectionResult {
		t.Helper()
		var rs []ElectionResult
		out := mustRunCLI(t, "", append([]string{"leader", "elect", "-b", addr, "-o", "json"}, args...)...)
		if err := json.Unmarshal([]byte(out), &rs); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		for _, r := range rs {
			if r.Result != electionNotNeeded {
				t.Errorf("leader elect %v: %+v, want not-needed", args, r)
			}
		}
		return rs
	}
	// All partitions: Kafka leaves out partitions that need no election,
	// so the answer may be empty; whatever is listed is not-needed.
	elect()
	elect("--preferred")
	if rs := elect("--topic", "le"); len(rs) != 3 {
		t.Errorf("--topic le: %d results, want 3", len(rs))
	}
	if rs := elect("--topic", "le", "--partition", "2"); len(rs) != 1 || rs[0].Partition != 2 || rs[0].Topic != "le" {
		t.Errorf("--partition 2: %+v", rs)
	}
	elect("--unclean", "--topic", "le")

	out, err := runCLI(t, "", "leader", "elect", "-b", addr, "--topic", "le", "--partition", "9")
	if err == nil || !strings.Contains(out+err.Error(), "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Errorf("unknown partition: %v\n%s", err, out)
	}
	if _, err := runCLI(t, "", "leader", "elect", "-b", addr, "--topic", "nosuch"); err == nil || !strings.Contains(err.Error(), "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Errorf("unknown topic: %v", err)
	}
}

// Elections against a fake three-broker cluster: a partition led by a
// non-preferred replica is elected, the rest need none, and a partition
// without a leader fails a preferred election (non-zero exit) but not an
// unclean one.
func TestLeaderElectFake(t *testing.T) {
	f := startFakeCluster(t, map[string][][]int32{"x": {{1, 2}, {2, 3}, {3, 1}}, "y": {{2, 1}}})
	b := []string{"-b", f.addr()}
	f.setLeader("x", 1, 3)

	var rs []ElectionResult
	out := mustRunCLI(t, "", append([]string{"leader", "elect", "-o", "json"}, b...)...)
	if err := json.Unmarshal([]byte(out), &rs); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(rs) != 1 || rs[0] != (ElectionResult{Topic: "x", Partition: 1, Result: electionElected}) {
		t.Errorf("all partitions: %+v, want only x-1 elected", rs)
	}
	out = mustRunCLI(t, "", append([]string{"leader", "elect", "--topic", "x"}, b...)...)
	if strings.Count(out, "not-needed") != 3 {
		t.Errorf("--topic x after the election:\n%s", out)
	}

	f.setLeader("y", 0, -1)
	out, err := runCLI(t, "", append([]string{"leader", "elect", "--preferred", "--topic", "y", "--partition", "0"}, b...)...)
	if err == nil || !strings.Contains(out, "PREFERRED_LEADER_NOT_AVAILABLE") {
		t.Errorf("preferred election without a leader: %v\n%s", err, out)
	}
	out = mustRunCLI(t, "", append([]string{"leader", "elect", "--unclean", "--topic", "y"}, b...)...)
	if !strings.Contains(out, "y      0          elected") {
		t.Errorf("unclean election:\n%s", out)
	}
	if out := mustRunCLI(t, "", append([]string{"leader", "elect"}, b...)...); !strings.Contains(out, "No leader elections were needed.") {
		t.Errorf("nothing to elect:\n%s", out)
	}
}
