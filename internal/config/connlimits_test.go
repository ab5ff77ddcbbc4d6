package config

import (
	"maps"
	"strings"
	"testing"
)

func TestConnectionLimitKeys(t *testing.T) {
	b, err := Parse(map[string]string{
		"listeners":                                           "PLAINTEXT://127.0.0.1:9092,EXTERNAL://127.0.0.1:9094,CONTROLLER://127.0.0.1:9093",
		"listener.security.protocol.map":                      "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"controller.listener.names":                           "CONTROLLER",
		"controller.quorum.voters":                            "1@127.0.0.1:9093",
		"max.connections":                                     "100",
		"max.connections.per.ip":                              "0",
		"max.connections.per.ip.overrides":                    " 127.0.0.1 : 5 ,broker-2.example:0,::1:7",
		"max.connection.creation.rate":                        "20",
		"listener.name.external.max.connections":              "10",
		"listener.name.external.max.connection.creation.rate": "3",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int32{"127.0.0.1": 5, "broker-2.example": 0, "::1": 7}
	if !maps.Equal(b.MaxConnectionsPerIPOverrides, want) {
		t.Errorf("overrides = %v, want %v", b.MaxConnectionsPerIPOverrides, want)
	}
	if got := b.Values()["max.connections.per.ip.overrides"]; got != "127.0.0.1:5,::1:7,broker-2.example:0" {
		t.Errorf("normalized overrides = %q", got)
	}
	if m, r := b.ListenerConnectionLimits("EXTERNAL"); m != 10 || r != 3 {
		t.Errorf("EXTERNAL limits = %d, %d; want 10, 3", m, r)
	}
	if m, r := b.ListenerConnectionLimits("PLAINTEXT"); m != 100 || r != 20 {
		t.Errorf("PLAINTEXT limits = %d, %d; want the broker's 100, 20", m, r)
	}
	if err := b.SetDynamic("max.connections", "50"); err != nil {
		t.Fatal(err)
	}
	if m, _ := b.ListenerConnectionLimits("PLAINTEXT"); m != 50 {
		t.Errorf("PLAINTEXT max.connections after a dynamic change = %d, want 50", m)
	}
	if vals, _ := b.ListenerSecurity("EXTERNAL"); vals["max.connections"] != "" || vals["max.connection.creation.rate"] != "" {
		t.Errorf("connection limits among the security keys: %v", vals)
	}
}

func TestConnectionLimitErrors(t *testing.T) {
	for _, tc := range []struct {
		props  map[string]string
		key    string
		reason string
	}{
		{map[string]string{"max.connections": "-1"}, "max.connections", ""},
		{map[string]string{"max.connection.creation.rate": "-1"}, "max.connection.creation.rate", ""},
		{map[string]string{"max.connections.per.ip": "-1"}, "max.connections.per.ip", ""},
		{map[string]string{"max.connections.per.ip": "0"}, "max.connections.per.ip", "only if max.connections.per.ip.overrides"},
		{map[string]string{"max.connections.per.ip.overrides": "127.0.0.1"}, "max.connections.per.ip.overrides", "host:count"},
		{map[string]string{"max.connections.per.ip.overrides": "127.0.0.1:x"}, "max.connections.per.ip.overrides", "not a number"},
		{map[string]string{"max.connections.per.ip.overrides": "127.0.0.1:-1"}, "max.connections.per.ip.overrides", "not a number"},
		{map[string]string{"max.connections.per.ip.overrides": "bad host!:1"}, "max.connections.per.ip.overrides", "invalid addresses"},
		{map[string]string{"max.connections.per.ip.overrides": "h:1,h:2"}, "max.connections.per.ip.overrides", "twice"},
		{map[string]string{"listener.name.plaintext.max.connections": "-5"}, "listener.name.plaintext.max.connections", ""},
		{map[string]string{"listener.name.plaintext.max.connections.per.ip": "5"}, "listener.name.plaintext.max.connections.per.ip", "per-listener"},
	} {
		_, err := Parse(tc.props)
		if err == nil {
			t.Errorf("%v: accepted", tc.props)
			continue
		}
		ce, ok := err.(*Error)
		if !ok || ce.Key != tc.key || !strings.Contains(err.Error(), tc.reason) {
			t.Errorf("%v: %v, want an error on %s saying %q", tc.props, err, tc.key, tc.reason)
		}
	}
	b := Default()
	if err := b.SetDynamic("max.connections.per.ip", "0"); err == nil {
		t.Error("max.connections.per.ip=0 without overrides accepted at runtime")
	}
	for _, k := range []string{"max.connections", "max.connection.creation.rate"} {
		if err := b.ValidateDynamic(k, "0"); err == nil || !strings.Contains(err.Error(), "Invalid "+k+" 0") {
			t.Errorf("%s=0 at runtime: %v, want Kafka's refusal", k, err)
		}
		if err := b.ValidateDynamic(k, "1"); err != nil {
			t.Errorf("%s=1 at runtime: %v", k, err)
		}
	}
}

// A listener's connection limits change at runtime: this broker's value beats the cluster
// default, which beats the static one; deleting each falls back a layer.
func TestListenerConnectionLimitsDynamicLayers(t *testing.T) {
	b, err := Parse(map[string]string{
		"listeners":                              "PLAINTEXT://127.0.0.1:9092,EXTERNAL://127.0.0.1:9094",
		"listener.security.protocol.map":         "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"listener.name.external.max.connections": "10",
	})
	if err != nil {
		t.Fatal(err)
	}
	const k = "listener.name.external.max.connections"
	step := func(what string, f func() error, want int32) {
		t.Helper()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if m, _ := b.ListenerConnectionLimits("EXTERNAL"); m != want {
			t.Fatalf("after %s: EXTERNAL max.connections %d, want %d", what, m, want)
		}
	}
	if !IsDynamic(k) {
		t.Fatalf("%s is not dynamic", k)
	}
	step("the cluster default", func() error { return b.SetDynamicDefault(k, "5") }, 5)
	step("this broker's value", func() error { return b.SetDynamic(k, "3") }, 3)
	step("deleting this broker's", func() error { return b.DeleteDynamic(k) }, 5)
	step("deleting the default", func() error { return b.DeleteDynamicDefault(k) }, 10)
	if err := b.ValidateDynamic(k, "0"); err == nil || !strings.Contains(err.Error(), "Invalid max.connections 0") {
		t.Fatalf("ValidateDynamic(%s=0) = %v", k, err)
	}
	if err := b.ValidateDynamic(k, "x"); err == nil {
		t.Fatalf("ValidateDynamic(%s=x) accepted", k)
	}
}
