package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// consumeOptions are the flags of `gregor consume`.
//
// The command is split in three steps so that group consumption (--group)
// only has to change the first: consumeSourceOpts decides what the client
// reads (today: a direct assignment of every partition, or one), newConsumer
// builds the client, and consumeLoop prints records until a stop condition.
type consumeOptions struct {
	cf            clientFlags
	fromBeginning bool
	offset        string
	partition     int32
	maxMessages   int64
	format        string
	timeoutMs     int64
	group         string
}

func newConsumeCommand() *cobra.Command {
	var o consumeOptions
	cmd := &cobra.Command{
		Use:   "consume TOPIC",
		Short: "Print records of a topic (directly, or as a member of a consumer group)",
		Long: `Print records of a topic. Without --from-beginning or --offset, starts at
the end and prints only new records. Stops after --max-messages records,
after --timeout-ms without a new record, or on SIGINT.

--format verbs: %k key, %v value, %o offset, %p partition, %t topic,
%T timestamp (Unix ms), %h headers as k=v,k=v, %% percent; escapes \n \t \r \\.
A null key or value prints as "null". -o json prints one JSON object per record.`,
		Args:         cobra.ExactArgs(1),
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runConsume(cmd, &o, args[0])
		},
	}
	o.cf.register(cmd)
	f := cmd.Flags()
	f.BoolVar(&o.fromBeginning, "from-beginning", false, "start at the log start offset")
	f.StringVar(&o.offset, "offset", "", "start offset: N, -N (N before the end), earliest or latest")
	f.Int32Var(&o.partition, "partition", -1, "consume only this partition (default: all)")
	f.Int64Var(&o.maxMessages, "max-messages", 0, "exit after this many records (0: no limit)")
	f.StringVar(&o.format, "format", DefaultConsumeFormat, "output format of each record (see above)")
	f.Int64Var(&o.timeoutMs, "timeout-ms", 0, "exit after this long without a record (0: wait forever)")
	f.StringVar(&o.group, "group", "", "consume as a member of this consumer group, committing what is printed")
	cmd.MarkFlagsMutuallyExclusive("from-beginning", "offset")
	cmd.MarkFlagsMutuallyExclusive("group", "partition")
	return cmd
}

// parseStartOffset maps --from-beginning / --offset to a kgo offset; the
// default is the log end (only new records).
func parseStartOffset(fromBeginning bool, offset string) (kgo.Offset, error) {
	if fromBeginning {
		return kgo.NewOffset().AtStart(), nil
	}
	switch s := strings.ToLower(strings.TrimSpace(offset)); s {
	case "", "latest":
		return kgo.NewOffset().AtEnd(), nil
	case "earliest":
		return kgo.NewOffset().AtStart(), nil
	default:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return kgo.Offset{}, fmt.Errorf("--offset %q: want a number, earliest or latest", offset)
		}
		if n < 0 {
			return kgo.NewOffset().AtEnd().Relative(n), nil
		}
		return kgo.NewOffset().At(n), nil
	}
}

// consumeSourceOpts returns the options that decide what the client reads:
// every partition of topic (or just --partition), assigned directly,
// starting at the requested offset. It checks the topic (and partition)
// exist first, so a typo fails fast instead of waiting forever.
func consumeSourceOpts(ctx context.Context, adm *kadm.Client, o *consumeOptions, topic string) ([]kgo.Opt, error) {
	start, err := parseStartOffset(o.fromBeginning, o.offset)
	if err != nil {
		return nil, err
	}
	details, err := adm.ListTopicsWithInternal(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("loading metadata of %s: %w", topic, err)
	}
	d, ok := details[topic]
	if !ok {
		d.Err = kerr.UnknownTopicOrPartition
	}
	if d.Err != nil {
		return nil, fmt.Errorf("topic %s: %s", topic, kafkaErrorText(d.Err, ""))
	}
	if o.group != "" {
		// The group's committed offsets win; the start offset applies where none exists.
		return []kgo.Opt{kgo.ConsumerGroup(o.group), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(start), kgo.AutoCommitMarks()}, nil
	}
	if o.partition >= 0 {
		if _, ok := d.Partitions[o.partition]; !ok {
			return nil, fmt.Errorf("topic %s has no partition %d (%d partitions)", topic, o.partition, len(d.Partitions))
		}
		return []kgo.Opt{kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {o.partition: start}})}, nil
	}
	return []kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeStartOffset(start)}, nil
}

func runConsume(cmd *cobra.Command, o *consumeOptions, topic string) error {
	format, err := o.cf.outputFormat()
	if err != nil {
		return err
	}
	var rf *recordFormat
	if format == outputJSON {
		if cmd.Flags().Changed("format") {
			return errors.New("--format and -o json cannot be used together")
		}
	} else if rf, err = parseRecordFormat(o.format); err != nil {
		return err
	}
	if o.maxMessages < 0 || o.timeoutMs < 0 {
		return errors.New("--max-messages and --timeout-ms must not be negative")
	}

	ctx, cancel := signalContext(cmd)
	defer cancel()

	// One plain client for the metadata check, then the consuming client.
	adm, metaCl, err := o.cf.newAdmin()
	if err != nil {
		return err
	}
	metaCtx, metaCancel := context.WithTimeout(ctx, adminTimeout)
	src, err := consumeSourceOpts(metaCtx, adm, o, topic)
	metaCancel()
	metaCl.Close()
	if err != nil {
		return err
	}
	cl, err := o.cf.newClient(append(src, kgo.FetchMaxWait(500*time.Millisecond))...)
	if err != nil {
		return err
	}
	defer cl.Close()

	out := bufio.NewWriterSize(cmd.OutOrStdout(), 64<<10)
	var buf []byte
	emit := func(r *kgo.Record) error {
		buf = buf[:0]
		if rf != nil {
			buf = rf.appendRecord(buf, r)
		} else {
			var jerr error
			if buf, jerr = appendRecordJSON(buf, r); jerr != nil {
				return jerr
			}
		}
		_, werr := out.Write(buf)
		if werr == nil && o.group != "" {
			cl.MarkCommitRecords(r)
		}
		return werr
	}
	// With --group, what was printed is committed after each poll (and before exit).
	flush := func() error {
		if err := out.Flush(); err != nil || o.group == "" {
			return err
		}
		return cl.CommitMarkedOffsets(context.WithoutCancel(ctx))
	}
	n, err := consumeLoop(ctx, cl, consumeLimits{
		maxRecords: o.maxMessages,
		idle:       time.Duration(o.timeoutMs) * time.Millisecond,
	}, emit, flush, cmd.ErrOrStderr())
	if ferr := flush(); err == nil {
		err = ferr
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "Processed a total of %d messages\n", n)
	return err
}

// consumeLimits are the stop conditions of consumeLoop; zero means none.
type consumeLimits struct {
	maxRecords int64
	idle       time.Duration
}

// consumeLoop polls cl, handing each record to emit, until maxRecords were
// emitted, no record arrived for idle, or ctx is done (SIGINT). Those are
// normal ends and return a nil error. flush is called after every poll so
// output appears promptly. Fetch errors are reported to errw and consuming
// continues (the client retries); an emit error (e.g. a closed stdout)
// stops the loop.
func consumeLoop(ctx context.Context, cl *kgo.Client, lim consumeLimits, emit func(*kgo.Record) error, flush func() error, errw io.Writer) (int64, error) {
	var n int64
	lastActivity := time.Now()
	for {
		if ctx.Err() != nil {
			return n, nil
		}
		pollCtx, cancel := ctx, context.CancelFunc(func() {})
		if lim.idle > 0 {
			pollCtx, cancel = context.WithDeadline(ctx, lastActivity.Add(lim.idle))
		}
		limit := 0 // all buffered records
		if lim.maxRecords > 0 {
			limit = int(min(lim.maxRecords-n, 1<<20))
		}
		fs := cl.PollRecords(pollCtx, limit)
		idleExpired := pollCtx.Err() != nil && ctx.Err() == nil
		cancel()

		var emitErr error
		fs.EachRecord(func(r *kgo.Record) {
			if emitErr != nil || (lim.maxRecords > 0 && n >= lim.maxRecords) {
				return
			}
			if emitErr = emit(r); emitErr == nil {
				n++
			}
		})
		if emitErr != nil {
			return n, emitErr
		}
		if fs.NumRecords() > 0 {
			lastActivity = time.Now()
		}
		if err := flush(); err != nil {
			return n, err
		}
		if fs.IsClientClosed() {
			return n, nil
		}
		fs.EachError(func(t string, p int32, err error) {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return
			}
			fmt.Fprintf(errw, "error: fetching %s partition %d: %s\n", t, p, kafkaErrorText(err, ""))
		})
		if lim.maxRecords > 0 && n >= lim.maxRecords {
			return n, nil
		}
		if idleExpired && time.Since(lastActivity) >= lim.idle {
			return n, nil
		}
	}
}
