package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

// `gregor topic add-partitions NAME --partitions N`: kafka-topics.sh --alter --partitions N.
// CreatePartitions raising the topic's partition count to N (the total, as Kafka's tool
// takes it); the controller places the new partitions. Keyed records of the existing
// partitions keep their place, but new keys spread over all N, as in Kafka.

// TopicPartitionsResult is what `gregor topic add-partitions -o json` prints.
type TopicPartitionsResult struct {
	Topic      string `json:"topic"`
	Partitions int    `json:"partitions"`
}

func newTopicAddPartitionsCommand(cf *clientFlags) *cobra.Command {
	var count int
	cmd := &cobra.Command{
		Use:          "add-partitions NAME --partitions N",
		Short:        "Raise a topic's partition count to N (kafka-topics.sh --alter --partitions)",
		Args:         cobra.ExactArgs(1),
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if count < 1 {
				return errors.New("--partitions: give the new total partition count")
			}
			name := args[0]
			return adminRun(cmd, cf, func(ctx context.Context, adm *kadm.Client, format string) error {
				resps, err := adm.UpdatePartitions(ctx, count, name)
				if err != nil {
					return fmt.Errorf("adding partitions to %s: %w", name, err)
				}
				r, ok := resps[name]
				if !ok {
					return fmt.Errorf("adding partitions to %s: no answer for the topic", name)
				}
				if r.Err != nil {
					return fmt.Errorf("adding partitions to %s: %s", name, kafkaErrorText(r.Err, r.ErrMessage))
				}
				if format == outputJSON {
					return writeJSON(cmd.OutOrStdout(), TopicPartitionsResult{Topic: name, Partitions: count})
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "Topic %s now has %d partitions.\n", name, count)
				return err
			})
		},
	}
	cmd.Flags().IntVar(&count, "partitions", 0, "the new total number of partitions (more than the topic has)")
	mustMarkRequired(cmd, "partitions")
	cmd.ValidArgsFunction = completeTopicArg
	return cmd
}
