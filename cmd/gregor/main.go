// Command gregor is the Gregor broker and its tools in one binary.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/gregor-project/gregor/internal/cli"
)

func main() {
	root := &cobra.Command{
		Use:           "gregor",
		Short:         "Gregor: a Kafka-compatible distributed commit log",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(serverCommand())
	root.AddCommand(devCommand())
	cli.AddCommands(root)
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "gregor:", err)
		os.Exit(1)
	}
}
