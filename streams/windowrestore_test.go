package streams

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gregor-project/gregor/streams/serde"
)

// A task restored from the changelogs of its session store, sliding-window store and
// suppression buffer goes on exactly as the task that wrote them: the same updates and the
// same final results, including those of windows held back before the restore.
func TestWindowStoresAndBufferRestore(t *testing.T) {
	topology := func() *Builder {
		b := NewBuilder()
		s := Stream(b, "in", serde.String, serde.String)
		sessions := CountSessionWindowed(SessionWindowedBy(GroupByKey(s), SessionWindowsOf(10*time.Millisecond, 5*time.Millisecond)), Named("sessions"))
		sks := SessionWindowedSerde(serde.String)
		To(ToStream(sessions), "session-updates", sks, serde.Int64)
		To(ToStream(Suppress(sessions, UntilWindowCloses(Unbounded()), Named("session-final"))), "session-final", sks, serde.Int64)
		sliding := CountWindowed(SlidingWindowedBy(GroupByKey(s), SlidingWindowsOf(8*time.Millisecond, 3*time.Millisecond)), Named("sliding"))
		wks := WindowedSerde(serde.String, 8*time.Millisecond)
		To(ToStream(sliding), "sliding-updates", wks, serde.Int64)
		To(ToStream(Suppress(sliding, UntilTimeLimit(20*time.Millisecond, Unbounded()), Named("sliding-held"))), "sliding-held", wks, serde.Int64)
		return b
	}
	type in struct {
		key string
		ts  int64
	}
	rng := rand.New(rand.NewPCG(11, 12))
	var records []in
	now, st := int64(1_000_000), int64(0)
	split := -1
	for i := range 400 {
		now += rng.Int64N(6)
		ts := now
		if rng.IntN(4) == 0 {
			ts -= rng.Int64N(20)
		}
		if i >= 200 && split < 0 && ts >= st {
			split = i // in order: the restored task's stream time starts where the other's was
		}
		st = max(st, ts)
		records = append(records, in{string(rune('a' + rng.IntN(4))), ts})
	}
	outputs := []string{"session-updates", "session-final", "sliding-updates", "sliding-held"}
	changelogs := []string{"sessions", "session-final-store", "sliding", "sliding-held-store"}
	pipe := func(d *TestDriver, rs []in) map[string][]RawRecord {
		for _, r := range rs {
			if err := d.PipeRaw("in", []byte(r.key), []byte("x"), time.UnixMilli(r.ts), nil); err != nil {
				t.Fatal(err)
			}
		}
		got := map[string][]RawRecord{}
		for _, o := range outputs {
			got[o] = d.ReadOutput(o)
		}
		return got
	}

	whole, err := NewTestDriver(topology(), "app", time.UnixMilli(0))
	if err != nil {
		t.Fatal(err)
	}
	pipe(whole, records[:split])
	want := pipe(whole, records[split:])

	first, err := NewTestDriver(topology(), "app", time.UnixMilli(0))
	if err != nil {
		t.Fatal(err)
	}
	pipe(first, records[:split])
	restored, err := NewTestDriver(topology(), "app", time.UnixMilli(0))
	if err != nil {
		t.Fatal(err)
	}
	held := 0
	for _, name := range changelogs {
		for _, r := range first.ReadOutput("app-" + name + "-changelog") {
			restored.tasks[0].stores[name].restore(r.Key, r.Value)
		}
	}
	held = len(restored.tasks[0].stores["session-final-store"].(*suppressBuffer).entries)
	if held == 0 || restored.tasks[0].stores["sessions"].(*sessionView[string, int64]).Len() == 0 {
		t.Fatalf("nothing restored: %d held back", held)
	}
	got := pipe(restored, records[split:])
	for _, o := range outputs {
		if len(want[o]) == 0 || !slices.EqualFunc(got[o], want[o], func(a, b RawRecord) bool {
			return string(a.Key) == string(b.Key) && string(a.Value) == string(b.Value) && (a.Value == nil) == (b.Value == nil) && a.Timestamp.Equal(b.Timestamp)
		}) {
			t.Fatalf("%s after the restore: %d records, want %d\n got %q\nwant %q", o, len(got[o]), len(want[o]), got[o], want[o])
		}
	}
	// The buffer's changelog is compacted (the default), the windowed stores' are also
	// deleted past their retention, as Kafka Streams makes them.
	for _, name := range changelogs {
		d := restored.topo.b.stores[name]
		if strings.HasSuffix(name, "-store") != (d.topicConfigs == nil) {
			t.Fatalf("changelog configs of %s: %v", name, d.topicConfigs)
		}
	}
}
