package config

import (
	"errors"
	"testing"
)

// The OAUTHBEARER keys of one listener: the per-mechanism callback handler class and
// sasl.oauthbearer.* keys come back keyed "<mechanism>.<key>", beside the listener's and the
// broker's plain keys.
func TestListenerSecurityOAuthBearerKeys(t *testing.T) {
	b, err := Parse(map[string]string{
		"sasl.oauthbearer.expected.issuer":                                                         "https://broker-wide",
		"listener.name.sasl_ssl.sasl.oauthbearer.expected.audience":                                "kafka",
		"listener.name.sasl_ssl.oauthbearer.sasl.oauthbearer.jwks.endpoint.url":                    "file:///etc/jwks.json",
		"listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class":                    OAuthBearerValidatorCallbackHandler,
		"listener.name.sasl_ssl.oauthbearer.sasl.oauthbearer.jwks.endpoint.refresh.ms":             "60000",
		"listener.name.sasl_ssl.oauthbearer.sasl.jaas.config":                                      "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;",
		"listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.clock.skew.seconds":             "5",
		"listener.name.sasl_plaintext.plain.sasl.server.callback.handler.class":                    "com.example.Handler",
		"listener.name.sasl_plaintext.scram-sha-256.sasl.server.callback.handler.class":            "com.example.Other",
		"listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.sub.claim.name":                 "client_id",
		"listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.scope.claim.name":               "scp",
		"listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.expected.audience":              "a,b",
		"listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.jwks.endpoint.url":              "https://idp/keys",
		"listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.expected.issuer":                "https://idp",
		"listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": "10",
	})
	if err != nil {
		t.Fatal(err)
	}
	v, k := b.ListenerSecurity("SASL_SSL")
	for key, want := range map[string]string{
		"sasl.oauthbearer.expected.issuer":                      "https://broker-wide",
		"sasl.oauthbearer.expected.audience":                    "kafka",
		"sasl.oauthbearer.clock.skew.seconds":                   "30",
		"oauthbearer.sasl.oauthbearer.jwks.endpoint.url":        "file:///etc/jwks.json",
		"oauthbearer.sasl.server.callback.handler.class":        OAuthBearerValidatorCallbackHandler,
		"oauthbearer.sasl.oauthbearer.jwks.endpoint.refresh.ms": "60000",
	} {
		if v[key] != want {
			t.Errorf("%s = %q, want %q", key, v[key], want)
		}
	}
	if got := k["oauthbearer.sasl.oauthbearer.jwks.endpoint.url"]; got != "listener.name.sasl_ssl.oauthbearer.sasl.oauthbearer.jwks.endpoint.url" {
		t.Errorf("set key = %q", got)
	}
	for _, bad := range []map[string]string{
		{"listener.name.sasl_ssl.oauthbearer.sasl.oauthbearer.clock.skew.seconds": "-1"},
		{"listener.name.sasl_ssl.oauthbearer.sasl.enabled.mechanisms": "PLAIN"},
		{"listener.name.sasl_ssl.kerberos.sasl.server.callback.handler.class": "x"},
	} {
		if _, err := Parse(bad); err == nil || !errors.Is(err, ErrUnknownConfig) && !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%v: err %v", bad, err)
		}
	}
}
