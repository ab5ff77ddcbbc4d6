package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gregor-project/gregor/internal/testutil"
)

func TestParseScramConfigs(t *testing.T) {
	cs, err := parseScramConfigs("SCRAM-SHA-256=[iterations=8192,password=a,b=c],SCRAM-SHA-512=[password=x]")
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 || cs[0].iterations != 8192 || cs[0].password != "a,b=c" || cs[1].iterations != scramDefaultIterations || cs[1].password != "x" {
		t.Fatalf("parsed %+v", cs)
	}
	for _, bad := range []string{"", "SCRAM-SHA-1=[password=x]", "SCRAM-SHA-256=[iterations=8192]", "SCRAM-SHA-256=[password=x", "SCRAM-SHA-256=password", "SCRAM-SHA-256=[salt=x,password=y]", "SCRAM-SHA-256=[iterations=many,password=y]"} {
		if _, err := parseScramConfigs(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestACLAndUserCommands(t *testing.T) {
	b := testutil.StartBroker(t,
		"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users=User:ANONYMOUS")
	addr := b.Addr()

	out := mustRunCLI(t, "", "acl", "add", "-b", addr, "--allow-principal", "User:alice", "--operation", "Read", "--operation", "Describe", "--topic", "orders")
	if !strings.Contains(out, "User:alice") || !strings.Contains(out, "READ") || !strings.Contains(out, "DESCRIBE") {
		t.Fatalf("add printed:\n%s", out)
	}
	mustRunCLI(t, "", "acl", "add", "-b", addr, "--deny-principal", "User:bob", "--deny-host", "10.0.0.9", "--topic", "ord", "--resource-pattern-type", "prefixed")
	mustRunCLI(t, "", "acl", "add", "-b", addr, "--allow-principal", "User:alice", "--group", "g1", "--operation", "Read")
	mustRunCLI(t, "", "acl", "add", "-b", addr, "--allow-principal", "User:admin", "--cluster", "--operation", "Alter")
	if _, err := runCLI(t, "", "acl", "add", "-b", addr, "--allow-principal", "User:alice", "--topic", "x", "--resource-pattern-type", "match"); err == nil {
		t.Error("adding a MATCH ACL succeeded")
	}

	var rows []aclRow
	list := func(args ...string) []aclRow {
		t.Helper()
		rows = nil
		out := mustRunCLI(t, "", append([]string{"acl", "list", "-b", addr, "-o", "json"}, args...)...)
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			t.Fatalf("list output %q: %v", out, err)
		}
		return rows
	}
	if all := list(); len(all) != 5 {
		t.Fatalf("all ACLs: %+v", all)
	}
	if m := list("--topic", "orders-eu", "--resource-pattern-type", "match"); len(m) != 1 || m[0].Principal != "User:bob" || m[0].Permission != "DENY" || m[0].Host != "10.0.0.9" || m[0].Operation != "ALL" {
		t.Fatalf("match orders-eu: %+v", m)
	}
	if m := list("--topic", "orders", "--resource-pattern-type", "match"); len(m) != 3 {
		t.Fatalf("match orders: %+v", m)
	}
	if m := list("--principal", "User:alice"); len(m) != 3 {
		t.Fatalf("alice's: %+v", m)
	}
	if table := mustRunCLI(t, "", "acl", "list", "-b", addr, "--cluster"); !strings.Contains(table, "kafka-cluster") || !strings.Contains(table, "User:admin") {
		t.Fatalf("cluster ACLs:\n%s", table)
	}

	if _, err := runCLI(t, "", "acl", "remove", "-b", addr); err == nil {
		t.Error("remove without a resource or --all succeeded")
	}
	out = mustRunCLI(t, "", "acl", "remove", "-b", addr, "--topic", "orders", "--operation", "Describe")
	if !strings.Contains(out, "DESCRIBE") || strings.Contains(out, "READ") {
		t.Fatalf("remove printed:\n%s", out)
	}
	mustRunCLI(t, "", "acl", "remove", "-b", addr, "--all", "--principal", "User:alice")
	if left := list(); len(left) != 2 {
		t.Fatalf("left: %+v", left)
	}

	// SCRAM credentials.
	mustRunCLI(t, "", "user", "scram", "set", "alice", "-b", addr, "--add-config", "SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]")
	mustRunCLI(t, "", "user", "scram", "set", "bob", "-b", addr, "--add-config", "SCRAM-SHA-512=[iterations=10000,password=bob-secret]")
	var creds []scramRow
	out = mustRunCLI(t, "", "user", "scram", "list", "-b", addr, "-o", "json")
	if err := json.Unmarshal([]byte(out), &creds); err != nil {
		t.Fatal(err)
	}
	want := []scramRow{{"alice", "SCRAM-SHA-256", 8192}, {"alice", "SCRAM-SHA-512", 4096}, {"bob", "SCRAM-SHA-512", 10000}}
	if len(creds) != len(want) {
		t.Fatalf("credentials %+v", creds)
	}
	for i := range want {
		if creds[i] != want[i] {
			t.Fatalf("credentials %+v, want %+v", creds, want)
		}
	}
	if _, err := runCLI(t, "", "user", "scram", "set", "carol", "-b", addr, "--add-config", "SCRAM-SHA-256=[iterations=100,password=x]"); err == nil || !strings.Contains(err.Error(), "UNACCEPTABLE_CREDENTIAL") {
		t.Errorf("too few iterations: %v", err)
	}
	mustRunCLI(t, "", "user", "scram", "delete", "alice", "-b", addr, "--delete-config", "SCRAM-SHA-256,SCRAM-SHA-512")
	if _, err := runCLI(t, "", "user", "scram", "list", "alice", "-b", addr); err == nil || !strings.Contains(err.Error(), "RESOURCE_NOT_FOUND") {
		t.Errorf("list a deleted user: %v", err)
	}
	if _, err := runCLI(t, "", "user", "scram", "delete", "alice", "-b", addr, "--delete-config", "SCRAM-SHA-256"); err == nil || !strings.Contains(err.Error(), "RESOURCE_NOT_FOUND") {
		t.Errorf("delete again: %v", err)
	}
}
