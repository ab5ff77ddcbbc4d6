package cli

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ConsumeBenchOptions configures RunConsumeBench. Start from
// DefaultConsumeBenchOptions.
type ConsumeBenchOptions struct {
	Brokers []string
	Topic   string
	// Records to read; 0 reads everything between the log start and end
	// offsets listed when the run begins.
	Records int64
	// ReadCommitted reads with isolation level read_committed (up to the last stable
	// offset, aborted records skipped). It needs Records: markers take offsets, so the
	// offsets do not say how many records there are.
	ReadCommitted          bool
	FetchMaxBytes          int32
	FetchMaxPartitionBytes int32
	// IdleTimeout ends the run with an error when no record arrives for
	// this long before Records were read; 0 waits forever.
	IdleTimeout    time.Duration
	ReportInterval time.Duration // <= 0: no progress reports
	Progress       func(BenchProgress)
	ExtraOpts      []kgo.Opt // appended last, overriding the above
}

// DefaultConsumeBenchOptions reads everything present, with fetch sizes
// large enough that round trips do not limit throughput.
func DefaultConsumeBenchOptions() ConsumeBenchOptions {
	return ConsumeBenchOptions{
		Brokers:                []string{DefaultBootstrapServer},
		FetchMaxBytes:          64 << 20,
		FetchMaxPartitionBytes: 8 << 20,
		IdleTimeout:            10 * time.Second,
		ReportInterval:         5 * time.Second,
	}
}

// recordsPresent sums end minus start offset over the topic's partitions.
func recordsPresent(ctx context.Context, adm *kadm.Client, topic string) (int64, error) {
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("listing start offsets of %s: %w", topic, err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("listing end offsets of %s: %w", topic, err)
	}
	var total int64
	for p, end := range ends[topic] {
		if end.Err != nil {
			return 0, fmt.Errorf("topic %s partition %d: %s", topic, p, kafkaErrorText(end.Err, ""))
		}
		start, ok := starts.Lookup(topic, p)
		if !ok || start.Err != nil {
			return 0, fmt.Errorf("topic %s partition %d: no log start offset", topic, p)
		}
		total += max(end.Offset-start.Offset, 0)
	}
	if len(ends[topic]) == 0 {
		return 0, fmt.Errorf("topic %s: no partitions found", topic)
	}
	return total, nil
}

// RunConsumeBench reads o.Records records of o.Topic from the beginning of
// every partition (direct assignment, no group) and measures throughput.
// Bytes count keys plus values.
func RunConsumeBench(ctx context.Context, o ConsumeBenchOptions) (BenchResult, error) {
	opts, err := consumeBenchOptions(o)
	if err != nil {
		return BenchResult{}, err
	}
	cl, err := newKgoClient(o.Brokers, append(opts, o.ExtraOpts...)...)
	if err != nil {
		return BenchResult{}, err
	}
	defer cl.Close()

	target := o.Records
	if target == 0 {
		listCtx, cancel := context.WithTimeout(ctx, adminTimeout)
		target, err = recordsPresent(listCtx, kadm.NewClient(cl), o.Topic)
		cancel()
		if err != nil {
			return BenchResult{}, err
		}
		if target == 0 {
			return BenchResult{}, nil
		}
	}

	b := &consumeBench{cl: cl, o: o, target: target, base: time.Now()}
	b.lastRecv = b.base
	progress := startProgress(o.ReportInterval, b.reportProgress)
	defer progress.stop()
	runErr := b.consume(ctx)
	elapsed := b.lastRecv.Sub(b.base)
	progress.stop()

	res := BenchResult{Records: b.n.Load(), Bytes: b.bytes.Load(), Latency: b.hist.stats()}
	res.rates(elapsed)
	return res, runErr
}

// consumeBenchOptions checks o and returns the client options it asks for.
func consumeBenchOptions(o ConsumeBenchOptions) ([]kgo.Opt, error) {
	if o.Topic == "" {
		return nil, errors.New("no topic given")
	}
	if o.Records < 0 {
		return nil, errors.New("records must not be negative")
	}
	if o.ReadCommitted && o.Records == 0 {
		return nil, errors.New("read_committed needs --records (transaction markers take offsets)")
	}
	opts := []kgo.Opt{
		kgo.ClientID("gregor-bench"),
		kgo.ConsumeTopics(o.Topic),
		kgo.ConsumeStartOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500 * time.Millisecond),
	}
	if o.ReadCommitted {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	if o.FetchMaxBytes > 0 {
		opts = append(opts, kgo.FetchMaxBytes(o.FetchMaxBytes), kgo.BrokerMaxReadBytes(max(o.FetchMaxBytes*2, 100<<20)))
	}
	if o.FetchMaxPartitionBytes > 0 {
		opts = append(opts, kgo.FetchMaxPartitionBytes(o.FetchMaxPartitionBytes))
	}
	return opts, nil
}

// consumeBench is one run of the consume benchmark. n and bytes are read by the progress
// goroutine, which alone uses lastN and lastB; the rest is the consuming goroutine's.
type consumeBench struct {
	cl       *kgo.Client
	o        ConsumeBenchOptions
	target   int64
	hist     latencyHistogram
	n        atomic.Int64
	bytes    atomic.Int64
	lastN    int64
	lastB    int64
	base     time.Time
	lastRecv time.Time
}

// reportProgress passes the last window's figures to o.Progress.
func (b *consumeBench) reportProgress(window time.Duration) {
	_, avg, maxLat := b.hist.takeWindow()
	curN, curB := b.n.Load(), b.bytes.Load()
	wn, wb := curN-b.lastN, curB-b.lastB
	b.lastN, b.lastB = curN, curB
	if b.o.Progress == nil {
		return
	}
	secs := window.Seconds()
	b.o.Progress(BenchProgress{
		Elapsed:       time.Since(b.base),
		Records:       curN,
		WindowRecords: wn,
		RecordsPerSec: float64(wn) / secs,
		MBPerSec:      float64(wb) / mib / secs,
		AvgLatencyMs:  ms(avg),
		MaxLatencyMs:  ms(maxLat),
	})
}

// consume polls until target records are read. It stops early, with the reason, when ctx
// ends, the client closes, no record came for o.IdleTimeout, or a fetch fails.
func (b *consumeBench) consume(ctx context.Context) error {
	for b.n.Load() < b.target {
		fs := b.poll(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if fs.IsClientClosed() {
			return kgo.ErrClientClosed
		}
		if b.o.IdleTimeout > 0 && time.Since(b.lastRecv) >= b.o.IdleTimeout {
			return fmt.Errorf("no record for %v: read %d of %d records", b.o.IdleTimeout, b.n.Load(), b.target)
		}
		var fetchErr error
		fs.EachError(func(t string, p int32, err error) {
			if fetchErr == nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				fetchErr = fmt.Errorf("fetching %s partition %d: %s", t, p, kafkaErrorText(err, ""))
			}
		})
		if fetchErr != nil {
			return fetchErr
		}
	}
	return nil
}

// poll fetches once, waiting no longer than o.IdleTimeout past the last record, and counts
// the records it got, up to target.
func (b *consumeBench) poll(ctx context.Context) kgo.Fetches {
	pollCtx, cancel := ctx, context.CancelFunc(func() {})
	if b.o.IdleTimeout > 0 {
		pollCtx, cancel = context.WithDeadline(ctx, b.lastRecv.Add(b.o.IdleTimeout))
	}
	fs := b.cl.PollFetches(pollCtx)
	cancel()
	now := time.Now()
	got := int64(0)
	fs.EachRecord(func(r *kgo.Record) {
		if b.n.Load()+got >= b.target {
			return
		}
		got++
		b.bytes.Add(int64(len(r.Key) + len(r.Value)))
		b.hist.record(now.Sub(r.Timestamp))
	})
	b.n.Add(got)
	if got > 0 {
		b.lastRecv = now
	}
	return fs
}

func newBenchConsumeCommand(cf *clientFlags) *cobra.Command {
	o := DefaultConsumeBenchOptions()
	var timeoutMs, reportIntervalMs int64
	var isolation string
	cmd := &cobra.Command{
		Use:   "consume",
		Short: "Read a topic from the beginning and report throughput",
		Long: `Read --records records (default: all present when the run starts) from the
beginning of every partition of --topic without a group, printing progress
every --report-interval-ms and a final line with records read, records/s and
MB/s (keys plus values). Latency is each record's age when received, i.e.
end-to-end latency when run alongside "bench produce". -o json prints the
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
			switch isolation {
			case "read_uncommitted":
			case "read_committed":
				o.ReadCommitted = true
			default:
				return fmt.Errorf("--isolation-level %q: want read_committed or read_uncommitted", isolation)
			}
			o.IdleTimeout = time.Duration(timeoutMs) * time.Millisecond
			o.ReportInterval = time.Duration(reportIntervalMs) * time.Millisecond
			pw := progressWriter(cmd, format)
			o.Progress = func(p BenchProgress) { writeBenchProgress(pw, "read", p) }
			ctx, cancel := signalContext(cmd)
			defer cancel()
			res, runErr := RunConsumeBench(ctx, o)
			if res.Records > 0 || runErr == nil {
				if err := writeBenchResult(cmd.OutOrStdout(), format, "read", res); err != nil {
					return err
				}
			}
			return runErr
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Topic, "topic", "", "topic to read (required)")
	f.Int64Var(&o.Records, "records", 0, "records to read (0: all present at the start)")
	f.Int32Var(&o.FetchMaxBytes, "fetch-max-bytes", o.FetchMaxBytes, "maximum bytes per fetch response")
	f.Int32Var(&o.FetchMaxPartitionBytes, "partition-max-bytes", o.FetchMaxPartitionBytes, "maximum bytes per partition per fetch")
	f.Int64Var(&timeoutMs, "timeout-ms", o.IdleTimeout.Milliseconds(), "fail if no record arrives for this long (0: wait forever)")
	f.Int64Var(&reportIntervalMs, "report-interval-ms", o.ReportInterval.Milliseconds(), "progress report interval (0: none)")
	f.StringVar(&isolation, "isolation-level", "read_uncommitted", "read_uncommitted|read_committed (read_committed needs --records)")
	mustMarkRequired(cmd, "topic")
	return cmd
}
