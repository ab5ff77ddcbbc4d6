package cli

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"
)

// maxReportedProduceErrors caps per-record error lines so a dead broker
// does not flood the terminal; the final count is always printed.
const maxReportedProduceErrors = 50

type produceOptions struct {
	cf                clientFlags
	keySeparator      string
	headers           []string
	compression       string
	acks              string
	partition         int32
	idempotent        bool
	deliveryTimeoutMs int64
}

func newProduceCommand() *cobra.Command {
	var o produceOptions
	cmd := &cobra.Command{
		Use:   "produce TOPIC",
		Short: "Produce one record per line of standard input",
		Long: `Produce one record per line of standard input (the line without its
newline is the value). With --key-separator SEP each line is split at the
first SEP into key and value; a line without SEP is an error. Keyed records
go to the partition Kafka's Java client would choose (murmur2 of the key).
Exits non-zero if any record failed.`,
		Args:         cobra.ExactArgs(1),
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runProduce(cmd, &o, args[0])
		},
	}
	o.cf.register(cmd)
	f := cmd.Flags()
	f.StringVar(&o.keySeparator, "key-separator", "", "split each line into key and value at the first occurrence of SEP")
	f.StringArrayVar(&o.headers, "header", nil, "header KEY=VALUE added to every record (repeatable)")
	f.StringVar(&o.compression, "compression", "none", "batch compression: none|gzip|snappy|lz4|zstd")
	f.StringVar(&o.acks, "acks", "all", "required acks: 0|1|all")
	f.Int32Var(&o.partition, "partition", -1, "produce every record to this partition (default: key hash / sticky)")
	f.BoolVar(&o.idempotent, "idempotent", true, "use the idempotent producer (acks=all only)")
	f.Int64Var(&o.deliveryTimeoutMs, "delivery-timeout-ms", 120000, "fail a record not acknowledged within this time (delivery.timeout.ms)")
	return cmd
}

// parseHeaders parses repeated --header KEY=VALUE flags, keeping order and
// allowing repeated keys (Kafka headers are a list, not a map).
func parseHeaders(list []string) ([]kgo.RecordHeader, error) {
	var hs []kgo.RecordHeader
	for _, s := range list {
		k, v, err := parseKeyValue(s)
		if err != nil {
			return nil, fmt.Errorf("--header %w", err)
		}
		hs = append(hs, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	return hs, nil
}

// errNoKeySeparator is returned for a line lacking --key-separator.
var errNoKeySeparator = errors.New("no key separator found")

// splitLine turns one input line (without its newline) into key and value.
// With an empty sep the key is nil (a null key) and the whole line is the
// value. The returned slices alias line.
func splitLine(line []byte, sep string) (key, value []byte, err error) {
	if sep == "" {
		return nil, line, nil
	}
	k, v, ok := bytes.Cut(line, []byte(sep))
	if !ok {
		return nil, nil, errNoKeySeparator
	}
	return k, v, nil
}

// trimNewline strips a trailing "\n" or "\r\n".
func trimNewline(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte("\n"))
	return bytes.TrimSuffix(b, []byte("\r"))
}

// ProduceResult is what `gregor produce -o json` prints when the input ends (with the
// table format, as kafka-console-producer.sh, nothing is printed but errors).
type ProduceResult struct {
	Topic        string `json:"topic"`
	Records      int64  `json:"records"`
	Acknowledged int64  `json:"acknowledged"`
	Failed       int64  `json:"failed"`
}

func runProduce(cmd *cobra.Command, o *produceOptions, topic string) error {
	format, err := o.cf.outputFormat()
	if err != nil {
		return err
	}
	headers, err := parseHeaders(o.headers)
	if err != nil {
		return err
	}
	acks, err := acksOptions(o.acks, o.idempotent)
	if err != nil {
		return err
	}
	comp, err := compressionOption(o.compression)
	if err != nil {
		return err
	}
	opts := append(acks, comp, kgo.DefaultProduceTopic(topic))
	if o.partition >= 0 {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	} else {
		opts = append(opts, kgo.RecordPartitioner(keyPartitioner()))
	}
	if o.deliveryTimeoutMs > 0 {
		opts = append(opts, kgo.RecordDeliveryTimeout(time.Duration(o.deliveryTimeoutMs)*time.Millisecond))
	}
	cl, err := o.cf.newClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()

	ctx, cancel := signalContext(cmd)
	defer cancel()

	stderr := cmd.ErrOrStderr()
	var (
		mu       sync.Mutex // guards reported and writes to stderr
		reported int
		failed   atomic.Int64
		acked    atomic.Int64
		total    int64
	)
	report := func(line int64, msg string) {
		failed.Add(1)
		mu.Lock()
		defer mu.Unlock()
		reported++
		if reported <= maxReportedProduceErrors {
			fmt.Fprintf(stderr, "error: line %d: %s\n", line, msg)
		}
	}

	r := bufio.NewReaderSize(cmd.InOrStdin(), 64<<10)
	for lineNo := int64(1); ; lineNo++ {
		b, readErr := r.ReadBytes('\n')
		if readErr != nil && readErr != io.EOF {
			return fmt.Errorf("reading input: %w", readErr)
		}
		if len(b) == 0 && readErr == io.EOF {
			break
		}
		total++
		key, value, err := splitLine(trimNewline(b), o.keySeparator)
		if err != nil {
			report(lineNo, fmt.Sprintf("%v (separator %q)", err, o.keySeparator))
		} else {
			rec := &kgo.Record{Key: key, Value: value, Headers: headers}
			if o.partition >= 0 {
				rec.Partition = o.partition
			}
			n := lineNo
			cl.Produce(ctx, rec, func(r *kgo.Record, err error) {
				if err != nil {
					report(n, fmt.Sprintf("producing to %s partition %d: %s", topic, r.Partition, kafkaErrorText(err, "")))
					return
				}
				acked.Add(1)
			})
		}
		if readErr == io.EOF || ctx.Err() != nil {
			break
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("flushing: %w (%d of %d records acknowledged)", err, acked.Load(), total)
	}
	if format == outputJSON {
		if err := writeJSON(cmd.OutOrStdout(), ProduceResult{Topic: topic, Records: total, Acknowledged: acked.Load(), Failed: failed.Load()}); err != nil {
			return err
		}
	}
	if n := failed.Load(); n > 0 {
		if n > maxReportedProduceErrors {
			fmt.Fprintf(stderr, "(%d more errors not shown)\n", n-maxReportedProduceErrors)
		}
		return fmt.Errorf("%d of %d records failed", n, total)
	}
	return nil
}
