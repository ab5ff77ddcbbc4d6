package streams_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/gregor-project/gregor/streams"
	"github.com/gregor-project/gregor/streams/serde"
	"github.com/gregor-project/gregor/streams/streamstest"
)

// BenchmarkWindowedCountDriver is the processing cost of a count per window kind through the
// test driver: one record per op, 1,000 keys, a record every millisecond of stream time,
// windows of a second (sessions: a gap of 50 ms), so each key has windows open and expiring.
func BenchmarkWindowedCountDriver(b *testing.B) {
	for _, kind := range []string{"tumbling", "sliding", "session"} {
		b.Run(kind, func(b *testing.B) {
			bl := streams.NewBuilder()
			g := streams.GroupByKey(streams.Stream(bl, "in", serde.String, serde.String))
			var t streams.KTable[streams.Windowed[string], int64]
			ks := streams.WindowedSerde(serde.String, time.Second)
			switch kind {
			case "tumbling":
				t = streams.CountWindowed(streams.WindowedBy(g, streams.TumblingWindows(time.Second, 0)), streams.Named("w"))
			case "sliding":
				t = streams.CountWindowed(streams.SlidingWindowedBy(g, streams.SlidingWindowsOf(time.Second, 0)), streams.Named("w"))
			case "session":
				t = streams.CountSessionWindowed(streams.SessionWindowedBy(g, streams.SessionWindowsOf(50*time.Millisecond, 0)), streams.Named("w"))
				ks = streams.SessionWindowedSerde(serde.String)
			}
			streams.To(streams.ToStream(t), "out", ks, serde.Int64)
			d := streamstest.New(b, bl)
			in := streamstest.Input(d, "in", serde.String, serde.String)
			keys := make([]string, 1000)
			for i := range keys {
				keys[i] = "k" + strconv.Itoa(i)
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				in.Pipe(keys[(i*7919)%len(keys)], "v", at(int64(i)))
				if i%1024 == 0 {
					d.Raw().ReadOutput("out")
					d.Raw().ReadOutput(d.Raw().TopicName("w-changelog"))
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
