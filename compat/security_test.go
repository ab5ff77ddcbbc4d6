package compat_test

import (
	"crypto/tls"
	"encoding/base64"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/gregor-project/gregor/compat"
	"github.com/gregor-project/gregor/internal/testutil"
)

// The security section: every client connects over SASL_SSL with SCRAM-SHA-512 (a credential
// set with AlterUserScramCredentials) and over SSL with a client certificate
// (ssl.client.auth=required), and runs the scenario's produce, consume and group steps there.
//
// A secured listener's address is registered with the settings a client needs to connect to
// it (secured), as an operator would hand a client a bootstrap address with its security
// settings; each client turns them into its own configuration wherever it takes a bootstrap
// address, so the scenario's steps run unchanged.

// secConn is how to connect to one secured listener.
type secConn struct {
	Protocol  string // "SASL_SSL" or "SSL"
	Mechanism string // SASL mechanism, e.g. "SCRAM-SHA-512" ("" for SSL)
	User      string
	Password  string
	CAFile    string // PEM: the CA that signed the broker's certificate
	CertFile  string // PEM: the client's certificate chain ("" without mTLS)
	KeyFile   string // PEM: the client's key (PKCS#8)
	TLS       *tls.Config
	TokenAuth bool // User and Password are a delegation token's id and HMAC (SCRAM tokenauth=true)
}

var securedMu sync.Mutex
var securedAddrs = map[string]*secConn{}

// secured is the security of the listener at addr, or nil for a PLAINTEXT one.
func secured(addr string) *secConn {
	securedMu.Lock()
	defer securedMu.Unlock()
	return securedAddrs[addr]
}

func registerSecured(t testing.TB, addr string, c *secConn) {
	securedMu.Lock()
	securedAddrs[addr] = c
	securedMu.Unlock()
	t.Cleanup(func() {
		securedMu.Lock()
		delete(securedAddrs, addr)
		securedMu.Unlock()
	})
}

// script is the connection as the scripts take it (their "security" request field).
func (c *secConn) script() map[string]string {
	if c == nil {
		return nil
	}
	m := map[string]string{"protocol": c.Protocol, "mechanism": c.Mechanism, "username": c.User, "password": c.Password,
		"ca": c.CAFile, "cert": c.CertFile, "key": c.KeyFile}
	if c.TokenAuth {
		m["tokenauth"] = "true"
	}
	return m
}

// librdkafka is the connection as librdkafka properties (confluent-kafka-go, kcat).
func (c *secConn) librdkafka() [][2]string {
	if c == nil {
		return nil
	}
	p := [][2]string{{"security.protocol", c.Protocol}, {"ssl.ca.location", c.CAFile}}
	if c.Mechanism != "" {
		p = append(p, [2]string{"sasl.mechanisms", c.Mechanism}, [2]string{"sasl.username", c.User}, [2]string{"sasl.password", c.Password})
	}
	if c.CertFile != "" {
		p = append(p, [2]string{"ssl.certificate.location", c.CertFile}, [2]string{"ssl.key.location", c.KeyFile})
	}
	return p
}

// Security steps.
const (
	secSCRAM = "scram-sha-512"
	secMTLS  = "mtls"
)

// secureBroker starts a broker with PLAINTEXT (set-up and checks), SASL_SSL (SCRAM-SHA-512)
// and SSL (client certificates required) listeners, creates the SCRAM user and registers
// both secured listeners; it returns the PLAINTEXT address and the secured ones by step.
func secureBroker(t *testing.T) (string, map[string]string) {
	ca := testutil.NewCA(t)
	trust := ca.TrustPEM()
	b := testutil.StartBroker(t, "auto.create.topics.enable=false", "group.initial.rebalance.delay.ms=0",
		"listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0",
		"sasl.enabled.mechanisms=SCRAM-SHA-512",
		"ssl.keystore.type=PEM", "ssl.keystore.location="+ca.KeyPEM("broker", ca.Issue("broker")),
		"listener.name.ssl.ssl.client.auth=required",
		"listener.name.ssl.ssl.truststore.type=PEM", "listener.name.ssl.ssl.truststore.location="+trust)
	addr := func(l string) string {
		a := b.ListenerAddr(l)
		if a == nil {
			t.Fatalf("no %s listener", l)
		}
		return a.String()
	}
	plain := addr("PLAINTEXT")
	createSCRAMUser(t, plain)
	pool := ca.Pool()
	certFile, keyFile := ca.CertFiles("client", ca.Issue("compat-client"))
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	scram := &secConn{Protocol: "SASL_SSL", Mechanism: "SCRAM-SHA-512", User: "compat", Password: "compat-secret",
		CAFile: trust, TLS: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	mtls := &secConn{Protocol: "SSL", CAFile: trust, CertFile: certFile, KeyFile: keyFile,
		TLS: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	out := map[string]string{secSCRAM: addr("SASL_SSL"), secMTLS: addr("SSL")}
	registerSecured(t, out[secSCRAM], scram)
	registerSecured(t, out[secMTLS], mtls)
	return plain, out
}

// createSCRAMUser gives the user compat (password compat-secret) a SCRAM-SHA-512 credential,
// over the broker's PLAINTEXT listener at plain.
func createSCRAMUser(t *testing.T, plain string) {
	res, err := kadm.NewClient(refClient(t, plain)).AlterUserSCRAMs(ctxFor(t, 30*time.Second), nil,
		[]kadm.UpsertSCRAM{{User: "compat", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "compat-secret"}})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("create the SCRAM credential: %v", err)
	}
}

// runSecure runs the scenario's produce, consume and group steps over each secured listener:
// produce 20 records, read them back from the beginning, then two group members split a
// topic's 3 partitions, read 30 records and commit. The broker's view (records stored,
// offsets committed) is checked over PLAINTEXT with the reference client.
func runSecure(t *testing.T, c Client) {
	info := c.Info()
	recordClient(info)
	plain, addrs := secureBroker(t)
	textOnly := c.Caps().TextOnly
	for _, id := range []string{secSCRAM, secMTLS} {
		step(t, compat.SectionSecurity, info.Name, id, func(t *stepT) {
			addr := addrs[id]
			topic, gtopic, group := id+"-topic", id+"-group-topic", id+"-group"
			createTopic(t, plain, topic, 3, nil)
			recs := genRecords(genOpts{prefix: id, n: 20, textOnly: textOnly})
			t.check(c.Produce(ctxFor(t, time.Minute), addr, topic, "none", recs), "produce")
			ref := refRead(t, plain, topic)
			checkSame(t, recs, ref, cmpOpts{noTimestamps: true, noHeaders: true, noPosition: true})

			got, err := c.Consume(ctxFor(t, time.Minute), addr, topic, len(ref))
			t.check(err, "consume")
			checkSame(t, ref, got, cmpOpts{noHeaders: true})

			createTopic(t, plain, gtopic, 3, nil)
			grecs := genRecords(genOpts{prefix: id + "-g", n: 30, textOnly: textOnly, partition: func(i int) int32 { return int32(i % 3) }})
			members, err := c.Group(ctxFor(t, 90*time.Second), addr, gtopic, group, grecs)
			t.check(err, "group")
			var all []Rec
			for i, m := range members {
				if len(m.Assigned) == 0 {
					t.Errorf("member %d was assigned no partition (assignments %v, %v)", i, members[0].Assigned, members[1].Assigned)
				}
				all = append(all, m.Records...)
			}
			checkSame(t, grecs, all, cmpOpts{noTimestamps: true, noHeaders: true, noPosition: true})
			checkCommitted(t, plain, group, gtopic, 10, "after the group over "+id)
		})
	}
}

func TestSecureFranzGo(t *testing.T)   { t.Parallel(); runSecure(t, franzClient{}) }
func TestSecureSarama(t *testing.T)    { t.Parallel(); runSecure(t, saramaClient{}) }
func TestSecureKafkaGo(t *testing.T)   { t.Parallel(); runSecure(t, kafkaGoClient{}) }
func TestSecureConfluent(t *testing.T) { t.Parallel(); runSecure(t, confluentClient{}) }
func TestSecureKcat(t *testing.T)      { t.Parallel(); runSecure(t, kcatClient{}) }
func TestSecureKafkajs(t *testing.T)   { t.Parallel(); runSecure(t, kafkajs()) }
func TestSecureKafkaPython(t *testing.T) {
	t.Parallel()
	runSecure(t, kafkaPython(nil, "kafka-python"))
}
func TestSecureConfluentKafkaPython(t *testing.T) { t.Parallel(); runSecure(t, confluentPython()) }

// Delegation tokens (KIP-48) with the clients that log in with them: Kafka's Java client
// (the ScramLoginModule line with tokenauth="true") and franz-go (scram.Auth.IsToken). A
// SCRAM user creates a token; each client then connects with the token's id and HMAC alone,
// produces 20 records and reads them back, as the token's owner. (librdkafka, sarama,
// kafka-go, kafkajs and kafka-python have no delegation token login.)
func TestDelegationTokenClients(t *testing.T) {
	t.Parallel()
	ca := testutil.NewCA(t)
	trust := ca.TrustPEM()
	b := testutil.StartBroker(t, "auto.create.topics.enable=false",
		"listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
		"sasl.enabled.mechanisms=SCRAM-SHA-512", "delegation.token.secret.key=compat-token-secret",
		"ssl.keystore.type=PEM", "ssl.keystore.location="+ca.KeyPEM("broker", ca.Issue("broker")))
	plain, addr := b.ListenerAddr("PLAINTEXT").String(), b.ListenerAddr("SASL_SSL").String()
	createSCRAMUser(t, plain)
	tlsCfg := &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
	user := refClient(t, addr, kgo.DialTLSConfig(tlsCfg.Clone()), kgo.SASL(scram.Auth{User: "compat", Pass: "compat-secret"}.AsSha512Mechanism()))
	tok, err := kmsg.NewPtrCreateDelegationTokenRequest().RequestWith(ctxFor(t, 30*time.Second), user)
	if err == nil {
		err = kerr.ErrorForCode(tok.ErrorCode)
	}
	if err != nil {
		t.Fatalf("create a delegation token: %v", err)
	}
	registerSecured(t, addr, &secConn{Protocol: "SASL_SSL", Mechanism: "SCRAM-SHA-512", User: tok.TokenID,
		Password: base64.StdEncoding.EncodeToString(tok.HMAC), CAFile: trust, TLS: tlsCfg, TokenAuth: true})
	for _, c := range []Client{javaClient(), franzClient{}} {
		t.Run(c.Info().Name, func(t *testing.T) {
			topic := "token-" + c.Info().Name
			createTopic(t, plain, topic, 1, nil)
			recs := genRecords(genOpts{prefix: "token", n: 20})
			if err := c.Produce(ctxFor(t, time.Minute), addr, topic, "none", recs); err != nil {
				t.Fatalf("produce with the token: %v", err)
			}
			ref := refRead(t, plain, topic)
			checkSame(t, recs, ref, cmpOpts{noTimestamps: true, noHeaders: true, noPosition: true})
			got, err := c.Consume(ctxFor(t, time.Minute), addr, topic, len(ref))
			if err != nil {
				t.Fatalf("consume with the token: %v", err)
			}
			checkSame(t, ref, got, cmpOpts{noHeaders: true})
		})
	}
}
