package config

import (
	"errors"
	"reflect"
	"strings"
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

// A listener's store keys may be set per broker at runtime: the dynamic value wins over the
// static one for that listener, is described as DYNAMIC_BROKER_CONFIG, and deleting it
// returns to the static value. Store passwords, other listener keys, the plain keys and the
// cluster-wide default are refused.
func TestDynamicListenerStores(t *testing.T) {
	b, err := Parse(map[string]string{
		"listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093",
		"listener.name.ssl.ssl.keystore.location": "/static.p12",
		"listener.name.ssl.ssl.keystore.type":     "PKCS12",
	})
	if err != nil {
		t.Fatal(err)
	}
	const k = "listener.name.ssl.ssl.keystore.location"
	if !IsDynamic(k) || !PerBrokerOnly(k) {
		t.Fatalf("%s: dynamic %v, per broker only %v", k, IsDynamic(k), PerBrokerOnly(k))
	}
	if err := b.ValidateDynamic(k, "/new.p12"); err != nil {
		t.Fatal(err)
	}
	if v, _ := b.ListenerSecurity("SSL"); v["ssl.keystore.location"] != "/static.p12" {
		t.Fatalf("validation changed the store: %q", v["ssl.keystore.location"])
	}
	next, err := b.WithDynamic(map[string]string{k: "/next.p12"})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := next.ListenerSecurity("SSL"); v["ssl.keystore.location"] != "/next.p12" {
		t.Fatalf("WithDynamic: %q", v["ssl.keystore.location"])
	}
	if err := b.SetDynamic(k, "/new.p12"); err != nil {
		t.Fatal(err)
	}
	v, setKey := b.ListenerSecurity("SSL")
	if v["ssl.keystore.location"] != "/new.p12" || setKey["ssl.keystore.location"] != k || v["ssl.keystore.type"] != "PKCS12" {
		t.Fatalf("after SetDynamic: %v %v", v, setKey)
	}
	if v, _ := b.ListenerSecurity("PLAINTEXT"); v["ssl.keystore.location"] != "" {
		t.Fatalf("another listener got the store: %q", v["ssl.keystore.location"])
	}
	found := false
	for _, e := range b.DescribeBroker() {
		if e.Name != k {
			continue
		}
		found = true
		want := []Synonym{{k, "/new.p12", SourceDynamicBroker}, {k, "/static.p12", SourceStaticBroker}}
		if e.Value != "/new.p12" || e.Source != SourceDynamicBroker || e.ReadOnly || !reflect.DeepEqual(e.Synonyms, want) {
			t.Fatalf("described as %+v", e)
		}
	}
	if !found {
		t.Fatalf("%s not described", k)
	}
	if err := b.DeleteDynamic(k); err != nil {
		t.Fatal(err)
	}
	if v, _ := b.ListenerSecurity("SSL"); v["ssl.keystore.location"] != "/static.p12" {
		t.Fatalf("after DeleteDynamic: %q", v["ssl.keystore.location"])
	}
	for _, tc := range []struct{ key, value, reason string }{
		{"listener.name.ssl.ssl.client.auth", "required", "cannot be updated dynamically"},
		{"listener.name.ssl.ssl.client.auth", "sometimes", "sometimes"},
		{"ssl.keystore.location", "/new.p12", "only per listener"},
		{"ssl.keystore.password", "secret", "only per listener"},
	} {
		err := b.SetDynamic(tc.key, tc.value)
		var ce *Error
		if !errors.As(err, &ce) || !errors.Is(err, ErrInvalidConfig) || !strings.Contains(ce.Reason, tc.reason) {
			t.Errorf("SetDynamic(%s=%s) = %v, want INVALID_CONFIG saying %q", tc.key, tc.value, err, tc.reason)
		}
	}
	if err := b.SetDynamicDefault(k, "/new.p12"); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "broker id must be specified") {
		t.Errorf("SetDynamicDefault(%s) = %v", k, err)
	}
}
