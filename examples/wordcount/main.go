// Command wordcount is Kafka Streams' word count with Gregor Streams: it reads text lines
// from --input, splits them on whitespace, lower-cases the words, and writes each word's
// running count to --output (key the word, value the count as decimal text) until SIGTERM
// or an interrupt.
//
//	go run ./examples/wordcount --bootstrap-server 127.0.0.1:9092 \
//		--input text-lines --output word-counts --application-id wordcount
//
// The counts live in a persistent store under --state-dir, so a restarted instance
// restores only what its changelog gained since it stopped.
//
// The input topic must exist; the output topic is written as the broker allows (create it
// first where topics are not created automatically).
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

	"github.com/gregor-project/gregor/streams"
	"github.com/gregor-project/gregor/streams/serde"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "wordcount:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("wordcount", flag.ContinueOnError)
	brokers := fs.String("bootstrap-server", "127.0.0.1:9092", "Kafka bootstrap servers, comma separated host:port")
	input := fs.String("input", "", "topic of text lines")
	output := fs.String("output", "", "topic of word counts")
	appID := fs.String("application-id", "wordcount", "application.id: consumer group and internal topic prefix")
	guarantee := fs.String("processing-guarantee", string(streams.AtLeastOnce), "at_least_once or exactly_once_v2")
	stateDir := fs.String("state-dir", "", "state.dir: where the counts' store lives (default <temp dir>/gregor-streams)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *input == "" || *output == "" {
		return fmt.Errorf("--input and --output are required")
	}

	b := streams.NewBuilder()
	lines := streams.Stream(b, *input, serde.String, serde.String)
	words := streams.FlatMapValues(lines, func(line string) []string { return strings.Fields(strings.ToLower(line)) })
	counts := streams.Count(streams.GroupBy(words, func(_, w string) string { return w }, serde.String), streams.Named("counts"))
	streams.To(streams.ToStream(counts), *output, serde.String, serde.Int64Text)

	app, err := streams.New(b, streams.Config{
		ApplicationID: *appID,
		Brokers:       strings.Split(*brokers, ","),
		Guarantee:     streams.Guarantee(*guarantee),
		StateDir:      *stateDir,
		Logger:        slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	fmt.Fprint(os.Stderr, app.Describe())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return app.Run(ctx)
}
