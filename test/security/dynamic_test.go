package security_test

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
)

// Dynamic update of a listener's key store (KIP-226), over the wire as kafka-configs does
// it: --entity-type brokers --entity-name 1 --alter --add-config
// listener.name.ssl.ssl.keystore.location=...

const dynKeystore = "listener.name.ssl.ssl.keystore.location"

// handshakeWith dials addr with TLS trusting only ca; nil when the broker's certificate
// chains to it.
func handshakeWith(addr string, ca *testutil.CA) error {
	c, err := tls.Dial("tcp", addr, tlsTo(ca))
	if err == nil {
		c.Close()
	}
	return err
}

// alterBroker1 sets (value non-nil) or deletes key on broker 1 with IncrementalAlterConfigs
// (validateOnly: validate_only) and returns the resource's error.
func alterBroker1(t *testing.T, adm *kadm.Client, key string, value *string, validateOnly bool) error {
	t.Helper()
	op := kadm.SetConfig
	if value == nil {
		op = kadm.DeleteConfig
	}
	alter := adm.AlterBrokerConfigs
	if validateOnly {
		alter = adm.ValidateAlterBrokerConfigs
	}
	res, err := alter(ctxT(t), []kadm.AlterConfig{{Op: op, Name: key, Value: value}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 {
		t.Fatalf("%d resources answered", len(res))
	}
	if res[0].Err != nil {
		return errors.Join(res[0].Err, errors.New(res[0].ErrMessage))
	}
	return nil
}

// describedKeystore is broker 1's described keystore location of the SSL listener: its
// value and source.
func describedKeystore(t *testing.T, adm *kadm.Client) (string, kmsg.ConfigSource) {
	t.Helper()
	rcs, err := adm.DescribeBrokerConfigs(ctxT(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("1", nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe broker 1: %v %v", err, rc.Err)
	}
	for _, c := range rc.Configs {
		if c.Key == dynKeystore {
			return c.MaybeValue(), c.Source
		}
	}
	t.Fatalf("%s not described", dynKeystore)
	return "", 0
}

func wantInvalidConfig(t *testing.T, err error, what, says string) {
	t.Helper()
	if !errors.Is(err, kerr.InvalidConfig) || !strings.Contains(err.Error(), says) {
		t.Fatalf("%s: %v, want INVALID_CONFIG saying %q", what, err, says)
	}
}

// A listener's key store is replaced through IncrementalAlterConfigs on the broker's own
// resource: validate_only changes nothing, a certificate with another subject is refused and
// changes nothing, the new store (same subject and SANs, a new key from another CA) serves
// new connections while open ones keep working, DescribeConfigs shows it as
// DYNAMIC_BROKER_CONFIG, its file is the one watched for rotation, it survives a restart
// (it is in the metadata log), and deleting it returns to the static store.
func TestSSLKeyStoreDynamicUpdate(t *testing.T) {
	oldCA, newCA := testutil.NewCA(t), testutil.NewCA(t)
	staticPath := oldCA.KeyPEM("broker", oldCA.Issue("broker"))
	b := startSecure(t, []string{"SSL"}, "listener.name.ssl.ssl.keystore.type=PEM", dynKeystore+"="+staticPath)
	adm := kadm.NewClient(client(t, addrOf(t, b, "PLAINTEXT")))
	addr := addrOf(t, b, "SSL")
	if err := handshakeWith(addr, oldCA); err != nil {
		t.Fatalf("before the update: %v", err)
	}
	kept := dialRaw(t, addr, tlsTo(oldCA)) // a connection open across the update keeps serving

	newPath := newCA.KeyPEM("broker-rotated", newCA.Issue("broker"))
	if err := alterBroker1(t, adm, dynKeystore, &newPath, true); err != nil {
		t.Fatalf("validate_only: %v", err)
	}
	if v, src := describedKeystore(t, adm); v != staticPath || src != kmsg.ConfigSourceStaticBrokerConfig {
		t.Fatalf("after validate_only the store is %s (source %v)", v, src)
	}
	if err := handshakeWith(addr, oldCA); err != nil {
		t.Fatalf("validate_only changed the served certificate: %v", err)
	}

	otherDN := newCA.KeyPEM("broker-other", newCA.Issue("other-broker"))
	wantInvalidConfig(t, alterBroker1(t, adm, dynKeystore, &otherDN, false), "a store with another subject", "DistinguishedName does not match")
	wantInvalidConfig(t, alterBroker1(t, adm, dynKeystore, &otherDN, true), "validate_only of a store with another subject", "DistinguishedName does not match")
	missing := newPath + ".missing"
	wantInvalidConfig(t, alterBroker1(t, adm, dynKeystore, &missing, false), "a store that does not load", "no such file")
	if v, src := describedKeystore(t, adm); v != staticPath || src != kmsg.ConfigSourceStaticBrokerConfig {
		t.Fatalf("a refused store changed the config: %s (source %v)", v, src)
	}

	if err := alterBroker1(t, adm, dynKeystore, &newPath, false); err != nil {
		t.Fatalf("update: %v", err)
	}
	waitFor(t, 10*time.Second, "the new key store to be served", func() bool { return handshakeWith(addr, newCA) == nil })
	if err := handshakeWith(addr, oldCA); err == nil {
		t.Fatal("the old certificate is still served after the update")
	}
	if r := kept.request(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse); r.ErrorCode != 0 {
		t.Fatalf("the connection opened before the update: ApiVersions error %d", r.ErrorCode)
	}
	if v, src := describedKeystore(t, adm); v != newPath || src != kmsg.ConfigSourceDynamicBrokerConfig {
		t.Fatalf("described as %s (source %v), want %s DYNAMIC_BROKER_CONFIG", v, src, newPath)
	}
	// The file watched is now the new store: rewritten in place, it is reloaded.
	again := newCA.Issue("broker")
	if err := os.WriteFile(newPath, []byte(again.KeyPEM+again.CertPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the rewritten dynamic store to be reloaded", func() bool {
		c, err := tls.Dial("tcp", addr, tlsTo(newCA))
		if err != nil {
			return false
		}
		defer c.Close()
		return bytes.Equal(c.ConnectionState().PeerCertificates[0].Raw, again.Cert.Raw)
	})

	b = b.Restart()
	adm = kadm.NewClient(client(t, addrOf(t, b, "PLAINTEXT")))
	addr = addrOf(t, b, "SSL")
	// The broker replays its metadata log, dynamic configs included, before it serves a
	// connection: the first one already gets the dynamic store.
	if err := handshakeWith(addr, newCA); err != nil {
		t.Fatalf("after a restart: %v", err)
	}
	if err := handshakeWith(addr, oldCA); err == nil {
		t.Fatal("after a restart the static certificate is served, not the dynamic one")
	}

	if err := alterBroker1(t, adm, dynKeystore, nil, false); err != nil {
		t.Fatalf("delete: %v", err)
	}
	waitFor(t, 10*time.Second, "the static key store to be served again", func() bool { return handshakeWith(addr, oldCA) == nil })
	if v, src := describedKeystore(t, adm); v != staticPath || src != kmsg.ConfigSourceStaticBrokerConfig {
		t.Fatalf("after delete: %s (source %v)", v, src)
	}
}

// What cannot change at runtime is refused with INVALID_CONFIG, saying why: a listener key
// that is not a store's, a store key without its listener prefix (a password too), and a
// store key on the cluster-wide default resource. The legacy AlterConfigs checks the new store as
// IncrementalAlterConfigs does.
func TestSSLDynamicRefusals(t *testing.T) {
	ca := testutil.NewCA(t)
	b := startSecure(t, []string{"SSL"}, sslSets(ca, "ssl")...)
	adm := kadm.NewClient(client(t, addrOf(t, b, "PLAINTEXT")))
	str := func(s string) *string { return &s }
	for _, tc := range []struct{ key, value, says string }{
		{"listener.name.ssl.ssl.client.auth", "required", "cannot be updated dynamically"},
		{"listener.name.ssl.ssl.enabled.protocols", "TLSv1.3", "cannot be updated dynamically"},
		{"ssl.keystore.location", "/x.p12", "only per listener"},
		{"ssl.keystore.password", "secret", "only per listener"},
		// As Kafka: a PEM store has no store password.
		{"listener.name.ssl.ssl.keystore.password", "secret", "cannot be specified with PEM format"},
		{"listener.name.controller.ssl.keystore.location", ca.KeyPEM("c", ca.Issue("broker")), "not a broker listener"},
	} {
		wantInvalidConfig(t, alterBroker1(t, adm, tc.key, str(tc.value), false), tc.key, tc.says)
	}
	res, err := adm.AlterBrokerConfigs(ctxT(t), []kadm.AlterConfig{{Name: dynKeystore, Value: str(ca.KeyPEM("d", ca.Issue("broker")))}})
	if err != nil {
		t.Fatal(err)
	}
	wantInvalidConfig(t, errors.Join(res[0].Err, errors.New(res[0].ErrMessage)), "the cluster-wide default", "broker id must be specified")

	other := ca.KeyPEM("other", ca.Issue("someone-else"))
	res, err = adm.AlterBrokerConfigsState(ctxT(t), []kadm.AlterConfig{{Name: "listener.name.ssl.ssl.keystore.type", Value: str("PEM")}, {Name: dynKeystore, Value: &other}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	wantInvalidConfig(t, errors.Join(res[0].Err, errors.New(res[0].ErrMessage)), "AlterConfigs with another subject", "DistinguishedName does not match")
	res, err = adm.AlterBrokerConfigsState(ctxT(t), []kadm.AlterConfig{{Name: "ssl.allow.dn.changes", Value: str("true")}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	wantInvalidConfig(t, errors.Join(res[0].Err, errors.New(res[0].ErrMessage)), "ssl.allow.dn.changes at runtime", "cannot be updated dynamically")
}

// A key store rotated to one with a password of its own (kafka-configs --alter
// --add-config listener.name.ssl.ssl.keystore.location=...,listener.name.ssl.ssl.keystore.password=...
// in one request, as Kafka's KRaft brokers take it): the new store serves, the password is
// described as sensitive with no value, and both survive a restart, read back from the
// metadata log.
func TestSSLDynamicStorePassword(t *testing.T) {
	oldCA, newCA := testutil.NewCA(t), testutil.NewCA(t)
	b := startSecure(t, []string{"SSL"}, "listener.name.ssl.ssl.keystore.type=PKCS12",
		dynKeystore+"="+oldCA.KeyPKCS12("old", oldCA.Issue("broker"), "old-pass"), "listener.name.ssl.ssl.keystore.password=old-pass")
	adm := kadm.NewClient(client(t, addrOf(t, b, "PLAINTEXT")))
	addr := addrOf(t, b, "SSL")
	if err := handshakeWith(addr, oldCA); err != nil {
		t.Fatal(err)
	}
	newPath, pass := newCA.KeyPKCS12("new", newCA.Issue("broker"), "new-pass"), "new-pass"
	// The location alone does not open: the store's password is still the old one.
	wantInvalidConfig(t, alterBroker1(t, adm, dynKeystore, &newPath, false), "a new store without its password", "keystore")
	res, err := adm.AlterBrokerConfigs(ctxT(t), []kadm.AlterConfig{
		{Name: dynKeystore, Value: &newPath}, {Name: "listener.name.ssl.ssl.keystore.password", Value: &pass}}, 1)
	if err != nil || res[0].Err != nil {
		t.Fatalf("rotate with password: %v %v %s", err, res[0].Err, res[0].ErrMessage)
	}
	waitFor(t, 10*time.Second, "the new key store to be served", func() bool { return handshakeWith(addr, newCA) == nil })
	checkPasswordHidden := func() {
		t.Helper()
		rcs, err := adm.DescribeBrokerConfigs(ctxT(t), 1)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, rc := range rcs {
			for _, c := range rc.Configs {
				if c.Value != nil && strings.Contains(*c.Value, "new-pass") {
					t.Fatalf("%s shows the password", c.Key)
				}
				if c.Key == "listener.name.ssl.ssl.keystore.password" {
					found = true
					if !c.Sensitive || c.Value != nil || c.Source != kmsg.ConfigSourceDynamicBrokerConfig {
						t.Fatalf("%s: sensitive %v, value %v, source %v", c.Key, c.Sensitive, c.MaybeValue(), c.Source)
					}
				}
			}
		}
		if !found {
			t.Fatal("the dynamic password is not described")
		}
	}
	checkPasswordHidden()
	b = b.Restart()
	adm = kadm.NewClient(client(t, addrOf(t, b, "PLAINTEXT")))
	if err := handshakeWith(addrOf(t, b, "SSL"), newCA); err != nil {
		t.Fatalf("after a restart: %v", err)
	}
	checkPasswordHidden()
}

// With ssl.allow.dn.changes and ssl.allow.san.changes a store with another subject is
// accepted, through the legacy AlterConfigs.
func TestSSLDynamicAllowDNChanges(t *testing.T) {
	ca := testutil.NewCA(t)
	b := startSecure(t, []string{"SSL"}, sslSets(ca, "ssl", "ssl.allow.dn.changes=true", "ssl.allow.san.changes=true")...)
	adm := kadm.NewClient(client(t, addrOf(t, b, "PLAINTEXT")))
	addr := addrOf(t, b, "SSL")
	other := ca.KeyPEM("other", ca.Issue("someone-else"))
	pem := "PEM"
	res, err := adm.AlterBrokerConfigsState(ctxT(t), []kadm.AlterConfig{{Name: "listener.name.ssl.ssl.keystore.type", Value: &pem}, {Name: dynKeystore, Value: &other}}, 1)
	if err != nil || res[0].Err != nil {
		t.Fatalf("AlterConfigs: %v %v %s", err, res[0].Err, res[0].ErrMessage)
	}
	waitFor(t, 10*time.Second, "the new subject to be served", func() bool {
		c, err := tls.Dial("tcp", addr, tlsTo(ca))
		if err != nil {
			return false
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName == "someone-else"
	})
}

// On the inter-broker listener, whose stores the brokers also use towards each other, a new
// certificate must be trusted by the trust store in service and the certificate in service by
// the new trust store. Moving to a new CA is then Kafka's rolling procedure: a key store
// from the new CA alone is refused, and so is one together with a trust store of both CAs
// (the trust store in service would not trust it); the trust store of both CAs first, then
// the key store, are taken, and serve again after a restart.
func TestSSLDynamicInterBrokerTrust(t *testing.T) {
	oldCA, newCA := testutil.NewCA(t), testutil.NewCA(t)
	b := startSecure(t, []string{"SSL"}, append(sslSets(oldCA, "ssl"), "inter.broker.listener.name=SSL",
		"listener.name.ssl.ssl.truststore.type=PEM", "listener.name.ssl.ssl.truststore.location="+oldCA.TrustPEM())...)
	adm := kadm.NewClient(client(t, addrOf(t, b, "PLAINTEXT")))
	addr := addrOf(t, b, "SSL")
	newPath := newCA.KeyPEM("broker-rotated", newCA.Issue("broker"))
	wantInvalidConfig(t, alterBroker1(t, adm, dynKeystore, &newPath, false), "a key store the trust store in service does not trust", "does not trust the new certificate")

	both := filepath.Join(t.TempDir(), "both-cas.pem")
	if err := os.WriteFile(both, []byte(oldCA.PEM+newCA.PEM), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := adm.AlterBrokerConfigs(ctxT(t), []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: dynKeystore, Value: &newPath},
		{Op: kadm.SetConfig, Name: "listener.name.ssl.ssl.truststore.location", Value: &both},
	}, 1)
	if err != nil {
		t.Fatal(err)
	}
	wantInvalidConfig(t, errors.Join(res[0].Err, errors.New(res[0].ErrMessage)), "key and trust store together", "does not trust the new certificate")
	if err := alterBroker1(t, adm, "listener.name.ssl.ssl.truststore.location", &both, false); err != nil {
		t.Fatalf("trust store of both CAs: %v", err)
	}
	if err := alterBroker1(t, adm, dynKeystore, &newPath, false); err != nil {
		t.Fatalf("key store of the new CA, once both are trusted: %v", err)
	}
	waitFor(t, 10*time.Second, "the new key store to be served", func() bool { return handshakeWith(addr, newCA) == nil })

	// After a restart both dynamic stores serve from the first connection, although the
	// static trust store alone would not trust the dynamic certificate: they replace the
	// static stores, which never serve, rather than being compared with them.
	b = b.Restart()
	addr = addrOf(t, b, "SSL")
	if err := handshakeWith(addr, newCA); err != nil {
		t.Fatalf("after a restart: %v", err)
	}
}

// An inline PEM key store (ssl.keystore.key and ssl.keystore.certificate.chain) is replaced
// by new inline values, described as sensitive; a location given besides them is refused,
// as Kafka refuses two sources for one store.
func TestSSLDynamicInlinePEM(t *testing.T) {
	oldCA, newCA := testutil.NewCA(t), testutil.NewCA(t)
	c := oldCA.Issue("broker")
	const p = "listener.name.ssl."
	b := startSecure(t, []string{"SSL"}, p+"ssl.keystore.type=PEM", p+"ssl.keystore.key="+c.KeyPEM, p+"ssl.keystore.certificate.chain="+c.CertPEM)
	adm := kadm.NewClient(client(t, addrOf(t, b, "PLAINTEXT")))
	addr := addrOf(t, b, "SSL")

	loc := newCA.KeyPEM("broker", newCA.Issue("broker"))
	wantInvalidConfig(t, alterBroker1(t, adm, dynKeystore, &loc, false), "a location besides the inline store", "Both SSL key store location and separate private key")

	n := newCA.Issue("broker")
	res, err := adm.AlterBrokerConfigs(ctxT(t), []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: p + "ssl.keystore.key", Value: &n.KeyPEM},
		{Op: kadm.SetConfig, Name: p + "ssl.keystore.certificate.chain", Value: &n.CertPEM},
	}, 1)
	if err != nil || res[0].Err != nil {
		t.Fatalf("inline update: %v %v %s", err, res[0].Err, res[0].ErrMessage)
	}
	waitFor(t, 10*time.Second, "the new inline key store to be served", func() bool { return handshakeWith(addr, newCA) == nil })

	rcs, err := adm.DescribeBrokerConfigs(ctxT(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("1", nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range rc.Configs {
		if e.Key == p+"ssl.keystore.key" {
			found = true
			if !e.Sensitive || e.Value != nil || e.Source != kmsg.ConfigSourceDynamicBrokerConfig {
				t.Fatalf("described as %+v", e)
			}
		}
	}
	if !found {
		t.Fatal("the dynamic inline key is not described")
	}
}

// Moving one broker of two to a new CA while they replicate over an SSL INTERNAL listener
// (a broker's stores are changed through that broker only): both brokers first trust both
// CAs, then broker 2 takes a key store of the new CA. Broker
// 1's own connections to broker 2 verify it with the trust store it was given at runtime
// (its inter-broker client is rebuilt), so a topic with two replicas and
// min.insync.replicas=2 keeps taking acks=all writes on partitions either broker leads.
func TestSSLDynamicRotationAcrossBrokers(t *testing.T) {
	oldCA, newCA := testutil.NewCA(t), testutil.NewCA(t)
	const p = "listener.name.internal."
	node := func(id int32) []string {
		return []string{p + "ssl.keystore.location=" + oldCA.KeyPEM(fmt.Sprintf("broker-%d", id), oldCA.Issue("broker"))}
	}
	c := testutil.StartCluster(t, testutil.ClusterOptions{Nodes: 2, Sets: []string{
		"listener.security.protocol.map=CLIENT:PLAINTEXT,INTERNAL:SSL,CONTROLLER:PLAINTEXT",
		p + "ssl.keystore.type=PEM", p + "ssl.truststore.type=PEM", p + "ssl.truststore.location=" + oldCA.TrustPEM(),
	}, NodeSets: map[int32][]string{1: node(1), 2: node(2)}})
	// Both brokers unfenced before either is addressed by id: a broker still fenced is not
	// in Metadata, and the client would not know it.
	c.WaitBrokersReady(t, 30*time.Second)
	cl := c.Client(t, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	ctx := ctxT(t)

	both := filepath.Join(t.TempDir(), "both-cas.pem")
	if err := os.WriteFile(both, []byte(oldCA.PEM+newCA.PEM), 0o600); err != nil {
		t.Fatal(err)
	}
	alter := func(key, value string, brokers ...int32) {
		t.Helper()
		res, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: key, Value: &value}}, brokers...)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("broker %s: %s: %v %s", r.Name, key, r.Err, r.ErrMessage)
			}
		}
	}
	// Only broker 2 can load and check its stores: the change sent to broker 1 is refused.
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, "2"
	rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	rc.Name, rc.Value = p+"ssl.truststore.location", &both
	rr.Configs = append(rr.Configs, rc)
	req.Resources = append(req.Resources, rr)
	r, err := req.RequestWith(ctx, cl.Broker(1))
	if err != nil {
		t.Fatal(err)
	}
	if code := r.Resources[0].ErrorCode; code != kerr.InvalidRequest.Code {
		t.Fatalf("broker 2's stores changed through broker 1: error %d, want INVALID_REQUEST", code)
	}

	alter(p+"ssl.truststore.location", both, 1, 2)
	alter(p+"ssl.keystore.location", newCA.KeyPEM("broker-2-rotated", newCA.Issue("broker")), 2)

	minISR := "2"
	resp, err := adm.CreateTopic(ctx, 2, 2, map[string]*string{"min.insync.replicas": &minISR}, "rotated")
	if err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	for i := range 6 {
		done := make(chan error, 1)
		cl.Produce(ctx, &kgo.Record{Topic: "rotated", Partition: int32(i % 2), Value: []byte{byte('a' + i)}}, func(_ *kgo.Record, err error) { done <- err })
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("acks=all produce %d (partition %d): %v", i, i%2, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("acks=all produce %d (partition %d) not acknowledged in 20s: a follower does not replicate", i, i%2)
		}
	}
}
