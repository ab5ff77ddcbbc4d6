package security_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/gregor-project/gregor/internal/testutil"
)

func plainAuth(user, pass string) kgo.Opt {
	return kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism())
}

// SASL_SSL with PLAIN: a user of the JAAS line produces and consumes; a wrong password is
// SASL_AUTHENTICATION_FAILED, an unknown mechanism UNSUPPORTED_SASL_MECHANISM.
func TestSASLPlainOverSSL(t *testing.T) {
	ca := testutil.NewCA(t)
	b := startSecure(t, []string{"SASL_SSL"}, sslSets(ca, "",
		"sasl.enabled.mechanisms=PLAIN", "listener.name.sasl_ssl.plain.sasl.jaas.config="+plainJAAS)...)
	addr := addrOf(t, b, "SASL_SSL")
	produceConsume(t, client(t, addr, kgoTLS(tlsTo(ca)), plainAuth("alice", "alice-secret")), "sasl-topic")

	bad := client(t, addr, kgoTLS(tlsTo(ca)), plainAuth("alice", "wrong"))
	err := bad.Ping(ctxT(t))
	if !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	scr := client(t, addr, kgoTLS(tlsTo(ca)), kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()))
	if err := scr.Ping(ctxT(t)); !errors.Is(err, kerr.UnsupportedSaslMechanism) {
		t.Fatalf("a mechanism not enabled: %v, want UNSUPPORTED_SASL_MECHANISM", err)
	}
}

// saslPlaintext starts a broker with a SASL_PLAINTEXT listener serving PLAIN.
func saslPlaintext(t *testing.T, sets ...string) (*testutil.Broker, string) {
	b := startSecure(t, []string{"SASL_PLAINTEXT"}, append([]string{
		"sasl.enabled.mechanisms=PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config=" + plainJAAS}, sets...)...)
	return b, addrOf(t, b, "SASL_PLAINTEXT")
}

// Nothing but ApiVersions and the SASL exchange is served before authentication, and SASL
// frames out of order or oversized close the connection.
func TestSASLNothingServedBeforeAuthentication(t *testing.T) {
	_, addr := saslPlaintext(t, "sasl.server.max.receive.size=1024")

	c := dialRaw(t, addr, nil)
	av := c.request(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse)
	if av.ErrorCode != 0 {
		t.Fatalf("ApiVersions before authentication: error %d", av.ErrorCode)
	}
	c.send(kmsg.NewPtrMetadataRequest())
	if !c.closed() {
		t.Fatal("a Metadata request before authentication was served")
	}

	for name, reqs := range map[string][]kmsg.Request{
		"authenticate before handshake": {saslAuth([]byte("\x00alice\x00alice-secret"))},
		"two handshakes":                {saslHandshake(1, "PLAIN"), saslHandshake(1, "PLAIN")},
		"produce after handshake":       {saslHandshake(1, "PLAIN"), kmsg.NewPtrProduceRequest()},
		"oversized token":               {saslHandshake(1, "PLAIN"), saslAuth(make([]byte, 4096))},
	} {
		t.Run(name, func(t *testing.T) {
			c := dialRaw(t, addr, nil)
			for i, r := range reqs {
				if i < len(reqs)-1 {
					c.request(r)
					continue
				}
				c.send(r)
			}
			if !c.closed() {
				t.Fatal("the connection was not closed")
			}
		})
	}
}

func saslHandshake(v int16, mech string) *kmsg.SASLHandshakeRequest {
	r := kmsg.NewPtrSASLHandshakeRequest()
	r.Version, r.Mechanism = v, mech
	return r
}

func saslAuth(tok []byte) *kmsg.SASLAuthenticateRequest {
	r := kmsg.NewPtrSASLAuthenticateRequest()
	r.Version, r.SASLAuthBytes = 1, tok
	return r
}

// SaslHandshake v0: the tokens then go bare, without Kafka's framing, as old clients send them.
func TestSASLHandshakeV0RawTokens(t *testing.T) {
	_, addr := saslPlaintext(t)
	c := dialRaw(t, addr, nil)
	if hs := c.request(saslHandshake(0, "PLAIN")).(*kmsg.SASLHandshakeResponse); hs.ErrorCode != 0 {
		t.Fatalf("handshake v0: error %d", hs.ErrorCode)
	}
	tok := []byte("\x00alice\x00alice-secret")
	if _, err := c.nc.Write(append([]byte{0, 0, 0, byte(len(tok))}, tok...)); err != nil {
		t.Fatal(err)
	}
	if out, err := c.frame(); err != nil || len(out) != 0 {
		t.Fatalf("answer to the bare token: %q, %v", out, err)
	}
	md := c.request(kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse)
	if len(md.Brokers) == 0 {
		t.Fatal("no brokers in the metadata after a v0 authentication")
	}
}

// Wrong passwords in a loop: each is answered SASL_AUTHENTICATION_FAILED and the connection
// closed, while other clients are served meanwhile.
func TestSASLWrongPasswordsInALoop(t *testing.T) {
	_, addr := saslPlaintext(t, "connection.failed.authentication.delay.ms=300")
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	var wg sync.WaitGroup
	failures := make(chan error, 64)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 5 && ctx.Err() == nil; i++ {
				cl, err := kgo.NewClient(kgo.SeedBrokers(addr), plainAuth("alice", "guess-"+string(rune('a'+w))), kgo.RequestRetries(0))
				if err != nil {
					failures <- err
					return
				}
				failures <- cl.Ping(ctx)
				cl.Close()
			}
		}()
	}
	good := client(t, addr, plainAuth("admin", "admin-secret"))
	produceConsume(t, good, "while-guessing")
	wg.Wait()
	close(failures)
	n := 0
	for err := range failures {
		if !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("a wrong password: %v", err)
		}
		n++
	}
	if n != 20 {
		t.Fatalf("%d failed logins, want 20", n)
	}
}

// KIP-368: with connections.max.reauth.ms the session has a lifetime; a client that
// re-authenticates goes on, one that does not is closed at its next request after expiry.
func TestSASLReauthentication(t *testing.T) {
	_, addr := saslPlaintext(t, "connections.max.reauth.ms=1500")

	c := dialRaw(t, addr, nil)
	c.request(saslHandshake(1, "PLAIN"))
	au := c.request(saslAuth([]byte("\x00alice\x00alice-secret"))).(*kmsg.SASLAuthenticateResponse)
	if au.ErrorCode != 0 || au.SessionLifetimeMillis <= 0 || au.SessionLifetimeMillis > 1500 {
		t.Fatalf("authenticate: error %d, session lifetime %d ms", au.ErrorCode, au.SessionLifetimeMillis)
	}
	// Re-authenticating renews the session (same principal).
	c.request(saslHandshake(1, "PLAIN"))
	if au := c.request(saslAuth([]byte("\x00alice\x00alice-secret"))).(*kmsg.SASLAuthenticateResponse); au.ErrorCode != 0 || au.SessionLifetimeMillis <= 0 {
		t.Fatalf("re-authenticate: error %d, lifetime %d", au.ErrorCode, au.SessionLifetimeMillis)
	}
	// Another principal may not take the connection over.
	c.request(saslHandshake(1, "PLAIN"))
	c.send(saslAuth([]byte("\x00admin\x00admin-secret")))
	if b, err := c.frame(); err == nil {
		resp := kmsg.NewPtrSASLAuthenticateResponse()
		resp.Version = 1
		if err := resp.ReadFrom(b[4:]); err != nil || resp.ErrorCode != kerr.SaslAuthenticationFailed.Code {
			t.Fatalf("re-authentication as another principal: %v, error %d", err, resp.ErrorCode)
		}
	}
	if !c.closed() {
		t.Fatal("a principal change at re-authentication left the connection open")
	}

	// A client that never re-authenticates is closed once its session expired.
	idle := dialRaw(t, addr, nil)
	idle.request(saslHandshake(1, "PLAIN"))
	idle.request(saslAuth([]byte("\x00alice\x00alice-secret")))
	deadline := time.Now().Add(15 * time.Second)
	for {
		idle.send(kmsg.NewPtrApiVersionsRequest())
		if _, err := idle.frame(); err != nil {
			break // closed: the session expired
		}
		if time.Now().After(deadline) {
			t.Fatal("the expired session was still served")
		}
		time.Sleep(100 * time.Millisecond) // pacing the probes, not synchronisation
	}

	// franz-go re-authenticates by itself and keeps producing across several lifetimes.
	cl := client(t, addr, plainAuth("alice", "alice-secret"))
	produceConsume(t, cl, "reauth")
	end := time.Now().Add(4 * time.Second)
	for i := 0; time.Now().Before(end); i++ {
		if err := cl.ProduceSync(ctxT(t), &kgo.Record{Topic: "reauth", Value: []byte(strings.Repeat("x", i%100))}).FirstErr(); err != nil {
			t.Fatalf("produce %d across re-authentications: %v", i, err)
		}
		time.Sleep(50 * time.Millisecond) // a steady producer, not synchronisation
	}
}
