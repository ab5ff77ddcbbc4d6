package cli

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

// `gregor log-dirs describe`: kafka-log-dirs.sh. DescribeLogDirs to each broker asked: every
// log dir it reports, its volume's total and usable bytes, and each partition replica in it
// with its size and offset lag (how far its log end is behind the high watermark; for a
// future replica, behind the current one). -o json prints kafka-log-dirs.sh's own JSON.

func newLogDirsCommand() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "log-dirs",
		Short: "Describe brokers' log dirs (kafka-log-dirs.sh)",
	}
	cf.register(cmd)
	cmd.AddCommand(newLogDirsDescribeCommand(&cf))
	return cmd
}

// LogDirsReport is kafka-log-dirs.sh's JSON: {"version":1,"brokers":[...]}.
type LogDirsReport struct {
	Version int             `json:"version"`
	Brokers []LogDirsBroker `json:"brokers"`
}

// LogDirsBroker is one broker's log dirs.
type LogDirsBroker struct {
	Broker  int32        `json:"broker"`
	LogDirs []LogDirInfo `json:"logDirs"`
}

// LogDirInfo is one log dir: its error (null when healthy) and partitions.
type LogDirInfo struct {
	LogDir      string             `json:"logDir"`
	Error       *string            `json:"error"`
	TotalBytes  int64              `json:"totalBytes"`
	UsableBytes int64              `json:"usableBytes"`
	Partitions  []LogDirPartitions `json:"partitions"`
}

// LogDirPartitions is one partition replica in a log dir.
type LogDirPartitions struct {
	Partition string `json:"partition"` // <topic>-<partition>
	Size      int64  `json:"size"`
	OffsetLag int64  `json:"offsetLag"`
	IsFuture  bool   `json:"isFuture"`
}

// parseBrokerList reads --broker-list: comma-separated broker ids.
func parseBrokerList(s string) ([]int32, error) {
	var out []int32
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x == "" {
			continue
		}
		n, err := strconv.ParseInt(x, 10, 32)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("--broker-list: %q is not a broker id", x)
		}
		out = append(out, int32(n))
	}
	return out, nil
}

func newLogDirsDescribeCommand(cf *clientFlags) *cobra.Command {
	var brokerList, topicList string
	cmd := &cobra.Command{
		Use:   "describe [--broker-list 1,2] [--topic-list t1,t2]",
		Short: "Describe each broker's log dirs and the partitions in them (kafka-log-dirs.sh --describe)",
		Long: `Ask each broker (those of --broker-list, else every broker) for its log dirs:
each dir with its error, its volume's total and usable bytes, and every partition
replica in it (only those of --topic-list when given) with its size in bytes and its
offset lag. A broker with several log dirs reports each of them.`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			brokers, err := parseBrokerList(brokerList)
			if err != nil {
				return err
			}
			var topics []string
			for _, t := range strings.Split(topicList, ",") {
				if t = strings.TrimSpace(t); t != "" {
					topics = append(topics, t)
				}
			}
			return adminRun(cmd, cf, func(ctx context.Context, adm *kadm.Client, format string) error {
				rep, err := describeLogDirs(ctx, adm, brokers, topics)
				if err != nil {
					return err
				}
				if format == outputJSON {
					return writeJSON(cmd.OutOrStdout(), rep)
				}
				return printLogDirs(cmd, rep)
			})
		},
	}
	cmd.Flags().StringVar(&brokerList, "broker-list", "", "broker ids to ask, comma-separated (every broker when omitted)")
	cmd.Flags().StringVar(&topicList, "topic-list", "", "topics to report, comma-separated (every topic when omitted)")
	return cmd
}

// describeLogDirs asks each broker for its log dirs.
func describeLogDirs(ctx context.Context, adm *kadm.Client, brokers []int32, topics []string) (LogDirsReport, error) {
	rep := LogDirsReport{Version: 1, Brokers: []LogDirsBroker{}}
	var set kadm.TopicsSet
	if len(topics) > 0 {
		md, err := adm.Metadata(ctx, topics...)
		if err != nil {
			return rep, fmt.Errorf("reading metadata: %w", err)
		}
		set = kadm.TopicsSet{}
		for _, t := range topics {
			td, ok := md.Topics[t]
			if !ok || td.Err != nil {
				return rep, fmt.Errorf("topic %s: %s", t, kafkaErrorText(td.Err, ""))
			}
			for p := range td.Partitions {
				set.Add(t, p)
			}
		}
	}
	if len(brokers) == 0 {
		bs, err := adm.ListBrokers(ctx)
		if err != nil {
			return rep, fmt.Errorf("listing brokers: %w", err)
		}
		brokers = bs.NodeIDs()
	}
	sort.Slice(brokers, func(i, j int) bool { return brokers[i] < brokers[j] })
	for _, b := range brokers {
		dirs, err := adm.DescribeBrokerLogDirs(ctx, b, set)
		if err != nil {
			return rep, fmt.Errorf("describing log dirs of broker %d: %w", b, err)
		}
		lb := LogDirsBroker{Broker: b, LogDirs: []LogDirInfo{}}
		for _, d := range dirs.Sorted() {
			info := LogDirInfo{LogDir: d.Dir, TotalBytes: d.TotalBytes, UsableBytes: d.UsableBytes, Partitions: []LogDirPartitions{}}
			if d.Err != nil {
				s := kafkaErrorName(d.Err)
				info.Error = &s
			}
			for _, p := range dirs.SortedPartitions() {
				if p.Dir != d.Dir {
					continue
				}
				info.Partitions = append(info.Partitions, LogDirPartitions{
					Partition: fmt.Sprintf("%s-%d", p.Topic, p.Partition), Size: p.Size, OffsetLag: p.OffsetLag, IsFuture: p.IsFuture,
				})
			}
			lb.LogDirs = append(lb.LogDirs, info)
		}
		rep.Brokers = append(rep.Brokers, lb)
	}
	return rep, nil
}

func printLogDirs(cmd *cobra.Command, rep LogDirsReport) error {
	w := cmd.OutOrStdout()
	for _, b := range rep.Brokers {
		for _, d := range b.LogDirs {
			status := "ok"
			if d.Error != nil {
				status = *d.Error
			}
			var size int64
			for _, p := range d.Partitions {
				size += p.Size
			}
			fmt.Fprintf(w, "Broker %d  %s  status=%s  partitions=%d  size=%d  total_bytes=%s  usable_bytes=%s\n",
				b.Broker, d.LogDir, status, len(d.Partitions), size, bytesOrDash(d.TotalBytes), bytesOrDash(d.UsableBytes))
			if len(d.Partitions) == 0 {
				continue
			}
			t := newTable(w, "  PARTITION", "SIZE", "OFFSET_LAG", "FUTURE")
			for _, p := range d.Partitions {
				t.row("  "+p.Partition, strconv.FormatInt(p.Size, 10), strconv.FormatInt(p.OffsetLag, 10), strconv.FormatBool(p.IsFuture))
			}
			if err := t.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

func bytesOrDash(n int64) string {
	if n < 0 {
		return "-"
	}
	return strconv.FormatInt(n, 10)
}
