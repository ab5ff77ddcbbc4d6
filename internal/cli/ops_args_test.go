package cli

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// Every runnable tool takes -o table|json.
func TestEveryCommandHasOutput(t *testing.T) {
	root := &cobra.Command{Use: "gregor"}
	AddCommands(root)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Runnable() && c != root {
			if f := c.Flag("output"); f == nil || f.Shorthand != "o" {
				t.Errorf("%s: no -o/--output", c.CommandPath())
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// The new tools refuse bad arguments before connecting anywhere.
func TestOpsToolsArgumentErrors(t *testing.T) {
	b := []string{"-b", "127.0.0.1:1"}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"configs", "describe"}, "name an entity"},
		{[]string{"configs", "describe", "--entity-type", "client-metrics"}, "--entity-type"},
		{[]string{"configs", "describe", "--entity-name", "x"}, "need --entity-type"},
		{[]string{"configs", "describe", "--topic", "a", "--broker", "1"}, "several entities"},
		{[]string{"configs", "describe", "--broker", "one"}, "broker id"},
		{[]string{"configs", "alter", "--entity-type", "topics"}, "--entity-name or --entity-default"},
		{[]string{"configs", "alter", "--topic", "a"}, "--add-config and/or --delete-config"},
		{[]string{"configs", "alter", "--topic", "a", "--add-config", "x=[1,2"}, "unbalanced"},
		{[]string{"offsets", "get", "--time", "yesterday"}, "--time"},
		{[]string{"offsets", "get", "--partitions", "0"}, "needs --topic"},
		{[]string{"offsets", "get", "--topic-partitions", "t:3-1"}, "partition"},
		{[]string{"records", "delete"}, "--offset-json-file"},
		{[]string{"records", "delete", "--topic", "t"}, "together"},
		{[]string{"records", "delete", "--topic", "t", "--partition", "0", "--offset", "-5"}, "--offset"},
		{[]string{"log-dirs", "describe", "--broker-list", "a"}, "--broker-list"},
	}
	for _, tt := range tests {
		_, err := runCLI(t, "", append(tt.args, b...)...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("gregor %s: got error %v, want one mentioning %q", strings.Join(tt.args, " "), err, tt.want)
		}
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"dump-log"}, "at least one"},
		{[]string{"storage", "format", "-t", "x"}, "--config"},
		{[]string{"metadata", "info"}, "--dir"},
		{[]string{"metadata-quorum", "describe"}, "bootstrap-controller"},
	} {
		if _, err := runCLI(t, "", tt.args...); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("gregor %s: got error %v, want one mentioning %q", strings.Join(tt.args, " "), err, tt.want)
		}
	}
}

func TestParseTopicPartitions(t *testing.T) {
	fs, err := parseTopicPartitions("orders.*:0-2,pay:5-,x:-1,y")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		topic string
		p     int32
		want  bool
	}{
		{"orders", 2, true}, {"orders-eu", 0, true}, {"orders", 3, false},
		{"pay", 5, true}, {"pay", 99, true}, {"pay", 4, false},
		{"x", 0, true}, {"x", 1, true}, {"x", 2, false},
		{"y", 7, true}, {"yy", 0, false}, {"apay", 5, false},
	}
	for _, c := range cases {
		got := false
		for _, f := range fs {
			got = got || f.matches(c.topic, c.p)
		}
		if got != c.want {
			t.Errorf("%s:%d matched %t, want %t", c.topic, c.p, got, c.want)
		}
	}
}

func TestConfigEntityFlags(t *testing.T) {
	entity := func(args ...string) (configEntity, error) {
		var ef configEntityFlags
		cmd := &cobra.Command{Use: "x"}
		ef.register(cmd)
		if err := cmd.ParseFlags(args); err != nil {
			t.Fatal(err)
		}
		return ef.entity(cmd, true)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--entity-type", "users", "--entity-name", "alice", "--client", "app"}, "user-principal 'alice', client-id 'app'"},
		{[]string{"--client", "app", "--user", "alice"}, "user-principal 'alice', client-id 'app'"},
		{[]string{"--user-defaults", "--client-defaults"}, "the default user-principal, the default client-id"},
		{[]string{"--entity-type", "brokers", "--entity-default"}, "default broker"},
		{[]string{"--entity-type", "brokers", "--entity-name", "2"}, "broker '2'"},
		{[]string{"--topic", "orders"}, "topic 'orders'"},
	} {
		e, err := entity(c.args...)
		if err != nil || e.String() != c.want {
			t.Errorf("%v: got %q, %v; want %q", c.args, e.String(), err, c.want)
		}
	}
	if _, err := entity("--topic", ""); err == nil {
		t.Error("an empty topic name was taken")
	}
	if _, err := entity("--entity-type", "topics", "--entity-name", "a", "--entity-default"); err == nil {
		t.Error("a name and the default were taken together")
	}
}
