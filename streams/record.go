package streams

import "time"

// Header is a record header, as Kafka's.
type Header struct {
	Key   string
	Value []byte
}

// Record is one typed record flowing through a topology: a key, a value, the record's
// timestamp (stream time advances with it) and its headers.
type Record[K, V any] struct {
	Key       K
	Value     V
	Timestamp time.Time
	Headers   []Header
}

// rec is a record inside a task, untyped: the typed operators assert its key and value to
// their types (a nil key or value is Kafka's null and becomes the zero value). ts is in
// milliseconds since the epoch, as Kafka's record timestamps.
type rec struct {
	key, value any
	ts         int64
	headers    []Header
	// old is the key's previous value in the table forwarding this update, when the table
	// sends old values (a foreign-key join's left table, fkjoin.go); nil otherwise.
	old any
}

// as returns v as a T; a nil v (Kafka's null) is T's zero value.
func as[T any](v any) T {
	if v == nil {
		var z T
		return z
	}
	return v.(T)
}

func millis(t time.Time) int64 { return t.UnixMilli() }

func fromMillis(ms int64) time.Time { return time.UnixMilli(ms) }

func typed[K, V any](r rec) Record[K, V] {
	return Record[K, V]{Key: as[K](r.key), Value: as[V](r.value), Timestamp: fromMillis(r.ts), Headers: r.headers}
}

func untyped[K, V any](r Record[K, V]) rec {
	return rec{key: r.Key, value: r.Value, ts: millis(r.Timestamp), headers: r.Headers}
}
