package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// `gregor metadata-quorum describe`: kafka-metadata-quorum.sh. DescribeQuorum for the
// metadata log (__cluster_metadata-0), sent to a controller's CONTROLLER listener
// (--bootstrap-controller, as Kafka's --bootstrap-controller; brokers do not answer it):
// the active controller, the raft term (Kafka's leader epoch), the high watermark, and each
// voter's log end offset where the answering controller knows it (-1: unknown).

func newMetadataQuorumCommand() *cobra.Command {
	var (
		controllers, commandConfig, output string
		replication                        bool
	)
	cmd := &cobra.Command{
		Use:   "metadata-quorum",
		Short: "Describe the controller quorum (kafka-metadata-quorum.sh)",
	}
	describe := &cobra.Command{
		Use:   "describe --bootstrap-controller HOST:PORT [--status | --replication]",
		Short: "The quorum's leader, epoch, high watermark and voters (--replication: per voter)",
		Long: `Ask a controller (its CONTROLLER listener) for the state of the metadata log's
quorum. --status (the default) prints the leader, its epoch (the raft term), the high
watermark, the voters and observers; --replication one line per voter and observer with
its log end offset and lag (- where the answering controller does not know it).`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cf := clientFlags{bootstrap: controllers, commandConfig: commandConfig, output: output}
			return clientRun(cmd, &cf, adminTimeout, func(ctx context.Context, cl *kgo.Client, format string) error {
				st, err := describeQuorum(ctx, cl)
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				if format == outputJSON {
					return writeJSON(w, st)
				}
				if replication {
					t := newTable(w, "NodeId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp", "Status")
					for _, r := range st.Replicas {
						lag := "-"
						if r.LogEndOffset >= 0 {
							lag = strconv.FormatInt(st.HighWatermark-r.LogEndOffset, 10)
						}
						t.row(fmt.Sprint(r.ID), offsetText(r.LogEndOffset), lag, timestampText(r.LastFetchTimestamp), timestampText(r.LastCaughtUpTimestamp), r.Status)
					}
					return t.flush()
				}
				fmt.Fprintf(w, "LeaderId:               %d\n", st.LeaderID)
				fmt.Fprintf(w, "LeaderEpoch:            %d\n", st.LeaderEpoch)
				fmt.Fprintf(w, "HighWatermark:          %d\n", st.HighWatermark)
				fmt.Fprintf(w, "CurrentVoters:          %v\n", st.Voters)
				_, err = fmt.Fprintf(w, "CurrentObservers:       %v\n", st.Observers)
				return err
			})
		},
	}
	describe.Flags().StringVar(&controllers, "bootstrap-controller", "", "a controller's CONTROLLER listener, HOST:PORT[,HOST:PORT...]")
	describe.Flags().StringVar(&commandConfig, "command-config", "", "Kafka client properties file for a secured controller listener")
	describe.Flags().BoolVar(&replication, "replication", false, "one line per voter and observer")
	describe.Flags().Bool("status", true, "the quorum's summary (the default)")
	describe.Flags().StringVarP(&output, "output", "o", outputTable, "output format: table|json")
	describe.MarkFlagsMutuallyExclusive("status", "replication")
	mustMarkRequired(describe, "bootstrap-controller")
	cmd.AddCommand(describe)
	return cmd
}

// QuorumStatus is what `gregor metadata-quorum describe -o json` prints.
type QuorumStatus struct {
	LeaderID      int32           `json:"leader_id"`
	LeaderEpoch   int32           `json:"leader_epoch"`
	HighWatermark int64           `json:"high_watermark"`
	Voters        []int32         `json:"voters"`
	Observers     []int32         `json:"observers"`
	Replicas      []QuorumReplica `json:"replicas"`
}

// QuorumReplica is one voter or observer.
type QuorumReplica struct {
	ID                    int32  `json:"id"`
	LogEndOffset          int64  `json:"log_end_offset"` // -1: unknown
	LastFetchTimestamp    int64  `json:"last_fetch_timestamp"`
	LastCaughtUpTimestamp int64  `json:"last_caught_up_timestamp"`
	Status                string `json:"status"` // Leader, Follower, Observer
}

const metadataTopic = "__cluster_metadata"

func describeQuorum(ctx context.Context, cl *kgo.Client) (QuorumStatus, error) {
	st := QuorumStatus{Voters: []int32{}, Observers: []int32{}, Replicas: []QuorumReplica{}}
	req := kmsg.NewPtrDescribeQuorumRequest()
	t := kmsg.NewDescribeQuorumRequestTopic()
	t.Topic = metadataTopic
	p := kmsg.NewDescribeQuorumRequestTopicPartition()
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	// Straight to the seeds: a controller listener serves no Metadata, so the client must
	// not try to discover brokers first. The first seed that answers is asked.
	var (
		resp *kmsg.DescribeQuorumResponse
		err  error
	)
	for _, b := range cl.SeedBrokers() {
		var kr kmsg.Response
		if kr, err = b.Request(ctx, req); err == nil {
			resp = kr.(*kmsg.DescribeQuorumResponse)
			break
		}
	}
	if resp == nil {
		if err == nil {
			err = errors.New("no controller given")
		}
		return st, fmt.Errorf("describing the quorum: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return st, fmt.Errorf("describing the quorum: %s", kafkaErrorText(err, derefString(resp.ErrorMessage)))
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return st, errors.New("describing the quorum: the answer names no metadata partition")
	}
	rp := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
		return st, fmt.Errorf("describing the quorum: %s", kafkaErrorText(err, derefString(rp.ErrorMessage)))
	}
	st.LeaderID, st.LeaderEpoch, st.HighWatermark = rp.LeaderID, rp.LeaderEpoch, rp.HighWatermark
	add := func(rs kmsg.DescribeQuorumResponseTopicPartitionReplicaState, voter bool) {
		status := "Observer"
		if voter {
			status = "Follower"
			if rs.ReplicaID == rp.LeaderID {
				status = "Leader"
			}
			st.Voters = append(st.Voters, rs.ReplicaID)
		} else {
			st.Observers = append(st.Observers, rs.ReplicaID)
		}
		st.Replicas = append(st.Replicas, QuorumReplica{ID: rs.ReplicaID, LogEndOffset: rs.LogEndOffset,
			LastFetchTimestamp: rs.LastFetchTimestamp, LastCaughtUpTimestamp: rs.LastCaughtUpTimestamp, Status: status})
	}
	for _, v := range rp.CurrentVoters {
		add(v, true)
	}
	for _, o := range rp.Observers {
		add(o, false)
	}
	return st, nil
}

// timestampText renders a millisecond timestamp, "-" when unknown (-1).
func timestampText(ms int64) string {
	if ms < 0 {
		return "-"
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
}
