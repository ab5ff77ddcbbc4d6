package streams_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/gregor-project/gregor/streams"
	"github.com/gregor-project/gregor/streams/serde"
	"github.com/gregor-project/gregor/streams/streamstest"
)

// totals keeps a sum per key in a store and, on each punctuation, forwards every total with
// the clock that fired ("stream" or "wall") as key prefix.
type totals struct {
	ctx   streams.ProcessorContext[string, int64]
	store streams.KeyValueStore[string, int64]
}

func (p *totals) Init(ctx streams.ProcessorContext[string, int64]) error {
	p.ctx = ctx
	s, err := streams.GetKeyValueStore[string, int64](ctx, "totals")
	if err != nil {
		return err
	}
	p.store = s
	ctx.Schedule(10*time.Millisecond, streams.StreamTime, func(now time.Time) error { return p.emit("stream", now) })
	ctx.Schedule(time.Second, streams.WallClockTime, func(now time.Time) error { return p.emit("wall", now) })
	return nil
}

func (p *totals) emit(clock string, now time.Time) error {
	for k, v := range p.store.All() {
		if err := p.ctx.Forward(streams.Record[string, int64]{Key: clock + ":" + k, Value: v, Timestamp: now}); err != nil {
			return err
		}
	}
	return nil
}

func (p *totals) Process(r streams.Record[string, int64]) error {
	if md, ok := p.ctx.RecordMetadata(); !ok || md.Topic != "in" {
		return fmt.Errorf("record metadata %+v %v", md, ok)
	}
	old, _, err := p.store.Get(r.Key)
	if err != nil {
		return err
	}
	return p.store.Put(r.Key, old+r.Value)
}

func (p *totals) Close() error { return nil }

func TestProcessorAPIPunctuators(t *testing.T) {
	b := streams.NewBuilder()
	streams.AddKeyValueStore(b, "totals", serde.String, serde.Int64)
	s := streams.Stream(b, "in", serde.String, serde.Int64)
	out := streams.Process(s, func() streams.Processor[string, int64, string, int64] { return &totals{} }, []string{"totals"})
	streams.To(out, "out", serde.String, serde.Int64)

	d := streamstest.New(t, b)
	in := streamstest.Input(d, "in", serde.String, serde.Int64)
	o := streamstest.Output(d, "out", serde.String, serde.Int64)
	type got = streams.KeyValue[string, int64]

	// Stream time: the first record fires the punctuator (scheduled before any record), then
	// it fires as stream time passes each 10 ms boundary, once however many it skipped, and
	// an out-of-order record does not move stream time back.
	in.Pipe("a", 1, at(0))
	equal(t, "first record", o.ReadKeyValues(), []got{{"stream:a", 1}})
	in.Pipe("b", 2, at(5))
	equal(t, "before the boundary", o.ReadKeyValues(), nil)
	in.Pipe("a", 3, at(2)) // out of order
	equal(t, "out of order", o.ReadKeyValues(), nil)
	in.Pipe("b", 4, at(35))
	equal(t, "boundary passed", o.ReadKeyValues(), []got{{"stream:a", 4}, {"stream:b", 6}})
	in.Pipe("a", 1, at(39))
	equal(t, "same interval", o.ReadKeyValues(), nil)

	// Wall clock: only the driver's clock fires it.
	d.AdvanceWallClock(999 * time.Millisecond)
	equal(t, "before a second", o.ReadKeyValues(), nil)
	d.AdvanceWallClock(time.Millisecond)
	rs := o.ReadRecords()
	if len(rs) != 2 || rs[0].Key != "wall:a" || rs[0].Value != 5 || rs[1].Value != 6 ||
		!rs[0].Timestamp.Equal(streamstest.Start.Add(time.Second)) {
		t.Fatalf("wall-clock punctuation %+v", rs)
	}
	if v, _, _ := streamstest.KeyValueStore[string, int64](d, "totals").Get("a"); v != 5 {
		t.Fatalf("store total of a = %d, want 5", v)
	}
	if n := len(streamstest.Output(d, "totals-changelog", serde.String, serde.Int64).ReadRecords()); n != 5 {
		t.Fatalf("%d changelog records, want one per put (5)", n)
	}
}
