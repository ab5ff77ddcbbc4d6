package cli

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestCommandTree(t *testing.T) {
	root := &cobra.Command{Use: "gregor"}
	AddCommands(root)
	want := map[string][]string{
		"topic create":       {"bootstrap-server", "output", "partitions", "replication-factor", "config"},
		"topic list":         {"bootstrap-server", "output", "internal"},
		"topic describe":     {"bootstrap-server", "output"},
		"topic delete":       {"bootstrap-server", "output"},
		"topic alter-config": {"bootstrap-server", "output", "set", "delete"},
		"produce":            {"bootstrap-server", "key-separator", "header", "compression", "acks", "partition"},
		"consume":            {"bootstrap-server", "output", "from-beginning", "offset", "partition", "max-messages", "format", "timeout-ms"},
		"bench produce": {"bootstrap-server", "output", "topic", "records", "record-size", "acks", "partitions",
			"throughput", "compression", "batch-max-bytes", "linger-ms"},
		"bench consume": {"bootstrap-server", "output", "topic", "records"},
		"console":       {"bootstrap-server", "command-config", "listen", "login-mechanism", "sample-interval"},
	}
	for path, flags := range want {
		cmd, _, err := root.Find(strings.Fields(path))
		if err != nil || cmd.Name() != strings.Fields(path)[len(strings.Fields(path))-1] {
			t.Errorf("%s: not found (%v)", path, err)
			continue
		}
		for _, f := range flags {
			if cmd.Flag(f) == nil {
				t.Errorf("%s: no --%s", path, f)
			}
		}
		if cmd.RunE == nil {
			t.Errorf("%s: not runnable", path)
		}
	}
	c, _, _ := root.Find([]string{"consume"})
	if f := c.Flags().Lookup("bootstrap-server"); f == nil || f.Shorthand != "b" || f.DefValue != DefaultBootstrapServer {
		t.Errorf("consume -b: %+v", f)
	}
	if f := c.Flags().Lookup("output"); f == nil || f.Shorthand != "o" {
		t.Errorf("consume -o: %+v", f)
	}
}

// Bad arguments are rejected before any connection is attempted (port 1
// on loopback refuses connections, so a dial would surface as a different
// error or a hang bounded by the test timeout).
func TestArgumentErrors(t *testing.T) {
	b := []string{"-b", "127.0.0.1:1"}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"topic", "create", "x", "--config", "novalue"}, "KEY=VALUE"},
		{[]string{"topic", "create"}, "accepts 1 arg"},
		{[]string{"topic", "list", "-o", "yaml"}, "--output"},
		{[]string{"topic", "alter-config", "x"}, "nothing to change"},
		{[]string{"topic", "alter-config", "x", "--set", "a=1", "--delete", "a"}, "both set and deleted"},
		{[]string{"produce", "t", "--acks", "2"}, "--acks"},
		{[]string{"produce", "t", "--compression", "brotli"}, "--compression"},
		{[]string{"produce", "t", "--header", "nokey"}, "--header"},
		{[]string{"consume", "t", "--format", "%x"}, "unknown verb"},
		{[]string{"consume", "t", "--offset", "soon"}, "--offset"},
		{[]string{"consume", "t", "--from-beginning", "--offset", "3"}, "none of the others"},
		{[]string{"consume", "t", "-o", "json", "--format", "%v"}, "cannot be used together"},
		{[]string{"bench", "produce"}, "topic"},
		{[]string{"bench", "produce", "--topic", "t", "--record-size", "2000000"}, "--batch-max-bytes"},
		{[]string{"bench", "consume"}, "topic"},
	}
	for _, tt := range tests {
		_, err := runCLI(t, "", append(tt.args, b...)...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("gregor %s: got error %v, want one mentioning %q", strings.Join(tt.args, " "), err, tt.want)
		}
	}
	if _, err := runCLI(t, "", "topic", "list", "-b", "hostonly"); err == nil || !strings.Contains(err.Error(), "HOST:PORT") {
		t.Errorf("-b hostonly: %v", err)
	}
}
