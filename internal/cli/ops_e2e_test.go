package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/internal/testutil"
)

// The operator's tools against a real broker: configs describe/alter for topics, brokers
// (one and the cluster default), users (quotas and SCRAM) and clients; offsets get;
// records delete in both forms; log-dirs describe. Each checks the tool's output and what
// it did, read back with a separate admin client.
func TestOpsToolsE2E(t *testing.T) {
	tb := testutil.StartBroker(t)
	b := tb.Addr()
	run := func(args ...string) string { t.Helper(); return mustRunCLI(t, "", append(args, "-b", b)...) }
	cl, err := kgo.NewClient(kgo.SeedBrokers(b))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	const topic = "ops"
	run("topic", "create", topic, "--partitions", "2", "--replication-factor", "1")
	stdin := "k0:v0\nk1:v1\nk2:v2\nk3:v3\nk4:v4\n"
	mustRunCLI(t, stdin, "produce", topic, "--partition", "0", "--key-separator", ":", "-b", b)

	t.Run("configs topic", func(t *testing.T) {
		out := run("configs", "alter", "--topic", topic, "--add-config", "retention.ms=60000,cleanup.policy=[compact,delete]")
		if !strings.Contains(out, "Completed updating config for topic 'ops'") {
			t.Fatalf("alter: %q", out)
		}
		rcs, err := adm.DescribeTopicConfigs(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		rc, _ := rcs.On(topic, nil)
		got := map[string]string{}
		for _, c := range rc.Configs {
			got[c.Key] = c.MaybeValue()
		}
		if got["retention.ms"] != "60000" || got["cleanup.policy"] != "compact,delete" {
			t.Fatalf("DescribeConfigs after alter: retention.ms=%q cleanup.policy=%q", got["retention.ms"], got["cleanup.policy"])
		}
		var descs []ConfigsDescription
		if err := json.Unmarshal([]byte(run("configs", "describe", "--entity-type", "topics", "--entity-name", topic, "-o", "json")), &descs); err != nil {
			t.Fatal(err)
		}
		if len(descs) != 1 || len(descs[0].Configs) != 2 || descs[0].Configs[1].Name != "retention.ms" ||
			descs[0].Configs[1].Source != "DYNAMIC_TOPIC_CONFIG" || *descs[0].Configs[1].Value != "60000" {
			t.Fatalf("describe -o json: %+v", descs)
		}
		table := run("configs", "describe", "--topic", topic)
		if !strings.Contains(table, "Dynamic configs for topic ops are:") || !strings.Contains(table, "retention.ms=60000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=60000") {
			t.Fatalf("describe table:\n%s", table)
		}
		if all := run("configs", "describe", "--topic", topic, "--all"); !strings.Contains(all, "All configs for topic ops are:") || !strings.Contains(all, "segment.bytes=") || !strings.Contains(all, "DEFAULT_CONFIG:") {
			t.Fatalf("describe --all:\n%s", all)
		}
		run("configs", "alter", "--topic", topic, "--delete-config", "retention.ms")
		if out := run("configs", "describe", "--topic", topic); strings.Contains(out, "retention.ms") || !strings.Contains(out, "cleanup.policy") {
			t.Fatalf("after --delete-config:\n%s", out)
		}
		if _, err := runCLI(t, "", "configs", "alter", "--topic", topic, "--add-config", "retention.ms=notanumber", "-b", b); err == nil || !strings.Contains(err.Error(), "INVALID_CONFIG") {
			t.Fatalf("bad value: %v", err)
		}
	})

	t.Run("configs broker", func(t *testing.T) {
		run("configs", "alter", "--broker-defaults", "--add-config", "log.cleaner.threads=2")
		run("configs", "alter", "--entity-type", "brokers", "--entity-name", "1", "--add-config", "log.cleaner.backoff.ms=20000")
		rcs, err := adm.DescribeBrokerConfigs(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		rc, _ := rcs.On("1", nil)
		src := map[string]string{}
		for _, c := range rc.Configs {
			src[c.Key] = c.Source.String() + "=" + c.MaybeValue()
		}
		if src["log.cleaner.threads"] != "DYNAMIC_DEFAULT_BROKER_CONFIG=2" || src["log.cleaner.backoff.ms"] != "DYNAMIC_BROKER_CONFIG=20000" {
			t.Fatalf("broker 1 after alter: threads %q backoff %q", src["log.cleaner.threads"], src["log.cleaner.backoff.ms"])
		}
		if out := run("configs", "describe", "--broker", "1"); !strings.Contains(out, "Dynamic configs for broker 1 are:") ||
			!strings.Contains(out, "log.cleaner.backoff.ms=20000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.cleaner.backoff.ms=20000") ||
			strings.Contains(out, "log.cleaner.threads") {
			t.Fatalf("describe --broker 1:\n%s", out)
		}
		if out := run("configs", "describe", "--entity-type", "brokers", "--entity-default"); !strings.Contains(out, "Dynamic configs for default broker are:") || !strings.Contains(out, "log.cleaner.threads=2") {
			t.Fatalf("describe --entity-default:\n%s", out)
		}
		var descs []ConfigsDescription
		if err := json.Unmarshal([]byte(run("configs", "describe", "--broker", "1", "--all", "-o", "json")), &descs); err != nil {
			t.Fatal(err)
		}
		var sawStatic bool
		for _, c := range descs[0].Configs {
			sawStatic = sawStatic || c.Source == "STATIC_BROKER_CONFIG"
			if c.Sensitive && c.Value != nil {
				t.Fatalf("sensitive config %s has a value", c.Name)
			}
		}
		if !sawStatic {
			t.Fatalf("describe --all -o json shows no STATIC_BROKER_CONFIG: %+v", descs)
		}
		run("configs", "alter", "--broker-defaults", "--delete-config", "log.cleaner.threads")
		if out := run("configs", "describe", "--broker-defaults"); strings.Contains(out, "log.cleaner.threads") {
			t.Fatalf("after delete:\n%s", out)
		}
	})

	t.Run("configs users and clients", func(t *testing.T) {
		run("configs", "alter", "--user", "alice", "--add-config", "SCRAM-SHA-256=[iterations=8192,password=alice-secret],producer_byte_rate=1024")
		run("configs", "alter", "--entity-type", "clients", "--entity-name", "app", "--add-config", "consumer_byte_rate=2048")
		scrams, err := adm.DescribeUserSCRAMs(ctx, "alice")
		if err != nil {
			t.Fatal(err)
		}
		if s := scrams["alice"]; s.Err != nil || len(s.CredInfos) != 1 || s.CredInfos[0].Iterations != 8192 {
			t.Fatalf("SCRAM of alice: %+v", s)
		}
		out := run("configs", "describe", "--user", "alice")
		for _, want := range []string{"Quota configs for user-principal 'alice' are producer_byte_rate=1024", "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192"} {
			if !strings.Contains(out, want) {
				t.Fatalf("describe --user alice lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "alice-secret") {
			t.Fatalf("the password was printed:\n%s", out)
		}
		var descs []ConfigsDescription
		if err := json.Unmarshal([]byte(run("configs", "describe", "--entity-type", "clients", "-o", "json")), &descs); err != nil {
			t.Fatal(err)
		}
		if len(descs) != 1 || descs[0].EntityName != "app" || descs[0].Quotas["consumer_byte_rate"] != 2048 {
			t.Fatalf("describe clients: %+v", descs)
		}
		run("configs", "alter", "--client-defaults", "--add-config", "request_percentage=40")
		if out := run("configs", "describe", "--client-defaults"); !strings.Contains(out, "Quota configs for the default client-id are request_percentage=40") {
			t.Fatalf("describe --client-defaults:\n%s", out)
		}
		if out := mustRunCLI(t, "", "__complete", "configs", "describe", "-b", b, "--entity-type", "brokers", "--entity-name", ""); !strings.Contains(out, "1\n") {
			t.Fatalf("broker id completion:\n%s", out)
		}
		run("configs", "alter", "--user", "alice", "--delete-config", "SCRAM-SHA-256,producer_byte_rate")
		if out := run("configs", "describe", "--user", "alice"); strings.Contains(out, "SCRAM") || strings.Contains(out, "producer_byte_rate") {
			t.Fatalf("after delete:\n%s", out)
		}
	})

	t.Run("offsets get", func(t *testing.T) {
		if out := run("offsets", "get", "--topic", "op.", "--time", "latest"); out != "ops:0:5\nops:1:0\n" {
			t.Fatalf("latest: %q", out)
		}
		if out := run("offsets", "get", "--topic-partitions", "ops:0", "--time", "-2"); out != "ops:0:0\n" {
			t.Fatalf("earliest: %q", out)
		}
		var rows []OffsetRow
		if err := json.Unmarshal([]byte(run("offsets", "get", "--topic", "ops", "--partitions", "0", "--time", "max-timestamp", "-o", "json")), &rows); err != nil {
			t.Fatal(err)
		}
		if len(rows) != 1 || rows[0].Offset < 0 || rows[0].Offset > 4 || rows[0].Timestamp <= 0 {
			t.Fatalf("max-timestamp: %+v", rows)
		}
		if out := run("offsets", "get", "--topic", "ops", "--partitions", "0", "--time", "0"); out != "ops:0:0\n" {
			t.Fatalf("time 0: %q", out)
		}
	})

	t.Run("records delete", func(t *testing.T) {
		out := run("records", "delete", "--topic", topic, "--partition", "0", "--offset", "2")
		if !strings.Contains(out, "partition: ops-0\tlow_watermark: 2") {
			t.Fatalf("delete: %q", out)
		}
		file := filepath.Join(t.TempDir(), "offsets.json")
		if err := os.WriteFile(file, []byte(`{"version":1,"partitions":[{"topic":"ops","partition":0,"offset":3}]}`), 0o644); err != nil {
			t.Fatal(err)
		}
		var rows []DeletedRecords
		if err := json.Unmarshal([]byte(run("records", "delete", "--offset-json-file", file, "-o", "json")), &rows); err != nil {
			t.Fatal(err)
		}
		if len(rows) != 1 || rows[0].LowWatermark != 3 {
			t.Fatalf("delete -o json: %+v", rows)
		}
		starts, err := adm.ListStartOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		if o, _ := starts.Lookup(topic, 0); o.Offset != 3 {
			t.Fatalf("log start offset after delete: %d, want 3", o.Offset)
		}
		if _, err := runCLI(t, "", "records", "delete", "--topic", topic, "--partition", "0", "--offset", "99", "-b", b); err == nil {
			t.Fatal("deleting past the high watermark succeeded")
		}
	})

	t.Run("completion", func(t *testing.T) {
		// What the shell's completion script asks: topic names for a topic argument or
		// --topic flag, from the cluster the command line names.
		for _, args := range [][]string{
			{"__complete", "topic", "describe", "-b", b, "o"},
			{"__complete", "configs", "describe", "-b", b, "--topic", ""},
			{"__complete", "offsets", "get", "-b", b, "--topic", "op"},
		} {
			out := mustRunCLI(t, "", args...)
			if !strings.Contains(out, "ops\n") {
				t.Fatalf("gregor %s:\n%s", strings.Join(args, " "), out)
			}
		}
		offs := kadm.Offsets{}
		offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: 1, LeaderEpoch: -1})
		if err := adm.CommitAllOffsets(ctx, "g1", offs); err != nil {
			t.Fatal(err)
		}
		if out := mustRunCLI(t, "", "__complete", "group", "describe", "-b", b, ""); !strings.Contains(out, "g1\n") {
			t.Fatalf("group completion:\n%s", out)
		}
	})

	t.Run("produce -o json", func(t *testing.T) {
		var res ProduceResult
		if err := json.Unmarshal([]byte(mustRunCLI(t, "x\ny\n", "produce", topic, "--partition", "0", "-o", "json", "-b", b)), &res); err != nil {
			t.Fatal(err)
		}
		if res.Records != 2 || res.Acknowledged != 2 || res.Failed != 0 || res.Topic != topic {
			t.Fatalf("produce -o json: %+v", res)
		}
	})

	t.Run("topic add-partitions", func(t *testing.T) {
		run("topic", "create", "grow", "--partitions", "1", "--replication-factor", "1")
		if out := run("topic", "add-partitions", "grow", "--partitions", "3"); !strings.Contains(out, "Topic grow now has 3 partitions.") {
			t.Fatalf("add-partitions: %q", out)
		}
		md, err := adm.Metadata(ctx, "grow")
		if err != nil {
			t.Fatal(err)
		}
		if n := len(md.Topics["grow"].Partitions); n != 3 {
			t.Fatalf("grow has %d partitions, want 3", n)
		}
		if _, err := runCLI(t, "", "topic", "add-partitions", "grow", "--partitions", "2", "-b", b); err == nil || !strings.Contains(err.Error(), "INVALID_PARTITIONS") {
			t.Fatalf("shrinking: %v", err)
		}
	})

	t.Run("log-dirs describe", func(t *testing.T) {
		var rep LogDirsReport
		if err := json.Unmarshal([]byte(run("log-dirs", "describe", "--topic-list", topic, "-o", "json")), &rep); err != nil {
			t.Fatal(err)
		}
		if len(rep.Brokers) != 1 || rep.Brokers[0].Broker != 1 || len(rep.Brokers[0].LogDirs) != 1 {
			t.Fatalf("log-dirs: %+v", rep)
		}
		d := rep.Brokers[0].LogDirs[0]
		if d.Error != nil || len(d.Partitions) != 2 || d.Partitions[0].Partition != "ops-0" || d.Partitions[0].Size <= 0 || d.Partitions[1].Size != 0 {
			t.Fatalf("log dir: %+v", d)
		}
		if same, err := filepath.EvalSymlinks(d.LogDir); err != nil || !strings.HasPrefix(same, mustEval(t, tb.Dir)) {
			t.Fatalf("log dir %q is not the broker's %q", d.LogDir, tb.Dir)
		}
		table := run("log-dirs", "describe", "--broker-list", "1")
		if !strings.Contains(table, "Broker 1  "+d.LogDir+"  status=ok") || !strings.Contains(table, "ops-0") {
			t.Fatalf("table:\n%s", table)
		}
	})
}

func mustEval(t *testing.T, p string) string {
	t.Helper()
	s, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
