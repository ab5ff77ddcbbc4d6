package serde_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/gregor-project/gregor/streams/serde"
)

// roundTrip serializes v, compares the bytes with want, and deserializes them back.
func roundTrip[T comparable](t *testing.T, s serde.Serde[T], v T, want []byte) {
	t.Helper()
	b, err := s.Serialize("t", v)
	if err != nil {
		t.Fatalf("serialize %v: %v", v, err)
	}
	if !bytes.Equal(b, want) {
		t.Fatalf("serialize %v = %x, want %x", v, b, want)
	}
	got, err := s.Deserialize("t", b)
	if err != nil {
		t.Fatalf("deserialize %x: %v", b, err)
	}
	if got != v {
		t.Fatalf("round trip of %v gave %v", v, got)
	}
}

// The byte layouts are Kafka's Java serializers' (IntegerSerializer, LongSerializer, ...).
func TestBuiltinsMatchKafkaBytes(t *testing.T) {
	roundTrip(t, serde.String, "héllo", []byte("héllo"))
	roundTrip(t, serde.Int32, int32(1), []byte{0, 0, 0, 1})
	roundTrip(t, serde.Int32, int32(-2), []byte{0xff, 0xff, 0xff, 0xfe})
	roundTrip(t, serde.Int64, int64(258), []byte{0, 0, 0, 0, 0, 0, 1, 2})
	roundTrip(t, serde.Int64, int64(-1), bytes.Repeat([]byte{0xff}, 8))
	roundTrip(t, serde.Int64Text, int64(-1234), []byte("-1234"))
	b, err := serde.Bytes.Serialize("t", []byte{1, 2})
	if err != nil || !bytes.Equal(b, []byte{1, 2}) {
		t.Fatalf("bytes: %x %v", b, err)
	}
}

func TestBadBytesAreErrors(t *testing.T) {
	if _, err := serde.Int32.Deserialize("t", []byte{1}); err == nil {
		t.Fatal("int32 from 1 byte: no error")
	}
	if _, err := serde.Int64.Deserialize("t", []byte{1, 2, 3}); err == nil {
		t.Fatal("int64 from 3 bytes: no error")
	}
	if _, err := serde.Int64Text.Deserialize("t", []byte("x1")); err == nil {
		t.Fatal("decimal from x1: no error")
	}
	if _, err := serde.JSON[map[string]int]().Deserialize("t", []byte("{")); err == nil {
		t.Fatal("JSON from {: no error")
	}
}

func TestJSONAndUserDefined(t *testing.T) {
	type view struct {
		User string `json:"user"`
		Page int    `json:"page"`
	}
	roundTrip(t, serde.JSON[view](), view{User: "ann", Page: 3}, []byte(`{"user":"ann","page":3}`))

	upper := serde.New(
		func(_ string, v string) ([]byte, error) { return []byte(strings.ToUpper(v)), nil },
		func(_ string, b []byte) (string, error) {
			if len(b) == 0 {
				return "", errors.New("empty")
			}
			return strings.ToLower(string(b)), nil
		})
	roundTrip(t, upper, "abc", []byte("ABC"))
	if _, err := upper.Deserialize("t", []byte{}); err == nil {
		t.Fatal("user-defined error was dropped")
	}
}
