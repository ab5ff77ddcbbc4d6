package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gregor-project/gregor/internal/config"
)

// A dev cluster is N combined broker+controller nodes on this machine, every
// node's files side by side in one directory:
//
//	DIR/node-N.properties  the node's server.properties
//	DIR/node-N/            its log dir
//	DIR/node-N.log         its output (gregor dev cluster)
//
// Node N (1-based) listens on base+N-1 for clients, base+100+N-1 for
// replication (INTERNAL), base+200+N-1 for the controller quorum and
// base+600+N-1 for its http.listener (/metrics, /healthz, /readyz); nodes
// reach each other directly.
const (
	devInternalOffset   = 100
	devControllerOffset = 200
	devHTTPOffset       = 600
	devMaxNodes         = devInternalOffset - 1
	devDefaultBasePort  = 9092
	devReadyTimeout     = 60 * time.Second
	devStopTimeout      = 60 * time.Second
)

// devNode is one node of a dev cluster.
type devNode struct {
	id         int32
	client     string // host:port of the CLIENT listener
	configFile string
	logFile    string
}

func devCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Local development helpers",
	}
	var o devOptions
	run := &cobra.Command{
		Use:   "cluster N",
		Short: "Run an N-node cluster on this machine (writes its config files, starts N servers, stops them on Ctrl-C)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			nodes, err := o.write(args[0], cmd.OutOrStdout())
			if err != nil {
				return err
			}
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runDevCluster(ctx, exe, nodes, cmd.OutOrStdout())
		},
	}
	o.register(run)
	var co devOptions
	configOnly := &cobra.Command{
		Use:   "cluster-config N",
		Short: "Write the config files of an N-node cluster on this machine, without starting it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			nodes, err := co.write(args[0], cmd.OutOrStdout())
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "start each node with: gregor server --config %s (and the others)\n", nodes[0].configFile)
			return nil
		},
	}
	co.register(configOnly)
	cmd.AddCommand(run, configOnly)
	return cmd
}

// devOptions are the flags of the dev cluster commands.
type devOptions struct {
	dir      string
	basePort int
	sets     []string
}

func (o *devOptions) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.dir, "dir", "dev-cluster", "directory for the nodes' config files, log dirs and output")
	cmd.Flags().IntVar(&o.basePort, "base-port", devDefaultBasePort,
		fmt.Sprintf("client port of node 1; node N uses base+N-1 (clients), base+%d+N-1 (replication), base+%d+N-1 (controllers), base+%d+N-1 (http: metrics and health)", devInternalOffset, devControllerOffset, devHTTPOffset))
	cmd.Flags().StringArrayVar(&o.sets, "set", nil, "extra config for every node: key=value (repeatable)")
}

// write validates the arguments, writes every node's properties file and
// prints the layout. A directory that already holds node-1.properties keeps
// its cluster id, so the cluster's data can be used again.
func (o *devOptions) write(arg string, out io.Writer) ([]devNode, error) {
	n, err := strconv.Atoi(arg)
	if err != nil || n < 1 || n > devMaxNodes {
		return nil, fmt.Errorf("dev: N must be a number of nodes from 1 to %d, got %q", devMaxNodes, arg)
	}
	if o.basePort < 1 || o.basePort+devHTTPOffset+n-1 > 65535 {
		return nil, fmt.Errorf("dev: --base-port %d leaves no room for %d nodes' ports", o.basePort, n)
	}
	for _, s := range o.sets {
		if k, _, ok := strings.Cut(s, "="); !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("dev: --set %q is not key=value", s)
		}
	}
	dir, err := filepath.Abs(o.dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	clusterID, err := devClusterID(filepath.Join(dir, "node-1.properties"))
	if err != nil {
		return nil, err
	}
	addr := func(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
	var voters []config.Voter
	for i := range n {
		voters = append(voters, config.Voter{ID: int32(i + 1), Host: "127.0.0.1", Port: o.basePort + devControllerOffset + i})
	}
	var nodes []devNode
	var bootstrap []string
	fmt.Fprintf(out, "cluster %s: %d nodes, files in %s\n", clusterID, n, dir)
	for i := range n {
		id := int32(i + 1)
		name := "node-" + strconv.Itoa(i+1)
		dn := devNode{
			id:         id,
			client:     addr(o.basePort + i),
			configFile: filepath.Join(dir, name+".properties"),
			logFile:    filepath.Join(dir, name+".log"),
		}
		controller := addr(o.basePort + devControllerOffset + i)
		text := config.ClusterNodeProperties(config.ClusterNode{
			ID:             id,
			Roles:          []string{"broker", "controller"},
			ClusterID:      clusterID,
			LogDir:         filepath.Join(dir, name),
			ClientAddr:     dn.client,
			InternalAddr:   addr(o.basePort + devInternalOffset + i),
			ControllerAddr: controller,
			Voters:         voters,
			Brokers:        n,
			Sets:           append([]string{"http.listener=" + addr(o.basePort+devHTTPOffset+i)}, o.sets...),
		})
		if err := os.WriteFile(dn.configFile, []byte(text), 0o644); err != nil {
			return nil, err
		}
		fmt.Fprintf(out, "  node %d: clients %s, controller %s, http %s, config %s\n", id, dn.client, controller, addr(o.basePort+devHTTPOffset+i), dn.configFile)
		nodes = append(nodes, dn)
		bootstrap = append(bootstrap, dn.client)
	}
	fmt.Fprintf(out, "bootstrap servers: %s\n", strings.Join(bootstrap, ","))
	return nodes, nil
}

// devClusterID returns the cluster.id of an existing node file at path, or
// a new id if there is none.
func devClusterID(path string) (string, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return config.NewClusterID(), nil
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	props, err := config.ReadProperties(f)
	if err != nil {
		return "", fmt.Errorf("%w (in %s)", err, path)
	}
	if id := props["cluster.id"]; id != "" {
		return id, nil
	}
	return config.NewClusterID(), nil
}

// devProcess is one running node of runDevCluster. err is written before
// done is closed.
type devProcess struct {
	node devNode
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// runDevCluster starts `exe server --config FILE` for every node, its
// output appended to the node's log file, waits until every node takes
// client connections, and then until ctx ends, when it stops every node with
// SIGTERM and waits for them (SIGKILL after devStopTimeout). A node that
// exits on its own is reported and the others keep running. The children
// run in their own process group, so a Ctrl-C reaches them only through
// this SIGTERM.
func runDevCluster(ctx context.Context, exe string, nodes []devNode, out io.Writer) error {
	var procs []*devProcess
	defer func() { stopDevCluster(procs, out) }()
	for _, n := range nodes {
		p, err := startDevNode(exe, n)
		if err != nil {
			return fmt.Errorf("dev: start node %d: %w", n.id, err)
		}
		procs = append(procs, p)
	}
	for _, p := range procs {
		if err := waitDevNode(ctx, p); err != nil {
			return err
		}
	}
	fmt.Fprintln(out, "cluster is up; Ctrl-C stops it")
	exited := make(chan *devProcess, len(procs))
	for _, p := range procs {
		go func() {
			select {
			case <-p.done:
				exited <- p
			case <-ctx.Done():
			}
		}()
	}
	for {
		select {
		case p := <-exited:
			fmt.Fprintf(out, "node %d exited: %v (see %s)\n", p.node.id, exitText(p.err), p.node.logFile)
		case <-ctx.Done():
			fmt.Fprintln(out, "stopping the cluster")
			return nil
		}
	}
}

func startDevNode(exe string, n devNode) (*devProcess, error) {
	f, err := os.OpenFile(n.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close() // the child has its own descriptor once started
	cmd := exec.Command(exe, "server", "--config", n.configFile)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &devProcess{node: n, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// waitDevNode waits until p's client listener accepts connections.
func waitDevNode(ctx context.Context, p *devProcess) error {
	deadline := time.Now().Add(devReadyTimeout)
	for {
		select {
		case <-p.done:
			return fmt.Errorf("dev: node %d exited during start-up: %s (see %s)", p.node.id, exitText(p.err), p.node.logFile)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if c, err := net.DialTimeout("tcp", p.node.client, 200*time.Millisecond); err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("dev: node %d did not listen on %s within %v (see %s)", p.node.id, p.node.client, devReadyTimeout, p.node.logFile)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stopDevCluster sends SIGTERM to every running node and waits for all of
// them; one still running after devStopTimeout is killed.
func stopDevCluster(procs []*devProcess, out io.Writer) {
	for _, p := range procs {
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
			fmt.Fprintf(out, "node %d: %v\n", p.node.id, err)
		}
	}
	deadline := time.Now().Add(devStopTimeout)
	for _, p := range procs {
		select {
		case <-p.done:
		case <-time.After(time.Until(deadline)):
			fmt.Fprintf(out, "node %d did not stop within %v; killing it\n", p.node.id, devStopTimeout)
			if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
				fmt.Fprintf(out, "node %d: %v\n", p.node.id, err)
			}
			<-p.done
		}
	}
}

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}
