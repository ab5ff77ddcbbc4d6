package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gregor-project/gregor/internal/testutil"
)

// `gregor quota` against an in-process broker: set, describe (filters, JSON), remove, and
// the broker's refusals passed on with Kafka's messages.
func TestQuotaE2E(t *testing.T) {
	b := testutil.StartBroker(t).Addr()
	run := func(args ...string) string { return mustRunCLI(t, "", append(args, "-b", b)...) }

	out := run("quota", "set", "--client", "app", "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152")
	if !strings.Contains(out, "Completed updating quotas of {client-id=app}") {
		t.Fatalf("set: %q", out)
	}
	run("quota", "set", "--user", "alice", "--client-defaults", "--add-config", "request_percentage=50")
	run("quota", "set", "--user-defaults", "--add-config", "producer_byte_rate=1024")

	table := run("quota", "describe")
	for _, want := range []string{
		"{client-id=app}", "consumer_byte_rate", "2097152",
		"{user=alice, client-id=<default>}", "request_percentage", "50",
		"{user=<default>}",
	} {
		if !strings.Contains(table, want) {
			t.Fatalf("describe lacks %q:\n%s", want, table)
		}
	}
	var entries []QuotaEntry
	if err := json.Unmarshal([]byte(run("quota", "describe", "--user", "alice", "-o", "json")), &entries); err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Entity != "{user=alice, client-id=<default>}" || entries[0].Values["request_percentage"] != 50 {
		t.Fatalf("describe --user alice: %+v", entries)
	}
	if out := run("quota", "describe", "--user", "alice", "--strict"); strings.Contains(out, "alice") {
		t.Fatalf("describe --user alice --strict matched a user+client entity:\n%s", out)
	}

	run("quota", "remove", "--client", "app", "--delete-config", "producer_byte_rate")
	if out := run("quota", "describe", "--client", "app", "--strict"); strings.Contains(out, "producer_byte_rate") || !strings.Contains(out, "consumer_byte_rate") {
		t.Fatalf("after remove:\n%s", out)
	}

	_, err := runCLI(t, "", "quota", "set", "--client", "app", "--add-config", "producer_byte_rate=1.5", "-b", b)
	if err == nil || !strings.Contains(err.Error(), "INVALID_REQUEST: producer_byte_rate cannot be a fractional value.") {
		t.Fatalf("fractional byte rate: %v", err)
	}
	_, err = runCLI(t, "", "quota", "set", "--ip", "10.0.0.1", "--user", "bob", "--add-config", "connection_creation_rate=5", "-b", b)
	if err == nil || !strings.Contains(err.Error(), "INVALID_REQUEST") {
		t.Fatalf("ip with user: %v", err)
	}
	if _, err := runCLI(t, "", "quota", "set", "--client", "x", "--client-defaults", "--add-config", "producer_byte_rate=1", "-b", b); err == nil {
		t.Fatal("a name and the default of one type were taken")
	}
}
