package security_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/oauth"

	"github.com/gregor-project/gregor/internal/testutil"
)

// oauthJAAS is the OAUTHBEARER JAAS line with no option.
const oauthJAAS = `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;`

const jwksHandler = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"

// unsecuredToken is an alg none JWS, as Kafka's unsecured login module writes one.
func unsecuredToken(claims map[string]any) string {
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	return enc(map[string]any{"alg": "none"}) + "." + enc(claims) + "."
}

func oauthToken(tok string) kgo.Opt {
	return kgo.SASL(oauth.Auth{Token: tok}.AsMechanism())
}

// The unsecured validator (no callback handler class, Kafka's default): a token's sub is the
// principal the ACLs see; an expired token or one without the required scope is
// SASL_AUTHENTICATION_FAILED after the JSON error.
func TestOAuthBearerUnsecured(t *testing.T) {
	b := startSecure(t, []string{"SASL_PLAINTEXT"},
		"sasl.enabled.mechanisms=OAUTHBEARER",
		`listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredValidatorRequiredScope="kafka";`,
		"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users=User:ANONYMOUS")
	addr := addrOf(t, b, "SASL_PLAINTEXT")
	adm := kadm.NewClient(client(t, addrOf(t, b, "PLAINTEXT")))
	acl := kadm.NewACLs().Allow("User:alice").Topics("oauth-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpAll)
	res, err := adm.CreateACLs(ctxT(t), acl)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	token := func(sub string, life time.Duration, scope ...string) string {
		now := time.Now().Unix()
		return unsecuredToken(map[string]any{"sub": sub, "iat": now, "exp": now + int64(life/time.Second), "scope": scope})
	}

	produceConsume(t, client(t, addr, oauthToken(token("alice", time.Hour, "kafka"))), "oauth-alice")

	bob := client(t, addr, oauthToken(token("bob", time.Hour, "kafka")))
	err = bob.ProduceSync(ctxT(t), &kgo.Record{Topic: "oauth-alice", Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("bob, whom no ACL names: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}

	for name, tok := range map[string]string{
		"expired":       token("alice", -time.Minute, "kafka"),
		"missing scope": token("alice", time.Hour, "read"),
	} {
		cl := client(t, addr, oauthToken(tok))
		if err := cl.Ping(ctxT(t)); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Errorf("%s: %v, want SASL_AUTHENTICATION_FAILED", name, err)
		}
	}

	// On the wire: the JSON error, the client's \x01, then SASL_AUTHENTICATION_FAILED
	// carrying the JSON, and the connection closes.
	c := dialRaw(t, addr, nil)
	c.request(saslHandshake(1, "OAUTHBEARER"))
	au := c.request(saslAuth([]byte("n,,\x01auth=Bearer " + token("alice", time.Hour, "read") + "\x01\x01"))).(*kmsg.SASLAuthenticateResponse)
	if au.ErrorCode != 0 || string(au.SASLAuthBytes) != `{"status":"insufficient_scope", "scope":"[kafka]"}` {
		t.Fatalf("first answer: error %d, %q", au.ErrorCode, au.SASLAuthBytes)
	}
	au = c.request(saslAuth([]byte{1})).(*kmsg.SASLAuthenticateResponse)
	if au.ErrorCode != kerr.SaslAuthenticationFailed.Code || au.ErrorMessage == nil || *au.ErrorMessage != `{"status":"insufficient_scope", "scope":"[kafka]"}` {
		t.Fatalf("after \\x01: error %d, message %v", au.ErrorCode, au.ErrorMessage)
	}
	if !c.closed() {
		t.Fatal("the failed connection stayed open")
	}

	// KIP-368: the session lasts until the token's exp (connections.max.reauth.ms unset).
	c = dialRaw(t, addr, nil)
	c.request(saslHandshake(1, "OAUTHBEARER"))
	au = c.request(saslAuth([]byte("n,,\x01auth=Bearer " + token("alice", 30*time.Second, "kafka") + "\x01\x01"))).(*kmsg.SASLAuthenticateResponse)
	if au.ErrorCode != 0 || au.SessionLifetimeMillis <= 28000 || au.SessionLifetimeMillis > 30000 {
		t.Fatalf("session lifetime %d ms (error %d), want the token's 30 s", au.SessionLifetimeMillis, au.ErrorCode)
	}
}

// rsaJWK is the public JWK of k.
func rsaJWK(kid string, k *rsa.PrivateKey) map[string]any {
	b64 := base64.RawURLEncoding.EncodeToString
	return map[string]any{"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256", "n": b64(k.N.Bytes()), "e": b64(big.NewInt(int64(k.E)).Bytes())}
}

// OAuthBearerValidatorCallbackHandler with a JWKS served over https (a TLS server on
// loopback the JAAS line's ssl.truststore.* trusts), on a SASL_SSL listener: a signed token
// produces and consumes, and the session ends at the earlier of exp and
// connections.max.reauth.ms; franz-go then re-authenticates with a fresh token. Badly signed,
// expired or wrongly addressed tokens are SASL_AUTHENTICATION_FAILED.
func TestOAuthBearerJWKSOverHTTPS(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	jwks, _ := json.Marshal(map[string]any{"keys": []any{rsaJWK("k1", key)}})
	var reads atomic.Int32
	ca := testutil.NewCA(t)
	idp := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reads.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Write(jwks)
	}))
	c := ca.Issue("idp")
	idp.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{c.Cert.Raw}, PrivateKey: c.Key}}}
	idp.StartTLS()
	t.Cleanup(idp.Close)

	const iss, aud = "https://idp.example", "kafka"
	b := startSecure(t, []string{"SASL_SSL"}, sslSets(ca, "",
		"sasl.enabled.mechanisms=OAUTHBEARER",
		`listener.name.sasl_ssl.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ssl.truststore.type="PEM" ssl.truststore.location="`+ca.TrustPEM()+`";`,
		"listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class="+jwksHandler,
		"listener.name.sasl_ssl.oauthbearer.sasl.oauthbearer.jwks.endpoint.url="+idp.URL+"/keys",
		"sasl.oauthbearer.expected.issuer="+iss,
		"sasl.oauthbearer.expected.audience="+aud,
		"listener.name.sasl_ssl.connections.max.reauth.ms=600000")...)
	if reads.Load() == 0 {
		t.Fatal("the JWKS was not read at start-up")
	}
	addr := addrOf(t, b, "SASL_SSL")
	sign := func(k *rsa.PrivateKey, life time.Duration, edit func(jwt.MapClaims)) string {
		now := time.Now()
		claims := jwt.MapClaims{"sub": "svc-orders", "iss": iss, "aud": aud, "iat": now.Unix(), "exp": now.Add(life).Unix(), "scope": "kafka"}
		if edit != nil {
			edit(claims)
		}
		tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
		tok.Header["kid"] = "k1"
		s, err := tok.SignedString(k)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	// A token provider as a client has one: each authentication gets a fresh token.
	var issued atomic.Int32
	fresh := kgo.SASL(oauth.Oauth(func(context.Context) (oauth.Auth, error) {
		issued.Add(1)
		return oauth.Auth{Token: sign(key, 4*time.Second, nil)}, nil
	}))
	cl := client(t, addr, kgoTLS(tlsTo(ca)), fresh)
	produceConsume(t, cl, "jwks")
	// The session ends with the 4 s token, well before connections.max.reauth.ms: franz-go
	// re-authenticates with a new token and keeps producing.
	end := time.Now().Add(6 * time.Second)
	for i := 0; time.Now().Before(end); i++ {
		if err := cl.ProduceSync(ctxT(t), &kgo.Record{Topic: "jwks", Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatalf("produce %d across token lifetimes: %v", i, err)
		}
		time.Sleep(100 * time.Millisecond) // a steady producer, not synchronisation
	}
	if n := issued.Load(); n < 2 {
		t.Fatalf("%d tokens issued: the session did not end with the token", n)
	}

	raw := dialRaw(t, addr, tlsTo(ca))
	raw.request(saslHandshake(1, "OAUTHBEARER"))
	au := raw.request(saslAuth([]byte("n,,\x01auth=Bearer " + sign(key, time.Minute, nil) + "\x01\x01"))).(*kmsg.SASLAuthenticateResponse)
	if au.ErrorCode != 0 || au.SessionLifetimeMillis <= 58000 || au.SessionLifetimeMillis > 60000 {
		t.Fatalf("session lifetime %d ms (error %d), want the token's 60 s", au.SessionLifetimeMillis, au.ErrorCode)
	}

	for name, tok := range map[string]string{
		"badly signed":   sign(stranger, time.Hour, nil),
		"expired":        sign(key, -time.Hour, nil),
		"wrong audience": sign(key, time.Hour, func(c jwt.MapClaims) { c["aud"] = "elsewhere" }),
		"wrong issuer":   sign(key, time.Hour, func(c jwt.MapClaims) { c["iss"] = "https://evil.example" }),
		"unsecured":      unsecuredToken(map[string]any{"sub": "svc-orders", "iss": iss, "aud": aud, "iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix()}),
	} {
		bad := client(t, addr, kgoTLS(tlsTo(ca)), oauthToken(tok))
		err := bad.Ping(ctxT(t))
		if !errors.Is(err, kerr.SaslAuthenticationFailed) || !strings.Contains(err.Error(), "invalid_token") {
			t.Errorf("%s: %v, want SASL_AUTHENTICATION_FAILED with invalid_token", name, err)
		}
	}
}
