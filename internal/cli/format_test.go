package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func testRecord() *kgo.Record {
	return &kgo.Record{
		Topic:     "orders",
		Partition: 2,
		Offset:    42,
		Timestamp: time.UnixMilli(1700000000123),
		Key:       []byte("k1"),
		Value:     []byte("hello world"),
		Headers: []kgo.RecordHeader{
			{Key: "h1", Value: []byte("v1")},
			{Key: "h2", Value: []byte("a=b")},
		},
	}
}

func TestRecordFormat(t *testing.T) {
	nullRec := &kgo.Record{Topic: "t", Timestamp: time.UnixMilli(5)}
	tests := []struct {
		format string
		rec    *kgo.Record
		want   string
	}{
		{DefaultConsumeFormat, testRecord(), "hello world\n"},
		{`%k %v %o %p %T`, testRecord(), "k1 hello world 42 2 1700000000123"},
		{`%t/%p@%o\t%h\n`, testRecord(), "orders/2@42\th1=v1,h2=a=b\n"},
		{`100%% %v\\n`, testRecord(), `100% hello world\n`},
		{`[%h]`, nullRec, "[]"},
		{`%k|%v`, nullRec, "null|null"},
		{`\r\n`, nullRec, "\r\n"},
		{``, testRecord(), ""},
		{`plain`, testRecord(), "plain"},
	}
	for _, tt := range tests {
		f, err := parseRecordFormat(tt.format)
		if err != nil {
			t.Fatalf("parse %q: %v", tt.format, err)
		}
		if got := string(f.appendRecord(nil, tt.rec)); got != tt.want {
			t.Errorf("format %q: got %q, want %q", tt.format, got, tt.want)
		}
	}
}

func TestRecordFormatAppends(t *testing.T) {
	f, err := parseRecordFormat(`%o,`)
	if err != nil {
		t.Fatal(err)
	}
	buf := f.appendRecord([]byte("x:"), testRecord())
	if got := string(buf); got != "x:42," {
		t.Fatalf("got %q", got)
	}
}

func TestRecordFormatErrors(t *testing.T) {
	for _, s := range []string{`%`, `%x`, `abc\`, `\q`, `%v %z`} {
		if _, err := parseRecordFormat(s); err == nil {
			t.Errorf("format %q: no error", s)
		}
	}
}

func TestRecordJSON(t *testing.T) {
	b, err := appendRecordJSON(nil, testRecord())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(b), "}\n") || strings.Count(string(b), "\n") != 1 {
		t.Fatalf("want one line, got %q", b)
	}
	var got jsonRecord
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Topic != "orders" || got.Partition != 2 || got.Offset != 42 || got.Timestamp != 1700000000123 ||
		*got.Key != "k1" || *got.Value != "hello world" || len(got.Headers) != 2 || *got.Headers[1].Value != "a=b" {
		t.Fatalf("unexpected %+v", got)
	}

	b, err = appendRecordJSON(nil, &kgo.Record{Topic: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"key":null`) || !strings.Contains(string(b), `"value":null`) || !strings.Contains(string(b), `"headers":[]`) {
		t.Fatalf("null key/value: %s", b)
	}
}
