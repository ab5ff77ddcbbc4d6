package serde

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
)

// Serde serializes and deserializes values of one type for a topic. Implementations must be
// safe for concurrent use: one Serde serves every task of an application.
type Serde[T any] interface {
	// Serialize returns v's bytes for a record of topic.
	Serialize(topic string, v T) ([]byte, error)
	// Deserialize returns the value of a record of topic from its (non-nil) bytes.
	Deserialize(topic string, b []byte) (T, error)
}

// Funcs is a Serde made of two functions.
type Funcs[T any] struct {
	Ser func(topic string, v T) ([]byte, error)
	De  func(topic string, b []byte) (T, error)
}

// Serialize calls f.Ser.
func (f Funcs[T]) Serialize(topic string, v T) ([]byte, error) { return f.Ser(topic, v) }

// Deserialize calls f.De.
func (f Funcs[T]) Deserialize(topic string, b []byte) (T, error) { return f.De(topic, b) }

// New returns a user-defined Serde from its two directions.
func New[T any](ser func(topic string, v T) ([]byte, error), de func(topic string, b []byte) (T, error)) Serde[T] {
	return Funcs[T]{Ser: ser, De: de}
}

// Bytes passes bytes through unchanged (Kafka's ByteArraySerializer).
var Bytes Serde[[]byte] = Funcs[[]byte]{
	Ser: func(_ string, v []byte) ([]byte, error) { return v, nil },
	De:  func(_ string, b []byte) ([]byte, error) { return b, nil },
}

// String is UTF-8 text (Kafka's StringSerializer).
var String Serde[string] = Funcs[string]{
	Ser: func(_ string, v string) ([]byte, error) { return []byte(v), nil },
	De:  func(_ string, b []byte) (string, error) { return string(b), nil },
}

// Int32 is four bytes big-endian (Kafka's IntegerSerializer).
var Int32 Serde[int32] = Funcs[int32]{
	Ser: func(_ string, v int32) ([]byte, error) { return binary.BigEndian.AppendUint32(nil, uint32(v)), nil },
	De: func(topic string, b []byte) (int32, error) {
		if len(b) != 4 {
			return 0, fmt.Errorf("serde: int32 in %q: %d bytes, want 4", topic, len(b))
		}
		return int32(binary.BigEndian.Uint32(b)), nil
	},
}

// Int64 is eight bytes big-endian (Kafka's LongSerializer).
var Int64 Serde[int64] = Funcs[int64]{
	Ser: func(_ string, v int64) ([]byte, error) { return binary.BigEndian.AppendUint64(nil, uint64(v)), nil },
	De: func(topic string, b []byte) (int64, error) {
		if len(b) != 8 {
			return 0, fmt.Errorf("serde: int64 in %q: %d bytes, want 8", topic, len(b))
		}
		return int64(binary.BigEndian.Uint64(b)), nil
	},
}

// Int64Text is an int64 as decimal text ("-12").
var Int64Text Serde[int64] = Funcs[int64]{
	Ser: func(_ string, v int64) ([]byte, error) { return strconv.AppendInt(nil, v, 10), nil },
	De: func(topic string, b []byte) (int64, error) {
		v, err := strconv.ParseInt(string(b), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("serde: decimal int64 in %q: %w", topic, err)
		}
		return v, nil
	},
}

// JSON encodes T with encoding/json.
func JSON[T any]() Serde[T] {
	return Funcs[T]{
		Ser: func(_ string, v T) ([]byte, error) { return json.Marshal(v) },
		De: func(topic string, b []byte) (T, error) {
			var v T
			if err := json.Unmarshal(b, &v); err != nil {
				return v, fmt.Errorf("serde: JSON in %q: %w", topic, err)
			}
			return v, nil
		},
	}
}
