package cli

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// adminTimeout bounds a single admin command.
const adminTimeout = 30 * time.Second

func newTopicCommand() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "topic",
		Short: "Create, list, describe, alter and delete topics",
	}
	cf.register(cmd)
	cmd.AddCommand(
		newTopicCreateCommand(&cf),
		newTopicListCommand(&cf),
		newTopicDescribeCommand(&cf),
		newTopicDeleteCommand(&cf),
		newTopicAlterConfigCommand(&cf),
		newTopicAddPartitionsCommand(&cf),
	)
	return cmd
}

// adminRun wraps the boilerplate of an admin command: validate -o, build
// the client, bound the run with a timeout and SIGINT.
func adminRun(cmd *cobra.Command, cf *clientFlags, fn func(ctx context.Context, adm *kadm.Client, format string) error) error {
	return adminClientRun(cmd, cf, func(ctx context.Context, adm *kadm.Client, _ *kgo.Client, format string) error {
		return fn(ctx, adm, format)
	})
}

// adminClientRun is adminRun for a command that also sends requests kadm has no call for,
// on the admin's own client.
func adminClientRun(cmd *cobra.Command, cf *clientFlags, fn func(ctx context.Context, adm *kadm.Client, cl *kgo.Client, format string) error) error {
	format, err := cf.outputFormat()
	if err != nil {
		return err
	}
	adm, cl, err := cf.newAdmin()
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := signalContext(cmd)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, adminTimeout)
	defer cancelTimeout()
	return fn(ctx, adm, cl, format)
}

// topicIDString renders a topic ID as Kafka does (URL-safe base64, no
// padding), so IDs match what Kafka's own tools print.
func topicIDString(id kadm.TopicID) string {
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// ---- create ----

type topicCreateResult struct {
	Topic             string `json:"topic"`
	TopicID           string `json:"topic_id,omitempty"`
	Partitions        int32  `json:"partitions"`
	ReplicationFactor int16  `json:"replication_factor"`
}

func newTopicCreateCommand(cf *clientFlags) *cobra.Command {
	var (
		partitions int32
		rf         int16
		configs    []string
	)
	cmd := &cobra.Command{
		Use:          "create NAME",
		Short:        "Create a topic",
		Args:         cobra.ExactArgs(1),
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfgs, err := parseKeyValues(configs)
			if err != nil {
				return fmt.Errorf("--config %w", err)
			}
			var cfgPtrs map[string]*string
			if len(cfgs) > 0 {
				cfgPtrs = make(map[string]*string, len(cfgs))
				for k, v := range cfgs {
					cfgPtrs[k] = kadm.StringPtr(v)
				}
			}
			return adminRun(cmd, cf, func(ctx context.Context, adm *kadm.Client, format string) error {
				name := args[0]
				resps, err := adm.CreateTopics(ctx, partitions, rf, cfgPtrs, name)
				if err != nil {
					return fmt.Errorf("creating topic %s: %w", name, err)
				}
				r, ok := resps[name]
				if !ok {
					return fmt.Errorf("creating topic %s: broker response did not include the topic", name)
				}
				if r.Err != nil {
					return fmt.Errorf("creating topic %s: %s", name, kafkaErrorText(r.Err, r.ErrMessage))
				}
				res := topicCreateResult{Topic: name, Partitions: r.NumPartitions, ReplicationFactor: r.ReplicationFactor}
				if r.ID != (kadm.TopicID{}) {
					res.TopicID = topicIDString(r.ID)
				}
				w := cmd.OutOrStdout()
				if format == outputJSON {
					return writeJSON(w, res)
				}
				_, err = fmt.Fprintf(w, "Created topic %s.\n", name)
				return err
			})
		},
	}
	f := cmd.Flags()
	f.Int32Var(&partitions, "partitions", -1, "number of partitions (-1: the broker's num.partitions)")
	f.Int16Var(&rf, "replication-factor", -1, "replicas per partition (-1: the broker's default.replication.factor)")
	f.StringArrayVar(&configs, "config", nil, "topic config override KEY=VALUE (repeatable)")
	return cmd
}

// ---- list ----

type topicListEntry struct {
	Topic             string `json:"topic"`
	TopicID           string `json:"topic_id,omitempty"`
	Partitions        int    `json:"partitions"`
	ReplicationFactor int    `json:"replication_factor"`
	Internal          bool   `json:"internal"`
	Error             string `json:"error,omitempty"`
}

// replicationFactor is the largest replica count over a topic's
// partitions (they are equal unless a reassignment is in progress).
func replicationFactor(d kadm.TopicDetail) int {
	rf := 0
	for _, p := range d.Partitions {
		rf = max(rf, len(p.Replicas))
	}
	return rf
}

func newTopicListCommand(cf *clientFlags) *cobra.Command {
	var internal, underReplicated bool
	cmd := &cobra.Command{
		Use:          "list",
		Short:        "List topics, or with --under-replicated the partitions missing in-sync replicas",
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return adminRun(cmd, cf, func(ctx context.Context, adm *kadm.Client, format string) error {
				var (
					details kadm.TopicDetails
					err     error
				)
				if internal {
					details, err = adm.ListTopicsWithInternal(ctx)
				} else {
					details, err = adm.ListTopics(ctx)
				}
				if err != nil {
					return fmt.Errorf("listing topics: %w", err)
				}
				if underReplicated {
					return printUnderReplicated(cmd.OutOrStdout(), format, underReplicatedPartitions(details))
				}
				entries := make([]topicListEntry, 0, len(details))
				for _, d := range details.Sorted() {
					e := topicListEntry{
						Topic:             d.Topic,
						Partitions:        len(d.Partitions),
						ReplicationFactor: replicationFactor(d),
						Internal:          d.IsInternal,
					}
					if d.ID != (kadm.TopicID{}) {
						e.TopicID = topicIDString(d.ID)
					}
					if d.Err != nil {
						e.Error = kafkaErrorName(d.Err)
					}
					entries = append(entries, e)
				}
				return printTopicList(cmd.OutOrStdout(), format, entries)
			})
		},
	}
	cmd.Flags().BoolVar(&internal, "internal", false, "include internal topics (__consumer_offsets, ...)")
	cmd.Flags().BoolVar(&underReplicated, "under-replicated", false, "list only partitions with fewer in-sync replicas than replicas")
	return cmd
}

// underReplicatedPartition is one row of `topic list --under-replicated`.
type underReplicatedPartition struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Leader    int32   `json:"leader"`
	Replicas  []int32 `json:"replicas"`
	ISR       []int32 `json:"isr"`
}

// underReplicatedPartitions picks the partitions of details whose ISR is
// smaller than their replica set, sorted by topic and partition.
func underReplicatedPartitions(details kadm.TopicDetails) []underReplicatedPartition {
	out := []underReplicatedPartition{}
	for _, d := range details.Sorted() {
		for _, p := range d.Partitions.Sorted() {
			if isUnderReplicated(p) {
				out = append(out, underReplicatedPartition{Topic: d.Topic, Partition: p.Partition, Leader: p.Leader,
					Replicas: nonNil(p.Replicas), ISR: nonNil(p.ISR)})
			}
		}
	}
	return out
}

func printUnderReplicated(w io.Writer, format string, ps []underReplicatedPartition) error {
	if format == outputJSON {
		return writeJSON(w, ps)
	}
	t := newTable(w, "TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR")
	for _, p := range ps {
		t.row(p.Topic, strconv.Itoa(int(p.Partition)), strconv.Itoa(int(p.Leader)), joinInt32s(p.Replicas), joinInt32s(p.ISR))
	}
	return t.flush()
}

func printTopicList(w io.Writer, format string, entries []topicListEntry) error {
	if format == outputJSON {
		return writeJSON(w, entries)
	}
	t := newTable(w, "TOPIC", "PARTITIONS", "REPLICATION-FACTOR", "ERROR")
	for _, e := range entries {
		t.row(e.Topic, strconv.Itoa(e.Partitions), strconv.Itoa(e.ReplicationFactor), e.Error)
	}
	return t.flush()
}

// ---- describe ----

type topicDescription struct {
	Topic             string                 `json:"topic"`
	TopicID           string                 `json:"topic_id"`
	Internal          bool                   `json:"internal"`
	PartitionCount    int                    `json:"partition_count"`
	ReplicationFactor int                    `json:"replication_factor"`
	Configs           map[string]string      `json:"configs"`
	Partitions        []partitionDescription `json:"partitions"`
}

type partitionDescription struct {
	Partition       int32   `json:"partition"`
	Leader          int32   `json:"leader"`
	LeaderEpoch     int32   `json:"leader_epoch"`
	Replicas        []int32 `json:"replicas"`
	ISR             []int32 `json:"isr"`
	OfflineReplicas []int32 `json:"offline_replicas,omitempty"`
	// Offline: no leader, or a leader that is not a live broker (Kafka's
	// unavailable partition). UnderReplicated: fewer in-sync replicas than
	// replicas.
	Offline         bool  `json:"offline"`
	UnderReplicated bool  `json:"under_replicated"`
	LogStartOffset  int64 `json:"log_start_offset"`
	LogEndOffset    int64 `json:"log_end_offset"`
	// LastStableOffset is what a read_committed consumer reads up to (ListOffsets
	// with isolation read_committed): the first offset of the oldest open
	// transaction, or the high watermark when none is open.
	LastStableOffset int64  `json:"last_stable_offset"`
	Error            string `json:"error,omitempty"`
}

// isUnderReplicated: fewer in-sync replicas than replicas.
func isUnderReplicated(p kadm.PartitionDetail) bool { return len(p.ISR) < len(p.Replicas) }

// isOffline: no leader, or one that is not among the live brokers.
func isOffline(p kadm.PartitionDetail, live map[int32]bool) bool {
	return p.Leader < 0 || !live[p.Leader]
}

// partitionMarkers is a partition's STATUS cell: "offline",
// "under-replicated", both, or "-".
func partitionMarkers(offline, underReplicated bool) string {
	var m []string
	if offline {
		m = append(m, "offline")
	}
	if underReplicated {
		m = append(m, "under-replicated")
	}
	if len(m) == 0 {
		return "-"
	}
	return strings.Join(m, ",")
}

func newTopicDescribeCommand(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:          "describe NAME",
		Short:        "Describe a topic: id, overridden configs, partitions with leaders, ISR and offsets",
		Args:         cobra.ExactArgs(1),
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return adminRun(cmd, cf, func(ctx context.Context, adm *kadm.Client, format string) error {
				desc, warnings, err := describeTopic(ctx, adm, args[0])
				for _, w := range warnings {
					fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
				}
				if err != nil {
					return err
				}
				return printTopicDescription(cmd.OutOrStdout(), format, desc)
			})
		},
	}
}

// describeTopic gathers metadata, overridden configs and offsets for one
// topic. Failures to load configs or offsets are returned as warnings so the
// rest of the description still prints.
func describeTopic(ctx context.Context, adm *kadm.Client, name string) (topicDescription, []string, error) {
	var warnings []string
	meta, err := adm.Metadata(ctx, name)
	if err != nil {
		return topicDescription{}, nil, fmt.Errorf("describing topic %s: %w", name, err)
	}
	live := map[int32]bool{}
	for _, b := range meta.Brokers {
		live[b.NodeID] = true
	}
	d, ok := meta.Topics[name]
	if !ok {
		return topicDescription{}, nil, fmt.Errorf("describing topic %s: %s", name, kafkaErrorText(kerr.UnknownTopicOrPartition, ""))
	}
	if d.Err != nil {
		return topicDescription{}, nil, fmt.Errorf("describing topic %s: %s", name, kafkaErrorText(d.Err, ""))
	}
	desc := topicDescription{
		Topic:             name,
		TopicID:           topicIDString(d.ID),
		Internal:          d.IsInternal,
		PartitionCount:    len(d.Partitions),
		ReplicationFactor: replicationFactor(d),
		Configs:           map[string]string{},
	}

	rcs, err := adm.DescribeTopicConfigs(ctx, name)
	switch {
	case err != nil:
		warnings = append(warnings, "describing configs: "+err.Error())
	default:
		rc, err := rcs.On(name, nil)
		switch {
		case err != nil:
			warnings = append(warnings, "describing configs: "+kafkaErrorText(err, ""))
		case rc.Err != nil:
			warnings = append(warnings, "describing configs: "+kafkaErrorText(rc.Err, rc.ErrMessage))
		default:
			desc.Configs = overriddenConfigs(rc.Configs)
		}
	}

	starts, err := adm.ListStartOffsets(ctx, name)
	if err != nil {
		warnings = append(warnings, "listing log start offsets: "+err.Error())
	}
	ends, err := adm.ListEndOffsets(ctx, name)
	if err != nil {
		warnings = append(warnings, "listing log end offsets: "+err.Error())
	}
	stables, err := adm.ListCommittedOffsets(ctx, name)
	if err != nil {
		warnings = append(warnings, "listing last stable offsets: "+err.Error())
	}
	for _, p := range d.Partitions.Sorted() {
		pd := partitionDescription{
			Partition:        p.Partition,
			Leader:           p.Leader,
			LeaderEpoch:      p.LeaderEpoch,
			Replicas:         nonNil(p.Replicas),
			ISR:              nonNil(p.ISR),
			OfflineReplicas:  p.OfflineReplicas,
			Offline:          isOffline(p, live),
			UnderReplicated:  isUnderReplicated(p),
			LogStartOffset:   -1,
			LogEndOffset:     -1,
			LastStableOffset: -1,
		}
		var errs []string
		if p.Err != nil {
			errs = append(errs, kafkaErrorName(p.Err))
		}
		if o, ok := starts.Lookup(name, p.Partition); ok {
			if o.Err != nil {
				errs = append(errs, "start offset: "+kafkaErrorName(o.Err))
			} else {
				pd.LogStartOffset = o.Offset
			}
		}
		if o, ok := ends.Lookup(name, p.Partition); ok {
			if o.Err != nil {
				errs = append(errs, "end offset: "+kafkaErrorName(o.Err))
			} else {
				pd.LogEndOffset = o.Offset
			}
		}
		if o, ok := stables.Lookup(name, p.Partition); ok {
			if o.Err != nil {
				errs = append(errs, "last stable offset: "+kafkaErrorName(o.Err))
			} else {
				pd.LastStableOffset = o.Offset
			}
		}
		pd.Error = strings.Join(errs, "; ")
		desc.Partitions = append(desc.Partitions, pd)
	}
	return desc, warnings, nil
}

func nonNil(xs []int32) []int32 {
	if xs == nil {
		return []int32{}
	}
	return xs
}

// overriddenConfigs keeps only configs set on the topic itself (Kafka's
// DYNAMIC_TOPIC_CONFIG source); sensitive values are masked.
func overriddenConfigs(cfgs []kadm.Config) map[string]string {
	out := map[string]string{}
	for _, c := range cfgs {
		if c.Source != kmsg.ConfigSourceDynamicTopicConfig {
			continue
		}
		if c.Sensitive {
			out[c.Key] = "(sensitive)"
			continue
		}
		out[c.Key] = c.MaybeValue()
	}
	return out
}

func printTopicDescription(w io.Writer, format string, d topicDescription) error {
	if format == outputJSON {
		return writeJSON(w, d)
	}
	keys := make([]string, 0, len(d.Configs))
	for k := range d.Configs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintf(w, "Topic: %s\tTopicId: %s\tPartitionCount: %d\tReplicationFactor: %d\n",
		d.Topic, d.TopicID, d.PartitionCount, d.ReplicationFactor)
	// One override per line: values such as cleanup.policy=compact,delete
	// contain commas, so Kafka's comma-joined form would be ambiguous.
	if len(keys) == 0 {
		fmt.Fprintln(w, "Configs: (none overridden)")
	} else {
		fmt.Fprintln(w, "Configs:")
		for _, k := range keys {
			fmt.Fprintf(w, "  %s=%s\n", k, d.Configs[k])
		}
	}
	t := newTable(w, "PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "OFFLINE-REPLICAS", "STATUS", "LOG-START-OFFSET", "LOG-END-OFFSET", "LAST-STABLE-OFFSET", "ERROR")
	for _, p := range d.Partitions {
		t.row(
			strconv.Itoa(int(p.Partition)),
			strconv.Itoa(int(p.Leader)),
			strconv.Itoa(int(p.LeaderEpoch)),
			joinInt32s(p.Replicas),
			joinInt32s(p.ISR),
			orDash(joinInt32s(p.OfflineReplicas)),
			partitionMarkers(p.Offline, p.UnderReplicated),
			offsetText(p.LogStartOffset),
			offsetText(p.LogEndOffset),
			offsetText(p.LastStableOffset),
			p.Error,
		)
	}
	return t.flush()
}

// ---- delete ----

func newTopicDeleteCommand(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:          "delete NAME",
		Short:        "Delete a topic",
		Args:         cobra.ExactArgs(1),
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return adminRun(cmd, cf, func(ctx context.Context, adm *kadm.Client, format string) error {
				name := args[0]
				resps, err := adm.DeleteTopics(ctx, name)
				if err != nil {
					return fmt.Errorf("deleting topic %s: %w", name, err)
				}
				r, ok := resps[name]
				if !ok {
					return fmt.Errorf("deleting topic %s: broker response did not include the topic", name)
				}
				if r.Err != nil {
					return fmt.Errorf("deleting topic %s: %s", name, kafkaErrorText(r.Err, r.ErrMessage))
				}
				w := cmd.OutOrStdout()
				if format == outputJSON {
					return writeJSON(w, map[string]any{"topic": name, "deleted": true})
				}
				_, err = fmt.Fprintf(w, "Deleted topic %s.\n", name)
				return err
			})
		},
	}
}

// ---- alter-config ----

// alterConfigOps turns --set and --delete into incremental alter operations.
// Setting and deleting the same key at once is rejected.
func alterConfigOps(set []string, del []string) ([]kadm.AlterConfig, error) {
	sets, err := parseKeyValues(set)
	if err != nil {
		return nil, fmt.Errorf("--set %w", err)
	}
	if len(sets) == 0 && len(del) == 0 {
		return nil, errors.New("nothing to change: give --set KEY=VALUE and/or --delete KEY")
	}
	keys := make([]string, 0, len(sets))
	for k := range sets {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	ops := make([]kadm.AlterConfig, 0, len(sets)+len(del))
	for _, k := range keys {
		ops = append(ops, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: kadm.StringPtr(sets[k])})
	}
	seen := map[string]bool{}
	for _, k := range del {
		if k == "" {
			return nil, errors.New("--delete: empty key")
		}
		if _, ok := sets[k]; ok {
			return nil, fmt.Errorf("%q is both set and deleted", k)
		}
		if seen[k] {
			continue
		}
		seen[k] = true
		ops = append(ops, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
	}
	return ops, nil
}

func newTopicAlterConfigCommand(cf *clientFlags) *cobra.Command {
	var set, del []string
	cmd := &cobra.Command{
		Use:          "alter-config NAME",
		Short:        "Set or delete topic config overrides (IncrementalAlterConfigs)",
		Args:         cobra.ExactArgs(1),
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			ops, err := alterConfigOps(set, del)
			if err != nil {
				return err
			}
			return adminRun(cmd, cf, func(ctx context.Context, adm *kadm.Client, format string) error {
				name := args[0]
				resps, err := adm.AlterTopicConfigs(ctx, ops, name)
				if err != nil {
					return fmt.Errorf("altering configs of topic %s: %w", name, err)
				}
				r, err := resps.On(name, nil)
				if err != nil {
					return fmt.Errorf("altering configs of topic %s: broker response did not include the topic", name)
				}
				if r.Err != nil {
					return fmt.Errorf("altering configs of topic %s: %s", name, kafkaErrorText(r.Err, r.ErrMessage))
				}
				w := cmd.OutOrStdout()
				if format == outputJSON {
					sets := map[string]string{}
					dels := []string{}
					for _, op := range ops {
						if op.Op == kadm.SetConfig {
							sets[op.Name] = *op.Value
						} else {
							dels = append(dels, op.Name)
						}
					}
					return writeJSON(w, map[string]any{"topic": name, "set": sets, "deleted": dels})
				}
				_, err = fmt.Fprintf(w, "Altered configs of topic %s.\n", name)
				return err
			})
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&set, "set", nil, "set config KEY=VALUE (repeatable)")
	f.StringArrayVar(&del, "delete", nil, "delete config override KEY, reverting to the default (repeatable)")
	return cmd
}
