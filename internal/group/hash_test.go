package group

import "testing"

// Java's String.hashCode values and the partitions Kafka derives (Utils.abs(h) % n), as
// printed by a JVM (OpenJDK, `s.hashCode()`).
func TestPartitionForMatchesJava(t *testing.T) {
	for _, c := range []struct {
		group string
		hash  int32 // "…".hashCode() in Java
		n     int32
		want  int32
	}{
		{"", 0, 50, 0},
		{"hello", 99162322, 50, 22},
		{"test", 3556498, 50, 48},
		{"polygenelubricants", -2147483648, 50, 0}, // Integer.MIN_VALUE: Utils.abs gives 0
		{"Hello World", -862545276, 50, 26},        // negative: abs first, then modulo
		{"my-consumer-group", 1513705513, 50, 13},
		{"😀", 1772899, 50, 49}, // a surrogate pair counts as two chars
		{"é", 233, 7, 2},
		{"Hello World", -862545276, 7, 5},
	} {
		if got := javaHashCode(c.group); got != c.hash {
			t.Errorf("hashCode(%q) = %d, Java says %d", c.group, got, c.hash)
		}
		if got := PartitionFor(c.group, c.n); got != c.want {
			t.Errorf("PartitionFor(%q, %d) = %d, want %d", c.group, c.n, got, c.want)
		}
	}
}

// javaHashCode recomputes the hash PartitionFor uses, for checking the test vectors.
func javaHashCode(s string) int32 {
	var h int32
	for _, u := range []rune(s) {
		if u >= 0x10000 {
			u -= 0x10000
			h = 31*h + (0xD800 + u>>10)
			h = 31*h + (0xDC00 + u&0x3FF)
		} else {
			h = 31*h + u
		}
	}
	return h
}
