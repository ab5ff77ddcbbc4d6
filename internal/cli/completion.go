package cli

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Shell completion of names: `gregor completion bash|zsh|fish|powershell` prints cobra's
// script, and the commands below register functions that ask the cluster (the command
// line's --bootstrap-server and --command-config) for topic and group names, bounded by
// completionTimeout so a cluster that is down never hangs the shell.

// completionTimeout bounds one completion's round trip to the cluster.
const completionTimeout = 2 * time.Second

// errResourceNotFound is what DescribeUserScramCredentials answers for a user with none.
var errResourceNotFound = kerr.ResourceNotFound

// completionAdmin builds an admin client from the flags of the command being completed.
func completionAdmin(cmd *cobra.Command) (*kadm.Client, func(), error) {
	cf := clientFlags{bootstrap: DefaultBootstrapServer}
	if f := cmd.Flag("bootstrap-server"); f != nil {
		cf.bootstrap = f.Value.String()
	}
	if f := cmd.Flag("command-config"); f != nil {
		cf.commandConfig = f.Value.String()
	}
	adm, cl, err := cf.newAdmin()
	if err != nil {
		return nil, nil, err
	}
	return adm, cl.Close, nil
}

// completeNames runs list against the cluster and keeps the names starting with toComplete.
func completeNames(cmd *cobra.Command, toComplete string, list func(context.Context, *kadm.Client) ([]string, error)) ([]string, cobra.ShellCompDirective) {
	adm, done, err := completionAdmin(cmd)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
	defer cancel()
	names, err := list(ctx, adm)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
	}
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, toComplete) {
			out = append(out, n)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeTopics completes topic names.
func completeTopics(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	return completeNames(cmd, toComplete, func(ctx context.Context, adm *kadm.Client) ([]string, error) {
		ts, err := adm.ListTopicsWithInternal(ctx)
		if err != nil {
			return nil, err
		}
		if err := ts.Error(); err != nil {
			return nil, err
		}
		return ts.Names(), nil
	})
}

// completeTopicArg completes the first positional argument as a topic name.
func completeTopicArg(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return completeTopics(cmd, args, toComplete)
}

// completeGroups completes consumer group ids.
func completeGroups(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	return completeNames(cmd, toComplete, func(ctx context.Context, adm *kadm.Client) ([]string, error) {
		gs, err := adm.ListGroups(ctx)
		if err != nil {
			return nil, err
		}
		return gs.Groups(), nil
	})
}

// completeGroupArgs completes every positional argument as a group id.
func completeGroupArgs(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	return completeGroups(cmd, args, toComplete)
}

// completeGroupArg completes the first positional argument as a group id.
func completeGroupArg(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return completeGroups(cmd, args, toComplete)
}

// nameCompletions are the commands whose positional arguments are topic or group names.
var nameCompletions = map[string]cobra.CompletionFunc{
	"topic describe":      completeTopicArg,
	"topic delete":        completeTopicArg,
	"topic alter-config":  completeTopicArg,
	"produce":             completeTopicArg,
	"consume":             completeTopicArg,
	"group describe":      completeGroupArg,
	"group reset-offsets": completeGroupArg,
	"group delete":        completeGroupArgs,
}

// flagCompletions are flags, on any command that has them, whose values are names.
var flagCompletions = map[string]cobra.CompletionFunc{
	"topic": completeTopics,
	"group": completeGroups,
}

// registerCompletions adds the name completions to the tools under root.
func registerCompletions(root *cobra.Command) {
	var walk func(c *cobra.Command, path string)
	walk = func(c *cobra.Command, path string) {
		if fn, ok := nameCompletions[path]; ok && c.ValidArgsFunction == nil {
			c.ValidArgsFunction = fn
		}
		for name, fn := range flagCompletions {
			if c.Flags().Lookup(name) != nil {
				if _, exists := c.GetFlagCompletionFunc(name); !exists {
					// The only error is a flag that does not exist or already has one,
					// both excluded just above.
					_ = c.RegisterFlagCompletionFunc(name, fn)
				}
			}
		}
		for _, sub := range c.Commands() {
			p := sub.Name()
			if path != "" {
				p = path + " " + sub.Name()
			}
			walk(sub, p)
		}
	}
	for _, c := range root.Commands() {
		walk(c, c.Name())
	}
}
