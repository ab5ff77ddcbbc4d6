// Command audit enriches audit events with Gregor Streams: it reads events from --input,
// JSON such as
//
//	{"user":"u1","action":"delete","resource":"/repos/7","time":"2026-01-01T10:00:12Z"}
//
// joins each with its user in the table of --users (a compacted topic keyed by user id,
// values such as {"name":"Ada","email":"ada@example.com","department":"ops"}; a null value
// deletes the user), and writes the enriched event to --output, keyed by user id:
//
//	{"user":"u1","action":"delete","resource":"/repos/7","time":"2026-01-01T10:00:12Z",
//	 "name":"Ada","email":"ada@example.com","department":"ops"}
//
// It runs until SIGTERM or an interrupt.
//
//	go run ./examples/audit --bootstrap-server 127.0.0.1:9092 \
//		--input audit-events --users users --output audit-enriched --application-id audit
//
// The join is a left join: an event whose user is not in the table (or has no user) is
// kept, with name and department "unknown". Each event is joined with the table as it is
// when the event is processed; a later change to a user changes later events only. The
// events are repartitioned by user id, into as many partitions as --input has, which must
// be as many as --users has. An event that is not JSON stops the program (nothing of an
// audit trail is skipped silently).
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

// Event is one input record's value.
type Event struct {
	User     string    `json:"user"`
	Action   string    `json:"action"`
	Resource string    `json:"resource"`
	Time     time.Time `json:"time"`
}

// User is one value of the users table.
type User struct {
	Name       string `json:"name"`
	Email      string `json:"email,omitempty"`
	Department string `json:"department"`
}

// Enriched is one output record's value: the event and its user.
type Enriched struct {
	Event
	User
}

// Unknown is the name and department of an event's user when the table does not have it.
const Unknown = "unknown"

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "audit:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("audit", flag.ContinueOnError)
	brokers := fs.String("bootstrap-server", "127.0.0.1:9092", "Kafka bootstrap servers, comma separated host:port")
	input := fs.String("input", "", "topic of audit events (JSON)")
	users := fs.String("users", "", "compacted topic of users (JSON) keyed by user id")
	output := fs.String("output", "", "topic of enriched events")
	appID := fs.String("application-id", "audit", "application.id: consumer group and internal topic prefix")
	guarantee := fs.String("processing-guarantee", string(streams.AtLeastOnce), "at_least_once or exactly_once_v2")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *input == "" || *users == "" || *output == "" {
		return fmt.Errorf("--input, --users and --output are required")
	}

	b := streams.NewBuilder()
	table := streams.Table(b, *users, serde.String, serde.JSON[User](), streams.Named("users"))
	events := streams.Stream(b, *input, serde.String, serde.JSON[Event]())
	byUser := streams.SelectKey(events, func(_ string, e Event) string { return e.User })
	enriched := streams.LeftJoin(byUser, table, func(e Event, u User, found bool) Enriched {
		if !found {
			u = User{Name: Unknown, Department: Unknown}
		}
		return Enriched{Event: e, User: u}
	}, streams.Named("events-by-user"))
	streams.To(enriched, *output, serde.String, serde.JSON[Enriched]())

	app, err := streams.New(b, streams.Config{
		ApplicationID: *appID,
		Brokers:       strings.Split(*brokers, ","),
		Guarantee:     streams.Guarantee(*guarantee),
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
