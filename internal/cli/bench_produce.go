package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func newBenchCommand() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure produce and consume throughput and latency (like kafka-*-perf-test)",
	}
	cf.register(cmd)
	cmd.AddCommand(newBenchProduceCommand(&cf), newBenchConsumeCommand(&cf))
	return cmd
}

// ProduceBenchOptions configures RunProduceBench. Start from
// DefaultProduceBenchOptions: zero values are taken literally where they
// mean something (Linger 0 is no linger).
type ProduceBenchOptions struct {
	Brokers    []string
	Topic      string
	Records    int64
	RecordSize int
	Acks       string // "0", "1" or "all"
	// DisableIdempotence turns off the idempotent producer for acks=all
	// (acks 0 and 1 are never idempotent).
	DisableIdempotence bool
	// Partitions > 0 creates the topic with that many partitions if it
	// does not exist; 0 uses the topic as it is.
	Partitions        int32
	ReplicationFactor int16   // for creation; -1 is the broker default
	Throughput        float64 // records/s; <= 0 is unlimited
	Compression       string  // none, gzip, snappy, lz4, zstd
	BatchMaxBytes     int32
	Linger            time.Duration
	// MaxBufferedRecords bounds records awaiting acknowledgement; Produce
	// blocks beyond it. 0 picks a size from RecordSize.
	MaxBufferedRecords int
	ReportInterval     time.Duration // <= 0: no progress reports
	// TransactionalID makes the producer transactional: records go in transactions of
	// TxnRecords records each, each committed before the next begins (a latency counts to
	// the record's acknowledgement, not its commit). Needs acks=all and idempotence.
	TransactionalID string
	TxnRecords      int64
	Progress        func(BenchProgress)
	ExtraOpts       []kgo.Opt // appended last, overriding the above
}

// DefaultProduceBenchOptions are throughput-oriented settings: 1 MiB
// batches, a deep buffer, 5 ms linger (Kafka's producer default since 4.0),
// no compression, acks=all.
func DefaultProduceBenchOptions() ProduceBenchOptions {
	return ProduceBenchOptions{
		Brokers:           []string{DefaultBootstrapServer},
		Records:           1_000_000,
		RecordSize:        100,
		Acks:              "all",
		ReplicationFactor: -1,
		Throughput:        -1,
		Compression:       "none",
		BatchMaxBytes:     1 << 20,
		Linger:            5 * time.Millisecond,
		ReportInterval:    5 * time.Second,
	}
}

// benchPayload returns size random upper-case letters, the payload
// kafka-producer-perf-test sends, shared by every record.
func benchPayload(size int) []byte {
	b := make([]byte, size)
	for i := range b {
		b[i] = byte('A' + rand.IntN(26))
	}
	return b
}

// defaultMaxBuffered keeps roughly 256 MiB of record data (at most 256Ki
// records, at least 10k) waiting, enough to keep several 1 MiB batches in
// flight per partition without the client's memory growing without bound.
func defaultMaxBuffered(recordSize int) int {
	n := 256 * mib / max(recordSize, 1)
	return min(max(n, 10_000), 1<<18)
}

// benchRecord is a pooled record with its send time; done is bound once so
// producing allocates nothing per record in steady state.
type benchRecord struct {
	rec   kgo.Record
	start time.Duration // since the run began
	done  func(*kgo.Record, error)
}

// ensureTopic creates topic if it is missing and waits until every
// partition has a leader.
func ensureTopic(ctx context.Context, adm *kadm.Client, topic string, partitions int32, rf int16) error {
	resps, err := adm.CreateTopics(ctx, partitions, rf, nil, topic)
	if err != nil {
		return fmt.Errorf("creating topic %s: %w", topic, err)
	}
	if r, ok := resps[topic]; ok && r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("creating topic %s: %s", topic, kafkaErrorText(r.Err, r.ErrMessage))
	}
	for {
		details, err := adm.ListTopics(ctx, topic)
		if err == nil {
			if d, ok := details[topic]; ok && d.Err == nil && len(d.Partitions) > 0 {
				ready := true
				for _, p := range d.Partitions {
					ready = ready && p.Err == nil && p.Leader >= 0
				}
				if ready {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for topic %s to have leaders: %w", topic, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// RunProduceBench produces o.Records records of o.RecordSize bytes to
// o.Topic and measures throughput and per-record latency (Produce call to
// acknowledgement). It returns the result even when some records failed,
// together with an error describing the first failure.
func RunProduceBench(ctx context.Context, o ProduceBenchOptions) (BenchResult, error) {
	opts, err := produceBenchOptions(&o)
	if err != nil {
		return BenchResult{}, err
	}
	cl, err := newKgoClient(o.Brokers, append(opts, o.ExtraOpts...)...)
	if err != nil {
		return BenchResult{}, err
	}
	defer cl.Close()

	if o.Partitions > 0 {
		setupCtx, cancel := context.WithTimeout(ctx, adminTimeout)
		err := ensureTopic(setupCtx, kadm.NewClient(cl), o.Topic, o.Partitions, o.ReplicationFactor)
		cancel()
		if err != nil {
			return BenchResult{}, err
		}
	}

	b := newProduceBench(cl, o)
	progress := startProgress(o.ReportInterval, b.reportProgress)
	txnErr := b.produce(ctx)
	var flushErr error
	if o.TransactionalID != "" && txnErr == nil && ctx.Err() == nil {
		txnErr = b.endTxn(ctx)
	} else {
		flushErr = cl.Flush(ctx)
	}
	elapsed := time.Since(b.base)
	progress.stop()
	return b.result(ctx, elapsed, txnErr, flushErr)
}

// produceBenchOptions checks o, fills in its defaults and returns the client options it
// asks for.
func produceBenchOptions(o *ProduceBenchOptions) ([]kgo.Opt, error) {
	if o.Topic == "" {
		return nil, errors.New("no topic given")
	}
	if o.Records <= 0 || o.RecordSize < 0 {
		return nil, errors.New("records must be positive and record size non-negative")
	}
	if o.BatchMaxBytes <= 0 {
		o.BatchMaxBytes = 1 << 20
	}
	// A record carries ~70 bytes of batch and record framing besides its
	// value; one that cannot fit a batch would fail every send.
	if int64(o.RecordSize)+128 > int64(o.BatchMaxBytes) {
		return nil, fmt.Errorf("record size %d does not fit batches of %d bytes: raise --batch-max-bytes", o.RecordSize, o.BatchMaxBytes)
	}
	if o.MaxBufferedRecords <= 0 {
		o.MaxBufferedRecords = defaultMaxBuffered(o.RecordSize)
	}
	acks, err := acksOptions(o.Acks, !o.DisableIdempotence)
	if err != nil {
		return nil, err
	}
	if o.TransactionalID != "" {
		if o.TxnRecords <= 0 {
			return nil, errors.New("--txn-records must be positive with --transactional-id")
		}
		if o.DisableIdempotence || (o.Acks != "all" && o.Acks != "-1") {
			return nil, errors.New("a transactional producer needs acks=all and idempotence")
		}
		acks = append(acks, kgo.TransactionalID(o.TransactionalID))
	}
	comp, err := compressionOption(o.Compression)
	if err != nil {
		return nil, err
	}
	return append(acks,
		comp,
		kgo.ClientID("gregor-bench"),
		kgo.DefaultProduceTopic(o.Topic),
		kgo.RecordPartitioner(keyPartitioner()),
		kgo.ProducerBatchMaxBytes(o.BatchMaxBytes),
		kgo.MaxBufferedRecords(o.MaxBufferedRecords),
		kgo.ProducerLinger(o.Linger),
	), nil
}

// produceBench is one run of the produce benchmark. The produce callbacks (done, on the
// client's goroutines) touch only hist, failed, firstErr and pool; txns is the producing
// goroutine's, lastTotal the progress goroutine's.
type produceBench struct {
	cl        *kgo.Client
	o         ProduceBenchOptions
	hist      latencyHistogram
	failed    atomic.Int64
	firstErr  atomic.Pointer[error]
	pool      sync.Pool
	payload   []byte
	base      time.Time
	txns      int64
	lastTotal int64
}

func newProduceBench(cl *kgo.Client, o ProduceBenchOptions) *produceBench {
	b := &produceBench{cl: cl, o: o, payload: benchPayload(o.RecordSize), base: time.Now()}
	b.pool.New = func() any {
		br := new(benchRecord)
		br.done = func(_ *kgo.Record, err error) {
			lat := time.Since(b.base) - br.start
			if err != nil {
				b.failed.Add(1)
				b.firstErr.CompareAndSwap(nil, &err)
			} else {
				b.hist.record(lat)
			}
			b.pool.Put(br)
		}
		return br
	}
	return b
}

// reportProgress passes the last window's figures to o.Progress.
func (b *produceBench) reportProgress(window time.Duration) {
	n, avg, maxLat := b.hist.takeWindow()
	b.lastTotal += n
	if b.o.Progress == nil {
		return
	}
	secs := window.Seconds()
	b.o.Progress(BenchProgress{
		Elapsed:       time.Since(b.base),
		Records:       b.lastTotal,
		WindowRecords: n,
		RecordsPerSec: float64(n) / secs,
		MBPerSec:      float64(n) * float64(b.o.RecordSize) / mib / secs,
		AvgLatencyMs:  ms(avg),
		MaxLatencyMs:  ms(maxLat),
	})
}

// produce sends the records, at most o.Throughput a second, in transactions of
// o.TxnRecords when transactional (every transaction but the last committed here). It
// stops at the first transaction error, which it returns, or when ctx ends.
func (b *produceBench) produce(ctx context.Context) error {
	o := &b.o
	txnal := o.TransactionalID != ""
	for i := int64(0); i < o.Records && ctx.Err() == nil; i++ {
		if txnal && i%o.TxnRecords == 0 {
			if i > 0 {
				if err := b.endTxn(ctx); err != nil {
					return err
				}
			}
			if err := b.cl.BeginTransaction(); err != nil {
				return fmt.Errorf("beginning a transaction: %w", err)
			}
		}
		if o.Throughput > 0 {
			if d := throttleDelay(o.Throughput, i, time.Since(b.base)); d >= time.Millisecond {
				sleepCtx(ctx, d)
			}
		}
		br := b.pool.Get().(*benchRecord)
		br.rec = kgo.Record{Topic: o.Topic, Value: b.payload}
		br.start = time.Since(b.base)
		b.cl.Produce(ctx, &br.rec, br.done)
	}
	return nil
}

// endTxn flushes the open transaction's records and commits it.
func (b *produceBench) endTxn(ctx context.Context) error {
	if err := b.cl.Flush(ctx); err != nil {
		return fmt.Errorf("flushing transaction %d: %w", b.txns+1, err)
	}
	if err := b.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return fmt.Errorf("committing transaction %d: %w", b.txns+1, err)
	}
	b.txns++
	return nil
}

// result is the run's figures over elapsed, with the first of its errors.
func (b *produceBench) result(ctx context.Context, elapsed time.Duration, txnErr, flushErr error) (BenchResult, error) {
	res := BenchResult{
		Records:      b.hist.count.Load(),
		Failed:       b.failed.Load(),
		Latency:      b.hist.stats(),
		Transactions: b.txns,
	}
	res.Bytes = res.Records * int64(b.o.RecordSize)
	res.rates(elapsed)
	switch {
	case txnErr != nil:
		return res, txnErr
	case flushErr != nil:
		return res, fmt.Errorf("flushing: %w", flushErr)
	case res.Failed > 0:
		return res, fmt.Errorf("%d records failed, first: %s", res.Failed, kafkaErrorText(*b.firstErr.Load(), ""))
	case ctx.Err() != nil:
		return res, ctx.Err()
	}
	return res, nil
}

// sleepCtx sleeps for d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// progressWriter picks where progress lines go: stdout for table output
// (as Kafka's perf tools print), stderr with -o json so stdout stays pure
// JSON.
func progressWriter(cmd *cobra.Command, format string) io.Writer {
	if format == outputJSON {
		return cmd.ErrOrStderr()
	}
	return cmd.OutOrStdout()
}

func newBenchProduceCommand(cf *clientFlags) *cobra.Command {
	o := DefaultProduceBenchOptions()
	var (
		lingerMs         int64
		reportIntervalMs int64
		idempotent       bool
	)
	cmd := &cobra.Command{
		Use:   "produce",
		Short: "Produce records as fast as allowed and report throughput and latency",
		Long: `Produce --records records of --record-size random bytes, printing progress
every --report-interval-ms and a final line with records sent, records/s,
MB/s (1 MB = 2^20 bytes, as in Kafka's tools) and avg/p50/p99/p99.9/max
latency from the Produce call to its acknowledgement. -o json prints the
final result as JSON (progress goes to stderr).`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := cf.outputFormat()
			if err != nil {
				return err
			}
			if o.Brokers, err = cf.seedBrokers(); err != nil {
				return err
			}
			sec, err := cf.securityOpts()
			if err != nil {
				return err
			}
			o.ExtraOpts = append(sec, o.ExtraOpts...)
			o.Linger = time.Duration(lingerMs) * time.Millisecond
			o.ReportInterval = time.Duration(reportIntervalMs) * time.Millisecond
			o.DisableIdempotence = !idempotent
			pw := progressWriter(cmd, format)
			o.Progress = func(p BenchProgress) { writeBenchProgress(pw, "sent", p) }
			ctx, cancel := signalContext(cmd)
			defer cancel()
			res, runErr := RunProduceBench(ctx, o)
			if res.Records > 0 || runErr == nil {
				if err := writeBenchResult(cmd.OutOrStdout(), format, "sent", res); err != nil {
					return err
				}
			}
			return runErr
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Topic, "topic", "", "topic to produce to (required)")
	f.Int64Var(&o.Records, "records", o.Records, "number of records to produce")
	f.IntVar(&o.RecordSize, "record-size", o.RecordSize, "value size in bytes")
	f.StringVar(&o.Acks, "acks", o.Acks, "required acks: 0|1|all")
	f.BoolVar(&idempotent, "idempotent", true, "use the idempotent producer (acks=all only)")
	f.Int32Var(&o.Partitions, "partitions", 0, "create the topic with this many partitions if it is missing")
	f.Int16Var(&o.ReplicationFactor, "replication-factor", o.ReplicationFactor, "replication factor when creating the topic (-1: broker default)")
	f.Float64Var(&o.Throughput, "throughput", o.Throughput, "target records/s (-1: unlimited)")
	f.StringVar(&o.Compression, "compression", o.Compression, "batch compression: none|gzip|snappy|lz4|zstd")
	f.Int32Var(&o.BatchMaxBytes, "batch-max-bytes", o.BatchMaxBytes, "maximum record batch size in bytes")
	f.Int64Var(&lingerMs, "linger-ms", o.Linger.Milliseconds(), "how long a partition waits for more records before sending a batch")
	f.IntVar(&o.MaxBufferedRecords, "max-buffered-records", 0, "records awaiting acknowledgement before Produce blocks (0: sized from --record-size)")
	f.StringVar(&o.TransactionalID, "transactional-id", "", "produce in transactions of this transactional.id (committed every --txn-records records)")
	f.Int64Var(&o.TxnRecords, "txn-records", 10000, "records per transaction with --transactional-id")
	f.Int64Var(&reportIntervalMs, "report-interval-ms", o.ReportInterval.Milliseconds(), "progress report interval (0: none)")
	mustMarkRequired(cmd, "topic")
	return cmd
}
