package streams_test

import (
	"testing"
	"time"

	"github.com/gregor-project/gregor/streams"
	"github.com/gregor-project/gregor/streams/serde"
	"github.com/gregor-project/gregor/streams/streamstest"
)

type event struct {
	User string `json:"user"`
	At   int64  `json:"at"` // event time, ms
}

// The event time inside the value, not the record's timestamp, places each event in its
// window and moves stream time; an event without a time is dropped.
func TestTimestampExtractor(t *testing.T) {
	b := streams.NewBuilder()
	s := streams.StreamWith(b, "events", streams.Consumed[string, event]{
		Key: serde.String, Value: serde.JSON[event](),
		TimestampExtractor: func(r streams.Record[string, event], _ time.Time) time.Time {
			if r.Value.At == 0 {
				return time.UnixMilli(-1)
			}
			return time.UnixMilli(r.Value.At)
		},
	})
	byUser := streams.GroupBy(s, func(_ string, e event) string { return e.User }, serde.String)
	counts := streams.CountWindowed(streams.WindowedBy(byUser, streams.TumblingWindows(time.Minute, 0)))
	ws := streams.WindowedSerde(serde.String, time.Minute)
	streams.To(streams.ToStream(counts), "per-minute", ws, serde.Int64)

	d := streamstest.New(t, b)
	in := streamstest.Input(d, "events", serde.String, serde.JSON[event]())
	recordTime := at(0) // the same record timestamp for all: only the extractor separates them
	in.Pipe("", event{"ann", 60_000}, recordTime)
	in.Pipe("", event{"ann", 119_999}, recordTime)
	in.Pipe("", event{"ann", 120_000}, recordTime)
	in.Pipe("", event{"bob", 0}, recordTime)
	in.Pipe("", event{"bob", 30_000}, recordTime) // its window closed at 60 s: late
	var got []windowed
	for _, r := range streamstest.Output(d, "per-minute", ws, serde.Int64).ReadRecords() {
		got = append(got, windowed{r.Key.Key, r.Key.Window.Start.UnixMilli(), r.Key.Window.End.UnixMilli(), r.Value})
		if r.Timestamp.Equal(recordTime) {
			t.Fatalf("output %v kept the record timestamp", r)
		}
	}
	equal(t, "per-minute counts", got, []windowed{{"ann", 60_000, 120_000, 1}, {"ann", 60_000, 120_000, 2}, {"ann", 120_000, 180_000, 1}})
	if d.SkippedRecords() != 1 || d.DroppedRecords() != 1 {
		t.Fatalf("skipped %d (want 1, no time), dropped %d (want 1, late)", d.SkippedRecords(), d.DroppedRecords())
	}
}
