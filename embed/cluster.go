package embed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gregor-project/gregor/internal/broker"
	"github.com/gregor-project/gregor/internal/config"
	"github.com/gregor-project/gregor/internal/lowport"
)

// Cluster is a cluster of nodes in this process, started by StartCluster: node ids 1..n,
// each a broker and a voter of the controller quorum, with three listeners on loopback:
// CLIENT (what Bootstrap and Addr name), INTERNAL (replication between brokers) and
// CONTROLLER (the quorum). Its methods are safe for concurrent use.
//
// Lock rule: a member's mu guards its running broker and is held across the broker's start
// and close, so Stop, Restart and Close of one node never overlap; no two members' locks
// are held at once. The network has its own lock, taken inside a member's.
type Cluster struct {
	clusterID string
	root      string // parent of the nodes' log dirs
	tempDir   string // removed by Close ("" when Options.Dir was given)
	log       *slog.Logger
	nw        *network
	members   []*member // by node id - 1
	// ctx ends when Close starts: a Restart still waiting for the quorum (an isolated
	// node's) gives up, so Close never waits for it.
	ctx    context.Context
	cancel context.CancelFunc

	closeOnce sync.Once
	closeErr  error
}

// member is one node of a Cluster; its ports and config are fixed at StartCluster.
type member struct {
	id    int
	dir   string
	ports [3]int // CLIENT, INTERNAL, CONTROLLER
	cfg   *config.Broker
	c     *Cluster

	mu struct {
		sync.Mutex
		b      *broker.Broker // nil while stopped
		closed bool           // the cluster closed: no more starts
	}
}

// listenerNames are the names of a member's three listeners, in the order of its ports.
var listenerNames = [3]string{config.ClusterClientListener, config.ClusterInternalListener, config.ClusterControllerListener}

// StartCluster starts n nodes and returns once every one of them serves clients. Their
// internal topics (__consumer_offsets, __transaction_state) are replicated min(n, 3) times
// with a min ISR of min(n, 2), as a Kafka cluster of that size is set up. ctx bounds the
// start-up only.
func StartCluster(ctx context.Context, n int, opt Options) (*Cluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("embed: StartCluster of %d nodes: need at least 1", n)
	}
	if err := refuseKeys(opt.Config, clusterKeys, "StartCluster"); err != nil {
		return nil, err
	}
	root, tempDir, err := dataDir(opt.Dir)
	if err != nil {
		return nil, err
	}
	c := &Cluster{
		clusterID: config.NewClusterID(), root: root, tempDir: tempDir,
		log: logger(opt.Logger), nw: newNetwork(),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if id, err := existingClusterID(root); err != nil {
		removeTemp(tempDir)
		return nil, err
	} else if id != "" {
		c.clusterID = id // a given Dir started before: the same cluster again
	}
	// Every port at once, bound until its broker takes it over, so that no two nodes, and
	// no other process, get the same one.
	lns := make([]net.Listener, 0, 3*n)
	closeAll := func() {
		for _, ln := range lns {
			ln.Close()
		}
	}
	for range 3 * n {
		ln, err := lowport.Listen()
		if err != nil {
			closeAll()
			removeTemp(tempDir)
			return nil, fmt.Errorf("embed: binding a loopback port: %w", err)
		}
		lns = append(lns, ln)
	}
	var voters []config.Voter
	for i := range n {
		m := &member{id: i + 1, dir: filepath.Join(root, "node-"+strconv.Itoa(i+1)), c: c}
		for j := range 3 {
			m.ports[j] = lns[3*i+j].Addr().(*net.TCPAddr).Port
			c.nw.own(m.ports[j], m.id)
		}
		voters = append(voters, config.Voter{ID: int32(m.id), Host: loopback, Port: m.ports[2]})
		c.members = append(c.members, m)
	}
	for _, m := range c.members {
		if m.cfg, err = m.config(voters, n, opt.Config); err != nil {
			closeAll()
			removeTemp(tempDir)
			return nil, err
		}
	}
	// The nodes start together: each waits for the quorum the others make up, so one that
	// fails ends the others' starts too.
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, m := range c.members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = m.start(sctx, map[string]net.Listener{
				listenerNames[0]: lns[3*i], listenerNames[1]: lns[3*i+1], listenerNames[2]: lns[3*i+2],
			})
			if errs[i] != nil {
				stop()
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		closeAll() // the ones a failed start never took
		return nil, errors.Join(err, c.Close())
	}
	return c, nil
}

// existingClusterID is the cluster.id node 1's log dir under root was formatted with ("" if
// none), so that a cluster started again on a kept Dir is the same cluster.
func existingClusterID(root string) (string, error) {
	f, err := os.Open(filepath.Join(root, "node-1", "meta.properties"))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	props, err := config.ReadProperties(f)
	if err != nil {
		return "", fmt.Errorf("embed: %s: %w", f.Name(), err)
	}
	return props["cluster.id"], nil
}

// config is the member's broker config: its place in the cluster, embed's defaults, then
// the caller's keys.
func (m *member) config(voters []config.Voter, brokers int, extra map[string]string) (*config.Broker, error) {
	text := config.ClusterNodeProperties(config.ClusterNode{
		ID:             int32(m.id),
		Roles:          []string{"broker", "controller"},
		ClusterID:      m.c.clusterID,
		LogDir:         m.dir,
		ClientAddr:     hostPort(m.ports[0]),
		InternalAddr:   hostPort(m.ports[1]),
		ControllerAddr: hostPort(m.ports[2]),
		Voters:         voters,
		Brokers:        brokers,
	})
	props, err := config.ReadProperties(strings.NewReader(text))
	if err != nil {
		return nil, err
	}
	maps.Copy(props, nodeDefaults)
	maps.Copy(props, extra)
	cfg, err := config.Parse(props)
	if err != nil {
		return nil, fmt.Errorf("embed: node %d: %w", m.id, err)
	}
	return cfg, nil
}

// start starts the member's broker on lns (nil: bind its ports again).
func (m *member) start(ctx context.Context, lns map[string]net.Listener) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		for _, ln := range lns {
			ln.Close()
		}
		return ErrClosed
	}
	if m.mu.b != nil {
		return nil
	}
	if lns == nil {
		var err error
		if lns, err = m.rebind(ctx); err != nil {
			return err
		}
	}
	b, err := broker.Start(m.cfg, broker.Options{
		Ctx: ctx, Logger: m.c.log.With("node", m.id), Dial: m.c.nw.dialer(m.id), Listeners: lns,
		// One voter of the new quorum campaigns at once: the others answer as they come
		// up (their ports are bound), so there is a leader without an election timeout. One
		// only, so that no two split the first vote.
		CampaignAtStart: m.id == 1,
	})
	if err != nil {
		return fmt.Errorf("embed: node %d: %w", m.id, err)
	}
	m.mu.b = b
	return nil
}

// rebindTimeout bounds how long a restarting node waits for one of its ports to be free.
const rebindTimeout = 10 * time.Second

// rebind binds the member's ports again for a restart. A port still held (by a connection
// of the previous broker the kernel has not let go of yet) is retried until rebindTimeout.
func (m *member) rebind(ctx context.Context) (map[string]net.Listener, error) {
	lns := map[string]net.Listener{}
	deadline := time.Now().Add(rebindTimeout)
	for i, port := range m.ports {
		for {
			ln, err := net.Listen("tcp", hostPort(port))
			if err == nil {
				lns[listenerNames[i]] = ln
				break
			}
			if !errors.Is(err, syscall.EADDRINUSE) || time.Now().After(deadline) || ctx.Err() != nil {
				for _, ln := range lns {
					ln.Close()
				}
				return nil, fmt.Errorf("embed: node %d: binding its %s port again: %w", m.id, listenerNames[i], err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return lns, nil
}

// stop closes the member's broker cleanly, if it runs.
func (m *member) stop() error { return m.stopWith((*broker.Broker).Close) }

// stopWith closes the member's broker with closeFn, if it runs.
func (m *member) stopWith(closeFn func(*broker.Broker) error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.mu.b
	if b == nil {
		return nil
	}
	m.mu.b = nil
	if err := closeFn(b); err != nil {
		return fmt.Errorf("embed: node %d: %w", m.id, err)
	}
	return nil
}

func (c *Cluster) member(id int) (*member, error) {
	if id < 1 || id > len(c.members) {
		return nil, fmt.Errorf("embed: no node %d in a cluster of %d", id, len(c.members))
	}
	return c.members[id-1], nil
}

// Bootstrap is the CLIENT addresses of every node, comma-separated, as Kafka's
// bootstrap.servers takes them (Addrs gives them as a slice).
func (c *Cluster) Bootstrap() string { return strings.Join(c.Addrs(), ",") }

// Addrs is the CLIENT address (host:port) of every node, by node id. A node keeps its
// addresses across Stop and Restart.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.members))
	for i, m := range c.members {
		out[i] = hostPort(m.ports[0])
	}
	return out
}

// Addr is node id's CLIENT address ("" if there is no such node).
func (c *Cluster) Addr(id int) string {
	m, err := c.member(id)
	if err != nil {
		return ""
	}
	return hostPort(m.ports[0])
}

// Size is the number of nodes, running or not; their ids are 1..Size.
func (c *Cluster) Size() int { return len(c.members) }

// ClusterID is the cluster.id every node was formatted with.
func (c *Cluster) ClusterID() string { return c.clusterID }

// DataDir is node id's log dir.
func (c *Cluster) DataDir(id int) string {
	m, err := c.member(id)
	if err != nil {
		return ""
	}
	return m.dir
}

// Running reports whether node id runs (it does until Stop, and again after Restart). It
// waits for a Stop or Restart of that node in progress.
func (c *Cluster) Running(id int) bool {
	m, err := c.member(id)
	if err != nil {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.b != nil
}

// Stop shuts node id down cleanly, as `gregor server` does on SIGTERM: a controlled
// shutdown first (the controller moves its leaderships to other in-sync replicas, so
// producers fail over at once), then every log flushed. Its data stays for Restart. Stop of
// a stopped node does nothing.
func (c *Cluster) Stop(id int) error {
	m, err := c.member(id)
	if err != nil {
		return err
	}
	return m.stop()
}

// Restart stops node id if it runs, then starts it again on the same data and ports, and
// returns once it serves clients again (a restarted node catches up as a follower and
// rejoins the ISR of its partitions on its own). A node that is isolated cannot rejoin the
// quorum: its Restart returns only once it is healed, from another goroutine, or the
// cluster is closed (then with an error).
func (c *Cluster) Restart(id int) error {
	m, err := c.member(id)
	if err != nil {
		return err
	}
	if err := m.stop(); err != nil {
		return err
	}
	return m.start(c.ctx, nil)
}

// Isolate cuts node id off from the other nodes, as a network partition would: its
// connections to them and theirs to it are closed, and new ones are refused until Heal.
// Clients still reach it (a cut-off leader keeps taking requests, as in a real partition,
// until the controller, which no longer hears from it, fences it and elects other leaders).
// Isolating several nodes cuts each of them off from all the others. A stopped node may be
// isolated: it starts cut off.
func (c *Cluster) Isolate(id int) error {
	if _, err := c.member(id); err != nil {
		return err
	}
	c.nw.setIsolated(id, true)
	return nil
}

// Heal undoes Isolate(id): the node's links to the others carry connections again (links
// to nodes still isolated stay cut). The node re-registers, catches up and rejoins the ISR
// of its partitions on its own.
func (c *Cluster) Heal(id int) error {
	if _, err := c.member(id); err != nil {
		return err
	}
	c.nw.setIsolated(id, false)
	return nil
}

// Close stops every node and removes the data directory if StartCluster made it. The
// nodes stop together, each flushing and checkpointing its logs as Stop does, but without
// the controlled shutdown: with every broker going, there is none to move leaderships to.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() {
		c.cancel()
		errs := make([]error, len(c.members))
		var wg sync.WaitGroup
		for i, m := range c.members {
			wg.Add(1)
			go func() {
				defer wg.Done()
				m.mu.Lock()
				m.mu.closed = true // no Restart from now on
				m.mu.Unlock()
				errs[i] = m.stopWith((*broker.Broker).CloseUncontrolled)
			}()
		}
		wg.Wait()
		if c.tempDir != "" {
			errs = append(errs, os.RemoveAll(c.tempDir))
		}
		c.closeErr = errors.Join(errs...)
	})
	return c.closeErr
}
