package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/gregor-project/gregor/internal/broker"
	"github.com/gregor-project/gregor/internal/config"
)

func serverCommand() *cobra.Command {
	var file string
	var sets []string
	var pprofAddr string
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run a broker (single node with no arguments: PLAINTEXT://127.0.0.1:9092, data in ./data)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(file, sets)
			if err != nil {
				return err
			}
			log := slog.New(slog.NewTextHandler(os.Stderr, nil))
			// Catch SIGTERM before anything starts: one that arrives during start-up (or the
			// moment "gregor started" is logged) must still shut down cleanly, not kill us.
			sig := make(chan os.Signal, 1)
			signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
			if pprofAddr != "" {
				addr, err := servePprof(pprofAddr, log)
				if err != nil {
					return err
				}
				log.Info("pprof serving", "addr", addr)
			}
			// A signal during start-up (a node waiting for the rest of its quorum) cancels
			// it; one that races the end of start-up is kept for the wait below.
			startCtx, cancelStart := context.WithCancel(context.Background())
			pending := make(chan os.Signal, 1)
			started := make(chan struct{})
			go func() {
				select {
				case s := <-sig:
					pending <- s
					cancelStart()
				case <-started:
				}
			}()
			b, err := broker.Start(cfg, broker.Options{Logger: log, Ctx: startCtx, OnLogDirFailure: func(dir string, err error) {
				haltOnLogDirFailure(log, dir, err)
			}})
			close(started)
			if err != nil {
				select {
				case s := <-pending:
					log.Info("start-up interrupted", "signal", s.String(), "err", err)
					return nil
				default:
					return err
				}
			}
			if b.Handler() != nil {
				log.Info("gregor started", "addr", b.Addr().String(), "node_id", cfg.NodeID)
			} else {
				log.Info("gregor controller started", "node_id", cfg.NodeID)
			}
			var s os.Signal
			select {
			case s = <-pending:
			case s = <-sig:
			case <-b.Failed():
				// The node cannot go on (its controller cannot write its log): shut down what
				// can be, and exit non-zero with the cause.
				log.Error("shutting down after a fatal error", "err", b.FailErr())
				return errors.Join(b.FailErr(), b.Close())
			}
			log.Info("shutting down", "signal", s.String())
			return b.Close()
		},
	}
	cmd.Flags().StringVar(&file, "config", "", "server.properties file with Kafka's config names")
	cmd.Flags().StringArrayVar(&sets, "set", nil, "override one config: key=value (repeatable)")
	cmd.Flags().StringVar(&pprofAddr, "pprof-addr", "", "serve Go's net/http/pprof profiles on this address, e.g. 127.0.0.1:6060 (off when empty)")
	return cmd
}

// haltOnLogDirFailure ends the process at once (no clean shutdown: nothing more is written to
// the failed dir), with exit status 1, as Kafka's LogManager halts a broker whose log dirs have
// all failed; with several log dirs one failed dir is enough, as the controller cannot yet be
// told of it alone, so the partitions' leaderships move with the whole broker. An operator
// starts it again once the disk is fixed or has room.
func haltOnLogDirFailure(log *slog.Logger, dir string, err error) {
	log.Error("shutting down: a log dir has failed (an I/O error took a partition's log offline)", "log_dir", dir, "err", err)
	os.Exit(1)
}

// servePprof serves /debug/pprof/ on addr for profiling a running broker. It is opt-in: the
// profiles expose internals, so bind it to loopback.
func servePprof(addr string, log *slog.Logger) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	go func() {
		if err := http.Serve(ln, mux); err != nil && !errors.Is(err, net.ErrClosed) {
			log.Warn("pprof server stopped", "err", err)
		}
	}()
	return ln.Addr().String(), nil
}
