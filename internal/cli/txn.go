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
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// `gregor txn ...`: transaction administration, like kafka-transactions.sh.

func newTxnCommand() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "txn",
		Short: "List, describe, abort and find hanging transactions",
	}
	cf.register(cmd)
	cmd.AddCommand(newTxnListCommand(&cf), newTxnDescribeCommand(&cf), newTxnAbortCommand(&cf), newTxnFindHangingCommand(&cf))
	return cmd
}

// txnListRow is one transactional id of `txn list`.
type txnListRow struct {
	TransactionalID string `json:"transactional_id"`
	Coordinator     int32  `json:"coordinator"`
	ProducerID      int64  `json:"producer_id"`
	State           string `json:"state"`
}

func newTxnListCommand(cf *clientFlags) *cobra.Command {
	var states []string
	var producerIDs []int64
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the transactional ids every coordinator knows, with their producer id and state",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return adminRun(cmd, cf, func(ctx context.Context, adm *kadm.Client, format string) error {
				listed, err := adm.ListTransactions(ctx, producerIDs, states)
				if err != nil {
					return fmt.Errorf("listing transactions: %w", err)
				}
				rows := []txnListRow{}
				for _, l := range listed.Sorted() {
					rows = append(rows, txnListRow{l.TxnID, l.Coordinator, l.ProducerID, l.State})
				}
				if format == outputJSON {
					return writeJSON(cmd.OutOrStdout(), rows)
				}
				t := newTable(cmd.OutOrStdout(), "TRANSACTIONAL-ID", "COORDINATOR", "PRODUCER-ID", "STATE")
				for _, r := range rows {
					t.row(r.TransactionalID, strconv.Itoa(int(r.Coordinator)), strconv.FormatInt(r.ProducerID, 10), r.State)
				}
				return t.flush()
			})
		},
	}
	cmd.Flags().StringSliceVar(&states, "state", nil, "only transactions in these states (Ongoing, PrepareCommit, ...)")
	cmd.Flags().Int64SliceVar(&producerIDs, "producer-id", nil, "only transactions of these producer ids")
	return cmd
}

// txnDescription is `txn describe`.
type txnDescription struct {
	TransactionalID string `json:"transactional_id"`
	Coordinator     int32  `json:"coordinator"`
	ProducerID      int64  `json:"producer_id"`
	ProducerEpoch   int16  `json:"producer_epoch"`
	State           string `json:"state"`
	TimeoutMs       int32  `json:"transaction_timeout_ms"`
	// StartTimeMs is when the id's current (or, once it ended, its last) transaction
	// began, as the coordinator answers; it and DurationMs are -1 when it began none.
	StartTimeMs     int64    `json:"current_transaction_start_time_ms"`
	DurationMs      int64    `json:"transaction_duration_ms"`
	TopicPartitions []string `json:"topic_partitions"` // topic-partition, as Kafka prints them
}

func newTxnDescribeCommand(cf *clientFlags) *cobra.Command {
	var id string
	cmd := &cobra.Command{
		Use:   "describe --id ID",
		Short: "Describe a transactional id: producer id and epoch, state, timeout, the open transaction's start and partitions",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if id == "" {
				return errors.New("--id is required")
			}
			return adminRun(cmd, cf, func(ctx context.Context, adm *kadm.Client, format string) error {
				described, err := adm.DescribeTransactions(ctx, id)
				if err != nil {
					return fmt.Errorf("describing transaction %s: %w", id, err)
				}
				d, err := described.On(id, nil)
				if err == nil {
					err = d.Err
				}
				if err != nil {
					return fmt.Errorf("describing transaction %s: %s", id, kafkaErrorText(err, ""))
				}
				desc := describeTxn(d, time.Now().UnixMilli())
				if format == outputJSON {
					return writeJSON(cmd.OutOrStdout(), desc)
				}
				t := newTable(cmd.OutOrStdout(), "COORDINATOR", "TRANSACTIONAL-ID", "PRODUCER-ID", "PRODUCER-EPOCH", "STATE",
					"TIMEOUT-MS", "START-TIME-MS", "DURATION-MS", "TOPIC-PARTITIONS")
				t.row(strconv.Itoa(int(desc.Coordinator)), desc.TransactionalID, strconv.FormatInt(desc.ProducerID, 10),
					strconv.Itoa(int(desc.ProducerEpoch)), desc.State, strconv.Itoa(int(desc.TimeoutMs)),
					orDash(msText(desc.StartTimeMs)), orDash(msText(desc.DurationMs)), orDash(strings.Join(desc.TopicPartitions, ",")))
				return t.flush()
			})
		},
	}
	cmd.Flags().StringVar(&id, "id", "", "the transactional id")
	return cmd
}

func msText(ms int64) string {
	if ms < 0 {
		return ""
	}
	return strconv.FormatInt(ms, 10)
}

// describeTxn renders a described transaction; the start time and duration are -1 when the
// coordinator answers a start of -1.
func describeTxn(d kadm.DescribedTransaction, nowMs int64) txnDescription {
	desc := txnDescription{
		TransactionalID: d.TxnID, Coordinator: d.Coordinator, ProducerID: d.ProducerID, ProducerEpoch: d.ProducerEpoch,
		State: d.State, TimeoutMs: d.TimeoutMillis, StartTimeMs: -1, DurationMs: -1, TopicPartitions: []string{},
	}
	if d.StartTimestamp >= 0 {
		desc.StartTimeMs = d.StartTimestamp
		desc.DurationMs = max(0, nowMs-d.StartTimestamp)
	}
	d.Topics.Each(func(t string, p int32) {
		desc.TopicPartitions = append(desc.TopicPartitions, fmt.Sprintf("%s-%d", t, p))
	})
	sort.Strings(desc.TopicPartitions)
	return desc
}

// txnAbortResult is `txn abort`.
type txnAbortResult struct {
	Topic            string `json:"topic"`
	Partition        int32  `json:"partition"`
	StartOffset      int64  `json:"start_offset"`
	ProducerID       int64  `json:"producer_id"`
	ProducerEpoch    int16  `json:"producer_epoch"`
	CoordinatorEpoch int32  `json:"coordinator_epoch"`
	Leader           int32  `json:"leader"`
}

func newTxnAbortCommand(cf *clientFlags) *cobra.Command {
	var (
		topic       string
		partition   int32
		startOffset int64
	)
	cmd := &cobra.Command{
		Use:   "abort --topic T --partition P --start-offset N",
		Short: "Abort the open transaction that starts at an offset of a partition (a hanging one): an ABORT marker written to the partition's leader",
		Long: "Finds, with DescribeProducers, the producer whose open transaction on the partition starts at --start-offset, " +
			"and writes an ABORT marker for it to the partition's leader with WriteTxnMarkers, in the producer's epoch and " +
			"coordinator epoch, as kafka-transactions.sh abort does. The transaction's coordinator is not told: use it for " +
			"transactions that `txn find-hanging` reports.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if topic == "" || partition < 0 || startOffset < 0 {
				return errors.New("--topic, --partition and --start-offset are required")
			}
			return adminRun(cmd, cf, func(ctx context.Context, adm *kadm.Client, format string) error {
				res, err := abortTxn(ctx, adm, topic, partition, startOffset)
				if err != nil {
					return err
				}
				if format == outputJSON {
					return writeJSON(cmd.OutOrStdout(), res)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Aborted the transaction of producer %d (epoch %d) on %s-%d starting at offset %d (marker written by leader %d)\n",
					res.ProducerID, res.ProducerEpoch, res.Topic, res.Partition, res.StartOffset, res.Leader)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&topic, "topic", "", "the partition's topic")
	cmd.Flags().Int32Var(&partition, "partition", -1, "the partition")
	cmd.Flags().Int64Var(&startOffset, "start-offset", -1, "the first offset of the transaction to abort")
	return cmd
}

func abortTxn(ctx context.Context, adm *kadm.Client, topic string, partition int32, startOffset int64) (txnAbortResult, error) {
	res := txnAbortResult{Topic: topic, Partition: partition, StartOffset: startOffset}
	var set kadm.TopicsSet
	set.Add(topic, partition)
	described, err := adm.DescribeProducers(ctx, set)
	if err != nil {
		return res, fmt.Errorf("describing the producers of %s-%d: %w", topic, partition, err)
	}
	dp, ok := described[topic].Partitions[partition]
	if !ok {
		return res, fmt.Errorf("describing the producers of %s-%d: no answer for the partition", topic, partition)
	}
	if dp.Err != nil {
		return res, fmt.Errorf("describing the producers of %s-%d: %s", topic, partition, kafkaErrorText(dp.Err, dp.ErrMessage))
	}
	var found *kadm.DescribedProducer
	for _, p := range dp.ActiveProducers.Sorted() {
		if p.CurrentTxnStartOffset == startOffset {
			found = &p
			break
		}
	}
	if found == nil {
		return res, fmt.Errorf("no producer of %s-%d has an open transaction starting at offset %d", topic, partition, startOffset)
	}
	res.ProducerID, res.ProducerEpoch, res.Leader = found.ProducerID, found.ProducerEpoch, dp.Leader
	// A producer whose batches no coordinator wrote a marker for yet has coordinator
	// epoch -1; markers carry a non-negative one.
	res.CoordinatorEpoch = max(found.CoordinatorEpoch, 0)
	var parts kadm.TopicsSet
	parts.Add(topic, partition)
	written, err := adm.WriteTxnMarkers(ctx, kadm.TxnMarkers{
		ProducerID: res.ProducerID, ProducerEpoch: res.ProducerEpoch, Commit: false,
		CoordinatorEpoch: res.CoordinatorEpoch, Topics: parts,
	})
	if err != nil {
		return res, fmt.Errorf("writing the ABORT marker: %w", err)
	}
	var werr error
	found2 := false
	written.EachPartition(func(p kadm.TxnMarkersPartitionResponse) {
		if p.Topic == topic && p.Partition == partition {
			found2 = true
			werr = p.Err
		}
	})
	if !found2 {
		return res, errors.New("writing the ABORT marker: no answer for the partition")
	}
	if werr != nil {
		return res, fmt.Errorf("writing the ABORT marker: %s", kafkaErrorText(werr, ""))
	}
	return res, nil
}

// hangingTxn is one row of `txn find-hanging`.
type hangingTxn struct {
	Topic            string `json:"topic"`
	Partition        int32  `json:"partition"`
	ProducerID       int64  `json:"producer_id"`
	ProducerEpoch    int16  `json:"producer_epoch"`
	CoordinatorEpoch int32  `json:"coordinator_epoch"`
	StartOffset      int64  `json:"start_offset"`
	LastTimestamp    int64  `json:"last_timestamp"`
	DurationMinutes  int64  `json:"duration_minutes"`
	// TransactionalID is the id the coordinators list for the producer, "" when none does.
	TransactionalID string `json:"transactional_id"`
}

func newTxnFindHangingCommand(cf *clientFlags) *cobra.Command {
	var (
		brokerID   int32
		maxTimeout int64
	)
	cmd := &cobra.Command{
		Use:   "find-hanging --broker-id N",
		Short: "Find open transactions on a broker's partitions that no coordinator will ever end",
		Long: "Asks broker N, with DescribeProducers, for the producers of every partition it holds a replica of (those it " +
			"follows are asked of their leaders when it answers only as a leader); an open " +
			"transaction that has written nothing for longer than --max-transaction-timeout is hanging unless its " +
			"coordinator lists it as ongoing with that partition (ListTransactions, DescribeTransactions), as " +
			"kafka-transactions.sh find-hanging does. Abort one with `txn abort`.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if brokerID < 0 {
				return errors.New("--broker-id is required")
			}
			return adminClientRun(cmd, cf, func(ctx context.Context, adm *kadm.Client, cl *kgo.Client, format string) error {
				rows, err := findHanging(ctx, adm, cl, brokerID, time.Duration(maxTimeout)*time.Minute, time.Now())
				if err != nil {
					return err
				}
				if format == outputJSON {
					return writeJSON(cmd.OutOrStdout(), rows)
				}
				t := newTable(cmd.OutOrStdout(), "TOPIC", "PARTITION", "PRODUCER-ID", "PRODUCER-EPOCH", "COORDINATOR-EPOCH",
					"START-OFFSET", "LAST-TIMESTAMP", "DURATION(MIN)", "TRANSACTIONAL-ID")
				for _, r := range rows {
					t.row(r.Topic, strconv.Itoa(int(r.Partition)), strconv.FormatInt(r.ProducerID, 10), strconv.Itoa(int(r.ProducerEpoch)),
						strconv.Itoa(int(r.CoordinatorEpoch)), strconv.FormatInt(r.StartOffset, 10), strconv.FormatInt(r.LastTimestamp, 10),
						strconv.FormatInt(r.DurationMinutes, 10), orDash(r.TransactionalID))
				}
				return t.flush()
			})
		},
	}
	cmd.Flags().Int32Var(&brokerID, "broker-id", -1, "the broker whose partitions to search")
	cmd.Flags().Int64Var(&maxTimeout, "max-transaction-timeout", 15, "minutes a transaction may stay open (the brokers' transaction.max.timeout.ms)")
	return cmd
}

func findHanging(ctx context.Context, adm *kadm.Client, cl *kgo.Client, brokerID int32, maxTimeout time.Duration, now time.Time) ([]hangingTxn, error) {
	meta, err := adm.Metadata(ctx)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	req := kmsg.NewPtrDescribeProducersRequest()
	leaderOf := map[string]map[int32]int32{}
	for _, td := range meta.Topics.Sorted() {
		leaderOf[td.Topic] = map[int32]int32{}
		for _, p := range td.Partitions {
			leaderOf[td.Topic][p.Partition] = p.Leader
		}
		rt := kmsg.NewDescribeProducersRequestTopic()
		rt.Topic = td.Topic
		for _, p := range td.Partitions.Sorted() {
			for _, r := range p.Replicas {
				if r == brokerID {
					rt.Partitions = append(rt.Partitions, p.Partition)
				}
			}
		}
		if len(rt.Partitions) > 0 {
			req.Topics = append(req.Topics, rt)
		}
	}
	rows := []hangingTxn{}
	if len(req.Topics) == 0 {
		return rows, nil
	}
	resp, err := req.RequestWith(ctx, cl.Broker(int(brokerID)))
	if err != nil {
		return nil, fmt.Errorf("describing the producers on broker %d: %w", brokerID, err)
	}
	var candidates []hangingTxn
	consider := func(topic string, partition int32, pid int64, epoch int16, coordEpoch int32, start, last int64) {
		idle := now.Sub(time.UnixMilli(last))
		if start < 0 || idle <= maxTimeout {
			return
		}
		candidates = append(candidates, hangingTxn{
			Topic: topic, Partition: partition, ProducerID: pid, ProducerEpoch: epoch, CoordinatorEpoch: coordEpoch,
			StartOffset: start, LastTimestamp: last, DurationMinutes: int64(idle / time.Minute),
		})
	}
	var errs []string
	// A broker that answers DescribeProducers only as a partition's leader: its follower
	// partitions are asked of their leaders, whose producer state the followers copy.
	var ofLeaders kadm.TopicsSet
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			err := kerr.ErrorForCode(p.ErrorCode)
			if errors.Is(err, kerr.NotLeaderForPartition) && leaderOf[t.Topic][p.Partition] != brokerID {
				ofLeaders.Add(t.Topic, p.Partition)
				continue
			}
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s-%d: %s", t.Topic, p.Partition, kafkaErrorText(err, derefString(p.ErrorMessage))))
				continue
			}
			for _, s := range p.ActiveProducers {
				consider(t.Topic, p.Partition, s.ProducerID, int16(s.ProducerEpoch), s.CoordinatorEpoch, s.CurrentTxnStartOffset, s.LastTimestamp)
			}
		}
	}
	if len(ofLeaders) > 0 {
		described, err := adm.DescribeProducers(ctx, ofLeaders)
		if err != nil {
			return nil, fmt.Errorf("describing the producers of broker %d's follower partitions on their leaders: %w", brokerID, err)
		}
		described.EachPartition(func(p kadm.DescribedProducersPartition) {
			if p.Err != nil {
				errs = append(errs, fmt.Sprintf("%s-%d: %s", p.Topic, p.Partition, kafkaErrorText(p.Err, p.ErrMessage)))
				return
			}
			p.ActiveProducers.Each(func(s kadm.DescribedProducer) {
				consider(p.Topic, p.Partition, s.ProducerID, s.ProducerEpoch, s.CoordinatorEpoch, s.CurrentTxnStartOffset, s.LastTimestamp)
			})
		})
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("describing the producers on broker %d: %s", brokerID, strings.Join(errs, "; "))
	}
	if len(candidates) == 0 {
		return rows, nil
	}
	// The coordinators' view of the candidates' producer ids.
	var pids []int64
	for _, c := range candidates {
		pids = append(pids, c.ProducerID)
	}
	listed, err := adm.ListTransactions(ctx, pids, nil)
	if err != nil {
		return nil, fmt.Errorf("listing the transactions of producers %v: %w", pids, err)
	}
	idOf := map[int64]string{}
	for _, l := range listed.Sorted() {
		idOf[l.ProducerID] = l.TxnID
	}
	var ids []string
	for _, id := range idOf {
		ids = append(ids, id)
	}
	described := kadm.DescribedTransactions{}
	if len(ids) > 0 {
		if described, err = adm.DescribeTransactions(ctx, ids...); err != nil {
			return nil, fmt.Errorf("describing transactions %v: %w", ids, err)
		}
	}
	for _, c := range candidates {
		c.TransactionalID = idOf[c.ProducerID]
		if c.TransactionalID != "" {
			d, ok := described[c.TransactionalID]
			if !ok || d.Err != nil {
				return nil, fmt.Errorf("describing transaction %s: %v", c.TransactionalID, d.Err)
			}
			// The coordinator is still in this transaction: it will end it (by its timeout
			// at the latest). Kafka's tool draws the same line.
			if d.ProducerID == c.ProducerID && d.ProducerEpoch == c.ProducerEpoch && d.State == "Ongoing" && d.Topics.Lookup(c.Topic, c.Partition) {
				continue
			}
		}
		rows = append(rows, c)
	}
	return rows, nil
}
