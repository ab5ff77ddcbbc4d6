package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseISODuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"PT1H", time.Hour, true},
		{"P2D", 48 * time.Hour, true},
		{"P1DT2H30M", 26*time.Hour + 30*time.Minute, true},
		{"PT0.5S", 500 * time.Millisecond, true},
		{"pt10m", 10 * time.Minute, true},
		{"-PT10M", -10 * time.Minute, true},
		{"PT-1H30M", -30 * time.Minute, true},
		{"PT1H-", 0, false},
		{"P", 0, false},
		{"PT", 0, false},
		{"1h", 0, false},
		{"P1W", 0, false},
	} {
		got, err := ParseISODuration(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseISODuration(%q) = %v, %v; want %v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestValidateGroupConfigs(t *testing.T) {
	b := Default()
	for _, tc := range []struct {
		m      map[string]string
		reason string // "" for valid
	}{
		{map[string]string{"share.auto.offset.reset": "by_duration:PT1H", "share.record.lock.duration.ms": "45000"}, ""},
		{map[string]string{"share.auto.offset.reset": "by_duration:-PT1H"}, "must be either"},
		{map[string]string{"share.record.lock.duration.ms": "14999"}, "must be in the range 15000 to 60000 inclusive."},
		{map[string]string{"consumer.session.timeout.ms": "45000", "consumer.heartbeat.interval.ms": "15000"}, ""},
		{map[string]string{"unknown": "1"}, "Unknown group config name: unknown"},
	} {
		err := b.ValidateGroupConfigs(tc.m)
		switch {
		case tc.reason == "" && err != nil:
			t.Errorf("%v: %v", tc.m, err)
		case tc.reason != "" && (err == nil || !strings.Contains(err.Error(), tc.reason) || !errors.Is(err, ErrInvalidConfig)):
			t.Errorf("%v: %v, want INVALID_CONFIG with %q", tc.m, err, tc.reason)
		}
	}
	// An override the broker's bounds no longer allow is clamped into them; an unset key
	// takes the broker's value.
	if v := b.GroupValue(map[string]string{"share.record.lock.duration.ms": "90000"}, "share.record.lock.duration.ms"); v != "60000" {
		t.Errorf("clamped lock duration %s, want 60000", v)
	}
	if v := b.GroupValue(nil, "share.session.timeout.ms"); v != "45000" {
		t.Errorf("unset share.session.timeout.ms %s, want the broker's 45000", v)
	}
}
