// Package serde turns typed keys and values into record bytes and back, as Kafka's
// Serializer/Deserializer pairs do, with generics: a Serde[T] is one type's two directions.
//
// The built-in serdes produce the bytes Kafka's Java serializers produce, so a Gregor Streams
// application and a Java one read each other's topics:
//
//   - Bytes: the bytes themselves (ByteArraySerializer).
//   - String: UTF-8 (StringSerializer).
//   - Int32, Int64: four and eight bytes big-endian (IntegerSerializer, LongSerializer).
//   - Int64Text: an int64 as decimal text ("42"), what a console consumer prints as is.
//   - JSON[T]: encoding/json.
//   - New: a user's own pair of functions.
//
// A nil byte slice is Kafka's null (a tombstone in a compacted topic); the streams runtime
// never hands it to a Deserialize (it stands for "no value" before deserialization), so a
// Serde only ever sees real bytes.
package serde
