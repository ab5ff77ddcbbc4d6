package cli

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gregor-project/gregor/internal/config"
	"github.com/gregor-project/gregor/internal/controller/quorum"
	"github.com/gregor-project/gregor/internal/controller/state"
	"github.com/gregor-project/gregor/internal/storage"
)

// `gregor metadata`: the metadata log and its snapshot read offline, as kafka-metadata-shell.sh
// and kafka-dump-log.sh --cluster-metadata-decoder inspect KRaft's. The log is a controller's
// <log dir>/__cluster_metadata-0 (the first of log.dirs); the image is rebuilt as the
// controller rebuilds it, from the newest snapshot and the committed entries after it
// (--uncommitted: every entry written).
//
//	gregor metadata info --dir /var/lib/gregor
//	gregor metadata brokers|topics|configs -c server.properties
//	gregor metadata partitions [TOPIC] --dir DIR
//	gregor metadata log [--from N] --dir DIR

type metadataFlags struct {
	dir, config string
	uncommitted bool
	output      string
}

func (f *metadataFlags) register(cmd *cobra.Command) {
	cmd.PersistentFlags().StringVar(&f.dir, "dir", "", "the log dir (or its "+storage.MetadataLogTopic+"-0 directory) holding the metadata log")
	cmd.PersistentFlags().StringVarP(&f.config, "config", "c", "", "the server's server.properties: the metadata log is in its metadata.log.dir, else its first log dir")
	cmd.PersistentFlags().BoolVar(&f.uncommitted, "uncommitted", false, "also apply entries written but not known to be committed")
	cmd.PersistentFlags().StringVarP(&f.output, "output", "o", outputTable, "output format: table|json")
}

// logDir finds the __cluster_metadata-0 directory the flags name.
func (f *metadataFlags) logDir() (string, error) {
	dir := f.dir
	switch {
	case dir != "" && f.config != "":
		return "", errors.New("give --dir or --config, not both")
	case dir == "" && f.config == "":
		return "", errors.New("give the log dir (--dir) or the server's config (--config)")
	case dir == "":
		cfg, err := config.Load(f.config, nil)
		if err != nil {
			return "", err
		}
		dir = cfg.LogDirs[0]
		if cfg.MetadataLogDir != "" {
			dir = cfg.MetadataLogDir
		}
	}
	if filepath.Base(filepath.Clean(dir)) != storage.MetadataLogTopic+"-0" {
		dir = filepath.Join(dir, storage.MetadataLogTopic+"-0")
	}
	if fi, err := os.Stat(dir); err != nil {
		return "", err
	} else if !fi.IsDir() {
		return "", fmt.Errorf("%s is not a directory", dir)
	}
	return dir, nil
}

// metadataView is the log read and the image rebuilt from it.
type metadataView struct {
	dir      string
	log      *quorum.OfflineLog
	image    *state.Image
	applied  int   // entries applied over the snapshot
	rejected []int // indexes of entries the image refused (as the controller refuses them)
}

func (f *metadataFlags) load() (*metadataView, string, error) {
	format, err := parseOutput(f.output)
	if err != nil {
		return nil, "", err
	}
	dir, err := f.logDir()
	if err != nil {
		return nil, "", err
	}
	l, err := quorum.ReadOffline(storage.OS, dir)
	if err != nil {
		return nil, "", err
	}
	v := &metadataView{dir: dir, log: l, image: state.NewImage()}
	if l.Snapshot != nil {
		if v.image, err = state.Restore(l.Snapshot); err != nil {
			return nil, "", fmt.Errorf("%s: %w", l.SnapshotFile, err)
		}
	}
	for _, e := range l.Entries {
		if !f.uncommitted && e.Index > l.Commit {
			break
		}
		if err := v.image.Apply(int64(e.Index), e.Records); err != nil {
			v.rejected = append(v.rejected, int(e.Index))
		}
		v.applied++
	}
	return v, format, nil
}

func newMetadataCommand() *cobra.Command {
	var f metadataFlags
	cmd := &cobra.Command{
		Use:   "metadata",
		Short: "Inspect the metadata log and its snapshot offline (kafka-metadata-shell.sh)",
		Long: `Read a controller's metadata log (the newest snapshot and the write-ahead log after
it) offline and show the cluster metadata it holds: brokers, topics, partitions and
configs, ACLs, client quotas and SCRAM users as of the last committed entry, or the
log's records with their offsets.
Safe on a running node's files: nothing is written.`,
	}
	f.register(cmd)
	cmd.AddCommand(
		newMetadataInfoCommand(&f),
		newMetadataBrokersCommand(&f),
		newMetadataTopicsCommand(&f),
		newMetadataPartitionsCommand(&f),
		newMetadataConfigsCommand(&f),
		newMetadataLogCommand(&f),
		newMetadataACLsCommand(&f),
		newMetadataQuotasCommand(&f),
		newMetadataUsersCommand(&f),
	)
	return cmd
}

// MetadataInfo is what `gregor metadata info -o json` prints.
type MetadataInfo struct {
	Dir           string `json:"dir"`
	SnapshotFile  string `json:"snapshot_file,omitempty"`
	SnapshotIndex uint64 `json:"snapshot_offset"`
	WAL           string `json:"wal,omitempty"`
	Entries       int    `json:"entries"`
	FirstOffset   uint64 `json:"first_offset,omitempty"`
	LastOffset    uint64 `json:"last_offset,omitempty"`
	Commit        uint64 `json:"committed_offset"`
	ImageOffset   int64  `json:"image_offset"`
	Rejected      []int  `json:"rejected_offsets,omitempty"`
	TornBytes     int64  `json:"torn_bytes,omitempty"`
	Brokers       int    `json:"brokers"`
	Topics        int    `json:"topics"`
	Partitions    int    `json:"partitions"`
}

func newMetadataInfoCommand(f *metadataFlags) *cobra.Command {
	return &cobra.Command{
		Use:          "info",
		Short:        "Summarize the metadata log: snapshot, entries, committed offset, counts",
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v, format, err := f.load()
			if err != nil {
				return err
			}
			in := MetadataInfo{
				Dir: v.dir, SnapshotFile: v.log.SnapshotFile, SnapshotIndex: v.log.SnapshotIndex, WAL: v.log.WAL,
				Entries: len(v.log.Entries), Commit: v.log.Commit, ImageOffset: v.image.Offset(), Rejected: v.rejected,
				TornBytes: v.log.TornBytes, Brokers: len(v.image.Brokers()), Topics: len(v.image.TopicNames()), Partitions: v.image.NumPartitions(),
			}
			if n := len(v.log.Entries); n > 0 {
				in.FirstOffset, in.LastOffset = v.log.Entries[0].Index, v.log.Entries[n-1].Index
			}
			w := cmd.OutOrStdout()
			if format == outputJSON {
				return writeJSON(w, in)
			}
			fmt.Fprintf(w, "Metadata log:     %s\n", in.Dir)
			if in.SnapshotFile != "" {
				fmt.Fprintf(w, "Snapshot:         %s (offset %d)\n", in.SnapshotFile, in.SnapshotIndex)
			} else {
				fmt.Fprintln(w, "Snapshot:         none")
			}
			fmt.Fprintf(w, "Log entries:      %d", in.Entries)
			if in.Entries > 0 {
				fmt.Fprintf(w, " (offsets %d-%d)", in.FirstOffset, in.LastOffset)
			}
			fmt.Fprintf(w, "\nCommitted offset: %d\nImage offset:     %d\n", in.Commit, in.ImageOffset)
			if in.TornBytes > 0 {
				fmt.Fprintf(w, "Torn tail:        %d bytes (dropped at the next start)\n", in.TornBytes)
			}
			if len(in.Rejected) > 0 {
				fmt.Fprintf(w, "Rejected entries: %v\n", in.Rejected)
			}
			_, err = fmt.Fprintf(w, "Brokers: %d  Topics: %d  Partitions: %d\n", in.Brokers, in.Topics, in.Partitions)
			return err
		},
	}
}

// metadataList is a `gregor metadata` command listing rows of the metadata image: rows makes
// them from the loaded image (and the command's arguments), -o json prints them as they
// are, and the table prints header and, through print, each row.
func metadataList[T any](f *metadataFlags, use, short string, args cobra.PositionalArgs,
	rows func(v *metadataView, args []string) ([]T, error), header []string, print func(t *table, r T)) *cobra.Command {
	return &cobra.Command{
		Use:          use,
		Short:        short,
		Args:         args,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			v, format, err := f.load()
			if err != nil {
				return err
			}
			out, err := rows(v, args)
			if err != nil {
				return err
			}
			if format == outputJSON {
				return writeJSON(cmd.OutOrStdout(), out)
			}
			t := newTable(cmd.OutOrStdout(), header...)
			for _, r := range out {
				print(t, r)
			}
			return t.flush()
		},
	}
}

// MetadataBroker is one registered broker as `gregor metadata brokers -o json` prints it.
type MetadataBroker struct {
	ID                   int32    `json:"id"`
	Epoch                int64    `json:"epoch"`
	Endpoints            []string `json:"endpoints"`
	Rack                 string   `json:"rack,omitempty"`
	Fenced               bool     `json:"fenced"`
	InControlledShutdown bool     `json:"in_controlled_shutdown"`
	IncarnationID        string   `json:"incarnation_id"`
}

var securityProtocols = map[int16]string{0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}

func newMetadataBrokersCommand(f *metadataFlags) *cobra.Command {
	return metadataList(f, "brokers", "List the registered brokers", cobra.NoArgs,
		func(v *metadataView, _ []string) ([]MetadataBroker, error) {
			out := []MetadataBroker{}
			for _, b := range v.image.Brokers() {
				mb := MetadataBroker{ID: b.ID, Epoch: b.Epoch, Rack: b.Rack, Fenced: b.Fenced, InControlledShutdown: b.InControlledShutdown,
					IncarnationID: base64.RawURLEncoding.EncodeToString(b.IncarnationID[:]), Endpoints: []string{}}
				for _, e := range b.Endpoints {
					mb.Endpoints = append(mb.Endpoints, fmt.Sprintf("%s://%s:%d (%s)", e.Name, e.Host, e.Port, securityProtocols[e.SecurityProtocol]))
				}
				out = append(out, mb)
			}
			return out, nil
		},
		[]string{"ID", "EPOCH", "FENCED", "RACK", "ENDPOINTS"},
		func(t *table, b MetadataBroker) {
			t.row(fmt.Sprint(b.ID), fmt.Sprint(b.Epoch), strconv.FormatBool(b.Fenced), orDash(b.Rack), strings.Join(b.Endpoints, ","))
		})
}

// MetadataTopic is one topic as `gregor metadata topics -o json` prints it.
type MetadataTopic struct {
	Name       string `json:"name"`
	ID         string `json:"id"`
	Partitions int    `json:"partitions"`
}

func newMetadataTopicsCommand(f *metadataFlags) *cobra.Command {
	return metadataList(f, "topics", "List the topics", cobra.NoArgs,
		func(v *metadataView, _ []string) ([]MetadataTopic, error) {
			out := []MetadataTopic{}
			for _, n := range v.image.TopicNames() {
				t := v.image.Topic(n)
				out = append(out, MetadataTopic{Name: n, ID: base64.RawURLEncoding.EncodeToString(t.ID[:]), Partitions: len(t.Partitions)})
			}
			return out, nil
		},
		[]string{"TOPIC", "ID", "PARTITIONS"},
		func(t *table, x MetadataTopic) { t.row(x.Name, x.ID, fmt.Sprint(x.Partitions)) })
}

// MetadataPartition is one partition as `gregor metadata partitions -o json` prints it.
type MetadataPartition struct {
	Topic          string  `json:"topic"`
	Partition      int32   `json:"partition"`
	Leader         int32   `json:"leader"`
	LeaderEpoch    int32   `json:"leader_epoch"`
	PartitionEpoch int32   `json:"partition_epoch"`
	Replicas       []int32 `json:"replicas"`
	ISR            []int32 `json:"isr"`
	Adding         []int32 `json:"adding,omitempty"`
	Removing       []int32 `json:"removing,omitempty"`
}

func newMetadataPartitionsCommand(f *metadataFlags) *cobra.Command {
	return metadataList(f, "partitions [TOPIC...]", "List partitions: replicas, ISR, leader and epochs (every topic when none is named)", cobra.ArbitraryArgs,
		func(v *metadataView, args []string) ([]MetadataPartition, error) {
			names := args
			if len(names) == 0 {
				names = v.image.TopicNames()
			}
			out := []MetadataPartition{}
			for _, n := range names {
				t := v.image.Topic(n)
				if t == nil {
					return nil, fmt.Errorf("topic %s is not in the metadata", n)
				}
				for i, p := range t.Partitions {
					out = append(out, MetadataPartition{Topic: n, Partition: int32(i), Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
						PartitionEpoch: p.PartitionEpoch, Replicas: nonNil(p.Replicas), ISR: nonNil(p.ISR), Adding: p.Adding, Removing: p.Removing})
				}
			}
			return out, nil
		},
		[]string{"TOPIC", "PARTITION", "LEADER", "LEADER_EPOCH", "PARTITION_EPOCH", "REPLICAS", "ISR", "ADDING", "REMOVING"},
		func(t *table, p MetadataPartition) {
			t.row(p.Topic, fmt.Sprint(p.Partition), fmt.Sprint(p.Leader), fmt.Sprint(p.LeaderEpoch), fmt.Sprint(p.PartitionEpoch),
				joinInt32s(p.Replicas), joinInt32s(p.ISR), orDash(joinInt32s(p.Adding)), orDash(joinInt32s(p.Removing)))
		})
}

// MetadataConfig is one config override as `gregor metadata configs -o json` prints it.
type MetadataConfig struct {
	ResourceType string `json:"resource_type"`
	ResourceName string `json:"resource_name"` // "" for the cluster-wide broker default
	Name         string `json:"name"`
	Value        string `json:"value"`
}

// resourceTypeName names a config resource type as Kafka's ConfigResource.Type does.
func resourceTypeName(t int8) string {
	switch t {
	case 2:
		return "TOPIC"
	case 4:
		return "BROKER"
	case 8:
		return "BROKER_LOGGER"
	case 32:
		return "GROUP"
	}
	return fmt.Sprintf("TYPE_%d", t)
}

func newMetadataConfigsCommand(f *metadataFlags) *cobra.Command {
	return metadataList(f, "configs", "List the config overrides of topics, brokers and the cluster default", cobra.NoArgs,
		func(v *metadataView, _ []string) ([]MetadataConfig, error) {
			out := []MetadataConfig{}
			for _, r := range v.image.ConfigResources() {
				m := v.image.Configs(r)
				for _, k := range sortedKeys(m) {
					out = append(out, MetadataConfig{ResourceType: resourceTypeName(r.Type), ResourceName: r.Name, Name: k, Value: m[k]})
				}
			}
			return out, nil
		},
		[]string{"RESOURCE_TYPE", "RESOURCE", "NAME", "VALUE"},
		func(t *table, c MetadataConfig) {
			name := c.ResourceName
			if name == "" {
				name = "<default>"
			}
			t.row(c.ResourceType, name, c.Name, c.Value)
		})
}

// MetadataRecord is one record of the log as `gregor metadata log -o json` prints it.
type MetadataRecord struct {
	Offset    uint64         `json:"offset"`
	Term      uint64         `json:"term"`
	Committed bool           `json:"committed"`
	Type      string         `json:"type"`
	Fields    map[string]any `json:"fields"`
}

func newMetadataLogCommand(f *metadataFlags) *cobra.Command {
	var from, limit int64
	cmd := &cobra.Command{
		Use:   "log [--from OFFSET] [--limit N]",
		Short: "Print the records of the metadata log after the snapshot, with their offsets",
		Long: `Print each record of the write-ahead log after the snapshot with its offset (the
raft index of its entry; the records of one entry share it), its term and whether it is
known to be committed. Snapshot contents are shown by the other subcommands.`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := parseOutput(f.output)
			if err != nil {
				return err
			}
			dir, err := f.logDir()
			if err != nil {
				return err
			}
			l, err := quorum.ReadOffline(storage.OS, dir)
			if err != nil {
				return err
			}
			out := metadataRecords(l, from, limit)
			w := cmd.OutOrStdout()
			if format == outputJSON {
				return writeJSON(w, out)
			}
			return printMetadataRecords(w, out)
		},
	}
	cmd.Flags().Int64Var(&from, "from", 0, "start at this offset")
	cmd.Flags().Int64Var(&limit, "limit", 0, "print at most this many records (0: all)")
	return cmd
}

// metadataRecords lists the records of the log's entries from offset from on, at most limit
// of them (0: all).
func metadataRecords(l *quorum.OfflineLog, from, limit int64) []MetadataRecord {
	out := []MetadataRecord{}
	for _, e := range l.Entries {
		if int64(e.Index) < from {
			continue
		}
		for _, r := range e.Records {
			if limit > 0 && int64(len(out)) >= limit {
				return out
			}
			out = append(out, MetadataRecord{Offset: e.Index, Term: e.Term, Committed: e.Index <= l.Commit, Type: recordTypeName(r), Fields: recordFields(r)})
		}
	}
	return out
}

func printMetadataRecords(w io.Writer, recs []MetadataRecord) error {
	for _, r := range recs {
		keys := make([]string, 0, len(r.Fields))
		for k := range r.Fields {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s=%v", k, r.Fields[k]))
		}
		uncommitted := ""
		if !r.Committed {
			uncommitted = " (uncommitted)"
		}
		if _, err := fmt.Fprintf(w, "offset: %d term: %d%s %s: %s\n", r.Offset, r.Term, uncommitted, r.Type, strings.Join(parts, " ")); err != nil {
			return err
		}
	}
	return nil
}

// recordTypeName is a record's Go type name, which is Kafka's record name where there is one
// (TopicRecord, PartitionRecord, ...).
func recordTypeName(r state.Record) string {
	t := reflect.TypeOf(r)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Name()
}

var uuidType = reflect.TypeOf(state.UUID{})

// recordFields is a record's exported fields, UUIDs in Kafka's URL-safe base64 and byte
// slices (salts, keys) left out as secrets.
func recordFields(r state.Record) map[string]any {
	v := reflect.ValueOf(r)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	out := map[string]any{}
	if v.Kind() != reflect.Struct {
		return out
	}
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		fv := v.Field(i)
		switch {
		case fv.Type() == uuidType:
			u := fv.Interface().(state.UUID)
			out[f.Name] = base64.RawURLEncoding.EncodeToString(u[:])
		case fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() == reflect.Uint8:
			out[f.Name] = fmt.Sprintf("<%d bytes>", fv.Len())
		default:
			out[f.Name] = fv.Interface()
		}
	}
	return out
}
