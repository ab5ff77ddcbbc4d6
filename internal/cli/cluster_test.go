package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/internal/testutil"
)

// testNodeID is the node.id of the single-node brokers these tests start
// (not the default 1, so a tool that assumed broker 1 would fail).
const testNodeID = 7

// startTestBroker starts a single-node broker with node.id testNodeID and
// returns its address.
func startTestBroker(t *testing.T) string {
	t.Helper()
	return testutil.StartBroker(t, "node.id="+strconv.Itoa(testNodeID)).Addr()
}

// newTestClient is a kgo client for addr, closed when the test ends.
func newTestClient(t *testing.T, addr string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func TestClusterCommandTree(t *testing.T) {
	root := &cobra.Command{Use: "gregor"}
	AddCommands(root)
	want := map[string][]string{
		"cluster describe":  {"bootstrap-server", "output"},
		"reassign generate": {"bootstrap-server", "output", "topics", "brokers", "rf"},
		"reassign execute":  {"bootstrap-server", "plan", "throttle", "wait", "additional", "interval"},
		"reassign status":   {"bootstrap-server", "output", "plan", "preserve-throttles"},
		"reassign cancel":   {"bootstrap-server", "output", "plan", "preserve-throttles"},
		"leader elect":      {"bootstrap-server", "output", "preferred", "unclean", "topic", "partition"},
		"topic list":        {"under-replicated"},
	}
	for path, flags := range want {
		cmd, _, err := root.Find(strings.Fields(path))
		if err != nil || cmd.Name() != strings.Fields(path)[len(strings.Fields(path))-1] || cmd.RunE == nil {
			t.Errorf("%s: not found or not runnable (%v)", path, err)
			continue
		}
		for _, f := range flags {
			if cmd.Flag(f) == nil {
				t.Errorf("%s: no --%s", path, f)
			}
		}
	}
}

// Bad arguments and bad plan files are rejected before any connection
// (port 1 refuses connections, so a dial would fail differently).
func TestClusterArgumentErrors(t *testing.T) {
	dir := t.TempDir()
	bad := dir + "/bad.json"
	writeFile(t, bad, `{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[1,1]}]}`)
	good := dir + "/good.json"
	writeFile(t, good, `{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[1]}]}`)
	b := []string{"-b", "127.0.0.1:1"}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"leader", "elect", "--preferred", "--unclean"}, "at most one"},
		{[]string{"leader", "elect", "--partition", "1"}, "--partition needs --topic"},
		{[]string{"leader", "elect", "--topic", "t", "--partition", "-2"}, "--partition -2"},
		{[]string{"reassign", "generate", "--topics", "t"}, "brokers"},
		{[]string{"reassign", "generate", "--topics", "t", "--brokers", "1,x"}, "--brokers"},
		{[]string{"reassign", "generate", "--topics", " , ", "--brokers", "1"}, "no topic"},
		{[]string{"reassign", "generate", "--topics", "t", "--brokers", "1,2", "--rf", "3"}, "--rf 3"},
		{[]string{"reassign", "execute"}, "plan"},
		{[]string{"reassign", "execute", "--plan", dir + "/missing.json"}, "no such file"},
		{[]string{"reassign", "execute", "--plan", bad}, "partitions[0] (a-0): broker 1 listed twice"},
		{[]string{"reassign", "execute", "--plan", bad, "--throttle", "-5"}, "--throttle"},
		{[]string{"reassign", "status", "--plan", bad}, "listed twice"},
		{[]string{"reassign", "execute", "--plan", good, "-o", "json"}, "text only"},
		{[]string{"reassign", "cancel", "--plan", bad}, "listed twice"},
	}
	for _, tt := range tests {
		_, err := runCLI(t, "", append(tt.args, b...)...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("gregor %s: got error %v, want one mentioning %q", strings.Join(tt.args, " "), err, tt.want)
		}
	}
}

func TestClusterDescribeE2E(t *testing.T) {
	addr := startTestBroker(t)
	mustRunCLI(t, "", "topic", "create", "cd", "-b", addr, "--partitions", "3", "--replication-factor", "1")

	var d ClusterDescription
	out := mustRunCLI(t, "", "cluster", "describe", "-b", addr, "-o", "json")
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if d.ClusterID == "" || d.ControllerID != testNodeID || len(d.Brokers) != 1 {
		t.Fatalf("cluster description %+v", d)
	}
	br := d.Brokers[0]
	if br.ID != testNodeID || net.JoinHostPort(br.Host, strconv.Itoa(int(br.Port))) != addr || br.Offline || br.Fenced {
		t.Fatalf("broker %+v, want id %d at %s", br, testNodeID, addr)
	}
	// Every partition (the topic's 3 and any internal ones) is on and led by the one broker.
	if d.Partitions < 3 || br.Replicas != d.Partitions || br.Leaders != d.Partitions {
		t.Fatalf("partitions %d, broker replicas %d leaders %d", d.Partitions, br.Replicas, br.Leaders)
	}

	table := mustRunCLI(t, "", "cluster", "describe", "-b", addr)
	for _, w := range []string{"Cluster ID: " + d.ClusterID, "Controller: " + strconv.Itoa(testNodeID), addr, "online"} {
		if !strings.Contains(table, w) {
			t.Errorf("table lacks %q:\n%s", w, table)
		}
	}
}

func TestPrintClusterDescription(t *testing.T) {
	rack := "r1"
	d := ClusterDescription{ClusterID: "c", ControllerID: -1, Partitions: 4, Brokers: []BrokerDescription{
		{ID: 1, Host: "h1", Port: 9092, Rack: &rack, Replicas: 3, Leaders: 2},
		{ID: 2, Host: "h2", Port: 9093, Fenced: true, Replicas: 1},
		{ID: 3, Offline: true, Replicas: 2},
	}}
	var buf bytes.Buffer
	if err := PrintClusterDescription(&buf, outputTable, d); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(buf.String(), "\n")
	want := [][]string{
		{"BROKER", "ADDRESS", "RACK", "STATUS", "REPLICAS", "LEADERS"},
		{"1", "h1:9092", "r1", "online", "3", "2"},
		{"2", "h2:9093", "-", "fenced", "1", "0"},
		{"3", "-", "-", "offline", "2", "0"},
	}
	if !strings.Contains(buf.String(), "Controller: -\n") {
		t.Errorf("unknown controller not shown as -:\n%s", buf.String())
	}
	for i, w := range want {
		if got := strings.Fields(lines[4+i]); !slices.Equal(got, w) {
			t.Errorf("line %d: %q, want %q", 4+i, got, w)
		}
	}
}

// topic describe shows leader, replicas, ISR and the offline/under-replicated
// markers; topic list --under-replicated lists nothing on a healthy broker.
func TestTopicReplicaStatusE2E(t *testing.T) {
	addr := startTestBroker(t)
	mustRunCLI(t, "", "topic", "create", "rs", "-b", addr, "--partitions", "2", "--replication-factor", "1")
	var d topicDescription
	out := mustRunCLI(t, "", "topic", "describe", "rs", "-b", addr, "-o", "json")
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(d.Partitions) != 2 {
		t.Fatalf("partitions %+v", d.Partitions)
	}
	for _, p := range d.Partitions {
		if p.Leader != testNodeID || !slices.Equal(p.Replicas, []int32{testNodeID}) || !slices.Equal(p.ISR, []int32{testNodeID}) ||
			p.Offline || p.UnderReplicated {
			t.Errorf("partition %+v: want leader, replicas and ISR %d, online, fully replicated", p, testNodeID)
		}
	}
	for _, field := range []string{`"offline": false`, `"under_replicated": false`, `"isr": [`} {
		if !strings.Contains(out, field) {
			t.Errorf("describe JSON lacks %s:\n%s", field, out)
		}
	}
	table := mustRunCLI(t, "", "topic", "describe", "rs", "-b", addr)
	if !strings.Contains(table, "STATUS") || !strings.Contains(table, "OFFLINE-REPLICAS") {
		t.Errorf("describe table lacks the status columns:\n%s", table)
	}

	if out := mustRunCLI(t, "", "topic", "list", "--under-replicated", "-b", addr, "-o", "json"); strings.TrimSpace(out) != "[]" {
		t.Errorf("list --under-replicated on a healthy broker: %s", out)
	}
	if out := mustRunCLI(t, "", "topic", "list", "--under-replicated", "-b", addr); strings.TrimSpace(out) != "TOPIC  PARTITION  LEADER  REPLICAS  ISR" {
		t.Errorf("list --under-replicated table: %q", out)
	}
}

func TestUnderReplicatedPartitions(t *testing.T) {
	details := kadm.TopicDetails{
		"b": {Topic: "b", Partitions: kadm.PartitionDetails{
			0: {Partition: 0, Leader: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}},
			1: {Partition: 1, Leader: 2, Replicas: []int32{2, 3, 1}, ISR: []int32{2}},
		}},
		"a": {Topic: "a", Partitions: kadm.PartitionDetails{
			3: {Partition: 3, Leader: -1, Replicas: []int32{1, 2}, ISR: []int32{}},
			0: {Partition: 0, Leader: 1, Replicas: []int32{1, 2}, ISR: []int32{1}},
		}},
	}
	got := underReplicatedPartitions(details)
	want := []underReplicatedPartition{
		{Topic: "a", Partition: 0, Leader: 1, Replicas: []int32{1, 2}, ISR: []int32{1}},
		{Topic: "a", Partition: 3, Leader: -1, Replicas: []int32{1, 2}, ISR: []int32{}},
		{Topic: "b", Partition: 1, Leader: 2, Replicas: []int32{2, 3, 1}, ISR: []int32{2}},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	var buf bytes.Buffer
	if err := printUnderReplicated(&buf, outputTable, got); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "b      1          2       2,3,1     2") {
		t.Errorf("table:\n%s", buf.String())
	}

	live := map[int32]bool{1: true, 2: true}
	for _, tt := range []struct {
		p            kadm.PartitionDetail
		offline, urp bool
		markers      string
	}{
		{kadm.PartitionDetail{Leader: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}, false, false, "-"},
		{kadm.PartitionDetail{Leader: 1, Replicas: []int32{1, 2}, ISR: []int32{1}}, false, true, "under-replicated"},
		{kadm.PartitionDetail{Leader: -1, Replicas: []int32{1}, ISR: []int32{1}}, true, false, "offline"},
		{kadm.PartitionDetail{Leader: 3, Replicas: []int32{3, 1}, ISR: []int32{3}}, true, true, "offline,under-replicated"},
	} {
		off, urp := isOffline(tt.p, live), isUnderReplicated(tt.p)
		if off != tt.offline || urp != tt.urp || partitionMarkers(off, urp) != tt.markers {
			t.Errorf("%+v: offline %v under-replicated %v markers %q", tt.p, off, urp, partitionMarkers(off, urp))
		}
	}
}

// Replica and leader counts per broker over a fake three-broker cluster.
func TestClusterDescribeFake(t *testing.T) {
	f := startFakeCluster(t, map[string][][]int32{"x": {{1, 2}, {2, 3}, {3, 1}, {1, 3}}})
	f.setLeader("x", 1, -1)
	d, err := DescribeCluster(t.Context(), newTestClient(t, f.addr()))
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("%s %d %d", d.ClusterID, d.ControllerID, d.Partitions)
	for _, b := range d.Brokers {
		got += fmt.Sprintf(" %d:%d/%d", b.ID, b.Replicas, b.Leaders)
	}
	if want := "fake 1 4 1:3/2 2:2/0 3:3/1"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
