package security

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const oauthJAAS = oauthLoginJA + " required"

// t0 is the tests' clock.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// unsecuredJWS is an alg none token of claims, as Kafka's unsecured login writes it.
func unsecuredJWS(claims map[string]any) string {
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	return enc(map[string]any{"alg": "none"}) + "." + enc(claims) + "."
}

func oauthListener(t *testing.T, values map[string]string) (*Listener, error) {
	t.Helper()
	v := map[string]string{"sasl.enabled.mechanisms": OAuthBearer}
	for k, x := range values {
		v[k] = x
	}
	return NewListener(ListenerOptions{Name: "SASL_PLAINTEXT", Protocol: ProtocolSASLPlaintext, Values: v, Logger: discardLog()})
}

func TestOAuthClientMessage(t *testing.T) {
	r, err := parseOAuthClientMessage([]byte("n,a=alice,\x01auth=Bearer abc.def-_.\x01traceId=42 x\x01region=eu\x01\x01"))
	if err != nil {
		t.Fatal(err)
	}
	if r.authzid != "alice" || r.token != "abc.def-_." || r.extensions["traceId"] != "42 x" || r.extensions["region"] != "eu" || len(r.extensions) != 2 {
		t.Fatalf("parsed %+v", r)
	}
	if r, err := parseOAuthClientMessage(oauthMessage("tok")); err != nil || r.token != "tok" || r.authzid != "" {
		t.Fatalf("%+v %v", r, err)
	}
	if r, err := parseOAuthClientMessage([]byte("n,,\x01auth=bearer   t\x01\x01")); err != nil || r.token != "t" {
		t.Fatalf("scheme case and blanks: %+v %v", r, err)
	}
	for _, bad := range []string{
		"",
		"\x01",
		"n,,\x01auth=Bearer tok\x01",     // one closing \x01 missing
		"y,,\x01auth=Bearer tok\x01\x01", // channel binding flag
		"p=tls-unique,,\x01auth=Bearer t\x01\x01", // channel binding
		"n,,\x01\x01",                          // no auth
		"n,,\x01x=1\x01\x01",                   // no auth, an extension
		"n,,\x01auth=Basic tok\x01\x01",        // scheme
		"n,,\x01auth=Bearer\x01\x01",           // no token
		"n,,\x01auth=Bearer a b\x01\x01",       // token with a blank
		"n,,\x01auth=Bearer a+b\x01\x01",       // not a b64token of Kafka's pattern
		"n,,\x01auth=Bearer t\x01x1=y\x01\x01", // extension key with a digit
		"n,a=a,b,\x01auth=Bearer t\x01\x01",    // ',' in the authzid
	} {
		if _, err := parseOAuthClientMessage([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestOAuthUnsecuredValidator(t *testing.T) {
	j, err := ParseJAAS(oauthJAAS + ` unsecuredValidatorRequiredScope="kafka write" unsecuredValidatorAllowableClockSkewMs="2000";`)
	if err != nil {
		t.Fatal(err)
	}
	v, err := newUnsecuredValidator(j, "k")
	if err != nil {
		t.Fatal(err)
	}
	now := t0.Unix()
	ok := map[string]any{"sub": "alice", "iat": now - 10, "exp": now + 60, "scope": []string{"kafka", "write", "read"}}
	with := func(k string, val any) map[string]any {
		c := map[string]any{}
		for k, x := range ok {
			c[k] = x
		}
		if val == nil {
			delete(c, k)
		} else {
			c[k] = val
		}
		return c
	}
	tok, bad := v.validate(unsecuredJWS(ok), t0)
	if bad != nil || tok.principal != "alice" || !tok.expires.Equal(t0.Add(60*time.Second)) {
		t.Fatalf("valid token: %+v %+v", tok, bad)
	}
	if _, bad := v.validate(unsecuredJWS(with("exp", now-1)), t0); bad != nil {
		t.Fatalf("expired within the clock skew: %+v", bad)
	}
	if _, bad := v.validate(unsecuredJWS(with("exp", float64(now)+0.5)), t0); bad != nil {
		t.Fatalf("fractional exp: %+v", bad)
	}
	for name, tc := range map[string]struct {
		token, status string
	}{
		"expired":           {unsecuredJWS(with("exp", now-2)), "invalid_token"},
		"no exp":            {unsecuredJWS(with("exp", nil)), "invalid_token"},
		"exp a string":      {unsecuredJWS(with("exp", "soon")), "invalid_token"},
		"issued in future":  {unsecuredJWS(with("iat", now+3)), "invalid_token"},
		"exp before iat":    {unsecuredJWS(with("iat", now+61)), "invalid_token"},
		"no sub":            {unsecuredJWS(with("sub", nil)), "invalid_token"},
		"blank sub":         {unsecuredJWS(with("sub", " ")), "invalid_token"},
		"sub a number":      {unsecuredJWS(with("sub", 7)), "invalid_token"},
		"scope missing one": {unsecuredJWS(with("scope", []string{"kafka"})), "insufficient_scope"},
		"scope one string":  {unsecuredJWS(with("scope", "kafka write")), "insufficient_scope"},
		"no scope":          {unsecuredJWS(with("scope", nil)), "insufficient_scope"},
		"signed":            {unsecuredJWS(ok) + "c2ln", "invalid_token"},
		"alg":               {strings.Replace(unsecuredJWS(ok), base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"}`)), base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"RS256"}`)), 1), "invalid_token"},
		"two parts":         {"e30.e30", "invalid_token"},
		"dot dot":           {"e30..", "invalid_token"},
		"not json":          {"bm90.bm90.", "invalid_token"},
	} {
		_, bad := v.validate(tc.token, t0)
		if bad == nil || bad.status != tc.status {
			t.Errorf("%s: %+v, want %s", name, bad, tc.status)
		} else if bad.status == "insufficient_scope" && bad.scope != "[kafka, write]" {
			t.Errorf("%s: scope %q", name, bad.scope)
		}
	}

	// The principal and scope claims are options.
	j, _ = ParseJAAS(oauthJAAS + ` unsecuredValidatorPrincipalClaimName="client_id" unsecuredValidatorScopeClaimName="scp" unsecuredValidatorRequiredScope="a";`)
	v, _ = newUnsecuredValidator(j, "k")
	if tok, bad := v.validate(unsecuredJWS(map[string]any{"client_id": "svc", "exp": now + 1, "scp": "a"}), t0); bad != nil || tok.principal != "svc" {
		t.Fatalf("claim names: %+v %+v", tok, bad)
	}
	j, _ = ParseJAAS(oauthJAAS + ` unsecuredValidatorAllowableClockSkewMs="-1";`)
	if _, err := newUnsecuredValidator(j, "k"); err == nil {
		t.Fatal("a negative clock skew was accepted")
	}
}

// The exchange as Kafka's OAuthBearerSaslServer runs it: a refused token is answered with
// the JSON error, the client's \x01 then fails the exchange with that JSON as its message.
func TestOAuthExchange(t *testing.T) {
	l, err := oauthListener(t, map[string]string{"oauthbearer.sasl.jaas.config": oauthJAAS + ` unsecuredValidatorRequiredScope="kafka";`})
	if err != nil {
		t.Fatal(err)
	}
	m := l.mechanisms[OAuthBearer]
	exp := t0.Add(time.Hour).Unix()

	e := m.start()
	out, done, err := e.step(oauthMessage(unsecuredJWS(map[string]any{"sub": "alice", "exp": exp})), t0)
	if err != nil || done || string(out) != `{"status":"insufficient_scope", "scope":"[kafka]"}` {
		t.Fatalf("first step: %q %v %v", out, done, err)
	}
	_, _, err = e.step([]byte{1}, t0)
	if !errors.Is(err, errAuthFailed) || trimCause(err.Error()) != `{"status":"insufficient_scope", "scope":"[kafka]"}` {
		t.Fatalf("after \\x01: %v", err)
	}

	// After an error, a new client message is a new try.
	e = m.start()
	if out, _, _ := e.step(oauthMessage(unsecuredJWS(map[string]any{"sub": "alice", "exp": t0.Unix() - 1})), t0); string(out) != `{"status":"invalid_token"}` {
		t.Fatalf("expired: %q", out)
	}
	out, done, err = e.step([]byte("n,a=alice,\x01auth=Bearer "+unsecuredJWS(map[string]any{"sub": "alice", "exp": exp, "scope": "kafka"})+"\x01ext=1\x01\x01"), t0)
	if err != nil || !done || len(out) != 0 || e.user() != "alice" || !e.credentialExpiry().Equal(time.Unix(exp, 0)) {
		t.Fatalf("retry: %q %v %v %s %s", out, done, err, e.user(), e.credentialExpiry())
	}

	e = m.start()
	_, _, err = e.step([]byte("n,a=bob,\x01auth=Bearer "+unsecuredJWS(map[string]any{"sub": "alice", "exp": exp, "scope": "kafka"})+"\x01\x01"), t0)
	if !errors.Is(err, errAuthFailed) || !strings.Contains(err.Error(), "authorization id (bob)") {
		t.Fatalf("authzid: %v", err)
	}
	e = m.start()
	if _, _, err = e.step([]byte("n,,\x01auth=Basic x\x01\x01"), t0); !errors.Is(err, errAuthFailed) {
		t.Fatalf("malformed: %v", err)
	}
	// A lone \x01 with no error pending is a malformed message.
	if _, _, err = m.start().step([]byte{1}, t0); !errors.Is(err, errAuthFailed) {
		t.Fatalf("\\x01 first: %v", err)
	}
}

// KIP-368: the session ends at the token's exp, or after connections.max.reauth.ms when that
// is sooner; SaslAuthenticate v1 says so, and an expired session serves nothing.
func TestOAuthSessionLifetime(t *testing.T) {
	for _, tc := range []struct {
		reauth string
		token  time.Duration
		want   int64
	}{
		{"", 90 * time.Second, 90000},
		{"0", 90 * time.Second, 90000},
		{"60000", 90 * time.Second, 60000},
		{"120000", 90 * time.Second, 90000},
	} {
		l, err := oauthListener(t, map[string]string{"oauthbearer.sasl.jaas.config": oauthJAAS + ";", "connections.max.reauth.ms": tc.reauth})
		if err != nil {
			t.Fatal(err)
		}
		s, _ := l.NewSession(nil)
		s.Handshake(&kmsg.SASLHandshakeRequest{Version: 1, Mechanism: OAuthBearer})
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version = 1
		req.SASLAuthBytes = oauthMessage(unsecuredJWS(map[string]any{"sub": "alice", "exp": t0.Add(tc.token).Unix()}))
		resp := s.Authenticate(req, t0)
		if resp.ErrorCode != 0 || resp.SessionLifetimeMillis != tc.want || s.Principal().String() != "User:alice" {
			t.Fatalf("reauth %q: error %d, lifetime %d, principal %s; want lifetime %d", tc.reauth, resp.ErrorCode, resp.SessionLifetimeMillis, s.Principal(), tc.want)
		}
		end := t0.Add(time.Duration(tc.want) * time.Millisecond)
		if v, _ := s.Admit(kmsg.Metadata.Int16(), end.Add(-time.Millisecond)); v != Serve {
			t.Fatalf("before the end: %v", v)
		}
		if v, _ := s.Admit(kmsg.Metadata.Int16(), end); v != Reject {
			t.Fatalf("at the end: %v", v)
		}
		// Re-authentication is offered even without connections.max.reauth.ms.
		if v, _ := s.Admit(kmsg.SASLHandshake.Int16(), end.Add(-time.Second)); v != Intercept {
			t.Fatalf("re-authentication: %v", v)
		}
	}

	// An expired token is refused: the JSON error, then SASL_AUTHENTICATION_FAILED.
	l, _ := oauthListener(t, map[string]string{"oauthbearer.sasl.jaas.config": oauthJAAS + ";"})
	s, _ := l.NewSession(nil)
	s.Handshake(&kmsg.SASLHandshakeRequest{Version: 1, Mechanism: OAuthBearer})
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.Version = 1
	req.SASLAuthBytes = oauthMessage(unsecuredJWS(map[string]any{"sub": "alice", "exp": t0.Unix()}))
	if resp := s.Authenticate(req, t0); resp.ErrorCode != 0 || string(resp.SASLAuthBytes) != `{"status":"invalid_token"}` || s.Authenticated() {
		t.Fatalf("expired token: %+v", resp)
	}
	req.SASLAuthBytes = []byte{1}
	if resp := s.Authenticate(req, t0); resp.ErrorCode != kerr.SaslAuthenticationFailed.Code || *resp.ErrorMessage != `{"status":"invalid_token"}` || !s.Failed() {
		t.Fatalf("after \\x01: %+v", resp)
	}
}

func TestSessionExpiry(t *testing.T) {
	cred := t0.Add(time.Minute)
	for _, tc := range []struct {
		cred   time.Time
		reauth time.Duration
		want   time.Time
	}{
		{time.Time{}, 0, time.Time{}},
		{time.Time{}, time.Second, t0.Add(time.Second)},
		{cred, 0, cred},
		{cred, time.Second, t0.Add(time.Second)},
		{cred, time.Hour, cred},
		{t0.Add(-time.Second), 0, t0}, // within the clock skew: a lifetime of 0
	} {
		if got := sessionExpiry(t0, tc.cred, tc.reauth); !got.Equal(tc.want) {
			t.Errorf("sessionExpiry(%s, %s) = %s, want %s", tc.cred, tc.reauth, got, tc.want)
		}
	}
}

// keyPair is a signing key and its JWK.
type keyPair struct {
	kid    string
	alg    jwt.SigningMethod
	signer crypto.Signer
}

func (k keyPair) jwk() map[string]any {
	b64 := func(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
	switch pk := k.signer.Public().(type) {
	case *rsa.PublicKey:
		return map[string]any{"kty": "RSA", "kid": k.kid, "use": "sig", "alg": k.alg.Alg(), "n": b64(pk.N.Bytes()), "e": b64(big.NewInt(int64(pk.E)).Bytes())}
	case *ecdsa.PublicKey:
		size := (pk.Curve.Params().BitSize + 7) / 8
		return map[string]any{"kty": "EC", "kid": k.kid, "crv": pk.Curve.Params().Name, "x": b64(pk.X.FillBytes(make([]byte, size))), "y": b64(pk.Y.FillBytes(make([]byte, size)))}
	}
	panic("key type")
}

func (k keyPair) sign(t *testing.T, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(k.alg, claims)
	if k.kid != "" {
		tok.Header["kid"] = k.kid
	}
	s, err := tok.SignedString(k.signer)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newRSA(t *testing.T, kid string) keyPair {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return keyPair{kid: kid, alg: jwt.SigningMethodRS256, signer: k}
}

func newEC(t *testing.T, kid string) keyPair {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return keyPair{kid: kid, alg: jwt.SigningMethodES256, signer: k}
}

func writeJWKS(t *testing.T, path string, keys ...keyPair) {
	t.Helper()
	var set []map[string]any
	for _, k := range keys {
		set = append(set, k.jwk())
	}
	b, _ := json.Marshal(map[string]any{"keys": set})
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestOAuthJWKSValidator(t *testing.T) {
	rsaKey, ecKey, other := newRSA(t, "rsa-1"), newEC(t, "ec-1"), newRSA(t, "rsa-1")
	path := filepath.Join(t.TempDir(), "jwks.json")
	writeJWKS(t, path, rsaKey, ecKey)
	l, err := oauthListener(t, map[string]string{
		"oauthbearer.sasl.jaas.config":                        oauthJAAS + ";",
		"oauthbearer.sasl.server.callback.handler.class":      OAuthBearerValidatorCallbackHandler,
		"oauthbearer.sasl.oauthbearer.jwks.endpoint.url":      "file://" + path,
		"sasl.oauthbearer.expected.audience":                  "kafka,other",
		"sasl.oauthbearer.expected.issuer":                    "https://idp.example",
		"sasl.oauthbearer.jwks.endpoint.refresh.ms":           "3600000",
		"sasl.oauthbearer.jwks.endpoint.retry.backoff.ms":     "1",
		"sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": "10",
		"sasl.oauthbearer.clock.skew.seconds":                 "30",
	})
	if err != nil {
		t.Fatal(err)
	}
	v := l.mechanisms[OAuthBearer].(*oauthMechanism).v.(*jwksValidator)
	now := t0.Unix()
	claims := func(edit func(jwt.MapClaims)) jwt.MapClaims {
		c := jwt.MapClaims{"sub": "alice", "iss": "https://idp.example", "aud": "kafka", "iat": now - 5, "exp": now + 300, "scope": "kafka"}
		if edit != nil {
			edit(c)
		}
		return c
	}
	for _, k := range []keyPair{rsaKey, ecKey} {
		tok, bad := v.validate(k.sign(t, claims(nil)), t0)
		if bad != nil || tok.principal != "alice" || !tok.expires.Equal(time.Unix(now+300, 0)) {
			t.Fatalf("%s: %+v %+v", k.alg.Alg(), tok, bad)
		}
	}
	if _, bad := v.validate(ecKey.sign(t, claims(func(c jwt.MapClaims) { c["exp"] = now - 20 })), t0); bad != nil {
		t.Fatalf("expired within the skew: %+v", bad)
	}
	if _, bad := v.validate(rsaKey.sign(t, claims(func(c jwt.MapClaims) { c["aud"] = []string{"x", "other"} })), t0); bad != nil {
		t.Fatalf("one of the audiences: %+v", bad)
	}
	noKid := rsaKey
	noKid.kid = ""
	if _, bad := v.validate(noKid.sign(t, claims(nil)), t0); bad != nil {
		t.Fatalf("no kid: %+v", bad)
	}

	noneTok, _ := jwt.NewWithClaims(jwt.SigningMethodNone, claims(nil)).SignedString(jwt.UnsafeAllowNoneSignatureType)
	hsTok, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, claims(nil)).SignedString([]byte("secret"))
	for name, token := range map[string]string{
		"expired":         rsaKey.sign(t, claims(func(c jwt.MapClaims) { c["exp"] = now - 31 })),
		"not yet valid":   rsaKey.sign(t, claims(func(c jwt.MapClaims) { c["nbf"] = now + 60 })),
		"no exp":          rsaKey.sign(t, claims(func(c jwt.MapClaims) { delete(c, "exp") })),
		"no iat":          rsaKey.sign(t, claims(func(c jwt.MapClaims) { delete(c, "iat") })),
		"wrong audience":  rsaKey.sign(t, claims(func(c jwt.MapClaims) { c["aud"] = "elsewhere" })),
		"no audience":     rsaKey.sign(t, claims(func(c jwt.MapClaims) { delete(c, "aud") })),
		"wrong issuer":    ecKey.sign(t, claims(func(c jwt.MapClaims) { c["iss"] = "https://evil.example" })),
		"no sub":          ecKey.sign(t, claims(func(c jwt.MapClaims) { delete(c, "sub") })),
		"wrong signature": other.sign(t, claims(nil)),
		"unknown kid":     newEC(t, "ec-2").sign(t, claims(nil)),
		"alg none":        noneTok,
		"HS256":           hsTok,
		"unsecured":       unsecuredJWS(claims(nil)),
		"tampered":        tamper(rsaKey.sign(t, claims(nil))),
		"not a JWT":       "abc",
	} {
		if _, bad := v.validate(token, t0); bad == nil || bad.status != "invalid_token" {
			t.Errorf("%s: %+v", name, bad)
		}
	}

	// Without an expected audience, a token naming one is refused (jose4j's default in
	// Kafka), and the principal may come from another claim.
	l, err = oauthListener(t, map[string]string{
		"oauthbearer.sasl.jaas.config":                   oauthJAAS + ";",
		"oauthbearer.sasl.server.callback.handler.class": OAuthBearerValidatorCallbackHandler,
		"sasl.oauthbearer.jwks.endpoint.url":             "file://" + path,
		"sasl.oauthbearer.sub.claim.name":                "client_id",
	})
	if err != nil {
		t.Fatal(err)
	}
	v = l.mechanisms[OAuthBearer].(*oauthMechanism).v.(*jwksValidator)
	if _, bad := v.validate(rsaKey.sign(t, claims(nil)), t0); bad == nil {
		t.Fatal("aud without sasl.oauthbearer.expected.audience accepted")
	}
	tok, bad := v.validate(rsaKey.sign(t, claims(func(c jwt.MapClaims) { delete(c, "aud"); c["client_id"] = "svc" })), t0)
	if bad != nil || tok.principal != "svc" {
		t.Fatalf("sub claim name: %+v %+v", tok, bad)
	}
}

func tamper(token string) string {
	parts := strings.Split(token, ".")
	b, _ := base64.RawURLEncoding.DecodeString(parts[1])
	b = []byte(strings.Replace(string(b), `"alice"`, `"admin"`, 1))
	parts[1] = base64.RawURLEncoding.EncodeToString(b)
	return strings.Join(parts, ".")
}

// The JWKS is read again after sasl.oauthbearer.jwks.endpoint.refresh.ms, and sooner when a
// token names an unknown key id; the keys in hand serve meanwhile.
func TestOAuthJWKSRefresh(t *testing.T) {
	k1, k2 := newEC(t, "one"), newRSA(t, "two")
	path := filepath.Join(t.TempDir(), "jwks.json")
	writeJWKS(t, path, k1)
	j, _ := ParseJAAS(oauthJAAS + ";")
	c := &listenerConfig{name: "SASL_SSL", values: map[string]string{
		"sasl.oauthbearer.jwks.endpoint.url":                  "file://" + path,
		"sasl.oauthbearer.jwks.endpoint.refresh.ms":           "60000",
		"sasl.oauthbearer.jwks.endpoint.retry.backoff.ms":     "1",
		"sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": "5",
	}}
	c.setKey = withDefaults(nil, c.values)
	v, err := newJWKSValidator(c, j, "k", discardLog())
	if err != nil {
		t.Fatal(err)
	}
	v.keys.mu.Lock()
	v.keys.mu.loaded = t0
	v.keys.mu.Unlock()
	claims := jwt.MapClaims{"sub": "alice", "iat": t0.Unix(), "exp": t0.Unix() + 600}
	wait := func() {
		t.Helper()
		for range 500 {
			v.keys.mu.Lock()
			busy := v.keys.mu.loading
			v.keys.mu.Unlock()
			if !busy {
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
		t.Fatal("the JWKS read did not end")
	}

	writeJWKS(t, path, k2)
	// An unknown kid brings a read forward: refused now, accepted once it is done.
	if _, bad := v.validate(k2.sign(t, claims), t0); bad == nil {
		t.Fatal("unknown kid accepted")
	}
	wait()
	if _, bad := v.validate(k2.sign(t, claims), t0.Add(time.Second)); bad != nil {
		t.Fatalf("after the read: %+v", bad)
	}
	if _, bad := v.validate(k1.sign(t, claims), t0.Add(time.Second)); bad == nil {
		t.Fatal("a key gone from the JWKS still verifies")
	}
	// The same unknown kid does not bring another read within a minute.
	writeJWKS(t, path, k1)
	v.validate(k1.sign(t, claims), t0.Add(2*time.Second))
	wait()
	v.validate(k1.sign(t, claims), t0.Add(3*time.Second))
	wait()
	if _, bad := v.validate(k1.sign(t, claims), t0.Add(4*time.Second)); bad == nil {
		t.Fatal("the JWKS was read again within a minute for the same key id")
	}
	// The refresh interval brings a read.
	v.validate(k1.sign(t, claims), t0.Add(2*time.Minute))
	wait()
	if _, bad := v.validate(k1.sign(t, claims), t0.Add(2*time.Minute)); bad != nil {
		t.Fatalf("after the refresh: %+v", bad)
	}
	// A JWKS that stops parsing keeps the keys in hand.
	os.WriteFile(path, []byte("{"), 0o600)
	v.validate(k1.sign(t, claims), t0.Add(4*time.Minute))
	wait()
	if _, bad := v.validate(k1.sign(t, claims), t0.Add(4*time.Minute)); bad != nil {
		t.Fatalf("after a failed read: %+v", bad)
	}
}

func TestOAuthListenerConfiguration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jwks.json")
	writeJWKS(t, path, newEC(t, "k"))
	for name, tc := range map[string]struct {
		values map[string]string
		want   string // in the error; "" for none
	}{
		"unsecured":  {map[string]string{"oauthbearer.sasl.jaas.config": oauthJAAS + ";"}, ""},
		"no JAAS":    {map[string]string{}, "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config is not set"},
		"wrong JAAS": {map[string]string{"oauthbearer.sasl.jaas.config": plainLoginJA + " required;"}, "OAUTHBEARER needs"},
		"other handler": {map[string]string{"oauthbearer.sasl.jaas.config": oauthJAAS + ";", "oauthbearer.sasl.server.callback.handler.class": "com.example.Handler"},
			"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class"},
		"no JWKS URL": {map[string]string{"oauthbearer.sasl.jaas.config": oauthJAAS + ";", "oauthbearer.sasl.server.callback.handler.class": OAuthBearerValidatorCallbackHandler},
			"sasl.oauthbearer.jwks.endpoint.url is not set"},
		"JWKS missing": {map[string]string{"oauthbearer.sasl.jaas.config": oauthJAAS + ";", "oauthbearer.sasl.server.callback.handler.class": OAuthBearerValidatorCallbackHandler,
			"sasl.oauthbearer.jwks.endpoint.url": "file:///nonexistent/jwks.json", "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": "1"}, "sasl.oauthbearer.jwks.endpoint.url"},
		"JWKS ftp": {map[string]string{"oauthbearer.sasl.jaas.config": oauthJAAS + ";", "oauthbearer.sasl.server.callback.handler.class": OAuthBearerValidatorCallbackHandler,
			"sasl.oauthbearer.jwks.endpoint.url": "ftp://x/jwks"}, "neither a file:// nor an https:// URL"},
		"JWKS": {map[string]string{"oauthbearer.sasl.jaas.config": oauthJAAS + ";", "oauthbearer.sasl.server.callback.handler.class": OAuthBearerValidatorCallbackHandler,
			"sasl.oauthbearer.jwks.endpoint.url": "file://" + path}, ""},
	} {
		_, err := oauthListener(t, tc.values)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
	_, err := NewListener(ListenerOptions{Name: "SASL_PLAINTEXT", Protocol: ProtocolSASLPlaintext, Logger: discardLog(), Values: map[string]string{
		"sasl.enabled.mechanisms": Plain, "plain.sasl.jaas.config": plainLoginJA + " required;", "plain.sasl.server.callback.handler.class": "com.example.Handler",
	}})
	if err == nil || !strings.Contains(err.Error(), "listener.name.sasl_plaintext.plain.sasl.server.callback.handler.class") {
		t.Errorf("PLAIN with a callback handler: %v", err)
	}
}

func discardLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// The broker's own OAUTHBEARER login (Kafka's unsecured login) against a listener's
// unsecured validator.
func TestOAuthInterBrokerClient(t *testing.T) {
	jaas := oauthJAAS + ` unsecuredLoginStringClaim_sub="broker" unsecuredLoginListClaim_scope=",kafka,admin" unsecuredLoginLifetimeSeconds="120" unsecuredLoginExtension_traceId="t1";`
	values := map[string]string{"sasl.mechanism.inter.broker.protocol": OAuthBearer, "oauthbearer.sasl.jaas.config": jaas}
	c, err := NewClient("INTERNAL", ProtocolSASLPlaintext, values, nil, "sasl.mechanism.inter.broker.protocol")
	if err != nil {
		t.Fatal(err)
	}
	if c.Mechanism != OAuthBearer || c.Username != "broker" {
		t.Fatalf("client %+v", c)
	}
	msg, err := c.login.clientMessage(t0)
	if err != nil {
		t.Fatal(err)
	}
	r, err := parseOAuthClientMessage(msg)
	if err != nil || r.extensions["traceId"] != "t1" {
		t.Fatalf("message: %+v %v", r, err)
	}

	serve := func(required string) (*Session, RoundTrip) {
		l, err := oauthListener(t, map[string]string{"oauthbearer.sasl.jaas.config": oauthJAAS + ` unsecuredValidatorRequiredScope="` + required + `";`})
		if err != nil {
			t.Fatal(err)
		}
		s, _ := l.NewSession(nil)
		return s, func(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
			switch r := req.(type) {
			case *kmsg.SASLHandshakeRequest:
				return s.Handshake(r), nil
			case *kmsg.SASLAuthenticateRequest:
				return s.Authenticate(r, time.Now()), nil
			}
			return nil, errors.New("unexpected request")
		}
	}
	s, rt := serve("admin")
	if _, err := c.Authenticate(context.Background(), "localhost", rt); err != nil {
		t.Fatal(err)
	}
	if s.Principal().String() != "User:broker" {
		t.Fatalf("principal %s", s.Principal())
	}
	_, rt = serve("superpowers")
	if _, err := c.Authenticate(context.Background(), "localhost", rt); !errors.Is(err, kerr.SaslAuthenticationFailed) || !strings.Contains(err.Error(), "insufficient_scope") {
		t.Fatalf("refused token: %v", err)
	}

	for _, bad := range []string{
		oauthJAAS + ";",
		oauthJAAS + ` unsecuredLoginStringClaim_sub="b" unsecuredLoginNumberClaim_exp="1";`,
		oauthJAAS + ` unsecuredLoginStringClaim_sub="b" unsecuredLoginLifetimeSeconds="0";`,
	} {
		values["oauthbearer.sasl.jaas.config"] = bad
		if _, err := NewClient("INTERNAL", ProtocolSASLPlaintext, values, nil, "sasl.mechanism.inter.broker.protocol"); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}
