package cli

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

// `gregor share-group ...`: share group (KIP-932) administration, like kafka-share-groups.sh.

func newShareGroupCommand() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "share-group",
		Short: "List, describe, reset and delete share groups",
	}
	cf.register(cmd)
	cmd.AddCommand(newShareGroupListCommand(&cf), newShareGroupDescribeCommand(&cf),
		newShareGroupResetCommand(&cf), newShareGroupDeleteCommand(&cf))
	return cmd
}

func newShareGroupListCommand(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List share groups with their state",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return adminRun(cmd, cf, func(ctx context.Context, adm *kadm.Client, format string) error {
				groups, err := adm.ListGroupsByType(ctx, []string{"share"})
				if err != nil {
					return err
				}
				list := groups.Sorted()
				if format == outputJSON {
					type row struct {
						Group       string `json:"group"`
						State       string `json:"state"`
						Coordinator int32  `json:"coordinator"`
					}
					rows := []row{}
					for _, g := range list {
						rows = append(rows, row{g.Group, g.State, g.Coordinator})
					}
					return writeJSON(cmd.OutOrStdout(), rows)
				}
				t := newTable(cmd.OutOrStdout(), "GROUP", "STATE", "COORDINATOR")
				for _, g := range list {
					t.row(g.Group, g.State, strconv.Itoa(int(g.Coordinator)))
				}
				return t.flush()
			})
		},
	}
}

// sharePartitionRow is one share-partition of `share-group describe`.
type sharePartitionRow struct {
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	StartOffset int64  `json:"start_offset"`
	Lag         int64  `json:"lag"`
}

// shareMemberRow is one member of `share-group describe`.
type shareMemberRow struct {
	MemberID   string   `json:"member_id"`
	Epoch      int32    `json:"epoch"`
	ClientID   string   `json:"client_id"`
	Host       string   `json:"host"`
	Subscribed []string `json:"subscribed"`
}

func newShareGroupDescribeCommand(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "describe GROUP",
		Short: "Show a share group's state, members and share-partition start offsets and lag",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return adminRun(cmd, cf, func(ctx context.Context, adm *kadm.Client, format string) error {
				group := args[0]
				described, err := adm.DescribeShareGroups(ctx, group)
				if err != nil {
					return err
				}
				d, ok := described[group]
				if !ok {
					return fmt.Errorf("share group %s: no answer", group)
				}
				if d.Err != nil {
					return fmt.Errorf("share group %s: %s", group, kafkaErrorText(d.Err, ""))
				}
				offsets, err := adm.DescribeShareGroupOffsets(ctx, group)
				if err != nil {
					return err
				}
				var parts []sharePartitionRow
				if o, ok := offsets[group]; ok {
					if o.Err != nil {
						return fmt.Errorf("share group %s offsets: %s", group, kafkaErrorText(o.Err, ""))
					}
					for topic, ps := range o.Offsets {
						for p, so := range ps {
							parts = append(parts, sharePartitionRow{topic, p, so.StartOffset, so.Lag})
						}
					}
				}
				sort.Slice(parts, func(i, j int) bool {
					if parts[i].Topic != parts[j].Topic {
						return parts[i].Topic < parts[j].Topic
					}
					return parts[i].Partition < parts[j].Partition
				})
				members := []shareMemberRow{}
				for _, m := range d.Members {
					members = append(members, shareMemberRow{m.MemberID, m.MemberEpoch, m.ClientID, m.ClientHost, m.SubscribedTopicNames})
				}
				if format == outputJSON {
					return writeJSON(cmd.OutOrStdout(), struct {
						Group      string              `json:"group"`
						State      string              `json:"state"`
						Epoch      int32               `json:"epoch"`
						Assignor   string              `json:"assignor"`
						Members    []shareMemberRow    `json:"members"`
						Partitions []sharePartitionRow `json:"partitions"`
					}{group, d.GroupState, d.GroupEpoch, d.Assignor, members, append([]sharePartitionRow{}, parts...)})
				}
				w := cmd.OutOrStdout()
				fmt.Fprintf(w, "Share group %s: %s, epoch %d, assignor %s, %d member(s)\n\n", group, d.GroupState, d.GroupEpoch, d.Assignor, len(members))
				t := newTable(w, "TOPIC", "PARTITION", "START-OFFSET", "LAG")
				for _, p := range parts {
					t.row(p.Topic, strconv.Itoa(int(p.Partition)), strconv.FormatInt(p.StartOffset, 10), strconv.FormatInt(p.Lag, 10))
				}
				if err := t.flush(); err != nil {
					return err
				}
				fmt.Fprintln(w)
				mt := newTable(w, "MEMBER-ID", "EPOCH", "CLIENT-ID", "HOST", "SUBSCRIBED")
				for _, m := range members {
					mt.row(m.MemberID, strconv.Itoa(int(m.Epoch)), m.ClientID, m.Host, strings.Join(m.Subscribed, ","))
				}
				return mt.flush()
			})
		},
	}
}

func newShareGroupDeleteCommand(cf *clientFlags) *cobra.Command {
	return newDeleteGroupsCommand(cf, "share group", "Delete share groups that have no members, with their share-partitions' state")
}

func newShareGroupResetCommand(cf *clientFlags) *cobra.Command {
	var topic string
	var earliest, latest bool
	var offset int64 = -1
	cmd := &cobra.Command{
		Use:   "reset-offsets GROUP --topic TOPIC (--to-earliest | --to-latest | --to-offset N)",
		Short: "Start an empty share group's partitions of a topic over at an offset",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			modes := 0
			for _, on := range []bool{earliest, latest, offset >= 0} {
				if on {
					modes++
				}
			}
			if topic == "" || modes != 1 {
				return errors.New("reset-offsets needs --topic and exactly one of --to-earliest, --to-latest, --to-offset")
			}
			return adminRun(cmd, cf, func(ctx context.Context, adm *kadm.Client, _ string) error {
				group := args[0]
				list := adm.ListEndOffsets
				if earliest {
					list = adm.ListStartOffsets
				}
				listed, err := list(ctx, topic)
				if err != nil {
					return err
				}
				if err := listed.Error(); err != nil {
					return err
				}
				offsets := kadm.Offsets{}
				listed.Each(func(l kadm.ListedOffset) {
					at := l.Offset
					if offset >= 0 {
						at = offset
					}
					offsets.Add(kadm.Offset{Topic: l.Topic, Partition: l.Partition, At: at})
				})
				resp, err := adm.AlterShareGroupOffsets(ctx, group, offsets)
				if err != nil {
					return fmt.Errorf("share group %s: %s", group, kafkaErrorText(err, ""))
				}
				var failed []string
				offsets.Each(func(o kadm.Offset) {
					if perr := resp[o.Topic][o.Partition]; perr != nil {
						failed = append(failed, fmt.Sprintf("%s/%d: %s", o.Topic, o.Partition, kafkaErrorText(perr, "")))
						return
					}
					fmt.Fprintf(cmd.OutOrStdout(), "%s %s/%d start offset %d\n", group, o.Topic, o.Partition, o.At)
				})
				if len(failed) > 0 {
					return errors.New(strings.Join(failed, "; "))
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&topic, "topic", "", "the topic whose partitions are reset")
	cmd.Flags().BoolVar(&earliest, "to-earliest", false, "start at each partition's log start offset")
	cmd.Flags().BoolVar(&latest, "to-latest", false, "start at each partition's end (only new records are delivered)")
	cmd.Flags().Int64Var(&offset, "to-offset", -1, "start every partition at this offset")
	return cmd
}
