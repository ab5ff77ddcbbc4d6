package cli

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestSplitLine(t *testing.T) {
	tests := []struct {
		line, sep  string
		key, value []byte
		err        bool
	}{
		{"hello", "", nil, []byte("hello"), false},
		{"k:v", ":", []byte("k"), []byte("v"), false},
		{"k:v:w", ":", []byte("k"), []byte("v:w"), false},
		{":v", ":", []byte{}, []byte("v"), false},
		{"k:", ":", []byte("k"), []byte{}, false},
		{"k<=>v", "<=>", []byte("k"), []byte("v"), false},
		{"k\tv", "\t", []byte("k"), []byte("v"), false},
		{"nosep", ":", nil, nil, true},
		{"", "", nil, []byte{}, false},
	}
	for _, tt := range tests {
		k, v, err := splitLine([]byte(tt.line), tt.sep)
		if (err != nil) != tt.err {
			t.Errorf("%q sep %q: err %v", tt.line, tt.sep, err)
			continue
		}
		if tt.err {
			if !errors.Is(err, errNoKeySeparator) {
				t.Errorf("%q: error %v", tt.line, err)
			}
			continue
		}
		if (k == nil) != (tt.key == nil) || string(k) != string(tt.key) || string(v) != string(tt.value) {
			t.Errorf("%q sep %q: got key %q (nil %v) value %q", tt.line, tt.sep, k, k == nil, v)
		}
	}
}

func TestTrimNewline(t *testing.T) {
	for in, want := range map[string]string{"a\n": "a", "a\r\n": "a", "a": "a", "\n": "", "a\r": "a", "a\n\n": "a\n"} {
		if got := string(trimNewline([]byte(in))); got != want {
			t.Errorf("%q: got %q want %q", in, got, want)
		}
	}
}

func TestParseHeaders(t *testing.T) {
	hs, err := parseHeaders([]string{"a=1", "b=x=y", "a=2", "empty="})
	if err != nil {
		t.Fatal(err)
	}
	want := []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: "b", Value: []byte("x=y")}, {Key: "a", Value: []byte("2")}, {Key: "empty", Value: []byte{}}}
	if !reflect.DeepEqual(hs, want) {
		t.Fatalf("got %+v", hs)
	}
	for _, bad := range []string{"novalue", "=v"} {
		if _, err := parseHeaders([]string{bad}); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestParseKeyValues(t *testing.T) {
	m, err := parseKeyValues([]string{"retention.ms=1000", "cleanup.policy=compact,delete"})
	if err != nil {
		t.Fatal(err)
	}
	if m["retention.ms"] != "1000" || m["cleanup.policy"] != "compact,delete" {
		t.Fatalf("got %v", m)
	}
	if _, err := parseKeyValues([]string{"a=1", "a=2"}); err == nil {
		t.Fatal("duplicate key accepted")
	}
}

func TestParseBrokers(t *testing.T) {
	got, err := parseBrokers(" a:1, b:2,,")
	if err != nil || !reflect.DeepEqual(got, []string{"a:1", "b:2"}) {
		t.Fatalf("got %v %v", got, err)
	}
	for _, bad := range []string{"", " , ", "hostonly"} {
		if _, err := parseBrokers(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestParseOutput(t *testing.T) {
	for in, want := range map[string]string{"": outputTable, "table": outputTable, "JSON": outputJSON} {
		if got, err := parseOutput(in); err != nil || got != want {
			t.Errorf("%q: %q %v", in, got, err)
		}
	}
	if _, err := parseOutput("yaml"); err == nil {
		t.Error("yaml accepted")
	}
}

func TestAcksAndCompressionOptions(t *testing.T) {
	for _, a := range []string{"0", "1", "all", "-1", "ALL"} {
		for _, idem := range []bool{true, false} {
			opts, err := acksOptions(a, idem)
			if err != nil {
				t.Fatalf("acks %q: %v", a, err)
			}
			// The options must form a valid client configuration (kgo
			// rejects idempotence with acks != all). No broker is dialed.
			cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers("127.0.0.1:1"))...)
			if err != nil {
				t.Fatalf("acks %q idempotent %v: %v", a, idem, err)
			}
			cl.Close()
		}
	}
	if _, err := acksOptions("2", true); err == nil {
		t.Error("acks 2 accepted")
	}
	for _, c := range []string{"none", "", "gzip", "snappy", "lz4", "ZSTD"} {
		if _, err := compressionOption(c); err != nil {
			t.Errorf("%q: %v", c, err)
		}
	}
	if _, err := compressionOption("brotli"); err == nil {
		t.Error("brotli accepted")
	}
}

func TestParseStartOffset(t *testing.T) {
	if o, err := parseStartOffset(true, ""); err != nil || o.String() != kgo.NewOffset().AtStart().String() {
		t.Errorf("from-beginning: %v %v", o, err)
	}
	tests := map[string]kgo.Offset{
		"":         kgo.NewOffset().AtEnd(),
		"latest":   kgo.NewOffset().AtEnd(),
		"earliest": kgo.NewOffset().AtStart(),
		"17":       kgo.NewOffset().At(17),
		"-5":       kgo.NewOffset().AtEnd().Relative(-5),
	}
	for in, want := range tests {
		got, err := parseStartOffset(false, in)
		if err != nil || got.String() != want.String() {
			t.Errorf("%q: got %v (%v), want %v", in, got, err, want)
		}
	}
	if _, err := parseStartOffset(false, "soon"); err == nil {
		t.Error("bad offset accepted")
	}
}

func TestAlterConfigOps(t *testing.T) {
	ops, err := alterConfigOps([]string{"b=2", "a=1"}, []string{"c", "c"})
	if err != nil {
		t.Fatal(err)
	}
	want := []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "a", Value: kadm.StringPtr("1")},
		{Op: kadm.SetConfig, Name: "b", Value: kadm.StringPtr("2")},
		{Op: kadm.DeleteConfig, Name: "c"},
	}
	if !reflect.DeepEqual(ops, want) {
		t.Fatalf("got %+v", ops)
	}
	for _, bad := range []struct{ set, del []string }{
		{nil, nil},
		{[]string{"a=1"}, []string{"a"}},
		{[]string{"novalue"}, nil},
		{nil, []string{""}},
	} {
		if _, err := alterConfigOps(bad.set, bad.del); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

func TestKafkaErrorText(t *testing.T) {
	if got := kafkaErrorText(kerr.TopicAlreadyExists, "Topic 'x' already exists."); got != "TOPIC_ALREADY_EXISTS: Topic 'x' already exists." {
		t.Errorf("got %q", got)
	}
	if got := kafkaErrorText(kerr.UnknownTopicOrPartition, ""); !strings.HasPrefix(got, "UNKNOWN_TOPIC_OR_PARTITION: ") {
		t.Errorf("got %q", got)
	}
	if got := kafkaErrorName(errors.Join(errors.New("wrapped"), kerr.InvalidReplicationFactor)); got != "INVALID_REPLICATION_FACTOR" {
		t.Errorf("got %q", got)
	}
	if got := kafkaErrorText(errors.New("dial tcp: refused"), ""); got != "dial tcp: refused" {
		t.Errorf("got %q", got)
	}
}

func TestTopicIDString(t *testing.T) {
	// Kafka prints Uuid as URL-safe base64 without padding: 22 characters.
	var id kadm.TopicID
	for i := range id {
		id[i] = byte(0xf0 + i)
	}
	s := topicIDString(id)
	if len(s) != 22 || strings.ContainsAny(s, "+/=") {
		t.Fatalf("got %q", s)
	}
	if got := topicIDString(kadm.TopicID{}); got != "AAAAAAAAAAAAAAAAAAAAAA" {
		t.Fatalf("zero id: %q", got)
	}
}

func TestOverriddenConfigs(t *testing.T) {
	got := overriddenConfigs([]kadm.Config{
		{Key: "retention.ms", Value: kadm.StringPtr("1000"), Source: kmsg.ConfigSourceDynamicTopicConfig},
		{Key: "segment.bytes", Value: kadm.StringPtr("1073741824"), Source: kmsg.ConfigSourceDefaultConfig},
		{Key: "x.password", Sensitive: true, Source: kmsg.ConfigSourceDynamicTopicConfig},
		{Key: "min.insync.replicas", Value: kadm.StringPtr("2"), Source: kmsg.ConfigSourceStaticBrokerConfig},
	})
	want := map[string]string{"retention.ms": "1000", "x.password": "(sensitive)"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v", got)
	}
}
