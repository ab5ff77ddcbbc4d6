package cli

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/gregor-project/gregor/internal/console"
)

// consoleOptions are the flags of `gregor console`.
type consoleOptions struct {
	listen   string
	login    string
	interval time.Duration
}

// newConsoleCommand serves the web console (internal/console) pointed at any cluster: the
// same pages the broker serves on its http.listener.
func newConsoleCommand() *cobra.Command {
	var cf clientFlags
	var o consoleOptions
	cmd := &cobra.Command{
		Use:   "console",
		Short: "Serve the web console for a cluster (topics, messages, groups, lag) on --listen",
		Long: `Serve the web console pointed at --bootstrap-server. It is a Kafka client: --command-config
gives it TLS settings for a secured cluster. With --login-mechanism, every user logs in with
their own SASL credentials and the console acts with their ACLs; it holds none of its own.
It listens on loopback unless --listen names another address.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			seeds, err := cf.seedBrokers()
			if err != nil {
				return err
			}
			format, err := cf.outputFormat()
			if err != nil {
				return err
			}
			opts, err := cf.securityOpts()
			if err != nil {
				return err
			}
			c, err := console.New(console.Config{
				Seeds: func() ([]string, error) { return seeds, nil }, Opts: opts,
				Login: o.login != "", Mechanism: o.login, Interval: o.interval,
			})
			if err != nil {
				return err
			}
			defer c.Close()
			ln, err := net.Listen("tcp", o.listen)
			if err != nil {
				return fmt.Errorf("--listen %s: %w", o.listen, err)
			}
			srv := &http.Server{Handler: c.Handler(), ReadHeaderTimeout: 10 * time.Second}
			url := "http://" + ln.Addr().String() + "/"
			if format == outputJSON {
				if err := writeJSON(cmd.OutOrStdout(), map[string]any{"url": url, "bootstrap_servers": seeds}); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "console for %s on %s\n", cf.bootstrap, url)
			}
			ctx, cancel := signalContext(cmd)
			defer cancel()
			errc := make(chan error, 1)
			go func() { errc <- srv.Serve(ln) }()
			select {
			case err := <-errc:
				return err
			case <-ctx.Done():
			}
			if err := srv.Close(); err != nil {
				return err
			}
			if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	cf.register(cmd) // -o json prints where it serves as JSON
	f := cmd.Flags()
	f.StringVar(&o.listen, "listen", "127.0.0.1:9645", "HOST:PORT to serve the console on")
	f.StringVar(&o.login, "login-mechanism", "", "ask each user for SASL credentials with this mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)")
	f.DurationVar(&o.interval, "sample-interval", 5*time.Second, "how often the throughput and lag charts sample the cluster")
	return cmd
}
