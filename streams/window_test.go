package streams_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/gregor-project/gregor/streams"
	"github.com/gregor-project/gregor/streams/serde"
	"github.com/gregor-project/gregor/streams/streamstest"
)

type windowed struct {
	key        string
	start, end int64
	count      int64
}

// bruteWindows computes a windowed count by trying every multiple of advance from well
// before a record's time as a window start, independently of the library's window
// arithmetic.
func bruteWindows(size, advance, grace int64, keys []string, times []int64) (out []windowed, dropped int64) {
	counts := map[string]int64{}
	streamTime := int64(-1)
	for i, ts := range times {
		streamTime = max(streamTime, ts)
		for start := (ts - 3*size) / advance * advance; start <= ts; start += advance {
			end := start + size
			if ts < start || ts >= end {
				continue
			}
			if end <= streamTime-grace {
				dropped++ // as Kafka: once for each closed window the record falls in
				continue
			}
			id := fmt.Sprint(keys[i], start)
			counts[id]++
			out = append(out, windowed{keys[i], start, end, counts[id]})
		}
	}
	return out, dropped
}

func TestWindowedCount(t *testing.T) {
	base := at(0).UnixMilli()
	// Relative times: in order, out of order within grace, and late past it.
	rel := []int64{1, 3, 12, 9, 25, 11, 14, 8, 31, 19, 20, 40, 33, 29}
	keys := []string{"a", "b", "a", "a", "b", "a", "b", "a", "a", "b", "a", "b", "a", "a"}
	for _, tc := range []struct {
		name                 string
		size, advance, grace time.Duration
	}{
		{"tumbling", 10 * time.Millisecond, 10 * time.Millisecond, 5 * time.Millisecond},
		{"tumbling without grace", 10 * time.Millisecond, 10 * time.Millisecond, 0},
		{"hopping", 10 * time.Millisecond, 5 * time.Millisecond, 3 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := streams.NewBuilder()
			s := streams.Stream(b, "in", serde.String, serde.String)
			w := streams.HoppingWindows(tc.size, tc.advance, tc.grace)
			counts := streams.CountWindowed(streams.WindowedBy(streams.GroupByKey(s), w), streams.Named("w"))
			ws := streams.WindowedSerde(serde.String, tc.size)
			streams.To(streams.ToStream(counts), "out", ws, serde.Int64)

			d := streamstest.New(t, b)
			in := streamstest.Input(d, "in", serde.String, serde.String)
			var times []int64
			for i, r := range rel {
				in.Pipe(keys[i], "v", at(r))
				times = append(times, base+r)
			}
			want, wantDropped := bruteWindows(tc.size.Milliseconds(), tc.advance.Milliseconds(), tc.grace.Milliseconds(), keys, times)
			var got []windowed
			for _, r := range streamstest.Output(d, "out", ws, serde.Int64).ReadRecords() {
				got = append(got, windowed{r.Key.Key, r.Key.Window.Start.UnixMilli(), r.Key.Window.End.UnixMilli(), r.Value})
			}
			equal(t, "windowed counts", got, want)
			if d.DroppedRecords() != wantDropped || wantDropped == 0 {
				t.Fatalf("dropped %d, want %d (and some)", d.DroppedRecords(), wantDropped)
			}
			// The newest window of a is in the store.
			last := want[len(want)-1]
			store := streamstest.KeyValueStore[streams.Windowed[string], int64](d, "w")
			k := streams.Windowed[string]{Key: last.key, Window: streams.Window{Start: time.UnixMilli(last.start), End: time.UnixMilli(last.end)}}
			if v, ok, err := store.Get(k); !ok || err != nil || v != last.count {
				t.Fatalf("store %v = %d %v %v, want %d", k, v, ok, err, last.count)
			}
		})
	}
}

func TestWindowedSerdeIsKafkas(t *testing.T) {
	ws := streams.WindowedSerde(serde.String, time.Minute)
	w := streams.Windowed[string]{Key: "k", Window: streams.Window{Start: time.UnixMilli(258), End: time.UnixMilli(258 + 60000)}}
	b, err := ws.Serialize("t", w)
	if err != nil || string(b) != "k\x00\x00\x00\x00\x00\x00\x01\x02" {
		t.Fatalf("serialized %q %v", b, err)
	}
	back, err := ws.Deserialize("t", b)
	if err != nil || back != w {
		t.Fatalf("deserialized %v %v", back, err)
	}
}
