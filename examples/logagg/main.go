// Command logagg is log aggregation with Gregor Streams: it reads log lines from --input,
// JSON such as
//
//	{"service":"api","level":"ERROR","message":"upstream timeout","time":"2026-01-01T10:00:12Z"}
//
// counts each service's errors (level ERROR, any case) per tumbling --window (a minute), and
// writes the counts to --output, keyed service@window-start (RFC 3339, UTC), the count as
// decimal text, updated with every error. When a service's count in a window goes above
// --threshold it writes one alert to --alerts, JSON with the service, the window and the
// count that crossed. It runs until SIGTERM or an interrupt.
//
//	go run ./examples/logagg --bootstrap-server 127.0.0.1:9092 --input logs \
//		--output errors-per-minute --alerts error-alerts --threshold 10 --application-id logagg
//
// A line's event time is its "time", or the record's timestamp when it has none. Errors
// arriving out of order still count while their window is open: until the stream time
// passes the window's end by --grace; later ones are dropped. Lines that are not JSON are
// logged and skipped.
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

// LogLine is one input record's value.
type LogLine struct {
	Service string    `json:"service"`
	Level   string    `json:"level"`
	Message string    `json:"message"`
	Time    time.Time `json:"time"`
}

// Alert is written when a service's errors in a window go above the threshold.
type Alert struct {
	Service     string    `json:"service"`
	WindowStart time.Time `json:"window_start"`
	WindowEnd   time.Time `json:"window_end"`
	Errors      int64     `json:"errors"`
	Threshold   int64     `json:"threshold"`
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "logagg:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("logagg", flag.ContinueOnError)
	brokers := fs.String("bootstrap-server", "127.0.0.1:9092", "Kafka bootstrap servers, comma separated host:port")
	input := fs.String("input", "", "topic of log lines (JSON)")
	output := fs.String("output", "", "topic of error counts per service and window")
	alerts := fs.String("alerts", "", "topic of alerts")
	threshold := fs.Int64("threshold", 10, "errors per service and window above which an alert is written")
	appID := fs.String("application-id", "logagg", "application.id: consumer group and internal topic prefix")
	guarantee := fs.String("processing-guarantee", string(streams.AtLeastOnce), "at_least_once or exactly_once_v2")
	window := fs.Duration("window", time.Minute, "window size")
	grace := fs.Duration("grace", time.Minute, "how long after its end a window still accepts late errors")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *input == "" || *output == "" || *alerts == "" {
		return fmt.Errorf("--input, --output and --alerts are required")
	}

	b := streams.NewBuilder()
	lines := streams.StreamWith(b, *input, streams.Consumed[string, LogLine]{
		Key: serde.String, Value: serde.JSON[LogLine](),
		TimestampExtractor: func(r streams.Record[string, LogLine], _ time.Time) time.Time {
			if r.Value.Time.IsZero() {
				return r.Timestamp
			}
			return r.Value.Time
		},
	})
	errs := lines.Filter(func(_ string, l LogLine) bool { return l.Service != "" && strings.EqualFold(l.Level, "ERROR") })
	byService := streams.GroupBy(errs, func(_ string, l LogLine) string { return l.Service }, serde.String, streams.Named("errors-by-service"))
	counts := streams.ToStream(streams.CountWindowed(streams.WindowedBy(byService, streams.TumblingWindows(*window, *grace)), streams.Named("errors-per-window")))
	streams.To(streams.Map(counts, func(w streams.Windowed[string], n int64) (string, int64) {
		return w.Key + "@" + w.Window.Start.UTC().Format(time.RFC3339), n
	}), *output, serde.String, serde.Int64Text)
	// Every error updates its window's count by one, so the count is threshold+1 exactly once.
	crossed := counts.Filter(func(_ streams.Windowed[string], n int64) bool { return n == *threshold+1 })
	streams.To(streams.Map(crossed, func(w streams.Windowed[string], n int64) (string, Alert) {
		return w.Key + "@" + w.Window.Start.UTC().Format(time.RFC3339),
			Alert{Service: w.Key, WindowStart: w.Window.Start.UTC(), WindowEnd: w.Window.End.UTC(), Errors: n, Threshold: *threshold}
	}), *alerts, serde.String, serde.JSON[Alert]())

	app, err := streams.New(b, streams.Config{
		ApplicationID:                   *appID,
		Brokers:                         strings.Split(*brokers, ","),
		Guarantee:                       streams.Guarantee(*guarantee),
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
