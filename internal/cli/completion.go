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
