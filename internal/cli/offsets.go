package cli

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

// `gregor offsets get`: kafka-get-offsets.sh. For each partition matched it lists the offset
// ListOffsets answers for --time: earliest (-2, the log start offset), latest (-1, the
// high watermark), max-timestamp (-3, the offset of the record with the largest timestamp),
// or a time in milliseconds (the first offset whose timestamp is at or after it).
//
//	gregor offsets get --topic 'orders.*' --time latest
//	gregor offsets get --topic-partitions 'orders:0-2,payments' --time -2
//	gregor offsets get --topic orders --partitions 0,1 --time 1700000000000

func newOffsetsCommand() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "offsets",
		Short: "List partition offsets by time (kafka-get-offsets.sh)",
	}
	cf.register(cmd)
	cmd.AddCommand(newOffsetsGetCommand(&cf))
	return cmd
}

// OffsetRow is one partition's answer as `gregor offsets get -o json` prints it.
type OffsetRow struct {
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	Offset      int64  `json:"offset"`
	Timestamp   int64  `json:"timestamp"`
	LeaderEpoch int32  `json:"leader_epoch"`
	Error       string `json:"error,omitempty"`
}

// partitionFilter is one --topic-partitions entry: a topic regex and the partitions
// (lo..hi inclusive; hi -1 means no upper bound; nil ranges means every partition).
type partitionFilter struct {
	topic  *regexp.Regexp
	ranges [][2]int32
}

func (f partitionFilter) matches(topic string, p int32) bool {
	if !f.topic.MatchString(topic) {
		return false
	}
	if len(f.ranges) == 0 {
		return true
	}
	for _, r := range f.ranges {
		if p >= r[0] && (r[1] < 0 || p <= r[1]) {
			return true
		}
	}
	return false
}

// parsePartitionRange reads N, N-M, N- or -M.
func parsePartitionRange(s string) ([2]int32, error) {
	bad := fmt.Errorf("partition %q: want N, N-M, N- or -M", s)
	lo, hi, isRange := strings.Cut(s, "-")
	parse := func(x string, def int32) (int32, error) {
		if x == "" {
			return def, nil
		}
		n, err := strconv.ParseInt(x, 10, 32)
		if err != nil || n < 0 {
			return 0, bad
		}
		return int32(n), nil
	}
	if !isRange {
		n, err := parse(lo, -1)
		if err != nil || lo == "" {
			return [2]int32{}, bad
		}
		return [2]int32{n, n}, nil
	}
	if lo == "" && hi == "" {
		return [2]int32{}, bad
	}
	a, err := parse(lo, 0)
	if err != nil {
		return [2]int32{}, err
	}
	b, err := parse(hi, -1)
	if err != nil {
		return [2]int32{}, err
	}
	if b >= 0 && b < a {
		return [2]int32{}, bad
	}
	return [2]int32{a, b}, nil
}

// parseTopicPartitions reads kafka-get-offsets.sh's --topic-partitions:
// TOPIC_REGEX[:PARTITIONS][,TOPIC_REGEX[:PARTITIONS]...] where PARTITIONS is N, N-M, N- or -M.
// A regex must match the whole topic name.
func parseTopicPartitions(s string) ([]partitionFilter, error) {
	var out []partitionFilter
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		topic, part, hasPart := item, "", false
		if i := strings.LastIndexByte(item, ':'); i >= 0 {
			topic, part, hasPart = item[:i], item[i+1:], true
		}
		re, err := regexp.Compile("^(?:" + topic + ")$")
		if err != nil {
			return nil, fmt.Errorf("topic pattern %q: %w", topic, err)
		}
		f := partitionFilter{topic: re}
		if hasPart {
			r, err := parsePartitionRange(part)
			if err != nil {
				return nil, err
			}
			f.ranges = [][2]int32{r}
		}
		out = append(out, f)
	}
	return out, nil
}

// parseOffsetTime reads --time: earliest, latest, max-timestamp, -1, -2, -3 or milliseconds.
func parseOffsetTime(s string) (int64, error) {
	switch strings.ToLower(s) {
	case "latest", "-1":
		return -1, nil
	case "earliest", "-2":
		return -2, nil
	case "max-timestamp", "-3":
		return -3, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("--time %q: want earliest, latest, max-timestamp, -1, -2, -3 or a time in ms", s)
	}
	return n, nil
}

func newOffsetsGetCommand(cf *clientFlags) *cobra.Command {
	var (
		topic, topicPartitions, partitions, timeFlag string
		excludeInternal                              bool
	)
	cmd := &cobra.Command{
		Use:   "get [--topic REGEX [--partitions P,...] | --topic-partitions T[:P][,...]] [--time earliest|latest|max-timestamp|MS]",
		Short: "Print each matching partition's offset at a time (kafka-get-offsets.sh)",
		Long: `Print TOPIC:PARTITION:OFFSET for every partition matched (every partition of
every topic when nothing is given). --topic is a regular expression matched against the
whole topic name; --partitions limits it to a list of partition ids. --topic-partitions
takes kafka-get-offsets.sh's form, TOPIC_REGEX[:N|N-M|N-|-M],... . --time is earliest
(-2), latest (-1, the default), max-timestamp (-3) or a time in ms since the epoch (the
first offset whose timestamp is at or after it; the latest offset when there is none).`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ts, err := parseOffsetTime(timeFlag)
			if err != nil {
				return err
			}
			if topicPartitions != "" && (topic != "" || partitions != "") {
				return fmt.Errorf("--topic-partitions cannot go with --topic or --partitions")
			}
			if partitions != "" && topic == "" {
				return fmt.Errorf("--partitions needs --topic")
			}
			spec := topicPartitions
			switch {
			case topic != "" && partitions != "":
				var items []string
				for _, p := range strings.Split(partitions, ",") {
					items = append(items, topic+":"+strings.TrimSpace(p))
				}
				spec = strings.Join(items, ",")
			case topic != "":
				spec = topic
			case spec == "":
				spec = ".*"
			}
			filters, err := parseTopicPartitions(spec)
			if err != nil {
				return err
			}
			return adminRun(cmd, cf, func(ctx context.Context, adm *kadm.Client, format string) error {
				rows, err := getOffsets(ctx, adm, filters, ts, excludeInternal)
				if err != nil {
					return err
				}
				if format == outputJSON {
					return writeJSON(cmd.OutOrStdout(), rows)
				}
				w := cmd.OutOrStdout()
				for _, r := range rows {
					if r.Error != "" {
						fmt.Fprintf(cmd.ErrOrStderr(), "%s:%d: %s\n", r.Topic, r.Partition, r.Error)
						continue
					}
					if _, err := fmt.Fprintf(w, "%s:%d:%d\n", r.Topic, r.Partition, r.Offset); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&topic, "topic", "", "topics whose offsets to get: a regular expression of the whole name")
	cmd.Flags().StringVar(&partitions, "partitions", "", "partition ids of --topic, comma-separated (all when omitted)")
	cmd.Flags().StringVar(&topicPartitions, "topic-partitions", "", "TOPIC_REGEX[:N|N-M|N-|-M][,...], as kafka-get-offsets.sh")
	cmd.Flags().StringVar(&timeFlag, "time", "latest", "earliest|latest|max-timestamp|-2|-1|-3|TIMESTAMP_MS")
	cmd.Flags().BoolVar(&excludeInternal, "exclude-internal-topics", false, "leave out internal topics (__consumer_offsets, __transaction_state)")
	_ = cmd.RegisterFlagCompletionFunc("topic", completeTopics)
	_ = cmd.RegisterFlagCompletionFunc("time", cobra.FixedCompletions([]string{"earliest", "latest", "max-timestamp"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// getOffsets lists the offsets of every partition the filters match.
func getOffsets(ctx context.Context, adm *kadm.Client, filters []partitionFilter, ts int64, excludeInternal bool) ([]OffsetRow, error) {
	topics, err := adm.ListTopicsWithInternal(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing topics: %w", err)
	}
	var names []string
	for _, t := range topics.Sorted() {
		if t.Err != nil || (excludeInternal && t.IsInternal) {
			continue
		}
		for _, f := range filters {
			if f.topic.MatchString(t.Topic) {
				names = append(names, t.Topic)
				break
			}
		}
	}
	rows := []OffsetRow{}
	if len(names) == 0 {
		return rows, nil
	}
	var listed kadm.ListedOffsets
	switch ts {
	case -1:
		listed, err = adm.ListEndOffsets(ctx, names...)
	case -2:
		listed, err = adm.ListStartOffsets(ctx, names...)
	case -3:
		listed, err = adm.ListMaxTimestampOffsets(ctx, names...)
	default:
		listed, err = adm.ListOffsetsAfterMilli(ctx, ts, names...)
	}
	if err != nil {
		return nil, fmt.Errorf("listing offsets: %w", err)
	}
	listed.Each(func(o kadm.ListedOffset) {
		keep := false
		for _, f := range filters {
			if f.matches(o.Topic, o.Partition) {
				keep = true
				break
			}
		}
		if !keep || o.Partition < 0 {
			return
		}
		r := OffsetRow{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, Timestamp: o.Timestamp, LeaderEpoch: o.LeaderEpoch}
		if o.Err != nil {
			r.Error = kafkaErrorText(o.Err, "")
		}
		rows = append(rows, r)
	})
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Topic != rows[j].Topic {
			return rows[i].Topic < rows[j].Topic
		}
		return rows[i].Partition < rows[j].Partition
	})
	return rows, nil
}
