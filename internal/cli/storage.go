package cli

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"

	"github.com/gregor-project/gregor/internal/config"
	"github.com/gregor-project/gregor/internal/storage"
)

// `gregor storage random-uuid|format|info`: kafka-storage.sh. format writes meta.properties
// (version=1, cluster.id, node.id) into each of the server config's log.dirs, exactly as the
// server formats an empty log dir itself (storage.FormatDir), so a server started with that
// config takes the cluster id without needing cluster.id set; info reads each dir's
// meta.properties as the server does at start-up and names what would stop it.
//
//	gregor storage random-uuid
//	gregor storage format -t $(gregor storage random-uuid) -c server.properties [--ignore-formatted]
//	gregor storage info -c server.properties

func newStorageCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "storage",
		Short: "Format log dirs and show their state, offline (kafka-storage.sh)",
	}
	cmd.AddCommand(newStorageRandomUUIDCommand(), newStorageFormatCommand(), newStorageInfoCommand())
	return cmd
}

// checkClusterID accepts what Kafka's Uuid.fromString accepts: 22 characters of URL-safe
// base64 that decode to 16 bytes.
func checkClusterID(id string) error {
	b, err := base64.RawURLEncoding.DecodeString(id)
	if len(id) != 22 || err != nil || len(b) != 16 {
		return fmt.Errorf("cluster id %q is not a UUID in URL-safe base64 (22 characters, as `gregor storage random-uuid` prints)", id)
	}
	return nil
}

func newStorageRandomUUIDCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "random-uuid",
		Short: "Print a new random cluster id",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := parseOutput(output)
			if err != nil {
				return err
			}
			id := config.NewClusterID() // as Kafka's Uuid.randomUuid().toString(): 22 characters
			if format == outputJSON {
				return writeJSON(cmd.OutOrStdout(), map[string]string{"cluster_id": id})
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), id)
			return err
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", outputTable, "output format: table|json")
	return cmd
}

// storageConfigFlags load the server config the way `gregor server` does.
type storageConfigFlags struct {
	file   string
	sets   []string
	output string
}

func (f *storageConfigFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&f.file, "config", "c", "", "the server's server.properties")
	cmd.Flags().StringArrayVar(&f.sets, "set", nil, "override one server config: key=value (repeatable), as `gregor server --set`")
	cmd.Flags().StringVarP(&f.output, "output", "o", outputTable, "output format: table|json")
}

func (f *storageConfigFlags) load() (*config.Broker, error) {
	if f.file == "" && len(f.sets) == 0 {
		return nil, errors.New("give the server's config: --config server.properties (and/or --set key=value)")
	}
	return config.Load(f.file, f.sets)
}

// FormattedDir is one log dir's outcome as `gregor storage format -o json` prints it.
type FormattedDir struct {
	Dir       string `json:"dir"`
	ClusterID string `json:"cluster_id"`
	NodeID    int32  `json:"node_id"`
	Formatted bool   `json:"formatted"` // false: already formatted (--ignore-formatted)
}

func newStorageFormatCommand() *cobra.Command {
	var (
		cf        storageConfigFlags
		clusterID string
		ignore    bool
	)
	cmd := &cobra.Command{
		Use:   "format -t CLUSTER_ID -c server.properties [--ignore-formatted]",
		Short: "Write meta.properties with a cluster id into each log dir (kafka-storage.sh format)",
		Long: `Format each of the config's log.dirs (and metadata.log.dir) for node.id of the cluster --cluster-id (else
the config's cluster.id): meta.properties with version=1, cluster.id and node.id, which
the server reads at start-up. Every node of a cluster is formatted with the same cluster
id. A dir already formatted is an error, unless --ignore-formatted (then it is left as it
is if it names the same cluster and node).`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := parseOutput(cf.output)
			if err != nil {
				return err
			}
			cfg, err := cf.load()
			if err != nil {
				return err
			}
			id := clusterID
			switch {
			case id == "" && cfg.ClusterID == "":
				return errors.New("give the cluster id: --cluster-id (gregor storage random-uuid makes one)")
			case id == "":
				id = cfg.ClusterID
			case cfg.ClusterID != "" && cfg.ClusterID != id:
				return fmt.Errorf("--cluster-id %s differs from the config's cluster.id %s: the server would refuse the dir", id, cfg.ClusterID)
			}
			if err := checkClusterID(id); err != nil {
				return err
			}
			var res []FormattedDir
			for _, dir := range formatDirs(cfg) {
				r := FormattedDir{Dir: dir, ClusterID: id, NodeID: cfg.NodeID, Formatted: true}
				err := storage.FormatDir(storage.OS, dir, id, cfg.NodeID)
				switch {
				case errors.Is(err, storage.ErrAlreadyFormatted) && ignore:
					r.Formatted = false
				case errors.Is(err, storage.ErrAlreadyFormatted):
					return fmt.Errorf("log directory %s is already formatted: use --ignore-formatted to ignore it", dir)
				case err != nil:
					return err
				}
				res = append(res, r)
			}
			w := cmd.OutOrStdout()
			if format == outputJSON {
				return writeJSON(w, res)
			}
			formatted := 0
			for _, r := range res {
				if r.Formatted {
					formatted++
					fmt.Fprintf(w, "Formatting %s with cluster.id %s and node.id %d.\n", r.Dir, r.ClusterID, r.NodeID)
				}
			}
			if formatted == 0 {
				fmt.Fprintln(w, "All of the log directories are already formatted.")
			}
			return nil
		},
	}
	cf.register(cmd)
	cmd.Flags().StringVarP(&clusterID, "cluster-id", "t", "", "the cluster id (gregor storage random-uuid)")
	cmd.Flags().BoolVarP(&ignore, "ignore-formatted", "g", false, "leave a dir already formatted (for the same cluster and node) as it is")
	return cmd
}

// formatDirs are the dirs format and info look at: log.dirs, and metadata.log.dir when it
// is not one of them (as kafka-storage.sh formats it too).
func formatDirs(cfg *config.Broker) []string {
	dirs := append([]string(nil), cfg.LogDirs...)
	if m := cfg.MetadataLogDir; m != "" && !slices.Contains(dirs, m) {
		dirs = append(dirs, m)
	}
	return dirs
}

// LogDirInfoOffline is one log dir's state as `gregor storage info -o json` prints it.
type LogDirInfoOffline struct {
	Dir       string `json:"dir"`
	Exists    bool   `json:"exists"`
	Formatted bool   `json:"formatted"`
	Version   int    `json:"version,omitempty"`
	ClusterID string `json:"cluster_id,omitempty"`
	NodeID    *int32 `json:"node_id,omitempty"`
	Problem   string `json:"problem,omitempty"`
}

func newStorageInfoCommand() *cobra.Command {
	var cf storageConfigFlags
	cmd := &cobra.Command{
		Use:   "info -c server.properties",
		Short: "Show each log dir's meta.properties and what would stop the server (kafka-storage.sh info)",
		Long: `Read meta.properties in each of the config's log.dirs as the server does at
start-up: whether the dir is formatted, its cluster.id, node.id and version, and the
problems that would stop the server (a node.id or cluster.id other than the config's,
dirs of different clusters, an unreadable file).`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := parseOutput(cf.output)
			if err != nil {
				return err
			}
			cfg, err := cf.load()
			if err != nil {
				return err
			}
			var infos []LogDirInfoOffline
			clusters := map[string]bool{}
			problems := 0
			for _, dir := range formatDirs(cfg) {
				in := LogDirInfoOffline{Dir: dir}
				if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
					in.Exists = true
					mp, ok, err := storage.ReadMetaProperties(storage.OS, dir)
					switch {
					case err != nil:
						in.Problem = err.Error()
					case ok:
						in.Formatted, in.Version, in.ClusterID = true, mp.Version, mp.ClusterID
						if mp.NodeID >= 0 {
							n := mp.NodeID
							in.NodeID = &n
						}
						clusters[mp.ClusterID] = true
						if mp.NodeID != cfg.NodeID {
							in.Problem = fmt.Sprintf("node.id %d in meta.properties, %d in the config", mp.NodeID, cfg.NodeID)
						} else if cfg.ClusterID != "" && cfg.ClusterID != mp.ClusterID {
							in.Problem = fmt.Sprintf("cluster.id %s in meta.properties, %s in the config", mp.ClusterID, cfg.ClusterID)
						}
					}
				}
				if in.Problem != "" {
					problems++
				}
				infos = append(infos, in)
			}
			var overall []string
			if len(clusters) > 1 {
				overall = append(overall, fmt.Sprintf("the log dirs belong to %d different clusters", len(clusters)))
			}
			w := cmd.OutOrStdout()
			if format == outputJSON {
				if err := writeJSON(w, infos); err != nil {
					return err
				}
			} else {
				for _, in := range infos {
					fmt.Fprintf(w, "Log directory %s:\n", in.Dir)
					switch {
					case !in.Exists:
						fmt.Fprintln(w, "  does not exist: the server creates and formats it")
					case !in.Formatted && in.Problem == "":
						fmt.Fprintln(w, "  not formatted (no "+filepath.Join(in.Dir, storage.MetaPropertiesFile)+")")
					case in.Formatted:
						node := "none"
						if in.NodeID != nil {
							node = fmt.Sprint(*in.NodeID)
						}
						fmt.Fprintf(w, "  Found metadata: {cluster.id=%s, node.id=%s, version=%d}\n", in.ClusterID, node, in.Version)
					}
					if in.Problem != "" {
						fmt.Fprintf(w, "  Found problem: %s\n", in.Problem)
					}
				}
				for _, p := range overall {
					fmt.Fprintf(w, "Found problem: %s\n", p)
				}
			}
			if n := problems + len(overall); n > 0 {
				return fmt.Errorf("%d problem(s) found", n)
			}
			return nil
		},
	}
	cf.register(cmd)
	return cmd
}
