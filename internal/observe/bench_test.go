package observe

import (
	"testing"
	"time"
)

// What the request path pays for its metrics: one request's six histograms and counter, and
// one partition's topic counters (lookup included).
func BenchmarkRequestObserve(b *testing.B) {
	m := New()
	now := time.Now()
	t := Timing{Received: now, Handling: now.Add(time.Microsecond), Handled: now.Add(50 * time.Microsecond), Sent: now.Add(60 * time.Microsecond)}
	b.ReportAllocs()
	for b.Loop() {
		m.Requests.Observe(0, 11, &t)
	}
}

func BenchmarkTopicProduced(b *testing.B) {
	m := New()
	m.Topics.For("topic-a")
	b.ReportAllocs()
	for b.Loop() {
		m.Topics.For("topic-a").Produced(100, 10000)
	}
}

func BenchmarkTopicProducedParallel(b *testing.B) {
	m := New()
	m.Topics.For("topic-a")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.Topics.For("topic-a").Produced(100, 10000)
		}
	})
}
