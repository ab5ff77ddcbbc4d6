package security_test

import (
	"crypto/tls"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/broker"
	"github.com/gregor-project/gregor/internal/config"
	"github.com/gregor-project/gregor/internal/testutil"
)

// An SSL listener serves TLS with every key store type Kafka's brokers take, and a client
// trusting the CA produces and consumes through it.
func TestSSLListenerKeyStores(t *testing.T) {
	ca := testutil.NewCA(t)
	c := ca.Issue("broker")
	for name, sets := range map[string][]string{
		"PEM file":   {"ssl.keystore.type=PEM", "ssl.keystore.location=" + ca.KeyPEM("b", c)},
		"PEM inline": {"ssl.keystore.type=PEM", "ssl.keystore.key=" + c.KeyPEM, "ssl.keystore.certificate.chain=" + c.CertPEM},
		"PKCS12":     {"ssl.keystore.type=PKCS12", "ssl.keystore.location=" + ca.KeyPKCS12("b", c, "store-pass"), "ssl.keystore.password=store-pass"},
		"JKS":        {"ssl.keystore.type=JKS", "ssl.keystore.location=" + ca.KeyJKS("b", c, "store-pass"), "ssl.keystore.password=store-pass"},
		"per listener": {"listener.name.ssl.ssl.keystore.type=PKCS12", "listener.name.ssl.ssl.keystore.location=" + ca.KeyPKCS12("b2", c, "pw"),
			"listener.name.ssl.ssl.keystore.password=pw"},
	} {
		t.Run(name, func(t *testing.T) {
			b := startSecure(t, []string{"SSL"}, sets...)
			cl := client(t, addrOf(t, b, "SSL"), kgoTLS(tlsTo(ca)))
			produceConsume(t, cl, "ssl-topic")
		})
	}
}

// A plaintext client on a TLS port and garbage instead of a ClientHello are closed with a log
// line; the broker goes on serving.
func TestSSLListenerRefusesPlaintext(t *testing.T) {
	ca := testutil.NewCA(t)
	b := startSecure(t, []string{"SSL"}, sslSets(ca, "")...)
	addr := addrOf(t, b, "SSL")

	plain := dialRaw(t, addr, nil)
	plain.send(kmsg.NewPtrApiVersionsRequest())
	if !plain.closed() {
		t.Fatal("a plaintext ApiVersions on the SSL port was not refused")
	}
	garbage := dialRaw(t, addr, nil)
	if _, err := garbage.nc.Write([]byte(strings.Repeat("\x16\x03\x01\xff\xff garbage ", 64))); err != nil {
		t.Fatal(err)
	}
	if !garbage.closed() {
		t.Fatal("garbage instead of a ClientHello was not refused")
	}
	// The reverse: a TLS client on the PLAINTEXT port fails its handshake.
	if _, err := tls.Dial("tcp", addrOf(t, b, "PLAINTEXT"), tlsTo(ca)); err == nil {
		t.Fatal("a TLS handshake succeeded on the PLAINTEXT port")
	}
	// Still serving TLS clients.
	produceConsume(t, client(t, addr, kgoTLS(tlsTo(ca))), "after-garbage")
}

// ssl.client.auth=required: a client without a certificate signed by the trust store cannot
// connect; one with one can.
func TestSSLClientAuthRequired(t *testing.T) {
	ca := testutil.NewCA(t)
	b := startSecure(t, []string{"SSL"}, sslSets(ca, "",
		"ssl.client.auth=required", "ssl.truststore.type=PEM", "ssl.truststore.location="+ca.TrustPEM())...)
	addr := addrOf(t, b, "SSL")

	raw := dialRawTLS(addr, tlsTo(ca))
	if raw == nil {
		t.Fatal("no TLS connection at all")
	}
	// TLS 1.3 reports a missing client certificate at the first read, not the handshake.
	raw.Write(kmsg.NewRequestFormatter().AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), 1))
	buf := make([]byte, 8)
	if _, err := raw.Read(buf); err == nil {
		t.Fatal("a client without a certificate was served")
	}

	other := testutil.NewCA(t).Issue("stranger")
	strangerCert := tls.Certificate{Certificate: [][]byte{other.Cert.Raw}, PrivateKey: other.Key}
	raw = dialRawTLS(addr, tlsTo(ca, strangerCert))
	raw.Write(kmsg.NewRequestFormatter().AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), 1))
	if _, err := raw.Read(buf); err == nil {
		t.Fatal("a client certificate from an unknown CA was accepted")
	}

	alice := ca.Issue("alice")
	cert := tls.Certificate{Certificate: [][]byte{alice.Cert.Raw}, PrivateKey: alice.Key}
	produceConsume(t, client(t, addr, kgoTLS(tlsTo(ca, cert))), "mtls-topic")
}

// dialRawTLS opens a TLS connection (nil if the handshake itself fails).
func dialRawTLS(addr string, cfg *tls.Config) *tls.Conn {
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return nil
	}
	return c
}

// A listener that cannot serve what it is configured for stops start-up, naming the key.
func TestMisconfiguredListenersStopStartup(t *testing.T) {
	ca := testutil.NewCA(t)
	for name, tc := range map[string]struct {
		sets []string
		want string
	}{
		"SSL without a key store":   {[]string{"listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0"}, "ssl.keystore.location"},
		"unreadable key store":      {[]string{"listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", "ssl.keystore.type=PKCS12", "ssl.keystore.location=/nonexistent/ks.p12"}, "ssl.keystore.location"},
		"wrong key store password":  {[]string{"listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", "ssl.keystore.type=PKCS12", "ssl.keystore.location=" + ca.KeyPKCS12("x", ca.Issue("x"), "right"), "ssl.keystore.password=wrong"}, "ssl.keystore.password"},
		"PEM key store password":    {append([]string{"listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", "ssl.keystore.password=x"}, sslSets(ca, "")...), "ssl.keystore.password"},
		"PEM trust store password":  {append([]string{"listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", "ssl.client.auth=required", "ssl.truststore.type=PEM", "ssl.truststore.location=" + ca.TrustPEM(), "ssl.truststore.password=x"}, sslSets(ca, "")...), "ssl.truststore.password"},
		"client auth without trust": {append([]string{"listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", "ssl.client.auth=required"}, sslSets(ca, "")...), "ssl.truststore.location"},
		"PLAIN without JAAS":        {[]string{"listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms=PLAIN"}, "listener.name.sasl_plaintext.plain.sasl.jaas.config"},
		"OAUTHBEARER handler class": {[]string{"listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms=OAUTHBEARER", "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config=" + oauthJAAS, "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class=io.strimzi.kafka.oauth.server.JaasServerOauthValidatorCallbackHandler"}, "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class"},
		"OAUTHBEARER JWKS unset":    {[]string{"listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms=OAUTHBEARER", "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config=" + oauthJAAS, "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class=" + jwksHandler}, "sasl.oauthbearer.jwks.endpoint.url"},
		"bad cipher suite":          {append([]string{"listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", "ssl.cipher.suites=TLS_NOT_A_SUITE"}, sslSets(ca, "")...), "ssl.cipher.suites"},
		// A controller listener is secured like any other, and refused by the same keys.
		"SSL controller without a key store":   {controllerSets("SSL"), "set ssl.keystore.location"},
		"SSL controller without a trust store": {controllerSets("SSL", sslSets(ca, "controller")...), "set ssl.truststore.location"},
		"SASL_SSL controller with GSSAPI": {controllerSets("SASL_SSL", append(sslSets(ca, "controller", "listener.name.controller.ssl.truststore.type=PEM", "listener.name.controller.ssl.truststore.location="+ca.TrustPEM(),
			"listener.name.controller.sasl.enabled.mechanisms=PLAIN"), `listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="b" password="p" user_b="p";`)...), "sasl.mechanism.controller.protocol"},
		// Raft cannot run SASL, and SASL_PLAINTEXT has no certificate to prove a controller.
		"SASL_PLAINTEXT controller":             {controllerSets("SASL_PLAINTEXT"), "listener.security.protocol.map"},
		"GSSAPI (Kafka's default) without JAAS": {[]string{"listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"}, "listener.name.sasl_plaintext.gssapi.sasl.jaas.config"},
		"GSSAPI without a service name": {[]string{"listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
			`listener.name.sasl_plaintext.gssapi.sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true keyTab="/nonexistent/kafka.keytab" principal="kafka/localhost@GREGOR.TEST";`}, "sasl.kerberos.service.name"},
		"GSSAPI without a keytab": {[]string{"listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0", "sasl.kerberos.service.name=kafka",
			`listener.name.sasl_plaintext.gssapi.sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true keyTab="/nonexistent/kafka.keytab" principal="kafka/localhost@GREGOR.TEST";`}, "/nonexistent/kafka.keytab"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg, err := config.Load("", append([]string{"log.dirs=" + t.TempDir(), "http.listener=127.0.0.1:0"}, tc.sets...))
			if err == nil {
				var b *broker.Broker
				b, err = broker.Start(cfg, broker.Options{Logger: discard()})
				if err == nil {
					b.Close()
					t.Fatal("the broker started")
				}
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not name %s", err, tc.want)
			}
		})
	}
	// A key Gregor does not know is refused by name too.
	if _, err := config.Load("", []string{"ssl.keymanager.algorithm=SunX509"}); err == nil || !strings.Contains(err.Error(), "ssl.keymanager.algorithm") {
		t.Fatalf("unknown ssl key: %v", err)
	}
	if _, err := config.Load("", []string{"listener.name.ssl.log.retention.ms=5"}); err == nil || !strings.Contains(err.Error(), "listener.name.ssl.log.retention.ms") {
		t.Fatalf("a non-security key per listener: %v", err)
	}
}

// controllerSets are the configs of a voter of its own whose CONTROLLER listener is proto.
func controllerSets(proto string, extra ...string) []string {
	return append([]string{"process.roles=broker,controller", "controller.listener.names=CONTROLLER", "node.id=1", "cluster.id=" + config.NewClusterID(), "controller.quorum.voters=1@127.0.0.1:1",
		"listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0", "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:" + proto}, extra...)
}

// Passwords are described as sensitive, without their value.
func TestPasswordsAreSensitive(t *testing.T) {
	cfg, err := config.Load("", []string{"ssl.keystore.password=hunter2"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range cfg.DescribeBroker() {
		if e.Name != "ssl.keystore.password" {
			continue
		}
		if !e.Sensitive || e.Value != "" || strings.Contains(e.Value, "hunter2") {
			t.Fatalf("ssl.keystore.password described as %+v", e)
		}
		for _, s := range e.Synonyms {
			if s.Value != "" {
				t.Fatalf("synonym %s shows %q", s.Name, s.Value)
			}
		}
		return
	}
	t.Fatal("ssl.keystore.password not described")
}

// DescribeConfigs of the broker names the password keys sensitive and gives no value.
func TestDescribeConfigsHidesPasswords(t *testing.T) {
	ca := testutil.NewCA(t)
	c := ca.Issue("broker")
	b := startSecure(t, []string{"SSL"}, "ssl.keystore.type=PKCS12", "ssl.keystore.location="+ca.KeyPKCS12("b", c, "hunter2"), "ssl.keystore.password=hunter2")
	adm := kadm.NewClient(client(t, addrOf(t, b, "PLAINTEXT")))
	rcs, err := adm.DescribeBrokerConfigs(ctxT(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, rc := range rcs {
		for _, cfg := range rc.Configs {
			if cfg.Value != nil && strings.Contains(*cfg.Value, "hunter2") {
				t.Fatalf("%s shows the password", cfg.Key)
			}
			if cfg.Key == "ssl.keystore.password" {
				found = true
				if !cfg.Sensitive || cfg.Value != nil {
					t.Fatalf("ssl.keystore.password: sensitive %v, value %v", cfg.Sensitive, cfg.MaybeValue())
				}
			}
		}
	}
	if !found {
		t.Fatal("ssl.keystore.password not described")
	}
}
