package security

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A token endpoint answering 503 is asked again after sasl.login.retry.backoff.ms, doubling,
// for at most sasl.login.retry.backoff.max.ms; with that at 0 a failure is final at once.
func TestTokenLoginRetriesUnavailableEndpoint(t *testing.T) {
	var asks atomic.Int32
	failFirst := int32(2)
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if asks.Add(1) <= failFirst {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		enc := func(v any) string { b, _ := json.Marshal(v); return base64.RawURLEncoding.EncodeToString(b) }
		tok := enc(map[string]string{"alg": "RS256"}) + "." + enc(map[string]any{"sub": "svc", "exp": time.Now().Add(time.Hour).Unix()}) + ".sig"
		json.NewEncoder(w).Encode(map[string]string{"access_token": tok})
	}))
	defer idp.Close()
	j, err := ParseJAAS(`org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="svc" clientSecret="s";`)
	if err != nil {
		t.Fatal(err)
	}
	login := func(backoffMax string) *tokenLogin {
		values := map[string]string{"sasl.oauthbearer.token.endpoint.url": idp.URL, "sasl.login.retry.backoff.ms": "10", "sasl.login.retry.backoff.max.ms": backoffMax}
		l, err := newTokenLogin(func(k string) (string, string) { return loginValue(values, nil, k) }, j, "sasl.jaas.config")
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	msg, err := login("5000").clientMessage(time.Now())
	if err != nil || !strings.Contains(string(msg), "auth=Bearer ") || asks.Load() != 3 {
		t.Fatalf("after two 503s: %q %v, asked %d times, want a token on the third", msg, err, asks.Load())
	}
	asks.Store(0)
	if _, err := login("0").clientMessage(time.Now()); err == nil || !strings.Contains(err.Error(), "503") || asks.Load() != 1 {
		t.Fatalf("no retries: %v, asked %d times", err, asks.Load())
	}
}
