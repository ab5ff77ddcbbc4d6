package security_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/security"
	"github.com/gregor-project/gregor/internal/testutil"
	"github.com/gregor-project/gregor/internal/wire"
)

// kerberosBroker is a broker whose SASL_PLAINTEXT listener serves GSSAPI as the principal
// kafka/localhost of a KDC the test runs, with the KDC's realm and keytabs.
type kerberosBroker struct {
	kdc  *kdc
	b    *testutil.Broker
	addr string // localhost:<port>: the host the broker's principal names
}

// gssapiJAAS is the broker's Kerberos JAAS line, as Kafka's documentation writes it.
func gssapiJAAS(keytab, principal string) string {
	return fmt.Sprintf(`com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true keyTab="%s" principal="%s";`, keytab, principal)
}

// startKerberosBroker starts a KDC with principals kafka/localhost, client, intruder and
// kafka/otherhost, and a broker serving GSSAPI with the rules given (only client, and the
// brokers, are mapped: intruder authenticates to the KDC but is no one to the broker).
func startKerberosBroker(t *testing.T, sets ...string) *kerberosBroker {
	k := startKDC(t)
	brokerKT := k.principal("kafka/localhost")
	k.principal("client")
	k.principal("intruder")
	k.principal("kafka/otherhost")
	t.Setenv("KRB5_CONFIG", k.krb5)
	b := testutil.StartBroker(t, append([]string{
		"listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://localhost:0",
		"sasl.enabled.mechanisms=GSSAPI",
		"sasl.kerberos.service.name=kafka",
		// The authorizer is the witness of the principal: only User:client and the brokers
		// (User:kafka) may do anything.
		"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users=User:client;User:kafka;User:ANONYMOUS",
		`sasl.kerberos.principal.to.local.rules=RULE:[1:$1@$0](client@GREGOR\.TEST)s/@.*//,RULE:[2:$1@$0](kafka@GREGOR\.TEST)s/@.*//`,
		"listener.name.sasl_plaintext.gssapi.sasl.jaas.config=" + gssapiJAAS(brokerKT, "kafka/localhost@"+testRealm),
	}, sets...)...)
	_, port, _ := net.SplitHostPort(addrOf(t, b, "SASL_PLAINTEXT"))
	return &kerberosBroker{kdc: k, b: b, addr: net.JoinHostPort("localhost", port)}
}

// saramaGSSAPI is sarama's configuration for user (its keytab from the KDC's directory)
// logging in with a keytab; spn, when set, is the service principal it asks a ticket for.
func (kb *kerberosBroker) saramaGSSAPI(user string, handshake int16, spn string) *sarama.Config {
	c := sarama.NewConfig()
	c.Version = sarama.V2_8_0_0
	c.ClientID = "gssapi-test"
	c.Net.DialTimeout = 5 * time.Second
	c.Net.ReadTimeout = 10 * time.Second
	c.Metadata.Retry.Max = 0
	c.Net.SASL.Enable = true
	c.Net.SASL.Mechanism = sarama.SASLTypeGSSAPI
	c.Net.SASL.Version = handshake
	if handshake == sarama.SASLHandshakeV0 {
		c.ApiVersionsRequest = false
	}
	c.Net.SASL.GSSAPI = sarama.GSSAPIConfig{
		AuthType:           sarama.KRB5_KEYTAB_AUTH,
		KeyTabPath:         filepath.Join(kb.kdc.dir, user+".keytab"),
		KerberosConfigPath: kb.kdc.krb5,
		ServiceName:        "kafka",
		Username:           user,
		Realm:              testRealm,
		DisablePAFXFAST:    true,
	}
	if spn != "" {
		c.Net.SASL.GSSAPI.BuildSpn = func(string, string) string { return spn }
	}
	c.Producer.Return.Successes = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	return c
}

// connect opens one sarama connection and waits for its SASL exchange.
func connect(t *testing.T, addr string, c *sarama.Config) error {
	t.Helper()
	br := sarama.NewBroker(addr)
	if err := br.Open(c); err != nil {
		return err
	}
	defer br.Close()
	_, err := br.Connected()
	if err != nil {
		return err
	}
	_, err = br.GetMetadata(&sarama.MetadataRequest{Version: 1})
	return err
}

// SASL_PLAINTEXT with GSSAPI against a real KDC: sarama logs in with its keytab, produces and
// consumes (SaslHandshake v1, then v0 with bare tokens) as User:client (the rules' short
// name: the authorizer lets no other principal of the listener do anything); a principal the rules do not map, and a ticket for another
// service, are SASL_AUTHENTICATION_FAILED.
func TestGSSAPISarama(t *testing.T) {
	kb := startKerberosBroker(t)

	c := kb.saramaGSSAPI("client", sarama.SASLHandshakeV1, "")
	admin, err := sarama.NewClusterAdmin([]string{kb.addr}, c)
	if err != nil {
		t.Fatalf("cluster admin as client: %v", err)
	}
	defer admin.Close()
	if err := admin.CreateTopic("krb", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	p, err := sarama.NewSyncProducer([]string{kb.addr}, c)
	if err != nil {
		t.Fatalf("producer: %v", err)
	}
	for i := range 3 {
		if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: "krb", Value: sarama.StringEncoder(fmt.Sprint("m", i))}); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	p.Close()

	v0 := kb.saramaGSSAPI("client", sarama.SASLHandshakeV0, "")
	v0.Version = sarama.V0_11_0_0
	cons, err := sarama.NewConsumer([]string{kb.addr}, v0)
	if err != nil {
		t.Fatalf("consumer (SaslHandshake v0): %v", err)
	}
	defer cons.Close()
	pc, err := cons.ConsumePartition("krb", 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatalf("consume: %v", err)
	}
	defer pc.Close()
	for i := range 3 {
		select {
		case m := <-pc.Messages():
			if got, want := string(m.Value), fmt.Sprint("m", i); got != want {
				t.Fatalf("record %d: %q, want %q", i, got, want)
			}
		case err := <-pc.Errors():
			t.Fatalf("consume: %v", err)
		case <-time.After(15 * time.Second):
			t.Fatalf("consumed %d of 3", i)
		}
	}

	for name, cfg := range map[string]*sarama.Config{
		"principal no rule maps":     kb.saramaGSSAPI("intruder", sarama.SASLHandshakeV1, ""),
		"ticket for another service": kb.saramaGSSAPI("client", sarama.SASLHandshakeV1, "kafka/otherhost"),
	} {
		err := connect(t, kb.addr, cfg)
		if !errors.Is(err, sarama.ErrSASLAuthenticationFailed) {
			t.Errorf("%s: %v, want SASL_AUTHENTICATION_FAILED", name, err)
		}
	}
	if err := connect(t, kb.addr, kb.saramaGSSAPI("client", sarama.SASLHandshakeV1, "")); err != nil {
		t.Errorf("client after the failures: %v", err)
	}
}

// The broker's keytab is read again when its file changes, as the JDK reads a keytab
// whenever keys are needed: once kafka/localhost's key is rotated in the KDC (kadmin ktadd,
// a new kvno), a new ticket is refused while the broker holds only the old key, and accepted
// once the new keytab is moved over the broker's file, with no restart.
func TestGSSAPIKeytabRotation(t *testing.T) {
	kb := startKerberosBroker(t)
	c := kb.saramaGSSAPI("client", sarama.SASLHandshakeV1, "")
	if err := connect(t, kb.addr, c); err != nil {
		t.Fatalf("before the rotation: %v", err)
	}
	rotated := filepath.Join(kb.kdc.dir, "rotated.keytab")
	kb.kdc.run("kadmin.local", "-r", testRealm, "-q", "ktadd -k "+rotated+" kafka/localhost@"+testRealm)
	if err := connect(t, kb.addr, c); !errors.Is(err, sarama.ErrSASLAuthenticationFailed) {
		t.Fatalf("a ticket of the new key while the broker holds the old one: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	if err := os.Rename(rotated, filepath.Join(kb.kdc.dir, "kafka_localhost.keytab")); err != nil {
		t.Fatal(err)
	}
	if err := connect(t, kb.addr, c); err != nil {
		t.Fatalf("after the new keytab replaced the broker's: %v", err)
	}
}

// kcat runs Debian's kcat (librdkafka with Cyrus SASL's GSSAPI module) as Kerberos user
// user, with its keytab and a credential cache of its own; librdkafka runs kinit itself.
func (kb *kerberosBroker) kcat(t *testing.T, user, stdin string, args ...string) (string, error) {
	t.Helper()
	path, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatalf("kcat not found: install Debian's kcat and libsasl2-modules-gssapi-mit (scripts/test does)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	all := append([]string{"-b", kb.addr,
		"-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=GSSAPI",
		"-X", "sasl.kerberos.service.name=kafka",
		"-X", "sasl.kerberos.keytab=" + filepath.Join(kb.kdc.dir, user+".keytab"),
		"-X", "sasl.kerberos.principal=" + user + "@" + testRealm,
	}, args...)
	cmd := exec.CommandContext(ctx, path, all...)
	cmd.Env = append(kb.kdc.env(), "KRB5CCNAME=FILE:"+filepath.Join(kb.kdc.dir, user+".ccache"))
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// kcat (librdkafka over Cyrus SASL and MIT's GSSAPI, which asks for mutual authentication:
// the AP-REP step) produces and consumes as client, and intruder is refused.
func TestGSSAPIKcat(t *testing.T) {
	kb := startKerberosBroker(t)
	if out, err := kb.kcat(t, "client", "one\ntwo\nthree\n", "-P", "-t", "krb-kcat"); err != nil {
		t.Fatalf("kcat produce: %v\n%s", err, out)
	}
	out, err := kb.kcat(t, "client", "", "-C", "-t", "krb-kcat", "-o", "beginning", "-e", "-q")
	if err != nil {
		t.Fatalf("kcat consume: %v\n%s", err, out)
	}
	if got := strings.Fields(out); strings.Join(got, ",") != "one,two,three" {
		t.Fatalf("kcat consumed %q, want one, two, three", out)
	}
	out, err = kb.kcat(t, "intruder", "", "-L", "-m", "5")
	if err == nil || !strings.Contains(out, "SASL authentication error") && !strings.Contains(out, "Authentication failed") {
		t.Fatalf("intruder listed metadata (%v):\n%s", err, out)
	}
}

// The broker's own side (sasl.mechanism.inter.broker.protocol=GSSAPI): it logs in with its
// keytab, asks a ticket for kafka/<host dialled>, verifies the AP-REP (mutual
// authentication) and is User:kafka to the other broker, a super user allowed CreateTopics.
func TestGSSAPIInterBrokerClient(t *testing.T) {
	// The broker's own inter-broker client is built at start-up from the same keys.
	kb := startKerberosBroker(t, "inter.broker.listener.name=SASL_PLAINTEXT", "sasl.mechanism.inter.broker.protocol=GSSAPI")
	values := map[string]string{
		"sasl.mechanism.inter.broker.protocol": "GSSAPI",
		"sasl.kerberos.service.name":           "kafka",
		"gssapi.sasl.jaas.config":              gssapiJAAS(filepath.Join(kb.kdc.dir, "kafka_localhost.keytab"), "kafka/localhost@"+testRealm),
	}
	c, err := security.NewClient("INTERNAL", security.ProtocolSASLPlaintext, values, nil, "sasl.mechanism.inter.broker.protocol")
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	conn, err := wire.DialSecure(ctx, kb.addr, "broker-1", c)
	if err != nil {
		t.Fatalf("inter-broker GSSAPI: %v", err)
	}
	defer conn.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "from-broker", 1, 1
	req.Topics = append(req.Topics, rt)
	resp, err := conn.Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; code != 0 {
		t.Fatalf("CreateTopics as the broker: %v, want User:kafka allowed", kerr.ErrorForCode(code))
	}

	values["sasl.kerberos.service.name"] = "nokafka"
	c, err = security.NewClient("INTERNAL", security.ProtocolSASLPlaintext, values, nil, "sasl.mechanism.inter.broker.protocol")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wire.DialSecure(ctx, kb.addr, "broker-1", c); err == nil || !strings.Contains(err.Error(), "nokafka/localhost") {
		t.Fatalf("a service the KDC does not know: %v", err)
	}
}

// Replication over GSSAPI: two broker processes whose INTERNAL listener serves only GSSAPI
// (as kafka/127.0.0.1, the host the brokers dial) and use it towards each other. A topic
// with two replicas and min.insync.replicas=2 takes acks=all writes only while the follower
// fetches, so every acknowledged record crossed a Kerberos-authenticated connection.
func TestGSSAPIReplication(t *testing.T) {
	k := startKDC(t)
	kt := k.principal("kafka/127.0.0.1")
	t.Setenv("KRB5_CONFIG", k.krb5)
	c := testutil.StartCluster(t, testutil.ClusterOptions{Nodes: 2, Sets: []string{
		"listener.security.protocol.map=CLIENT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
		"listener.name.internal.sasl.enabled.mechanisms=GSSAPI",
		"listener.name.internal.gssapi.sasl.jaas.config=" + gssapiJAAS(kt, "kafka/127.0.0.1@"+testRealm),
		"sasl.kerberos.service.name=kafka",
		"sasl.mechanism.inter.broker.protocol=GSSAPI",
	}})
	cl := c.Client(t, kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx := ctxT(t)
	adm := kadm.NewClient(cl)
	minISR := "2"
	resp, err := adm.CreateTopic(ctx, 1, 2, map[string]*string{"min.insync.replicas": &minISR}, "krb-replicated")
	if err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	for i := range 5 {
		done := make(chan error, 1)
		cl.Produce(ctx, &kgo.Record{Topic: "krb-replicated", Value: []byte{byte('a' + i)}}, func(_ *kgo.Record, err error) { done <- err })
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("acks=all produce %d: %v", i, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("acks=all produce %d not acknowledged in 20s: the follower does not replicate over GSSAPI", i)
		}
	}
}
