package cli

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gregor-project/gregor/internal/config"
	"github.com/gregor-project/gregor/internal/testutil"
)

// metadata over the log a real node wrote: the broker, the topic with its partitions and
// config override, and the records that made them, with their offsets.
func TestMetadataToolE2E(t *testing.T) {
	tb := testutil.StartBroker(t, "authorizer.class.name="+config.StandardAuthorizer, "super.users=User:ANONYMOUS")
	b := tb.Addr()
	mustRunCLI(t, "", "topic", "create", "meta", "--partitions", "3", "--replication-factor", "1", "--config", "retention.ms=1234", "-b", b)
	mustRunCLI(t, "", "acl", "add", "-b", b, "--allow-principal", "User:alice", "--operation", "Read", "--topic", "meta")
	mustRunCLI(t, "", "configs", "alter", "-b", b, "--client", "app", "--add-config", "producer_byte_rate=4096")
	mustRunCLI(t, "", "configs", "alter", "-b", b, "--group", "workers", "--add-config", "share.auto.offset.reset=earliest")
	mustRunCLI(t, "", "configs", "alter", "-b", b, "--user", "alice", "--add-config", "SCRAM-SHA-512=[iterations=5000,password=pw]")
	var live topicDescription
	if err := json.Unmarshal([]byte(mustRunCLI(t, "", "topic", "describe", "meta", "-o", "json", "-b", b)), &live); err != nil {
		t.Fatal(err)
	}
	// Read while the node runs (nothing is written), then again after it stopped.
	var parts []MetadataPartition
	if err := json.Unmarshal([]byte(mustRunCLI(t, "", "metadata", "partitions", "meta", "--dir", tb.Dir, "-o", "json")), &parts); err != nil {
		t.Fatal(err)
	}
	if len(parts) != 3 || parts[2].Partition != 2 || parts[2].Leader != 1 || len(parts[2].ISR) != 1 {
		t.Fatalf("partitions of a running node: %+v", parts)
	}
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	dir := []string{"--dir", tb.Dir}
	run := func(args ...string) string { t.Helper(); return mustRunCLI(t, "", append(args, dir...)...) }

	var info MetadataInfo
	if err := json.Unmarshal([]byte(run("metadata", "info", "-o", "json")), &info); err != nil {
		t.Fatal(err)
	}
	if info.Brokers != 1 || info.Topics < 1 || info.Commit == 0 || info.ImageOffset <= 0 || len(info.Rejected) != 0 {
		t.Fatalf("info: %+v", info)
	}
	var brokers []MetadataBroker
	if err := json.Unmarshal([]byte(run("metadata", "brokers", "-o", "json")), &brokers); err != nil {
		t.Fatal(err)
	}
	if len(brokers) != 1 || brokers[0].ID != 1 || len(brokers[0].Endpoints) == 0 || !strings.Contains(brokers[0].Endpoints[0], "PLAINTEXT://127.0.0.1:") {
		t.Fatalf("brokers: %+v", brokers)
	}
	var topics []MetadataTopic
	if err := json.Unmarshal([]byte(run("metadata", "topics", "-o", "json")), &topics); err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, tp := range topics {
		if tp.Name == "meta" {
			found = true
			if tp.Partitions != 3 || tp.ID != live.TopicID {
				t.Fatalf("topic meta: %+v, the broker described id %s", tp, live.TopicID)
			}
		}
	}
	if !found {
		t.Fatalf("topics: %+v", topics)
	}
	// The controlled shutdown left the partitions without a leader (there is no other
	// broker) in a new leader epoch: the image is rebuilt through those records.
	if err := json.Unmarshal([]byte(run("metadata", "partitions", "meta", "-o", "json")), &parts); err != nil {
		t.Fatal(err)
	}
	if len(parts) != 3 || parts[0].Leader != -1 || parts[0].LeaderEpoch < 1 {
		t.Fatalf("partitions after shutdown: %+v", parts)
	}
	if out := run("metadata", "configs"); !strings.Contains(out, "TOPIC") || !strings.Contains(out, "retention.ms") || !strings.Contains(out, "1234") ||
		!strings.Contains(out, "GROUP") || !strings.Contains(out, "share.auto.offset.reset") {
		t.Fatalf("configs:\n%s", out)
	}
	if out := run("metadata", "acls"); !strings.Contains(out, "TOPIC") || !strings.Contains(out, "User:alice") || !strings.Contains(out, "READ") || !strings.Contains(out, "ALLOW") {
		t.Fatalf("acls:\n%s", out)
	}
	var quotas []QuotaEntry
	if err := json.Unmarshal([]byte(run("metadata", "quotas", "-o", "json")), &quotas); err != nil {
		t.Fatal(err)
	}
	if len(quotas) != 1 || quotas[0].Entity != "{client-id=app}" || quotas[0].Values["producer_byte_rate"] != 4096 {
		t.Fatalf("quotas: %+v", quotas)
	}
	if out := run("metadata", "users"); !strings.Contains(out, "alice") || !strings.Contains(out, "SCRAM-SHA-512") || !strings.Contains(out, "5000") {
		t.Fatalf("users:\n%s", out)
	}
	out := run("metadata", "log")
	if strings.Contains(out, "pw") && !strings.Contains(out, "bytes>") {
		t.Fatalf("log shows a credential:\n%s", out)
	}
	if !strings.Contains(out, "TopicRecord: Name=meta TopicID="+live.TopicID) || !strings.Contains(out, "RegisterBrokerRecord:") || !strings.Contains(out, "offset: ") {
		t.Fatalf("log:\n%s", out)
	}
	// dump-log of the WAL file decodes it the same way (kafka-dump-log.sh
	// --cluster-metadata-decoder).
	wals, _ := filepath.Glob(filepath.Join(tb.Dir, "__cluster_metadata-0", "wal-*.log"))
	if len(wals) != 1 {
		t.Fatalf("WAL files: %v", wals)
	}
	if dumped := mustRunCLI(t, "", "dump-log", wals[0]); !strings.Contains(dumped, "TopicRecord: Name=meta TopicID="+live.TopicID) {
		t.Fatalf("dump-log of the metadata WAL:\n%s", dumped)
	}
	var recs []MetadataRecord
	if err := json.Unmarshal([]byte(run("metadata", "log", "-o", "json")), &recs); err != nil {
		t.Fatal(err)
	}
	var topicOffset uint64
	for _, r := range recs {
		if r.Type == "TopicRecord" && r.Fields["Name"] == "meta" {
			topicOffset = r.Offset
		}
	}
	if topicOffset == 0 {
		t.Fatalf("no TopicRecord for meta in %+v", recs)
	}
	// --from skips what is before the offset.
	var later []MetadataRecord
	if err := json.Unmarshal([]byte(run("metadata", "log", "--from", fmt.Sprint(topicOffset+1), "-o", "json")), &later); err != nil {
		t.Fatal(err)
	}
	for _, r := range later {
		if r.Offset <= topicOffset {
			t.Fatalf("--from %d printed offset %d", topicOffset+1, r.Offset)
		}
	}
}
