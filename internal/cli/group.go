package cli

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

// `gregor group ...`: consumer group administration, like kafka-consumer-groups.sh.

func newGroupCommand() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "group",
		Short: "List, describe, reset and delete consumer groups",
	}
	cf.register(cmd)
	cmd.AddCommand(newGroupListCommand(&cf), newGroupDescribeCommand(&cf),
		newGroupResetCommand(&cf), newGroupDeleteCommand(&cf))
	return cmd
}

func newGroupListCommand(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List consumer groups with their state",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return adminRun(cmd, cf, func(ctx context.Context, adm *kadm.Client, format string) error {
				groups, err := adm.ListGroups(ctx)
				if err != nil {
					return err
				}
				list := groups.Sorted()
				if format == outputJSON {
					type row struct {
						Group        string `json:"group"`
						State        string `json:"state"`
						ProtocolType string `json:"protocol_type"`
						Coordinator  int32  `json:"coordinator"`
					}
					rows := []row{}
					for _, g := range list {
						rows = append(rows, row{g.Group, g.State, g.ProtocolType, g.Coordinator})
					}
					return writeJSON(cmd.OutOrStdout(), rows)
				}
				t := newTable(cmd.OutOrStdout(), "GROUP", "STATE", "PROTOCOL-TYPE", "COORDINATOR")
				for _, g := range list {
					t.row(g.Group, g.State, g.ProtocolType, strconv.Itoa(int(g.Coordinator)))
				}
				return t.flush()
			})
		},
	}
}

// groupLagRow is one partition of `group describe`.
type groupLagRow struct {
	Group         string `json:"group"`
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	CurrentOffset int64  `json:"current_offset"`
	LogEndOffset  int64  `json:"log_end_offset"`
	Lag           int64  `json:"lag"`
	MemberID      string `json:"member_id"`
	ClientID      string `json:"client_id"`
	Host          string `json:"host"`
}

func newGroupDescribeCommand(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "describe GROUP",
		Short: "Show a group's state, members, assignments, committed offsets and lag",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			group := args[0]
			return adminRun(cmd, cf, func(ctx context.Context, adm *kadm.Client, format string) error {
				lags, err := adm.Lag(ctx, group)
				if err != nil {
					return err
				}
				l, ok := lags[group]
				if !ok {
					return fmt.Errorf("group %s: not found", group)
				}
				if err := l.Error(); err != nil {
					return fmt.Errorf("group %s: %s", group, kafkaErrorText(err, ""))
				}
				rows := []groupLagRow{}
				for _, m := range l.Lag.Sorted() {
					r := groupLagRow{Group: group, Topic: m.Topic, Partition: m.Partition,
						CurrentOffset: m.Commit.At, LogEndOffset: m.End.Offset, Lag: m.Lag}
					if m.Member != nil {
						r.MemberID, r.ClientID, r.Host = m.Member.MemberID, m.Member.ClientID, m.Member.ClientHost
					}
					rows = append(rows, r)
				}
				if format == outputJSON {
					return writeJSON(cmd.OutOrStdout(), map[string]any{
						"group": group, "state": l.State, "protocol": l.Protocol,
						"members": len(l.Members), "partitions": rows,
					})
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Group %s is %s with %d member(s) (protocol %s)\n\n",
					group, l.State, len(l.Members), orDash(l.Protocol))
				t := newTable(cmd.OutOrStdout(), "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "MEMBER-ID", "CLIENT-ID", "HOST")
				for _, r := range rows {
					t.row(r.Topic, strconv.Itoa(int(r.Partition)), offsetText(r.CurrentOffset), offsetText(r.LogEndOffset),
						offsetText(r.Lag), orDash(r.MemberID), orDash(r.ClientID), orDash(r.Host))
				}
				return t.flush()
			})
		},
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// resetOptions are the flags of `group reset-offsets`; exactly one --to-* / --shift-by.
type resetOptions struct {
	topic      string
	earliest   bool
	latest     bool
	toOffset   int64
	toDatetime string
	shiftBy    int64
	dryRun     bool
}

func newGroupResetCommand(cf *clientFlags) *cobra.Command {
	var o resetOptions
	cmd := &cobra.Command{
		Use:   "reset-offsets GROUP --topic T (--to-earliest|--to-latest|--to-offset N|--to-datetime T|--shift-by N)",
		Short: "Move a group's committed offsets (refused while the group has members)",
		Long: `Move a group's committed offsets for every partition of a topic. Offsets are
kept within [log start, log end], as Kafka does. --to-datetime takes RFC 3339 or
Kafka's YYYY-MM-DDTHH:mm:SS.sss (UTC). --dry-run prints the plan without committing.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			group := args[0]
			modes := 0
			for _, set := range []bool{o.earliest, o.latest, cmd.Flags().Changed("to-offset"),
				o.toDatetime != "", cmd.Flags().Changed("shift-by")} {
				if set {
					modes++
				}
			}
			if modes != 1 {
				return errors.New("give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime, --shift-by")
			}
			return adminRun(cmd, cf, func(ctx context.Context, adm *kadm.Client, format string) error {
				plan, err := planReset(ctx, adm, group, &o, cmd.Flags().Changed("to-offset"), cmd.Flags().Changed("shift-by"))
				if err != nil {
					return err
				}
				if !o.dryRun {
					resp, err := adm.CommitOffsets(ctx, group, plan)
					if err != nil {
						return err
					}
					if err := resp.Error(); err != nil {
						return fmt.Errorf("committing offsets: %s", kafkaErrorText(err, ""))
					}
				}
				return printPlan(cmd, format, group, plan)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.topic, "topic", "", "topic whose partitions to reset (required)")
	f.BoolVar(&o.earliest, "to-earliest", false, "reset to the log start offset")
	f.BoolVar(&o.latest, "to-latest", false, "reset to the log end offset")
	f.Int64Var(&o.toOffset, "to-offset", 0, "reset to this offset")
	f.StringVar(&o.toDatetime, "to-datetime", "", "reset to the first offset at or after this time")
	f.Int64Var(&o.shiftBy, "shift-by", 0, "move the committed offset by N (negative: back)")
	f.BoolVar(&o.dryRun, "dry-run", false, "print the new offsets without committing them")
	mustMarkRequired(cmd, "topic")
	return cmd
}

// planReset computes the new offset of every partition of o.topic.
func planReset(ctx context.Context, adm *kadm.Client, group string, o *resetOptions, toOffset, shift bool) (kadm.Offsets, error) {
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return nil, err
	}
	if d, ok := described[group]; ok {
		if d.Err != nil {
			return nil, fmt.Errorf("group %s: %s", group, kafkaErrorText(d.Err, ""))
		}
		if len(d.Members) > 0 {
			return nil, fmt.Errorf("group %s has %d active member(s) (state %s): offsets can only be reset while the group is inactive", group, len(d.Members), d.State)
		}
	}
	starts, err := adm.ListStartOffsets(ctx, o.topic)
	if err != nil {
		return nil, err
	}
	ends, err := adm.ListEndOffsets(ctx, o.topic)
	if err != nil {
		return nil, err
	}
	if err := ends.Error(); err != nil {
		return nil, fmt.Errorf("topic %s: %s", o.topic, kafkaErrorText(err, ""))
	}
	var target kadm.ListedOffsets
	switch {
	case o.earliest:
		target = starts
	case o.latest:
		target = ends
	case o.toDatetime != "":
		ts, err := parseDatetime(o.toDatetime)
		if err != nil {
			return nil, err
		}
		if target, err = adm.ListOffsetsAfterMilli(ctx, ts.UnixMilli(), o.topic); err != nil {
			return nil, err
		}
	}
	var committed kadm.OffsetResponses
	if shift {
		if committed, err = adm.FetchOffsets(ctx, group); err != nil {
			return nil, err
		}
	}
	plan := kadm.Offsets{}
	ends.Each(func(e kadm.ListedOffset) {
		lo, hi := int64(0), e.Offset
		if s, ok := starts.Lookup(e.Topic, e.Partition); ok {
			lo = s.Offset
		}
		at := hi
		switch {
		case target != nil:
			if t, ok := target.Lookup(e.Topic, e.Partition); ok {
				at = t.Offset
			}
		case toOffset:
			at = o.toOffset
		case shift:
			at = lo
			if c, ok := committed.Lookup(e.Topic, e.Partition); ok && c.Err == nil && c.At >= 0 {
				at = c.At + o.shiftBy
			}
		}
		at = max(lo, min(hi, at))
		plan.Add(kadm.Offset{Topic: e.Topic, Partition: e.Partition, At: at, LeaderEpoch: -1})
	})
	return plan, nil
}

// parseDatetime accepts RFC 3339 and Kafka's tool format YYYY-MM-DDTHH:mm:SS.sss (UTC).
func parseDatetime(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.000", "2006-01-02T15:04:05"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("--to-datetime %q: want RFC 3339 or YYYY-MM-DDTHH:mm:SS.sss", s)
}

func printPlan(cmd *cobra.Command, format, group string, plan kadm.Offsets) error {
	type row struct {
		Group     string `json:"group"`
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
		NewOffset int64  `json:"new_offset"`
	}
	var rows []row
	plan.Each(func(o kadm.Offset) { rows = append(rows, row{group, o.Topic, o.Partition, o.At}) })
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Topic != rows[j].Topic {
			return rows[i].Topic < rows[j].Topic
		}
		return rows[i].Partition < rows[j].Partition
	})
	if format == outputJSON {
		return writeJSON(cmd.OutOrStdout(), rows)
	}
	t := newTable(cmd.OutOrStdout(), "GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")
	for _, r := range rows {
		t.row(r.Group, r.Topic, strconv.Itoa(int(r.Partition)), strconv.FormatInt(r.NewOffset, 10))
	}
	return t.flush()
}

func newGroupDeleteCommand(cf *clientFlags) *cobra.Command {
	return newDeleteGroupsCommand(cf, "group", "Delete groups that have no members, with their committed offsets")
}

// newDeleteGroupsCommand is `delete GROUP...` of `gregor group` and `gregor share-group`
// (what names the kind of group in its output): one DeleteGroups, each group's outcome.
func newDeleteGroupsCommand(cf *clientFlags, what, short string) *cobra.Command {
	return &cobra.Command{
		Use:   "delete GROUP...",
		Short: short,
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return adminRun(cmd, cf, func(ctx context.Context, adm *kadm.Client, _ string) error {
				resp, err := adm.DeleteGroups(ctx, args...)
				if err != nil {
					return err
				}
				var failed []string
				for _, g := range args {
					if r, ok := resp[g]; ok && r.Err != nil {
						failed = append(failed, g+": "+kafkaErrorText(r.Err, ""))
						continue
					}
					fmt.Fprintf(cmd.OutOrStdout(), "Deleted %s %s\n", what, g)
				}
				if len(failed) > 0 {
					return errors.New(strings.Join(failed, "; "))
				}
				return nil
			})
		},
	}
}
