package security_test

import (
	"crypto/tls"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/internal/testutil"
)

const standardAuthorizer = "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer"

// allowTopic gives principal every operation on topic, through the operator's PLAINTEXT
// connection (a super user there as User:ANONYMOUS).
func allowTopic(t *testing.T, b *testutil.Broker, principal, topic string) {
	t.Helper()
	adm := kadm.NewClient(client(t, addrOf(t, b, "PLAINTEXT")))
	res, err := adm.CreateACLs(ctxT(t), kadm.NewACLs().Allow(principal).Topics(topic).Operations(kadm.OpAll).ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("create ACL: %v", r.Err)
		}
	}
}

// produceOne writes one record to topic (creating it through cl's own principal first).
func produceOne(t *testing.T, cl *kgo.Client, topic string) error {
	t.Helper()
	if _, err := kadm.NewClient(cl).CreateTopic(ctxT(t), 1, 1, nil, topic); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return err
	}
	return cl.ProduceSync(ctxT(t), &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr()
}

func certOf(c *testutil.Cert) tls.Certificate {
	return tls.Certificate{Certificate: [][]byte{c.Cert.Raw}, PrivateKey: c.Key}
}

// An SSL client's principal is its certificate's subject, mapped by
// ssl.principal.mapping.rules, and the ACLs are checked against it.
func TestSSLPrincipalMappingWithACLs(t *testing.T) {
	ca := testutil.NewCA(t)
	b := startSecure(t, []string{"SSL"}, sslSets(ca, "", standardAuthorizer, "super.users=User:ANONYMOUS",
		"listener.name.ssl.ssl.client.auth=required", "ssl.truststore.type=PEM", "ssl.truststore.location="+ca.TrustPEM(),
		`ssl.principal.mapping.rules=RULE:^CN=([a-z]+),O=Gregor$/$1/L,DEFAULT`)...)
	addr := addrOf(t, b, "SSL")
	allowTopic(t, b, "User:alice", "alice-topic")
	allowTopic(t, b, "User:CN=carol,OU=ops,O=Gregor", "carol-topic")

	alice := client(t, addr, kgoTLS(tlsTo(ca, certOf(ca.Issue("alice")))))
	if err := produceOne(t, alice, "alice-topic"); err != nil {
		t.Fatalf("alice (mapped to User:alice) on her topic: %v", err)
	}
	bob := client(t, addr, kgoTLS(tlsTo(ca, certOf(ca.Issue("bob")))))
	if err := produceOne(t, bob, "alice-topic"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("bob on alice's topic: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	// No rule matches carol's subject (it has an OU): DEFAULT keeps the whole name.
	carol := client(t, addr, kgoTLS(tlsTo(ca, certOf(ca.Issue("carol", "ops")))))
	if err := produceOne(t, carol, "carol-topic"); err != nil {
		t.Fatalf("carol (User:CN=carol,OU=ops,O=Gregor) on her topic: %v", err)
	}
	if err := produceOne(t, alice, "carol-topic"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice on carol's topic: %v", err)
	}
}

// A SASL client's principal is User:<name>, and the ACLs are checked against it.
func TestSASLPrincipalWithACLs(t *testing.T) {
	b, addr := saslPlaintext(t, standardAuthorizer, "super.users=User:ANONYMOUS")
	allowTopic(t, b, "User:alice", "alice-only")
	if err := produceOne(t, client(t, addr, plainAuth("alice", "alice-secret")), "alice-only"); err != nil {
		t.Fatalf("alice: %v", err)
	}
	if err := produceOne(t, client(t, addr, plainAuth("admin", "admin-secret")), "alice-only"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("admin (not a super user on SASL) on alice's topic: %v", err)
	}
}

// ssl.client.auth=requested: a client without a certificate is served as ANONYMOUS, one with
// a certificate from the trust store as its subject, one with an unknown CA's is refused.
func TestSSLClientAuthRequested(t *testing.T) {
	ca := testutil.NewCA(t)
	b := startSecure(t, []string{"SSL"}, sslSets(ca, "", standardAuthorizer, "super.users=User:ANONYMOUS",
		"ssl.client.auth=requested", "ssl.truststore.type=PEM", "ssl.truststore.location="+ca.TrustPEM(),
		`ssl.principal.mapping.rules=RULE:^CN=([a-z]+),O=Gregor$/$1/,DEFAULT`)...)
	addr := addrOf(t, b, "SSL")
	allowTopic(t, b, "User:alice", "t")
	// Without a certificate: ANONYMOUS, a super user here.
	if err := produceOne(t, client(t, addr, kgoTLS(tlsTo(ca))), "anon"); err != nil {
		t.Fatalf("no certificate: %v", err)
	}
	if err := produceOne(t, client(t, addr, kgoTLS(tlsTo(ca, certOf(ca.Issue("alice"))))), "t"); err != nil {
		t.Fatalf("alice: %v", err)
	}
	if err := produceOne(t, client(t, addr, kgoTLS(tlsTo(ca, certOf(ca.Issue("alice"))))), "anon"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice is not ANONYMOUS: %v", err)
	}
	stranger := certOf(testutil.NewCA(t).Issue("alice"))
	if err := client(t, addr, kgoTLS(tlsTo(ca, stranger))).Ping(ctxT(t)); err == nil {
		t.Fatal("a certificate from an unknown CA was accepted")
	}
}

// ssl.enabled.protocols=TLSv1.3: a client that stops at TLS 1.2 cannot connect.
func TestSSLEnabledProtocols(t *testing.T) {
	ca := testutil.NewCA(t)
	b := startSecure(t, []string{"SSL"}, sslSets(ca, "", "ssl.enabled.protocols=TLSv1.3")...)
	cfg := tlsTo(ca)
	cfg.MaxVersion = tls.VersionTLS12
	if _, err := tls.Dial("tcp", addrOf(t, b, "SSL"), cfg); err == nil {
		t.Fatal("a TLS 1.2 handshake succeeded with ssl.enabled.protocols=TLSv1.3")
	}
	cfg.MaxVersion = tls.VersionTLS13
	c, err := tls.Dial("tcp", addrOf(t, b, "SSL"), cfg)
	if err != nil {
		t.Fatalf("TLS 1.3: %v", err)
	}
	c.Close()
}

// A key store rewritten in place (certificate rotation) serves new connections without a
// restart; a store rewritten with garbage leaves the previous certificate serving.
func TestSSLKeyStoreReload(t *testing.T) {
	oldCA, newCA := testutil.NewCA(t), testutil.NewCA(t)
	path := oldCA.KeyPEM("broker", oldCA.Issue("broker"))
	b := startSecure(t, []string{"SSL"}, "ssl.keystore.type=PEM", "ssl.keystore.location="+path)
	addr := addrOf(t, b, "SSL")
	handshake := func(ca *testutil.CA) error {
		c, err := tls.Dial("tcp", addr, tlsTo(ca))
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := handshake(oldCA); err != nil {
		t.Fatalf("before rotation: %v", err)
	}
	garbage := []byte("-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n")
	if err := os.WriteFile(path, garbage, 0o600); err != nil {
		t.Fatal(err)
	}
	// The listener looks at its files at most once a second, before a handshake: over 2.5 s of
	// handshakes it has looked at the broken file at least twice, and kept serving.
	for end := time.Now().Add(2500 * time.Millisecond); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if err := handshake(oldCA); err != nil {
			t.Fatalf("a broken store replaced the serving certificate: %v", err)
		}
	}
	c := newCA.Issue("broker")
	if err := os.WriteFile(path, []byte(c.KeyPEM+c.CertPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the rotated certificate to be served", func() bool { return handshake(newCA) == nil })
	if err := handshake(oldCA); err == nil {
		t.Fatal("the old certificate is still served after rotation")
	}
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
