// Package cli implements gregor's client tools: topic administration, a
// console producer and consumer, consumer group administration, cluster
// tools (describe, partition reassignment, leader election), configs, log
// dirs, offsets and record deletion, and throughput benchmarks. Every network
// tool is a real Kafka client (franz-go's kgo and kadm), so it works against
// any Kafka-compatible broker, not only gregor. The offline tools (dump-log,
// storage, metadata) read a log dir directly, through the broker's own
// parsers (internal/batch, internal/storage, internal/replica,
// internal/controller/quorum), and write nothing but what `storage format`
// is for. docs/tools.md maps each to the kafka-*.sh it replaces.
//
// Commands are built fresh by AddCommands each time, and every flag value
// lives in a per-command options struct rather than a package variable, so
// the same process can execute the command tree many times (the end-to-end
// tests do exactly that).
package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultBootstrapServer is where the tools connect when -b is not given.
const DefaultBootstrapServer = "127.0.0.1:9092"

// AddCommands adds the tools (topic, produce, consume, group, txn, cluster,
// reassign, leader, quota, bench, acl, user, configs, log-dirs, offsets,
// records, dump-log, storage, metadata, metadata-quorum, console) to root, with name
// completion.
func AddCommands(root *cobra.Command) {
	root.AddCommand(
		newTopicCommand(),
		newProduceCommand(),
		newConsumeCommand(),
		newGroupCommand(),
		newShareGroupCommand(),
		newTxnCommand(),
		newClusterCommand(),
		newReassignCommand(),
		newLeaderCommand(),
		newQuotaCommand(),
		newBenchCommand(),
		newACLCommand(),
		newUserCommand(),
		newDelegationTokenCommand(),
		newConfigsCommand(),
		newLogDirsCommand(),
		newOffsetsCommand(),
		newRecordsCommand(),
		newDumpLogCommand(),
		newStorageCommand(),
		newMetadataCommand(),
		newMetadataQuorumCommand(),
		newConsoleCommand(),
	)
	registerCompletions(root)
}

// clientFlags holds the connection and output flags every tool shares.
type clientFlags struct {
	bootstrap     string
	output        string
	commandConfig string // --command-config: Kafka client properties (security.go)
}

// registerBootstrap adds -b/--bootstrap-server to cmd and its subcommands.
func (f *clientFlags) registerBootstrap(cmd *cobra.Command) {
	cmd.PersistentFlags().StringVarP(&f.bootstrap, "bootstrap-server", "b", DefaultBootstrapServer,
		"broker(s) to bootstrap from, HOST:PORT[,HOST:PORT...]")
	cmd.PersistentFlags().StringVar(&f.commandConfig, "command-config", "",
		"Kafka client properties file (security.protocol, sasl.*, ssl.*) for a secured cluster")
}

// securityOpts are the client options of --command-config.
func (f *clientFlags) securityOpts() ([]kgo.Opt, error) { return commandConfigOpts(f.commandConfig) }

// registerOutput adds -o/--output to cmd and its subcommands.
func (f *clientFlags) registerOutput(cmd *cobra.Command) {
	cmd.PersistentFlags().StringVarP(&f.output, "output", "o", outputTable, "output format: table|json")
}

// register adds both -b and -o.
func (f *clientFlags) register(cmd *cobra.Command) {
	f.registerBootstrap(cmd)
	f.registerOutput(cmd)
}

// seedBrokers splits the --bootstrap-server list.
func (f *clientFlags) seedBrokers() ([]string, error) {
	return parseBrokers(f.bootstrap)
}

// parseBrokers splits a comma-separated HOST:PORT list, dropping blanks.
func parseBrokers(s string) ([]string, error) {
	var out []string
	for _, b := range strings.Split(s, ",") {
		b = strings.TrimSpace(b)
		if b == "" {
			continue
		}
		if !strings.Contains(b, ":") {
			return nil, fmt.Errorf("bootstrap server %q: want HOST:PORT", b)
		}
		out = append(out, b)
	}
	if len(out) == 0 {
		return nil, errors.New("no bootstrap server given")
	}
	return out, nil
}

// outputFormat validates and returns the -o value.
func (f *clientFlags) outputFormat() (string, error) {
	return parseOutput(f.output)
}

// newClient builds a kgo client seeded from --bootstrap-server; extra options
// are appended after the defaults so callers can override them.
func (f *clientFlags) newClient(extra ...kgo.Opt) (*kgo.Client, error) {
	seeds, err := f.seedBrokers()
	if err != nil {
		return nil, err
	}
	sec, err := f.securityOpts()
	if err != nil {
		return nil, err
	}
	return newKgoClient(seeds, append(sec, extra...)...)
}

func newKgoClient(seeds []string, extra ...kgo.Opt) (*kgo.Client, error) {
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.ClientID("gregor-cli"),
	}, extra...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("creating client: %w", err)
	}
	return cl, nil
}

// newAdmin builds an admin client; close it with the returned kgo client.
func (f *clientFlags) newAdmin() (*kadm.Client, *kgo.Client, error) {
	cl, err := f.newClient()
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl, nil
}

// signalContext returns a context cancelled by SIGINT/SIGTERM (or when the
// command's own context ends).
func signalContext(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}

// kafkaErrorText renders err the way Kafka's tools do: the protocol error
// name (TOPIC_ALREADY_EXISTS, ...) followed by the broker's message if it sent
// one, else the error's standard description.
func kafkaErrorText(err error, brokerMessage string) string {
	if err == nil {
		return ""
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		if brokerMessage != "" {
			return ke.Message + ": " + brokerMessage
		}
		return ke.Message + ": " + ke.Description
	}
	if brokerMessage != "" {
		return err.Error() + ": " + brokerMessage
	}
	return err.Error()
}

// kafkaErrorName returns the protocol error name of err, or err.Error() for
// errors that did not come from a broker. Used in JSON output.
func kafkaErrorName(err error) string {
	if err == nil {
		return ""
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	return err.Error()
}

// parseKeyValue splits "k=v" at the first '='. The key must be non-empty;
// the value may be empty (and may itself contain '=').
func parseKeyValue(s string) (key, value string, err error) {
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		return "", "", fmt.Errorf("%q: want KEY=VALUE", s)
	}
	if k == "" {
		return "", "", fmt.Errorf("%q: empty key", s)
	}
	return k, v, nil
}

// parseKeyValues parses repeated k=v flags into a map; a repeated key is an
// error because the intent is ambiguous.
func parseKeyValues(list []string) (map[string]string, error) {
	m := make(map[string]string, len(list))
	for _, s := range list {
		k, v, err := parseKeyValue(s)
		if err != nil {
			return nil, err
		}
		if _, dup := m[k]; dup {
			return nil, fmt.Errorf("%q given more than once", k)
		}
		m[k] = v
	}
	return m, nil
}

// acksOption maps --acks to kgo options. Kafka only allows idempotent
// producing with acks=all, so acks 0/1 (or idempotent=false) disable it and
// allow Kafka's default of 5 requests in flight per broker.
func acksOptions(acks string, idempotent bool) ([]kgo.Opt, error) {
	var opts []kgo.Opt
	switch strings.ToLower(acks) {
	case "all", "-1":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
		if idempotent {
			return opts, nil
		}
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()))
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()))
	default:
		return nil, fmt.Errorf("--acks %q: want 0, 1 or all", acks)
	}
	return append(opts, kgo.DisableIdempotentWrite(), kgo.MaxProduceRequestsInflightPerBroker(5)), nil
}

// compressionOption maps --compression to a kgo option.
func compressionOption(name string) (kgo.Opt, error) {
	var c kgo.CompressionCodec
	switch strings.ToLower(name) {
	case "", "none":
		c = kgo.NoCompression()
	case "gzip":
		c = kgo.GzipCompression()
	case "snappy":
		c = kgo.SnappyCompression()
	case "lz4":
		c = kgo.Lz4Compression()
	case "zstd":
		c = kgo.ZstdCompression()
	default:
		return nil, fmt.Errorf("--compression %q: want none, gzip, snappy, lz4 or zstd", name)
	}
	return kgo.ProducerBatchCompression(c), nil
}

// keyPartitioner is the partitioner every gregor producer uses when no
// explicit partition is given: keyed records go to
// murmur2(key) & 0x7fffffff % partitions exactly as Kafka's Java client
// does, unkeyed records are spread with Kafka's uniform sticky strategy
// (KIP-794). A nil hasher in kgo means Kafka's murmur2.
func keyPartitioner() kgo.Partitioner {
	return kgo.UniformBytesPartitioner(64<<10, true, true, nil)
}

// mustMarkRequired marks a flag required; it can only fail for a flag that
// does not exist, which is a bug in this package.
func mustMarkRequired(cmd *cobra.Command, name string) {
	if err := cmd.MarkFlagRequired(name); err != nil {
		panic(err)
	}
}
