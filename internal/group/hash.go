package group

import (
	"math"
	"unicode/utf16"
)

// TopicName is the internal compacted topic holding groups and committed offsets.
const TopicName = "__consumer_offsets"

// PartitionFor is the __consumer_offsets partition that coordinates group, as Kafka
// computes it: Utils.abs(groupId.hashCode()) % n, where hashCode is Java's String.hashCode
// (h = 31*h + c over the UTF-16 code units, in wrapping int32 arithmetic) and Utils.abs
// maps Integer.MIN_VALUE to 0. Group ids arrive as UTF-8; invalid bytes count as U+FFFD,
// as Java's decoder replaces them (Java may merge a malformed multi-byte sequence into one
// replacement character where Go yields one per byte).
func PartitionFor(group string, n int32) int32 {
	var h int32
	for _, r := range group {
		if r >= 0x10000 {
			hi, lo := utf16.EncodeRune(r)
			h = 31*h + hi
			h = 31*h + lo
		} else {
			h = 31*h + r
		}
	}
	switch {
	case h == math.MinInt32:
		h = 0
	case h < 0:
		h = -h
	}
	return h % n
}
