package streams_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/gregor-project/gregor/streams"
	"github.com/gregor-project/gregor/streams/serde"
	"github.com/gregor-project/gregor/streams/streamstest"
)

// BenchmarkStreamStreamLeftJoinDriver is a left stream-stream join's processing cost: one
// record per op, alternating sides over 1000 keys, one millisecond apart, in a 100 ms window
// (both window stores, the shared outer store and their changelogs; half the left records
// wait for their window to close).
func BenchmarkStreamStreamLeftJoinDriver(b *testing.B) {
	bl := streams.NewBuilder()
	l := streams.Stream(bl, "left", serde.String, serde.String)
	r := streams.Stream(bl, "right", serde.String, serde.String)
	streams.To(streams.LeftJoinStreams(l, r, func(a, c string, _ bool) string { return a + c },
		streams.JoinTimeDifferenceAndGrace(100*time.Millisecond, 10*time.Millisecond)), "out", serde.String, serde.String)
	d := streamstest.New(b, bl)
	lt := streamstest.Input(d, "left", serde.String, serde.String)
	rt := streamstest.Input(d, "right", serde.String, serde.String)
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprint("k", i)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		k := keys[(i*7)%len(keys)]
		if i%2 == 0 {
			lt.Pipe(k, "l", at(int64(i)))
		} else if i%4 == 1 {
			rt.Pipe(k, "r", at(int64(i)))
		} else {
			rt.Pipe(keys[(i*7+1)%len(keys)], "r", at(int64(i)))
		}
		if i%1024 == 0 {
			for _, topic := range []string{"out", d.Raw().TopicName("KSTREAM-JOINTHIS-0000000004-store-changelog"),
				d.Raw().TopicName("KSTREAM-OUTEROTHER-0000000005-store-changelog"), d.Raw().TopicName("KSTREAM-OUTERSHARED-0000000004-store-changelog")} {
				d.Raw().ReadOutput(topic)
			}
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
