// Command activity is activity tracking with Gregor Streams: it reads page views from
// --input, JSON such as
//
//	{"user":"alice","page":"/cart","time":"2026-01-01T10:00:12Z"}
//
// and writes to --output each user's count of page views per tumbling --window (a minute),
// keyed user@window-start (RFC 3339, UTC), the count as decimal text, updated with every
// view until SIGTERM or an interrupt.
//
//	go run ./examples/activity --bootstrap-server 127.0.0.1:9092 \
//		--input page-views --output views-per-minute --application-id activity
//
// A view's event time is its "time", or the record's timestamp when it has none. Views
// arriving out of order still count while their window is open: until the stream time
// passes the window's end by --grace; later ones are dropped.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/gregor-project/gregor/streams"
	"github.com/gregor-project/gregor/streams/serde"
)

// PageView is one input record's value.
type PageView struct {
	User string    `json:"user"`
	Page string    `json:"page"`
	Time time.Time `json:"time"`
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "activity:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("activity", flag.ContinueOnError)
	brokers := fs.String("bootstrap-server", "127.0.0.1:9092", "Kafka bootstrap servers, comma separated host:port")
	input := fs.String("input", "", "topic of page views (JSON)")
	output := fs.String("output", "", "topic of counts per user and window")
	appID := fs.String("application-id", "activity", "application.id: consumer group and internal topic prefix")
	guarantee := fs.String("processing-guarantee", string(streams.AtLeastOnce), "at_least_once or exactly_once_v2")
	window := fs.Duration("window", time.Minute, "window size")
	grace := fs.Duration("grace", time.Minute, "how long after its end a window still accepts late views")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *input == "" || *output == "" {
		return fmt.Errorf("--input and --output are required")
	}

	b := streams.NewBuilder()
	views := streams.StreamWith(b, *input, streams.Consumed[string, PageView]{
		Key: serde.String, Value: serde.JSON[PageView](),
		TimestampExtractor: func(r streams.Record[string, PageView], _ time.Time) time.Time {
			if r.Value.Time.IsZero() {
				return r.Timestamp
			}
			return r.Value.Time
		},
	})
	byUser := streams.GroupBy(views.Filter(func(_ string, v PageView) bool { return v.User != "" }),
		func(_ string, v PageView) string { return v.User }, serde.String, streams.Named("views-by-user"))
	counts := streams.CountWindowed(streams.WindowedBy(byUser, streams.TumblingWindows(*window, *grace)), streams.Named("views-per-window"))
	out := streams.Map(streams.ToStream(counts), func(w streams.Windowed[string], n int64) (string, int64) {
		return w.Key + "@" + w.Window.Start.UTC().Format(time.RFC3339), n
	})
	streams.To(out, *output, serde.String, serde.Int64Text)

	app, err := streams.New(b, streams.Config{
		ApplicationID: *appID,
		Brokers:       strings.Split(*brokers, ","),
		Guarantee:     streams.Guarantee(*guarantee),
		// A view that is not JSON is logged and skipped.
		DeserializationExceptionHandler: streams.LogAndContinue,
		Logger:                          slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	fmt.Fprint(os.Stderr, app.Describe())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return app.Run(ctx)
}
