package security_test

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/gregor-project/gregor/internal/testutil"
)

func scram512(user, pass string) kgo.Opt {
	return kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism())
}

// SCRAM-SHA-512 over SASL_SSL against credentials set with AlterUserScramCredentials (kept
// salted in the metadata log): a new credential works at once, a wrong password or a deleted
// credential is refused, and credentials survive a restart.
func TestSCRAMOverSSL(t *testing.T) {
	ca := testutil.NewCA(t)
	sets := sslSets(ca, "", "sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512")
	b := startSecure(t, []string{"SASL_SSL"}, sets...)
	addr := addrOf(t, b, "SASL_SSL")
	tlsOpt := kgoTLS(tlsTo(ca))

	if err := client(t, addr, tlsOpt, scram512("alice", "alice-secret")).Ping(ctxT(t)); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("before the credential exists: %v", err)
	}
	adm := kadm.NewClient(client(t, addrOf(t, b, "PLAINTEXT")))
	res, err := adm.AlterUserSCRAMs(ctxT(t), nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "alice-secret"},
		{User: "bob", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "bob-secret"},
	})
	if err != nil || res.Error() != nil {
		t.Fatalf("alter SCRAM credentials: %v %v", err, res.Error())
	}
	produceConsume(t, client(t, addr, tlsOpt, scram512("alice", "alice-secret")), "scram-topic")
	bob := client(t, addr, tlsOpt, kgo.SASL(scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha256Mechanism()))
	if err := bob.Ping(ctxT(t)); err != nil {
		t.Fatalf("bob with SCRAM-SHA-256: %v", err)
	}
	if err := client(t, addr, tlsOpt, scram512("alice", "wrong")).Ping(ctxT(t)); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("wrong password: %v", err)
	}
	// bob has no SHA-512 credential.
	if err := client(t, addr, tlsOpt, scram512("bob", "bob-secret")).Ping(ctxT(t)); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("a mechanism the user has no credential for: %v", err)
	}

	b = b.Restart()
	addr = addrOf(t, b, "SASL_SSL")
	if err := client(t, addr, tlsOpt, scram512("alice", "alice-secret")).Ping(ctxT(t)); err != nil {
		t.Fatalf("after a restart: %v", err)
	}
	adm = kadm.NewClient(client(t, addrOf(t, b, "PLAINTEXT")))
	if res, err := adm.AlterUserSCRAMs(ctxT(t), []kadm.DeleteSCRAM{{User: "alice", Mechanism: kadm.ScramSha512}}, nil); err != nil || res.Error() != nil {
		t.Fatalf("delete: %v %v", err, res.Error())
	}
	if err := client(t, addr, tlsOpt, scram512("alice", "alice-secret")).Ping(ctxT(t)); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("after the credential was deleted: %v", err)
	}
}

// setScram gives user a SCRAM-SHA-512 credential through AlterUserScramCredentials.
func setScram(t *testing.T, cl *kgo.Client, user, pass string) {
	t.Helper()
	res, err := kadm.NewClient(cl).AlterUserSCRAMs(ctxT(t), nil, []kadm.UpsertSCRAM{{User: user, Mechanism: kadm.ScramSha512, Iterations: 8192, Password: pass}})
	if err != nil || res.Error() != nil {
		t.Fatalf("alter SCRAM credentials: %v %v", err, res.Error())
	}
}
