// Command eventsourcing keeps bank accounts by event sourcing with Gregor Streams. Clients
// write commands to --commands, keyed by account, JSON such as
//
//	{"id":"c17","account":"alice","kind":"withdraw","amount":2500}
//
// (kind open, deposit, withdraw or close; amounts in cents). A processor validates each
// command against its account's current state, kept in the store "accounts", and writes
// one event per command to --events, keyed by account: the command, accepted or rejected
// (with the reason), and the account's balance after it:
//
//	{"id":"c17","account":"alice","kind":"withdraw","amount":2500,"accepted":false,
//	 "reason":"insufficient funds: balance 1200","balance":1200,"open":true}
//
// A withdrawal beyond the balance is rejected, as is any command on an account that is
// closed or was never opened (Decide has the rules). The accepted events, read back from
// --events, are folded into a table of balances (the store "balances"), which the program
// serves over HTTP through interactive queries:
//
//	GET http://127.0.0.1:8080/balance/alice
//	{"account":"alice","balance":1200,"open":true,"host":"127.0.0.1:8080"}
//
// 404 answers an account with no accepted event, 503 (retry) a lookup made while the
// instances rebalance or restore. Several instances of one --application-id share the
// accounts; each serves every account, from its own store when it runs the account's task
// and otherwise by forwarding the request to the instance that does (its
// --application-server, shared through the group's assignment). "host" names the instance
// that read the balance.
//
//	go run ./examples/eventsourcing --bootstrap-server 127.0.0.1:9092 --commands commands \
//		--events events --application-id accounts --http 127.0.0.1:8080
//
// It runs until SIGTERM or an interrupt. The commands of an account are decided in the
// order of the commands topic, so a client must key each command by its account (one that
// is not is rejected). A command that is not JSON stops the program: no command is skipped
// without an event. Run it with --processing-guarantee exactly_once_v2 for a ledger: then
// each command is decided exactly once, its event and the account's new state committed
// together; at-least-once, a crash may decide the commands since the last commit again,
// against a state that already has them. The balances table takes each account's balance
// from its latest event, so an event read twice changes nothing.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/gregor-project/gregor/streams"
	"github.com/gregor-project/gregor/streams/serde"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "eventsourcing:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("eventsourcing", flag.ContinueOnError)
	brokers := fs.String("bootstrap-server", "127.0.0.1:9092", "Kafka bootstrap servers, comma separated host:port")
	commands := fs.String("commands", "", "topic of account commands (JSON), keyed by account")
	events := fs.String("events", "", "topic of account events (JSON), keyed by account")
	appID := fs.String("application-id", "eventsourcing", "application.id: consumer group and internal topic prefix")
	guarantee := fs.String("processing-guarantee", string(streams.AtLeastOnce), "at_least_once or exactly_once_v2")
	httpAddr := fs.String("http", "127.0.0.1:8080", "address the balance lookup listens on (port 0: any free port)")
	appServer := fs.String("application-server", "", "host:port other instances reach this one's lookup at (default: the --http listener's address)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *commands == "" || *events == "" {
		return fmt.Errorf("--commands and --events are required")
	}

	b := streams.NewBuilder()
	streams.AddKeyValueStore(b, AccountsStore, serde.String, serde.JSON[Account]())
	cmds := streams.Stream(b, *commands, serde.String, serde.JSON[Command]())
	evs := streams.Process(cmds, func() streams.Processor[string, Command, string, Event] { return &validator{} },
		[]string{AccountsStore}, streams.Named("validate"))
	streams.To(evs, *events, serde.String, serde.JSON[Event]())
	// The balances are a projection of the event log: rebuilt from --events alone.
	accepted := streams.Stream(b, *events, serde.String, serde.JSON[Event]()).
		Filter(func(_ string, e Event) bool { return e.Accepted })
	streams.Aggregate(streams.GroupByKey(accepted), func() Balance { return Balance{} },
		func(account string, e Event, _ Balance) Balance {
			return Balance{Account: account, Balance: e.Balance, Open: e.Open}
		}, serde.JSON[Balance](), streams.Named(BalancesStore))

	ln, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		return err
	}
	defer ln.Close()
	self := *appServer
	if self == "" {
		self = ln.Addr().String()
	}
	app, err := streams.New(b, streams.Config{
		ApplicationID:     *appID,
		Brokers:           strings.Split(*brokers, ","),
		Guarantee:         streams.Guarantee(*guarantee),
		ApplicationServer: self,
		Logger:            slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	fmt.Fprint(os.Stderr, app.Describe())

	l := &lookup{app: app, self: self, client: &http.Client{Timeout: 10 * time.Second}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /balance/{account}", l.balance)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	served := make(chan error, 1)
	go func() {
		err := srv.Serve(ln)
		cancel() // the lookup is down: stop processing too
		served <- err
	}()
	fmt.Fprintf(os.Stderr, "eventsourcing: serving http://%s/balance/{account} as application.server %s\n", ln.Addr(), self)

	runErr := app.Run(ctx)
	shutdownCtx, done := context.WithTimeout(context.Background(), 10*time.Second)
	defer done()
	shutErr := srv.Shutdown(shutdownCtx)
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return errors.Join(runErr, fmt.Errorf("http: %w", err))
	}
	return errors.Join(runErr, shutErr)
}
