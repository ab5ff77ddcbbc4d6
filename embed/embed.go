package embed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"slices"
	"strings"

	"github.com/gregor-project/gregor/internal/broker"
	"github.com/gregor-project/gregor/internal/config"
)

// Options configure Start and StartCluster. The zero value is a working node.
type Options struct {
	// Dir is the data directory. Empty: a new temporary directory, removed by Close. A
	// given directory is kept, and a node started on it again finds its data (for a
	// Cluster, node N's log dir is Dir/node-N).
	Dir string
	// LogDirs, for Start only, are several log dirs (log.dirs: JBOD, one per disk) in place
	// of Dir, which must then be empty. They are kept.
	LogDirs []string
	// Config are broker configs by Kafka's names (server.properties keys), applied over
	// embed's own defaults (see defaults.go). A key the broker does not know, or a value it
	// cannot honour, fails the start naming the key. A single node listens on
	// PLAINTEXT://127.0.0.1:0 unless Config sets listeners.
	Config map[string]string
	// Logger receives the nodes' logs. nil: they are discarded.
	Logger *slog.Logger
}

// ErrClosed is returned for an operation on a closed Node or Cluster.
var ErrClosed = errors.New("embed: closed")

// Node is one running node, broker and controller, started by Start. Its methods are safe
// for concurrent use.
type Node struct {
	b       *broker.Broker
	id      int
	dir     string // the node's log dir
	tempDir string // removed by Close ("" when Options.Dir was given)
	addr    string
}

// Start starts a single node (broker and its own one-voter controller quorum) and returns
// once a client can produce to it. ctx bounds the start-up only: cancelling it later does
// not stop the node; Close does.
func Start(ctx context.Context, opt Options) (*Node, error) {
	if err := refuseKeys(opt.Config, nodeKeys, "Start"); err != nil {
		return nil, err
	}
	if len(opt.LogDirs) > 0 && opt.Dir != "" {
		return nil, fmt.Errorf("embed: Start takes Dir or LogDirs, not both: %w", config.ErrInvalidConfig)
	}
	var dir, tempDir string
	var err error
	logDirs := strings.Join(opt.LogDirs, ",")
	if len(opt.LogDirs) > 0 {
		dir = opt.LogDirs[0]
	} else if dir, tempDir, err = dataDir(opt.Dir); err != nil {
		return nil, err
	} else {
		logDirs = dir
	}
	props := map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0"}
	maps.Copy(props, nodeDefaults)
	maps.Copy(props, opt.Config)
	props["log.dirs"] = logDirs
	cfg, err := config.Parse(props)
	if err != nil {
		removeTemp(tempDir)
		return nil, err
	}
	b, err := broker.Start(cfg, broker.Options{Ctx: ctx, Logger: logger(opt.Logger)})
	if err != nil {
		removeTemp(tempDir)
		return nil, err
	}
	n := &Node{b: b, id: int(cfg.NodeID), dir: dir, tempDir: tempDir}
	if a := b.Addr(); a != nil { // none on a controller-only node (process.roles=controller)
		n.addr = a.String()
	}
	return n, nil
}

// Addr is the host:port of the node's first listener: what a client is given as its
// bootstrap server ("" on a controller-only node, which serves no clients).
func (n *Node) Addr() string { return n.addr }

// ID is the node's node.id.
func (n *Node) ID() int { return n.id }

// DataDir is the node's log dir (the first of log.dirs).
func (n *Node) DataDir() string { return n.dir }

// Close shuts the node down cleanly (as `gregor server` on SIGTERM: every log flushed and
// checkpointed) and then removes its data directory if Start made it. Calling it again
// returns the first call's error.
func (n *Node) Close() error {
	err := n.b.Close()
	if n.tempDir != "" {
		if rerr := os.RemoveAll(n.tempDir); rerr != nil && err == nil {
			err = rerr
		}
	}
	return err
}

// dataDir returns the directory to use and, when it was made here, the temporary directory
// Close removes.
func dataDir(dir string) (use, temp string, err error) {
	if dir != "" {
		return dir, "", nil
	}
	temp, err = os.MkdirTemp("", "gregor-embed-")
	if err != nil {
		return "", "", fmt.Errorf("embed: temporary data directory: %w", err)
	}
	return temp, temp, nil
}

func removeTemp(dir string) {
	if dir != "" {
		os.RemoveAll(dir) // best effort on a failed start: the start's error is what matters
	}
}

// refuseKeys fails when cfg sets one of the keys embed places itself.
func refuseKeys(cfg map[string]string, keys []string, what string) error {
	var bad []string
	for k := range cfg {
		if slices.Contains(keys, strings.TrimSpace(k)) {
			bad = append(bad, k)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	slices.Sort(bad)
	return fmt.Errorf("embed: %s places %s itself; Options.Config may not set it (use Options.Dir for the data directory): %w",
		what, strings.Join(bad, ", "), config.ErrInvalidConfig)
}

func logger(l *slog.Logger) *slog.Logger {
	if l != nil {
		return l
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// loopback is the host every embedded listener binds.
const loopback = "127.0.0.1"

func hostPort(port int) string { return net.JoinHostPort(loopback, fmt.Sprint(port)) }
