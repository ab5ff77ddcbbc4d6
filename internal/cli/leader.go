package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// `gregor leader elect`: trigger leader elections (ElectLeaders, KIP-183 and
// KIP-460), like kafka-leader-election.sh.

// Election results, as printed and in JSON.
const (
	electionElected   = "elected"
	electionNotNeeded = "not-needed" // ELECTION_NOT_NEEDED: the wanted leader already leads
	electionFailed    = "failed"
)

// ElectionResult is the outcome of one partition's election.
type ElectionResult struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Result    string `json:"result"`          // elected, not-needed or failed
	Error     string `json:"error,omitempty"` // Kafka error name and message when failed
}

func newLeaderCommand() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "leader",
		Short: "Elect partition leaders",
	}
	cf.register(cmd)
	var (
		preferred, unclean bool
		topic              string
		partition          int32
	)
	elect := &cobra.Command{
		Use:   "elect [--preferred|--unclean] [--topic T [--partition P]]",
		Short: "Elect leaders: the preferred replica (default) or, with --unclean, any live replica",
		Long: `Elect leaders for every partition, a topic's partitions, or one partition.
--preferred (the default) moves leadership to the first replica if it is in the
ISR; --unclean elects a live replica outside the ISR for partitions that have no
leader, which can lose acknowledged records. Partitions whose leader is already
the right one report not-needed, which is not a failure.`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if preferred && unclean {
				return errors.New("give at most one of --preferred and --unclean")
			}
			if cmd.Flags().Changed("partition") && topic == "" {
				return errors.New("--partition needs --topic")
			}
			if cmd.Flags().Changed("partition") && partition < 0 {
				return fmt.Errorf("--partition %d: want a partition number", partition)
			}
			if !cmd.Flags().Changed("partition") {
				partition = -1
			}
			return clientRun(cmd, &cf, adminTimeout, func(ctx context.Context, cl *kgo.Client, format string) error {
				results, err := ElectLeaders(ctx, cl, unclean, topic, partition)
				if err != nil {
					return err
				}
				if err := PrintElectionResults(cmd.OutOrStdout(), format, results); err != nil {
					return err
				}
				return electionFailures(results)
			})
		},
	}
	f := elect.Flags()
	f.BoolVar(&preferred, "preferred", false, "elect the preferred (first) replica (default)")
	f.BoolVar(&unclean, "unclean", false, "elect any live replica for partitions without a leader, even outside the ISR")
	f.StringVar(&topic, "topic", "", "only this topic's partitions (default: every partition)")
	f.Int32Var(&partition, "partition", -1, "only this partition of --topic")
	cmd.AddCommand(elect)
	return cmd
}

// ElectLeaders runs a preferred (or, with unclean, unclean) election for
// every partition (topic ""), every partition of topic (partition < 0), or
// one partition, and returns one result per partition sorted by topic and
// partition. ELECTION_NOT_NEEDED is reported as not-needed, not failed.
func ElectLeaders(ctx context.Context, cl *kgo.Client, unclean bool, topic string, partition int32) ([]ElectionResult, error) {
	adm := kadm.NewClient(cl)
	how := kadm.ElectPreferredReplica
	if unclean {
		how = kadm.ElectLiveReplica
	}
	var set kadm.TopicsSet // nil: every partition
	switch {
	case topic != "" && partition >= 0:
		set = kadm.TopicsSet{}
		set.Add(topic, partition)
	case topic != "":
		meta, err := requestMetadata(ctx, cl, []string{topic})
		if err != nil {
			return nil, fmt.Errorf("metadata of topic %s: %w", topic, err)
		}
		set = kadm.TopicsSet{}
		for _, t := range meta.Topics {
			if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
				return nil, fmt.Errorf("topic %s: %s", topic, kafkaErrorText(err, ""))
			}
			for _, p := range t.Partitions {
				set.Add(topic, p.Partition)
			}
		}
		if len(set) == 0 {
			return nil, fmt.Errorf("topic %s: %s", topic, kafkaErrorText(kerr.UnknownTopicOrPartition, ""))
		}
	}
	rs, err := adm.ElectLeaders(ctx, how, set)
	if err != nil {
		return nil, fmt.Errorf("electing leaders: %w", err)
	}
	out := []ElectionResult{}
	for _, ps := range rs {
		for _, r := range ps {
			e := ElectionResult{Topic: r.Topic, Partition: r.Partition, Result: electionElected}
			switch {
			case errors.Is(r.Err, kerr.ElectionNotNeeded):
				e.Result = electionNotNeeded
			case r.Err != nil:
				e.Result, e.Error = electionFailed, kafkaErrorText(r.Err, r.ErrMessage)
			}
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out, nil
}

// PrintElectionResults writes one row per partition, or JSON.
func PrintElectionResults(w io.Writer, format string, results []ElectionResult) error {
	if format == outputJSON {
		return writeJSON(w, results)
	}
	if len(results) == 0 {
		_, err := fmt.Fprintln(w, "No leader elections were needed.")
		return err
	}
	t := newTable(w, "TOPIC", "PARTITION", "RESULT", "ERROR")
	for _, r := range results {
		t.row(r.Topic, strconv.Itoa(int(r.Partition)), r.Result, r.Error)
	}
	return t.flush()
}

// electionFailures is the command's error when any election failed.
func electionFailures(results []ElectionResult) error {
	n := 0
	for _, r := range results {
		if r.Result == electionFailed {
			n++
		}
	}
	if n > 0 {
		return fmt.Errorf("leader election failed for %d partition(s)", n)
	}
	return nil
}
