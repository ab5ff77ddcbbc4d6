package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

// `gregor records delete`: kafka-delete-records.sh. DeleteRecords moves each partition's log
// start offset up to the offset given (-1: the high watermark), so everything below it is
// gone for consumers at once and from disk when its segments are wholly below it. The
// partitions come from --offset-json-file, in Kafka's format:
//
//	{"version": 1, "partitions": [{"topic": "orders", "partition": 0, "offset": 42}]}
//
// or from --topic/--partition/--offset for one partition.

func newRecordsCommand() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "records",
		Short: "Delete records below an offset (kafka-delete-records.sh)",
	}
	cf.register(cmd)
	cmd.AddCommand(newRecordsDeleteCommand(&cf))
	return cmd
}

// deleteRecordsFile is kafka-delete-records.sh's --offset-json-file.
type deleteRecordsFile struct {
	Version    *int `json:"version"`
	Partitions []struct {
		Topic     string `json:"topic"`
		Partition *int32 `json:"partition"`
		Offset    *int64 `json:"offset"`
	} `json:"partitions"`
}

// parseDeleteRecordsJSON reads the offset JSON file's content into offsets to delete below.
func parseDeleteRecordsJSON(data []byte) (kadm.Offsets, error) {
	var f deleteRecordsFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("offset JSON file: %w", err)
	}
	if f.Version != nil && *f.Version != 1 {
		return nil, fmt.Errorf("offset JSON file: version %d is not supported (want 1)", *f.Version)
	}
	if len(f.Partitions) == 0 {
		return nil, errors.New("offset JSON file: no partitions")
	}
	offs := kadm.Offsets{}
	for i, p := range f.Partitions {
		if p.Topic == "" || p.Partition == nil || p.Offset == nil {
			return nil, fmt.Errorf("offset JSON file: partitions[%d] needs topic, partition and offset", i)
		}
		if _, dup := offs.Lookup(p.Topic, *p.Partition); dup {
			return nil, fmt.Errorf("offset JSON file: %s-%d is given more than once", p.Topic, *p.Partition)
		}
		if *p.Offset < -1 {
			return nil, fmt.Errorf("offset JSON file: %s-%d: offset %d (want >= 0, or -1 for the high watermark)", p.Topic, *p.Partition, *p.Offset)
		}
		offs.Add(kadm.Offset{Topic: p.Topic, Partition: *p.Partition, At: *p.Offset, LeaderEpoch: -1})
	}
	return offs, nil
}

// DeletedRecords is one partition's outcome as `gregor records delete -o json` prints it.
type DeletedRecords struct {
	Topic        string `json:"topic"`
	Partition    int32  `json:"partition"`
	LowWatermark int64  `json:"low_watermark"`
	Error        string `json:"error,omitempty"`
}

func newRecordsDeleteCommand(cf *clientFlags) *cobra.Command {
	var (
		file      string
		topic     string
		partition int32
		offset    int64
	)
	cmd := &cobra.Command{
		Use:   "delete (--offset-json-file FILE | --topic T --partition P --offset O)",
		Short: "Delete the records below an offset of each partition given (kafka-delete-records.sh)",
		Long: `Move each partition's log start offset up to the offset given (-1: the high
watermark), deleting every record below it. --offset-json-file takes Kafka's format:
{"version":1,"partitions":[{"topic":"t","partition":0,"offset":42}]}. The answer is
each partition's new low watermark; the command fails if any partition failed.`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var offs kadm.Offsets
			simple := cmd.Flags().Changed("topic") || cmd.Flags().Changed("partition") || cmd.Flags().Changed("offset")
			switch {
			case file != "" && simple:
				return errors.New("--offset-json-file cannot go with --topic/--partition/--offset")
			case file != "":
				data, err := os.ReadFile(file)
				if err != nil {
					return err
				}
				if offs, err = parseDeleteRecordsJSON(data); err != nil {
					return err
				}
			case simple:
				if topic == "" || !cmd.Flags().Changed("partition") || !cmd.Flags().Changed("offset") {
					return errors.New("give --topic, --partition and --offset together")
				}
				if offset < -1 {
					return fmt.Errorf("--offset %d: want >= 0, or -1 for the high watermark", offset)
				}
				offs = kadm.Offsets{}
				offs.Add(kadm.Offset{Topic: topic, Partition: partition, At: offset, LeaderEpoch: -1})
			default:
				return errors.New("give --offset-json-file, or --topic, --partition and --offset")
			}
			return adminRun(cmd, cf, func(ctx context.Context, adm *kadm.Client, format string) error {
				resps, err := adm.DeleteRecords(ctx, offs)
				if err != nil {
					return fmt.Errorf("deleting records: %w", err)
				}
				var rows []DeletedRecords
				var failed int
				offs.Each(func(o kadm.Offset) {
					r := DeletedRecords{Topic: o.Topic, Partition: o.Partition, LowWatermark: -1}
					if resp, ok := resps.Lookup(o.Topic, o.Partition); !ok {
						r.Error = "no answer for the partition"
					} else if resp.Err != nil {
						r.Error = kafkaErrorText(resp.Err, "")
					} else {
						r.LowWatermark = resp.LowWatermark
					}
					if r.Error != "" {
						failed++
					}
					rows = append(rows, r)
				})
				sort.Slice(rows, func(i, j int) bool {
					if rows[i].Topic != rows[j].Topic {
						return rows[i].Topic < rows[j].Topic
					}
					return rows[i].Partition < rows[j].Partition
				})
				w := cmd.OutOrStdout()
				if format == outputJSON {
					if err := writeJSON(w, rows); err != nil {
						return err
					}
				} else {
					fmt.Fprintln(w, "Executing records delete operation")
					fmt.Fprintln(w, "Records delete operation completed:")
					for _, r := range rows {
						if r.Error != "" {
							fmt.Fprintf(w, "partition: %s-%d\terror: %s\n", r.Topic, r.Partition, r.Error)
						} else {
							fmt.Fprintf(w, "partition: %s-%d\tlow_watermark: %d\n", r.Topic, r.Partition, r.LowWatermark)
						}
					}
				}
				if failed > 0 {
					return fmt.Errorf("deleting records failed for %d of %d partitions", failed, len(rows))
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&file, "offset-json-file", "", `Kafka's JSON: {"version":1,"partitions":[{"topic":"t","partition":0,"offset":42}]}`)
	cmd.Flags().StringVar(&topic, "topic", "", "the topic (with --partition and --offset)")
	cmd.Flags().Int32Var(&partition, "partition", 0, "the partition")
	cmd.Flags().Int64Var(&offset, "offset", 0, "delete records below this offset (-1: the high watermark)")
	_ = cmd.RegisterFlagCompletionFunc("topic", completeTopics)
	return cmd
}
