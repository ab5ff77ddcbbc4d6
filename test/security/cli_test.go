package security_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/gregor-project/gregor/internal/cli"
	"github.com/gregor-project/gregor/internal/testutil"
)

// gregor runs the command-line tools in-process, as `gregor ARGS...` with stdin.
func gregor(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	root := &cobra.Command{Use: "gregor", SilenceUsage: true, SilenceErrors: true}
	cli.AddCommands(root)
	var out, errOut bytes.Buffer
	root.SetArgs(args)
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&out)
	root.SetErr(&errOut)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := root.ExecuteContext(ctx)
	if errOut.Len() > 0 {
		t.Logf("gregor %s: stderr:\n%s", strings.Join(args, " "), errOut.String())
	}
	return out.String(), err
}

// The tools take Kafka's client properties with --command-config and work against a
// SASL_SSL listener with SCRAM; without them, or with a wrong password, they fail.
func TestToolsWithCommandConfig(t *testing.T) {
	ca := testutil.NewCA(t)
	b := startSecure(t, []string{"SASL_SSL"}, sslSets(ca, "", "sasl.enabled.mechanisms=SCRAM-SHA-512")...)
	addr := addrOf(t, b, "SASL_SSL")
	adm := client(t, addrOf(t, b, "PLAINTEXT"))
	setScram(t, adm, "alice", "alice-secret")

	dir := t.TempDir()
	props := func(name, pass string) string {
		p := filepath.Join(dir, name)
		body := "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n" +
			`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="` + pass + "\";\n" +
			"ssl.truststore.type=PEM\nssl.truststore.location=" + ca.TrustPEM() + "\n"
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := props("client.properties", "alice-secret")
	run := func(stdin string, args ...string) string {
		t.Helper()
		out, err := gregor(t, stdin, append(args, "-b", addr, "--command-config", good)...)
		if err != nil {
			t.Fatalf("gregor %s: %v", strings.Join(args, " "), err)
		}
		return out
	}
	run("", "topic", "create", "secured", "--partitions", "2")
	if out := run("", "topic", "list"); !strings.Contains(out, "secured") {
		t.Fatalf("topic list: %q", out)
	}
	run("one\ntwo\nthree\n", "produce", "secured")
	out := run("", "consume", "secured", "--from-beginning", "--max-messages", "3", "--timeout-ms", "20000")
	for _, v := range []string{"one", "two", "three"} {
		if !strings.Contains(out, v) {
			t.Fatalf("consumed %q, missing %s", out, v)
		}
	}
	if _, err := gregor(t, "", "topic", "list", "-b", addr, "--command-config", props("bad.properties", "wrong")); err == nil {
		t.Fatal("the tools worked with a wrong password")
	}
	if _, err := gregor(t, "", "topic", "list", "-b", addr, "--command-config", filepath.Join(dir, "missing.properties")); err == nil {
		t.Fatal("a missing --command-config file was accepted")
	}
	unknown := filepath.Join(dir, "unknown.properties")
	if err := os.WriteFile(unknown, []byte("security.protocol=SSL\nssl.keymanager.algorithm=SunX509\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := gregor(t, "", "topic", "list", "-b", addr, "--command-config", unknown); err == nil || !strings.Contains(err.Error(), "ssl.keymanager.algorithm") {
		t.Fatalf("an unknown client property: %v", err)
	}
}

// writeProps writes a client properties file and returns its path.
func writeProps(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "client.properties")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The tools log in with OAUTHBEARER (Kafka's unsecured login options) and with GSSAPI (a
// keytab and principal), through the same code as the broker's own connections.
func TestToolsWithOAuthBearerAndGSSAPI(t *testing.T) {
	t.Run("OAUTHBEARER", func(t *testing.T) {
		b := startSecure(t, []string{"SASL_PLAINTEXT"}, "sasl.enabled.mechanisms=OAUTHBEARER",
			`listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredValidatorRequiredScope="kafka";`,
			standardAuthorizer, "super.users=User:ANONYMOUS")
		allowTopic(t, b, "User:alice", "oauth-tool")
		addr := addrOf(t, b, "SASL_PLAINTEXT")
		props := func(sub string) string {
			return writeProps(t, "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n"+
				`sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="`+sub+`" unsecuredLoginListClaim_scope=",kafka";`+"\n")
		}
		if _, err := gregor(t, "", "topic", "create", "oauth-tool", "-b", addr, "--command-config", props("alice")); err != nil {
			t.Fatalf("alice creates her topic: %v", err)
		}
		if _, err := gregor(t, "", "topic", "create", "oauth-tool-2", "-b", addr, "--command-config", props("bob")); err == nil {
			t.Fatal("bob, whom no ACL names, created a topic")
		}
	})
	t.Run("GSSAPI", func(t *testing.T) {
		kb := startKerberosBroker(t)
		props := writeProps(t, "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\nsasl.kerberos.service.name=kafka\n"+
			"sasl.jaas.config="+gssapiJAAS(filepath.Join(kb.kdc.dir, "client.keytab"), "client@"+testRealm)+"\n")
		if _, err := gregor(t, "", "topic", "create", "gssapi-tool", "-b", kb.addr, "--command-config", props); err != nil {
			t.Fatalf("client (a super user) creates a topic: %v", err)
		}
		out, err := gregor(t, "", "topic", "list", "-b", kb.addr, "--command-config", props)
		if err != nil || !strings.Contains(out, "gssapi-tool") {
			t.Fatalf("topic list: %q %v", out, err)
		}
		bad := writeProps(t, "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\nsasl.kerberos.service.name=kafka\n"+
			"sasl.jaas.config="+gssapiJAAS(filepath.Join(kb.kdc.dir, "intruder.keytab"), "intruder@"+testRealm)+"\n")
		if _, err := gregor(t, "", "topic", "list", "-b", kb.addr, "--command-config", bad); err == nil {
			t.Fatal("a principal the broker does not map logged in")
		}
	})
}
