package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gregor-project/gregor/internal/testutil"
)

// `gregor configs alter|describe --entity-type groups` (and --group) set, show and delete
// a group's configs, and report the broker's refusal of a bad one.
func TestConfigsGroupsE2E(t *testing.T) {
	broker := testutil.StartBroker(t).Addr()
	mustRunCLI(t, "", "configs", "alter", "-b", broker, "--entity-type", "groups", "--entity-name", "workers",
		"--add-config", "share.auto.offset.reset=earliest,share.record.lock.duration.ms=20000")

	out := mustRunCLI(t, "", "configs", "describe", "-b", broker, "--group", "workers")
	for _, want := range []string{
		"Dynamic configs for group workers are:",
		"share.auto.offset.reset=earliest sensitive=false synonyms={GROUP_CONFIG:share.auto.offset.reset=earliest}",
		"share.record.lock.duration.ms=20000",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("describe output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "share.session.timeout.ms") {
		t.Errorf("describe without --all shows a key the group does not override:\n%s", out)
	}

	var descs []ConfigsDescription
	js := mustRunCLI(t, "", "configs", "describe", "-b", broker, "--entity-type", "groups", "--entity-name", "workers", "--all", "-o", "json")
	if err := json.Unmarshal([]byte(js), &descs); err != nil || len(descs) != 1 {
		t.Fatalf("json: %v %s", err, js)
	}
	sources := map[string]string{}
	for _, c := range descs[0].Configs {
		sources[c.Name] = c.Source
	}
	if sources["share.auto.offset.reset"] != "GROUP_CONFIG" || sources["share.session.timeout.ms"] != "DEFAULT_CONFIG" || len(sources) != 7 {
		t.Errorf("--all sources: %v", sources)
	}

	if _, err := runCLI(t, "", "configs", "alter", "-b", broker, "--group", "workers", "--add-config", "share.auto.offset.reset=sometime"); err == nil ||
		!strings.Contains(err.Error(), "INVALID_CONFIG") {
		t.Errorf("a bad share.auto.offset.reset: %v, want INVALID_CONFIG", err)
	}
	mustRunCLI(t, "", "configs", "alter", "-b", broker, "--group", "workers", "--delete-config", "share.auto.offset.reset")
	out = mustRunCLI(t, "", "configs", "describe", "-b", broker, "--group", "workers")
	if strings.Contains(out, "share.auto.offset.reset") || !strings.Contains(out, "share.record.lock.duration.ms=20000") {
		t.Errorf("after delete:\n%s", out)
	}
	if _, err := runCLI(t, "", "configs", "alter", "-b", broker, "--entity-type", "groups", "--entity-default", "--add-config", "share.auto.offset.reset=earliest"); err == nil {
		t.Error("groups --entity-default accepted")
	}
}
