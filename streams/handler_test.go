package streams_test

import (
	"context"
	"encoding/binary"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/embed"
	"github.com/gregor-project/gregor/embed/embedtest"
	"github.com/gregor-project/gregor/streams"
	"github.com/gregor-project/gregor/streams/serde"
)

// A value that is not an 8-byte long: LogAndContinue skips it and counts it, LogAndFail
// (the default) stops Run with the error.
func TestDeserializationHandlers(t *testing.T) {
	n := embedtest.Start(t, embed.Options{})
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "nums"); err != nil {
		t.Fatal(err)
	}
	long := func(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }
	if err := cl.ProduceSync(ctx,
		&kgo.Record{Topic: "nums", Value: long(1)},
		&kgo.Record{Topic: "nums", Value: []byte("bad")},
		&kgo.Record{Topic: "nums", Value: long(2)},
	).FirstErr(); err != nil {
		t.Fatal(err)
	}
	build := func(seen chan<- int64) *streams.Builder {
		b := streams.NewBuilder()
		streams.Stream(b, "nums", serde.String, serde.Int64).Foreach(func(_ string, v int64) { seen <- v })
		return b
	}

	seen := make(chan int64, 3)
	app, err := streams.New(build(seen), streams.Config{ApplicationID: "cont", Brokers: []string{n.Addr()}, StateDir: t.TempDir(),
		DeserializationExceptionHandler: streams.LogAndContinue})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	var got []int64
	timeout := time.After(time.Minute) // a deadline for the condition, not a synchronisation
	for len(got) < 2 {
		select {
		case v := <-seen:
			got = append(got, v)
		case <-timeout:
			t.Fatalf("values %v", got)
		}
	}
	if !slices.Equal(got, []int64{1, 2}) || app.SkippedRecords() != 1 {
		t.Fatalf("values %v, skipped %d", got, app.SkippedRecords())
	}
	if err := app.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	seen = make(chan int64, 3)
	app, err = streams.New(build(seen), streams.Config{ApplicationID: "fail", Brokers: []string{n.Addr()}, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := app.Run(rctx); err == nil || !strings.Contains(err.Error(), "offset 1: value") {
		t.Fatalf("Run with LogAndFail: %v", err)
	}
	if v := <-seen; v != 1 || len(seen) != 0 {
		t.Fatalf("processed %d then %d more", v, len(seen))
	}
}
