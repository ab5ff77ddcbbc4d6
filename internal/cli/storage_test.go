package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gregor-project/gregor/internal/config"
	"github.com/gregor-project/gregor/internal/testutil"
)

// storage random-uuid, format and info on a fresh log dir, then a real broker started on
// that dir: it takes the cluster id format wrote.
func TestStorageToolE2E(t *testing.T) {
	id := strings.TrimSpace(mustRunCLI(t, "", "storage", "random-uuid"))
	if err := checkClusterID(id); err != nil {
		t.Fatal(err)
	}
	if other := strings.TrimSpace(mustRunCLI(t, "", "storage", "random-uuid")); other == id {
		t.Fatalf("two random ids are equal: %s", id)
	}
	dir := filepath.Join(t.TempDir(), "data")
	props := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(props, []byte("node.id=1\nlog.dirs="+dir+"\nlisteners=PLAINTEXT://127.0.0.1:0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := mustRunCLI(t, "", "storage", "info", "-c", props); !strings.Contains(out, "does not exist") {
		t.Fatalf("info before format:\n%s", out)
	}
	if _, err := runCLI(t, "", "storage", "format", "-t", "not-a-uuid", "-c", props); err == nil {
		t.Fatal("format took a cluster id that is not a UUID")
	}
	out := mustRunCLI(t, "", "storage", "format", "-t", id, "-c", props)
	if !strings.Contains(out, "Formatting "+dir+" with cluster.id "+id+" and node.id 1.") {
		t.Fatalf("format:\n%s", out)
	}
	if _, err := runCLI(t, "", "storage", "format", "-t", id, "-c", props); err == nil || !strings.Contains(err.Error(), "already formatted") {
		t.Fatalf("second format: %v", err)
	}
	if out := mustRunCLI(t, "", "storage", "format", "-t", id, "-c", props, "--ignore-formatted"); !strings.Contains(out, "All of the log directories are already formatted.") {
		t.Fatalf("format --ignore-formatted:\n%s", out)
	}
	other := strings.TrimSpace(mustRunCLI(t, "", "storage", "random-uuid"))
	if _, err := runCLI(t, "", "storage", "format", "-t", other, "-c", props, "--ignore-formatted"); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("format for another cluster: %v", err)
	}
	var infos []LogDirInfoOffline
	if err := json.Unmarshal([]byte(mustRunCLI(t, "", "storage", "info", "-c", props, "-o", "json")), &infos); err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || !infos[0].Formatted || infos[0].ClusterID != id || infos[0].NodeID == nil || *infos[0].NodeID != 1 || infos[0].Version != 1 {
		t.Fatalf("info -o json: %+v", infos)
	}
	if _, err := runCLI(t, "", "storage", "info", "-c", props, "--set", "node.id=2"); err == nil {
		t.Fatal("info with another node.id found no problem")
	}

	// The server starts on the formatted dir and serves the cluster id format wrote.
	b := testutil.StartBrokerIn(t, dir, nil)
	var d ClusterDescription
	if err := json.Unmarshal([]byte(mustRunCLI(t, "", "cluster", "describe", "-o", "json", "-b", b.Addr())), &d); err != nil {
		t.Fatal(err)
	}
	if d.ClusterID != id {
		t.Fatalf("the broker serves cluster id %q, format wrote %q", d.ClusterID, id)
	}
	if out := mustRunCLI(t, "", "storage", "info", "-c", props); !strings.Contains(out, "Found metadata: {cluster.id="+id+", node.id=1, version=1}") {
		t.Fatalf("info after start:\n%s", out)
	}
}

// A node of a quorum (which refuses to format its dir itself) started as a real process
// with no cluster.id in its config, on a dir `gregor storage format` formatted: it runs,
// and serves the cluster id format wrote. Its controller listener then answers
// `gregor metadata-quorum describe`.
func TestStorageFormatThenServerProcess(t *testing.T) {
	id := config.NewClusterID()
	c := testutil.StartCluster(t, testutil.ClusterOptions{Nodes: 1, BeforeStart: func(n *testutil.Node) {
		data, err := os.ReadFile(n.ConfigFile)
		if err != nil {
			t.Fatal(err)
		}
		var kept []string
		for _, line := range strings.Split(string(data), "\n") {
			if !strings.HasPrefix(strings.TrimSpace(line), "cluster.id") {
				kept = append(kept, line)
			}
		}
		if err := os.WriteFile(n.ConfigFile, []byte(strings.Join(kept, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		mustRunCLI(t, "", "storage", "format", "-t", id, "-c", n.ConfigFile)
	}})
	var d ClusterDescription
	if err := json.Unmarshal([]byte(mustRunCLI(t, "", "cluster", "describe", "-o", "json", "-b", strings.Join(c.Bootstrap(), ","))), &d); err != nil {
		t.Fatal(err)
	}
	if d.ClusterID != id {
		t.Fatalf("the node serves cluster id %q, format wrote %q", d.ClusterID, id)
	}

	// The same process's controller listener answers metadata-quorum describe.
	ctrl := c.Nodes()[0].ControllerAddr()
	var st QuorumStatus
	if err := json.Unmarshal([]byte(mustRunCLI(t, "", "metadata-quorum", "describe", "--bootstrap-controller", ctrl, "-o", "json")), &st); err != nil {
		t.Fatal(err)
	}
	if st.LeaderID != 1 || st.LeaderEpoch < 1 || st.HighWatermark <= 0 || len(st.Voters) != 1 || st.Voters[0] != 1 || st.Replicas[0].Status != "Leader" {
		t.Fatalf("metadata-quorum describe: %+v", st)
	}
	if out := mustRunCLI(t, "", "metadata-quorum", "describe", "--bootstrap-controller", ctrl); !strings.Contains(out, "LeaderId:               1") || !strings.Contains(out, "CurrentVoters:          [1]") {
		t.Fatalf("--status:\n%s", out)
	}
	if out := mustRunCLI(t, "", "metadata-quorum", "describe", "--bootstrap-controller", ctrl, "--replication"); !strings.Contains(out, "Leader") || !strings.Contains(out, "LogEndOffset") {
		t.Fatalf("--replication:\n%s", out)
	}
}
