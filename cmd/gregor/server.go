package main

import (
	"log/slog"
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
			b, err := broker.Start(cfg, broker.Options{Logger: log})
			if err != nil {
				return err
			}
			log.Info("gregor started", "addr", b.Addr().String(), "node_id", cfg.NodeID)
			sig := make(chan os.Signal, 1)
			signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
			s := <-sig
			log.Info("shutting down", "signal", s.String())
			return b.Close()
		},
	}
	cmd.Flags().StringVar(&file, "config", "", "server.properties file with Kafka's config names")
	cmd.Flags().StringArrayVar(&sets, "set", nil, "override one config: key=value (repeatable)")
	return cmd
}
