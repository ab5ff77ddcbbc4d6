package security_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/security"
	"github.com/gregor-project/gregor/internal/testutil"
	"github.com/gregor-project/gregor/internal/wire"
)

const loginHandler = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"

// identityProvider is an OAuth 2 identity provider on loopback over TLS: its JWKS at /keys,
// and a token endpoint at /token granting client_credentials to the clients it knows (HTTP
// Basic) for scope kafka, with tokens of life whose sub is the client id.
type identityProvider struct {
	t    *testing.T
	srv  *httptest.Server
	key  *rsa.PrivateKey
	life time.Duration

	mu     sync.Mutex
	grants map[string]int // token requests by client id, granted or not
}

func startIdentityProvider(t *testing.T, ca *testutil.CA, life time.Duration) *identityProvider {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p := &identityProvider{t: t, key: key, life: life, grants: map[string]int{}}
	secrets := map[string]string{"svc-orders": "orders-secret", "svc-broker": "broker-secret"}
	jwks, _ := json.Marshal(map[string]any{"keys": []any{rsaJWK("k1", key)}})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /keys", func(w http.ResponseWriter, r *http.Request) { w.Write(jwks) })
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		id, secret, ok := r.BasicAuth()
		p.mu.Lock()
		p.grants[id]++
		p.mu.Unlock()
		if err := r.ParseForm(); err != nil || r.PostForm.Get("grant_type") != "client_credentials" || r.PostForm.Get("scope") != "kafka" {
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"error":"invalid_request","error_description":"client_credentials for scope kafka only"}`))
			return
		}
		if !ok || secrets[id] == "" || secrets[id] != secret {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":"invalid_client","error_description":"bad client credentials"}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"access_token": p.sign(id), "token_type": "Bearer", "expires_in": int(p.life.Seconds())})
	})
	p.srv = httptest.NewUnstartedServer(mux)
	c := ca.Issue("idp")
	p.srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{c.Cert.Raw}, PrivateKey: c.Key}}}
	p.srv.StartTLS()
	t.Cleanup(p.srv.Close)
	return p
}

// sign makes a token for sub, as the token endpoint grants it.
func (p *identityProvider) sign(sub string) string {
	now := time.Now()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"sub": sub, "iat": now.Unix(), "exp": now.Add(p.life).Unix(), "scope": "kafka"})
	tok.Header["kid"] = "k1"
	s, err := tok.SignedString(p.key)
	if err != nil {
		p.t.Fatal(err)
	}
	return s
}

func (p *identityProvider) granted(id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.grants[id]
}

// loginJAAS is the OAUTHBEARER JAAS line of a client getting its tokens from the provider,
// trusting the test CA towards it.
func loginJAAS(ca *testutil.CA, id, secret string) string {
	return `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="` + id + `" clientSecret="` + secret +
		`" scope="kafka" ssl.truststore.type="PEM" ssl.truststore.location="` + ca.TrustPEM() + `";`
}

// Kafka's OAuthBearerLoginCallbackHandler (KIP-768) on the client side: the broker's own
// connections (SASL_SSL as the inter-broker listener, OAUTHBEARER as its mechanism) and the
// tools (--command-config) get signed tokens from an identity provider's token endpoint with
// client credentials, and the broker validates them against the provider's JWKS. The broker
// logs in at start-up; the tools act as the token's sub (an ACL names svc-orders); a wrong
// client secret is refused by the provider once, without retries; a token from a file://
// URL works too; a token is fetched again once 80% of its lifetime has passed.
func TestOAuthBearerTokenEndpoint(t *testing.T) {
	ca := testutil.NewCA(t)
	idp := startIdentityProvider(t, ca, 3*time.Second)
	b := startSecure(t, []string{"SASL_SSL"}, sslSets(ca, "",
		"sasl.enabled.mechanisms=OAUTHBEARER",
		"inter.broker.listener.name=SASL_SSL",
		"ssl.truststore.type=PEM", "ssl.truststore.location="+ca.TrustPEM(),
		"sasl.mechanism.inter.broker.protocol=OAUTHBEARER",
		"listener.name.sasl_ssl.oauthbearer.sasl.jaas.config="+loginJAAS(ca, "svc-broker", "broker-secret"),
		"listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class="+jwksHandler,
		"listener.name.sasl_ssl.oauthbearer.sasl.oauthbearer.jwks.endpoint.url="+idp.srv.URL+"/keys",
		"listener.name.sasl_ssl.oauthbearer.sasl.login.callback.handler.class="+loginHandler,
		"listener.name.sasl_ssl.oauthbearer.sasl.oauthbearer.token.endpoint.url="+idp.srv.URL+"/token",
		standardAuthorizer, "super.users=User:ANONYMOUS;User:svc-broker")...)
	if n := idp.granted("svc-broker"); n == 0 {
		t.Fatal("the broker did not log in with the identity provider at start-up")
	}
	addr := addrOf(t, b, "SASL_SSL")

	// The broker's own client, as it dials another broker: its token's principal is
	// User:svc-broker, a super user allowed CreateTopics.
	values, setKey := map[string]string{
		"sasl.mechanism.inter.broker.protocol":            "OAUTHBEARER",
		"oauthbearer.sasl.jaas.config":                    loginJAAS(ca, "svc-broker", "broker-secret"),
		"oauthbearer.sasl.login.callback.handler.class":   loginHandler,
		"oauthbearer.sasl.oauthbearer.token.endpoint.url": idp.srv.URL + "/token",
		"ssl.truststore.type":                             "PEM",
		"ssl.truststore.location":                         ca.TrustPEM(),
		"ssl.endpoint.identification.algorithm":           "https",
		"ssl.enabled.protocols":                           "TLSv1.2,TLSv1.3",
		"ssl.protocol":                                    "TLSv1.3",
	}, map[string]string{}
	bc, err := security.NewClient("SASL_SSL", security.ProtocolSASLSSL, values, setKey, "sasl.mechanism.inter.broker.protocol")
	if err != nil {
		t.Fatal(err)
	}
	if bc.Username != "svc-broker" {
		t.Fatalf("the broker's login is %q, want the token's sub svc-broker", bc.Username)
	}
	createTopic := func(name string) {
		t.Helper()
		conn, err := wire.DialSecure(ctxT(t), addr, "broker-1", bc)
		if err != nil {
			t.Fatalf("the broker's own connection: %v", err)
		}
		defer conn.Close()
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, 1
		req.Topics = append(req.Topics, rt)
		resp, err := conn.Request(ctxT(t), req)
		if err != nil {
			t.Fatal(err)
		}
		if code := resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; code != 0 {
			t.Fatalf("CreateTopics as the broker: %v", kerr.ErrorForCode(code))
		}
	}
	createTopic("from-broker")
	// The token serves until 80% of its 3 s: then the next connection brings a new one.
	before := idp.granted("svc-broker")
	deadline := time.Now().Add(15 * time.Second)
	for i := 0; idp.granted("svc-broker") == before; i++ {
		if time.Now().After(deadline) {
			t.Fatal("no new token was fetched as the first one neared its end")
		}
		createTopic("from-broker-" + string(rune('a'+i%26)) + strings.Repeat("x", i/26))
		time.Sleep(200 * time.Millisecond) // connections spread over the token's life, not synchronisation
	}

	// The tools, with Kafka's client properties.
	allowTopic(t, b, "User:svc-orders", "idp-tool")
	props := func(jaas string, extra ...string) string {
		return writeProps(t, "security.protocol=SASL_SSL\nsasl.mechanism=OAUTHBEARER\n"+
			"sasl.login.callback.handler.class="+loginHandler+"\n"+
			"sasl.jaas.config="+jaas+"\n"+
			"ssl.truststore.type=PEM\nssl.truststore.location="+ca.TrustPEM()+"\n"+strings.Join(extra, "\n")+"\n")
	}
	good := props(loginJAAS(ca, "svc-orders", "orders-secret"), "sasl.oauthbearer.token.endpoint.url="+idp.srv.URL+"/token")
	if _, err := gregor(t, "", "topic", "create", "idp-tool", "-b", addr, "--command-config", good); err != nil {
		t.Fatalf("svc-orders creates its topic: %v", err)
	}
	if _, err := gregor(t, "", "topic", "create", "idp-tool-2", "-b", addr, "--command-config", good); err == nil {
		t.Fatal("svc-orders created a topic no ACL gives it")
	}

	wrong := props(loginJAAS(ca, "svc-orders", "guess"), "sasl.oauthbearer.token.endpoint.url="+idp.srv.URL+"/token")
	before = idp.granted("svc-orders")
	_, err = gregor(t, "", "topic", "list", "-b", addr, "--command-config", wrong)
	if err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "invalid_client") {
		t.Fatalf("a wrong client secret: %v, want the provider's 401 invalid_client", err)
	}
	if n := idp.granted("svc-orders") - before; n != 1 {
		t.Fatalf("a refused client asked the provider %d times, want once (401 is not retried)", n)
	}

	tokenFile := filepath.Join(t.TempDir(), "token.jwt")
	if err := os.WriteFile(tokenFile, []byte(idp.sign("svc-orders")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fromFile := props(`org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;`, "sasl.oauthbearer.token.endpoint.url=file://"+tokenFile)
	out, err := gregor(t, "", "topic", "list", "-b", addr, "--command-config", fromFile)
	if err != nil || !strings.Contains(out, "idp-tool") {
		t.Fatalf("a token from a file: %q %v", out, err)
	}
}
