// Command rollups is metrics rollups with Gregor Streams: it reads measurements from
// --input, JSON such as
//
//	{"host":"web-1","metric":"cpu","value":42.5,"time":"2026-01-01T10:00:12Z"}
//
// and writes to --output the average of each host's metric over hopping windows of
// --window (5 minutes) starting every --advance (a minute), keyed host/metric@window-start
// (RFC 3339, UTC), the value JSON with the window, count, sum and average, updated with
// every measurement until SIGTERM or an interrupt.
//
//	go run ./examples/rollups --bootstrap-server 127.0.0.1:9092 \
//		--input metrics --output metrics-5m --application-id rollups
//
// The windows keep a sum and a count (an average of averages would be wrong) and the
// average is their quotient. A measurement's event time is its "time", or the record's
// timestamp when it has none; one arriving out of order still counts in those of its
// windows that are open: until the stream time passes a window's end by --grace.
// Measurements that are not JSON are logged and skipped.
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

// Measurement is one input record's value.
type Measurement struct {
	Host   string    `json:"host"`
	Metric string    `json:"metric"`
	Value  float64   `json:"value"`
	Time   time.Time `json:"time"`
}

// Rollup is one output record's value: a host's metric over a window.
type Rollup struct {
	Host        string    `json:"host"`
	Metric      string    `json:"metric"`
	WindowStart time.Time `json:"window_start"`
	WindowEnd   time.Time `json:"window_end"`
	Count       int64     `json:"count"`
	Sum         float64   `json:"sum"`
	Avg         float64   `json:"avg"`
}

// sumCount is the state kept per series and window (in the store and its changelog).
type sumCount struct {
	Host   string  `json:"host"`
	Metric string  `json:"metric"`
	Count  int64   `json:"count"`
	Sum    float64 `json:"sum"`
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "rollups:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("rollups", flag.ContinueOnError)
	brokers := fs.String("bootstrap-server", "127.0.0.1:9092", "Kafka bootstrap servers, comma separated host:port")
	input := fs.String("input", "", "topic of measurements (JSON)")
	output := fs.String("output", "", "topic of averages per host, metric and window")
	appID := fs.String("application-id", "rollups", "application.id: consumer group and internal topic prefix")
	guarantee := fs.String("processing-guarantee", string(streams.AtLeastOnce), "at_least_once or exactly_once_v2")
	window := fs.Duration("window", 5*time.Minute, "window size")
	advance := fs.Duration("advance", time.Minute, "how often a window starts")
	grace := fs.Duration("grace", time.Minute, "how long after its end a window still accepts late measurements")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *input == "" || *output == "" {
		return fmt.Errorf("--input and --output are required")
	}

	b := streams.NewBuilder()
	ms := streams.StreamWith(b, *input, streams.Consumed[string, Measurement]{
		Key: serde.String, Value: serde.JSON[Measurement](),
		TimestampExtractor: func(r streams.Record[string, Measurement], _ time.Time) time.Time {
			if r.Value.Time.IsZero() {
				return r.Timestamp
			}
			return r.Value.Time
		},
	})
	ms = ms.Filter(func(_ string, m Measurement) bool { return m.Host != "" && m.Metric != "" })
	bySeries := streams.GroupBy(ms, func(_ string, m Measurement) string { return m.Host + "/" + m.Metric }, serde.String, streams.Named("metrics-by-series"))
	sums := streams.AggregateWindowed(streams.WindowedBy(bySeries, streams.HoppingWindows(*window, *advance, *grace)),
		func() sumCount { return sumCount{} },
		func(_ string, m Measurement, acc sumCount) sumCount {
			return sumCount{Host: m.Host, Metric: m.Metric, Count: acc.Count + 1, Sum: acc.Sum + m.Value}
		}, serde.JSON[sumCount](), streams.Named("rollups"))
	out := streams.Map(streams.ToStream(sums), func(w streams.Windowed[string], a sumCount) (string, Rollup) {
		return w.Key + "@" + w.Window.Start.UTC().Format(time.RFC3339), Rollup{Host: a.Host, Metric: a.Metric,
			WindowStart: w.Window.Start.UTC(), WindowEnd: w.Window.End.UTC(), Count: a.Count, Sum: a.Sum, Avg: a.Sum / float64(a.Count)}
	})
	streams.To(out, *output, serde.String, serde.JSON[Rollup]())

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
