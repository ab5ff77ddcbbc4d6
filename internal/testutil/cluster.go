package testutil

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/embed"
	"github.com/gregor-project/gregor/internal/config"
	"github.com/gregor-project/gregor/internal/lowport"
)

// A test cluster is real `gregor server` processes on loopback ports, one per
// node, each with its own properties file and log dir under one root:
//
//	<root>/node-N             log.dirs of node N (Node.Dir)
//	<root>/node-N.properties  its server.properties (Node.ConfigFile)
//	<root>/node-N.log         its stdout and stderr, appended across restarts (Node.LogFile)
//
// Nodes talk to each other only through Proxies, so a test can partition
// them without touching the processes:
//
//   - every broker's INTERNAL listener has one proxy in front of it, which is
//     the address it advertises: every replication fetch to the broker passes
//     through it;
//   - node i reaches controller j (i != j) through a proxy dedicated to the
//     pair (i -> j): its controller.quorum.voters names that proxy.
//
// Clients use the CLIENT listeners directly; isolating a node does not hide it
// from clients (a cut-off leader keeps taking requests, as in a real
// partition).

// clusterDefaultSets are written before ClusterOptions.Sets, which override
// them: embed's defaults (short broker sessions and ISR lag, so failures are
// noticed within seconds; no initial rebalance delay), so that a process of
// the harness behaves as an embedded node does.
func clusterDefaultSets() []string {
	var sets []string
	for k, v := range embed.Defaults() {
		sets = append(sets, k+"="+v)
	}
	slices.Sort(sets) // the same properties file every time
	return sets
}

// clusterReadyTimeout bounds how long a node may take to open its listener.
const clusterReadyTimeout = 60 * time.Second

// ClusterOptions configure StartCluster.
type ClusterOptions struct {
	// Nodes is the number of voters: processes with process.roles
	// broker,controller and node ids 1..Nodes. At least 1.
	Nodes int
	// Sets are extra key=value configs of every node, written last in its
	// properties file, so they override the harness's defaults.
	Sets []string
	// NodeSets are extra key=value configs of single nodes, written after Sets.
	NodeSets map[int32][]string
	// ClusterID is the cluster.id of every node; "" makes a random one.
	ClusterID string
	// BeforeStart, if set, is called by StartCluster for each node once its
	// files are laid out (Node.Dir does not exist yet, Node.ConfigFile is
	// written) and before any process starts, on the test's goroutine: a test
	// can mount a file system of its own at Node.Dir there. Cleanups it
	// registers run before the cluster's (which kill the processes), so one
	// that unmounts must kill the node first.
	BeforeStart func(n *Node)
}

// Cluster is a test cluster of real broker processes; see StartCluster.
//
// Lock rule: mu guards the node and proxy maps and the isolated set; a node's
// process has its own lock (Node.mu), never taken with mu held. Proxies are
// cut and healed with mu held (a Proxy's lock comes after mu) but closed
// without it, since closing waits for Proxy.Identify callbacks, which take mu.
// Methods that take or fail a testing.TB must be called from the test's
// goroutine.
type Cluster struct {
	t         testing.TB
	root      string
	clusterID string
	opt       ClusterOptions
	voters    []int32 // node ids of the controller quorum, ascending; fixed at start

	mu struct {
		sync.Mutex
		nodes    map[int32]*Node
		internal map[int32]*Proxy    // in front of each broker's INTERNAL listener
		voter    map[[2]int32]*Proxy // (from, to): node from's way to controller to
		isolated map[int32]bool
	}
}

// Node is one process of a Cluster. Its fields are fixed at start.
type Node struct {
	ID         int32
	Roles      []string // process.roles
	Dir        string   // log.dirs
	ConfigFile string   // the server.properties the process runs with
	LogFile    string   // the process's stdout and stderr

	clientAddr     string // CLIENT listener ("" for a controller-only node)
	internalAddr   string // INTERNAL listener as bound (others dial its proxy)
	controllerAddr string // CONTROLLER listener ("" for a broker-only node)
	httpAddr       string // http.listener: /metrics, /healthz, /readyz
	c              *Cluster

	mu struct {
		sync.Mutex
		run *nodeRun // the latest process; nil before the first start
	}
}

// nodeRun is one process of a node. err is written before done is closed
// and read only after.
type nodeRun struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// StartCluster starts opt.Nodes combined broker+controller processes
// (`gregor server --config FILE` of the binary Binary builds) in a new temp
// dir and waits until every node's CLIENT listener accepts TCP connections.
// Every node gets the same cluster.id, ports from the loopback range, and
// the proxies described above. When the test ends every process is killed
// and every proxy closed; if the test failed, the tail of each node's log
// is printed.
func StartCluster(t testing.TB, opt ClusterOptions) *Cluster {
	t.Helper()
	bin := Binary(t) // build before any process starts, outside the ready timeout
	c := layoutCluster(t, opt)
	nodes := c.Nodes()
	if opt.BeforeStart != nil {
		for _, n := range nodes {
			opt.BeforeStart(n)
		}
	}
	for _, n := range nodes {
		if err := n.spawn(bin); err != nil {
			t.Fatalf("start node %d: %v", n.ID, err)
		}
	}
	for _, n := range nodes {
		n.waitReady(t)
	}
	return c
}

// layoutCluster is StartCluster without the processes: ports, proxies and
// properties files.
func layoutCluster(t testing.TB, opt ClusterOptions) *Cluster {
	t.Helper()
	if opt.Nodes < 1 {
		t.Fatalf("StartCluster: Nodes = %d, need at least 1", opt.Nodes)
	}
	c := &Cluster{t: t, root: t.TempDir(), clusterID: opt.ClusterID, opt: opt}
	if c.clusterID == "" {
		c.clusterID = config.NewClusterID()
	}
	c.mu.nodes = map[int32]*Node{}
	c.mu.internal = map[int32]*Proxy{}
	c.mu.voter = map[[2]int32]*Proxy{}
	c.mu.isolated = map[int32]bool{}
	t.Cleanup(c.cleanup)

	// Every node's three ports at once, held until the proxies are bound, so
	// no two nodes and no proxy get the same one.
	ports, release := holdPorts(t, 4*opt.Nodes)
	var nodes []*Node
	for i := range opt.Nodes {
		id := int32(i + 1)
		nodes = append(nodes, c.newNode(id, []string{"broker", "controller"}, ports[4*i:4*i+4]))
		c.voters = append(c.voters, id)
	}
	c.mu.Lock()
	for _, n := range nodes {
		c.mu.nodes[n.ID] = n
	}
	for _, n := range nodes {
		c.addProxiesLocked(n)
	}
	c.mu.Unlock()
	release()
	for _, n := range nodes {
		c.writeConfig(n)
	}
	return c
}

// newNode lays out node id with its ports (client, internal, controller, http;
// the first three only as its roles use them).
func (c *Cluster) newNode(id int32, roles []string, ports []int) *Node {
	name := "node-" + strconv.Itoa(int(id))
	n := &Node{
		ID:         id,
		Roles:      roles,
		Dir:        filepath.Join(c.root, name),
		ConfigFile: filepath.Join(c.root, name+".properties"),
		LogFile:    filepath.Join(c.root, name+".log"),
		c:          c,
	}
	addr := func(p int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)) }
	if n.isBroker() {
		n.clientAddr, n.internalAddr = addr(ports[0]), addr(ports[1])
	}
	if n.isController() {
		n.controllerAddr = addr(ports[2])
	}
	n.httpAddr = addr(ports[3])
	return n
}

// addProxiesLocked creates the proxies n needs that do not exist yet: in
// front of its INTERNAL listener, from n to every controller, and from
// every node to n if n is a controller.
func (c *Cluster) addProxiesLocked(n *Node) {
	if n.isBroker() {
		c.mu.internal[n.ID] = StartProxy(c.t, n.internalAddr, ProxyOptions{Identify: c.identify})
	}
	add := func(from, to *Node) {
		k := [2]int32{from.ID, to.ID}
		if from.ID != to.ID && c.mu.voter[k] == nil {
			c.mu.voter[k] = StartProxy(c.t, to.controllerAddr, ProxyOptions{})
		}
	}
	for _, v := range c.voters {
		to := c.mu.nodes[v]
		if to == nil {
			continue
		}
		add(n, to)
		if n.isController() {
			add(to, n)
		}
	}
}

// writeConfig writes n's properties file: its listeners, its INTERNAL proxy
// as the advertised address, and the voters as n reaches them.
func (c *Cluster) writeConfig(n *Node) {
	c.mu.Lock()
	var voters []config.Voter
	var bad error
	for _, v := range c.voters {
		addr := c.mu.nodes[v].controllerAddr
		if v != n.ID {
			addr = c.mu.voter[[2]int32{n.ID, v}].Addr()
		}
		ta, err := net.ResolveTCPAddr("tcp", addr)
		if err != nil {
			bad = fmt.Errorf("voter %d address %q: %w", v, addr, err)
			break
		}
		voters = append(voters, config.Voter{ID: v, Host: ta.IP.String(), Port: ta.Port})
	}
	brokers := 0
	for _, m := range c.mu.nodes {
		if m.isBroker() {
			brokers++
		}
	}
	advertised := ""
	if p := c.mu.internal[n.ID]; p != nil {
		advertised = p.Addr()
	}
	c.mu.Unlock()
	if bad != nil {
		c.t.Fatal(bad)
	}

	var sets []string
	sets = append(sets, clusterDefaultSets()...)
	sets = append(sets, "http.listener="+n.httpAddr) // never the default port: nodes share the machine
	sets = append(sets, c.opt.Sets...)
	sets = append(sets, c.opt.NodeSets[n.ID]...)
	text := config.ClusterNodeProperties(config.ClusterNode{
		ID:                     n.ID,
		Roles:                  n.Roles,
		ClusterID:              c.clusterID,
		LogDir:                 n.Dir,
		ClientAddr:             n.clientAddr,
		InternalAddr:           n.internalAddr,
		ControllerAddr:         n.controllerAddr,
		AdvertisedInternalAddr: advertised,
		Voters:                 voters,
		Brokers:                brokers,
		Sets:                   sets,
	})
	if err := os.WriteFile(n.ConfigFile, []byte(text), 0o644); err != nil {
		c.t.Fatalf("write %s: %v", n.ConfigFile, err)
	}
}

// AddBroker starts a broker-only process with node id id that joins the
// same quorum (through voter proxies of its own) and waits until its CLIENT
// listener accepts connections. id must not be in use.
func (c *Cluster) AddBroker(id int32) *Node {
	c.t.Helper()
	bin := Binary(c.t)
	n := c.layoutBroker(id)
	if err := n.spawn(bin); err != nil {
		c.t.Fatalf("start node %d: %v", id, err)
	}
	n.waitReady(c.t)
	return n
}

// layoutBroker is AddBroker without the process.
func (c *Cluster) layoutBroker(id int32) *Node {
	c.t.Helper()
	ports, release := holdPorts(c.t, 3)
	n := c.newNode(id, []string{"broker"}, []int{ports[0], ports[1], 0, ports[2]})
	c.mu.Lock()
	if c.mu.nodes[id] != nil {
		c.mu.Unlock()
		release()
		c.t.Fatalf("AddBroker: node %d exists", id)
	}
	c.mu.nodes[id] = n
	c.addProxiesLocked(n)
	c.applyIsolationLocked() // links to an isolated node start cut
	c.mu.Unlock()
	release()
	c.writeConfig(n)
	return n
}

// ClusterID is the cluster.id every node was formatted with.
func (c *Cluster) ClusterID() string { return c.clusterID }

// Dir is the root directory of the nodes' files.
func (c *Cluster) Dir() string { return c.root }

// Node returns node id, or nil if there is none.
func (c *Cluster) Node(id int32) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.nodes[id]
}

// Nodes returns every node, by id.
func (c *Cluster) Nodes() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*Node, 0, len(c.mu.nodes))
	for _, n := range c.mu.nodes {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Bootstrap returns the CLIENT addresses of the running brokers, by node
// id: seed brokers for a client.
func (c *Cluster) Bootstrap() []string {
	var addrs []string
	for _, n := range c.Nodes() {
		if n.isBroker() && n.Running() {
			addrs = append(addrs, n.clientAddr)
		}
	}
	return addrs
}

// Client returns a franz-go client seeded with Bootstrap, closed when the
// test ends.
func (c *Cluster) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Bootstrap()...)}, opts...)...)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Isolate cuts node id off from every other node: every proxy carrying
// traffic to or from it is cut (its INTERNAL proxy, the voter proxies
// (i -> id) and (id -> i)), and the other brokers' INTERNAL proxies refuse
// the connections its process opens (told apart by /proc on Linux; see
// identify). Open connections are closed at once. Its CLIENT listener stays
// reachable. Isolating several nodes cuts each of them off from all others.
func (c *Cluster) Isolate(id int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.isolated[id] = true
	c.applyIsolationLocked()
}

// Heal undoes Isolate(id). Links to nodes still isolated stay cut.
func (c *Cluster) Heal(id int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.mu.isolated, id)
	c.applyIsolationLocked()
}

// applyIsolationLocked sets every proxy from the isolated set: a link is
// cut exactly when one of its ends is isolated.
func (c *Cluster) applyIsolationLocked() {
	iso := c.mu.isolated
	for id, p := range c.mu.internal {
		if iso[id] {
			p.Cut()
		} else {
			p.Heal()
		}
		for other := range c.mu.nodes {
			switch {
			case other == id:
			case iso[other]:
				p.CutPeer(peerName(other))
			default:
				p.HealPeer(peerName(other))
			}
		}
	}
	for pair, p := range c.mu.voter {
		if iso[pair[0]] || iso[pair[1]] {
			p.Cut()
		} else {
			p.Heal()
		}
	}
}

// WaitFor polls cond until it holds, failing the test with what if timeout
// passes first.
func (c *Cluster) WaitFor(t testing.TB, timeout time.Duration, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitBrokersReady waits until every running broker's /readyz answers 200:
// registered, unfenced and caught up with the metadata log. A cluster whose
// client listeners accept connections may still have brokers the controller
// fences; a test that needs partitions placed over every broker waits here
// before creating its topics.
func (c *Cluster) WaitBrokersReady(t testing.TB, timeout time.Duration) {
	t.Helper()
	hc := &http.Client{Timeout: time.Second}
	for _, n := range c.Nodes() {
		if !n.isBroker() || !n.Running() {
			continue
		}
		url := "http://" + n.httpAddr + "/readyz"
		c.WaitFor(t, timeout, func() bool {
			resp, err := hc.Get(url)
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		}, fmt.Sprintf("node %d ready (%s)", n.ID, url))
	}
}

// cleanup kills every process and closes every proxy; after a failed test
// it prints the tail of every node's log.
func (c *Cluster) cleanup() {
	nodes := c.Nodes()
	for _, n := range nodes {
		n.Kill()
	}
	var proxies []*Proxy
	c.mu.Lock()
	for _, p := range c.mu.internal {
		proxies = append(proxies, p)
	}
	for _, p := range c.mu.voter {
		proxies = append(proxies, p)
	}
	c.mu.Unlock()
	for _, p := range proxies {
		if err := p.Close(); err != nil {
			c.t.Logf("close proxy to %s: %v", p.Target(), err)
		}
	}
	if c.t.Failed() {
		for _, n := range nodes {
			c.t.Logf("--- tail of node %d's log (%s):\n%s", n.ID, n.LogFile, tailFile(n.LogFile, 60))
		}
	}
}

// ClientAddr is the node's CLIENT listener, host:port ("" for a
// controller-only node).
func (n *Node) ClientAddr() string { return n.clientAddr }

// InternalAddr is where other brokers reach the node's INTERNAL listener:
// its proxy ("" for a controller-only node).
func (n *Node) InternalAddr() string {
	n.c.mu.Lock()
	defer n.c.mu.Unlock()
	if p := n.c.mu.internal[n.ID]; p != nil {
		return p.Addr()
	}
	return ""
}

// ControllerAddr is the node's CONTROLLER listener ("" for a broker-only
// node); other nodes reach it through their own proxies.
func (n *Node) ControllerAddr() string { return n.controllerAddr }

// HTTPAddr is the node's http.listener (host:port): /metrics, /healthz and /readyz.
func (n *Node) HTTPAddr() string { return n.httpAddr }

func (n *Node) isBroker() bool     { return slices.Contains(n.Roles, "broker") }
func (n *Node) isController() bool { return slices.Contains(n.Roles, "controller") }

// readyAddr is the listener whose accepting connections means the node is up.
func (n *Node) readyAddr() string {
	if n.isBroker() {
		return n.clientAddr
	}
	return n.controllerAddr
}

// spawn starts a process of the node, its output appended to LogFile.
func (n *Node) spawn(bin string) error {
	f, err := os.OpenFile(n.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close() // the child has its own descriptor once started
	if _, err := fmt.Fprintf(f, "=== %s: starting node %d ===\n", time.Now().Format(time.RFC3339Nano), n.ID); err != nil {
		return err
	}
	cmd := exec.Command(bin, "server", "--config", n.ConfigFile)
	cmd.Stdout, cmd.Stderr = f, f
	dieWithTest(cmd)
	if err := cmd.Start(); err != nil {
		return err
	}
	r := &nodeRun{cmd: cmd, done: make(chan struct{})}
	go func() {
		r.err = cmd.Wait()
		close(r.done)
	}()
	n.mu.Lock()
	n.mu.run = r
	n.mu.Unlock()
	return nil
}

// waitReady waits until the node accepts connections, failing the test if
// the process exits first or takes longer than clusterReadyTimeout.
func (n *Node) waitReady(t testing.TB) {
	t.Helper()
	r := n.run()
	addr := n.readyAddr()
	deadline := time.Now().Add(clusterReadyTimeout)
	for {
		select {
		case <-r.done:
			t.Fatalf("node %d exited during start-up: %v\n%s", n.ID, r.err, tailFile(n.LogFile, 60))
		default:
		}
		if conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			conn.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d did not listen on %s within %v\n%s", n.ID, addr, clusterReadyTimeout, tailFile(n.LogFile, 60))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (n *Node) run() *nodeRun {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.mu.run
}

// Running reports whether the node's process is alive (a paused one is).
func (n *Node) Running() bool {
	r := n.run()
	if r == nil {
		return false
	}
	select {
	case <-r.done:
		return false
	default:
		return true
	}
}

// Start starts the node again with the same config and data, after Kill or
// Stop, and waits until it accepts connections. It fails the test if the
// node is running.
func (n *Node) Start() {
	n.c.t.Helper()
	if n.Running() {
		n.c.t.Fatalf("Start: node %d is running", n.ID)
	}
	if err := n.spawn(Binary(n.c.t)); err != nil {
		n.c.t.Fatalf("start node %d: %v", n.ID, err)
	}
	n.waitReady(n.c.t)
}

// Kill sends SIGKILL and waits for the process to die (a crash: nothing is
// flushed). It does nothing if the node is not running.
func (n *Node) Kill() {
	r := n.run()
	if r == nil {
		return
	}
	select {
	case <-r.done:
		return
	default:
	}
	if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		n.c.t.Logf("kill node %d: %v", n.ID, err)
	}
	<-r.done
}

// Stop sends SIGTERM (a clean shutdown) and waits for the process to exit,
// returning its exit error: nil after a clean shutdown. A process that does
// not exit within a minute is killed and reported as an error. Stop of a
// node that is not running returns its last exit error.
func (n *Node) Stop() error { return n.StopWithin(time.Minute) }

// StopWithin is Stop with d in place of the minute.
func (n *Node) StopWithin(d time.Duration) error {
	r := n.run()
	if r == nil {
		return fmt.Errorf("node %d was never started", n.ID)
	}
	select {
	case <-r.done:
		return r.err
	default:
	}
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-r.done:
		return r.err
	case <-time.After(d):
		n.Kill()
		return fmt.Errorf("node %d did not stop within %v of SIGTERM; killed", n.ID, d)
	}
}

// WaitExit waits up to d for the process to exit on its own and returns its
// exit error; exited is false if it still runs then (it is left running).
func (n *Node) WaitExit(d time.Duration) (exited bool, err error) {
	r := n.run()
	if r == nil {
		return true, fmt.Errorf("node %d was never started", n.ID)
	}
	select {
	case <-r.done:
		return true, r.err
	case <-time.After(d):
		return false, nil
	}
}

// Pause stops the process with SIGSTOP: it keeps its sockets but answers
// nothing (a long GC pause, a hung machine) until Resume.
//
// It returns once the process is stopped (every thread, as /proc shows it): kill(2) returns
// before the target's threads have taken the signal, and on a busy machine a "paused" node
// could otherwise still answer a request the test sends right after.
func (n *Node) Pause() {
	n.signal(syscall.SIGSTOP)
	pid := n.pid()
	if pid == 0 {
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for !processStopped(pid) {
		if time.Now().After(deadline) {
			n.c.t.Fatalf("node %d not stopped 10s after SIGSTOP", n.ID)
		}
		time.Sleep(time.Millisecond)
	}
}

// processStopped reports whether every thread of pid is stopped (state T in
// /proc/<pid>/task/*/stat). Where /proc is missing it reports true.
func processStopped(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return true
	}
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		if err != nil {
			continue // the thread exited
		}
		// The state follows the parenthesised command name: "pid (comm) S ...".
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 || i+2 >= len(b) || (b[i+2] != 'T' && b[i+2] != 't') {
			return false
		}
	}
	return true
}

// Resume continues a paused process with SIGCONT.
func (n *Node) Resume() { n.signal(syscall.SIGCONT) }

func (n *Node) signal(sig syscall.Signal) {
	r := n.run()
	if r == nil {
		n.c.t.Fatalf("node %d was never started", n.ID)
	}
	if err := r.cmd.Process.Signal(sig); err != nil {
		n.c.t.Fatalf("signal node %d: %v", n.ID, err)
	}
}

// Pid is the process id of the node's running process (a paused one is
// running), or 0 if it is not running.
func (n *Node) Pid() int { return n.pid() }

// pid is the process id of the running process, or 0.
func (n *Node) pid() int {
	r := n.run()
	if r == nil || !n.Running() {
		return 0
	}
	return r.cmd.Process.Pid
}

// peerName is how the INTERNAL proxies name a node's connections.
func peerName(id int32) string { return "node-" + strconv.Itoa(int(id)) }

// identify names the node whose process opened the proxied connection conn
// ("" if none or unknown), so Isolate can refuse an isolated node's own
// connections to other brokers. It finds the dialling socket in
// /proc/net/tcp (Linux) by its ports and looks for its inode among the open
// files of each node's process. Elsewhere it names nobody, and an isolated
// node can still fetch from the others.
func (c *Cluster) identify(conn net.Conn) string {
	remote, ok1 := conn.RemoteAddr().(*net.TCPAddr)
	local, ok2 := conn.LocalAddr().(*net.TCPAddr)
	if !ok1 || !ok2 {
		return ""
	}
	inode := socketInode(remote.Port, local.Port)
	if inode == "" {
		return ""
	}
	want := "socket:[" + inode + "]"
	for _, n := range c.Nodes() {
		if pid := n.pid(); pid != 0 && holdsFile(pid, want) {
			return peerName(n.ID)
		}
	}
	return ""
}

// holdsFile reports whether process pid has an open file whose
// /proc/PID/fd link reads target.
func holdsFile(pid int, target string) bool {
	fdDir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	ents, err := os.ReadDir(fdDir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join(fdDir, e.Name())); err == nil && l == target {
			return true
		}
	}
	return false
}

// socketInode returns the inode of the IPv4 TCP socket with local port
// lport connected to remote port rport, from /proc/net/tcp ("" if none).
// Its lines are "sl local rem st tx:rx tr:when retrnsmt uid timeout inode
// ...", addresses as hex IP:PORT.
func socketInode(lport, rport int) string {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 10 {
			continue
		}
		if hexPort(fs[1]) == lport && hexPort(fs[2]) == rport {
			return fs[9]
		}
	}
	return ""
}

// hexPort is the port of a /proc/net/tcp address such as "0100007F:1F90",
// or -1.
func hexPort(a string) int {
	_, p, ok := strings.Cut(a, ":")
	if !ok {
		return -1
	}
	v, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return -1
	}
	return int(v)
}

// holdPorts returns n distinct loopback ports, held (bound) until release
// is called, so that nothing else binding port 0 meanwhile, such as a
// Proxy, can get one of them.
func holdPorts(t testing.TB, n int) (ports []int, release func()) {
	t.Helper()
	var held []net.Listener
	release = func() {
		for _, l := range held {
			l.Close()
		}
		held = nil
	}
	for range n {
		l, err := lowport.Listen()
		if err != nil {
			release()
			t.Fatal(err)
		}
		held = append(held, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, release
}

// tailFile returns the last n lines of the file at path.
func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
