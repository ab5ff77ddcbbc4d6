package testutil

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/gregor-project/gregor/internal/config"
)

// loadNodeConfig loads a node's properties file as `gregor server --config`
// does.
func loadNodeConfig(t *testing.T, n *Node) *config.Broker {
	t.Helper()
	cfg, err := config.Load(n.ConfigFile, nil)
	if err != nil {
		t.Fatalf("node %d: %v\n%s", n.ID, err, readFile(t, n.ConfigFile))
	}
	return cfg
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func listenerAddr(ls []config.Listener, name string) string {
	for _, l := range ls {
		if l.Name == name {
			return l.Addr()
		}
	}
	return ""
}

// TestClusterConfigsParse checks that the properties files the harness
// writes load with the broker's config and say what the layout means: the
// listeners, the advertised INTERNAL proxy, each voter reached through the
// proxy of its pair, and the shared cluster id.
func TestClusterConfigsParse(t *testing.T) {
	c := layoutCluster(t, ClusterOptions{
		Nodes:    3,
		Sets:     []string{"num.partitions=4", "replica.lag.time.max.ms=5000"},
		NodeSets: map[int32][]string{2: {"broker.rack=r2"}},
	})
	c.layoutBroker(4)
	for _, n := range c.Nodes() {
		cfg := loadNodeConfig(t, n)
		if cfg.ClusterID != c.ClusterID() {
			t.Errorf("node %d: cluster.id %q, want %q", n.ID, cfg.ClusterID, c.ClusterID())
		}
		if cfg.NodeID != n.ID {
			t.Errorf("node.id = %d, want %d", cfg.NodeID, n.ID)
		}
		if !slices.Equal(cfg.ProcessRoles, n.Roles) {
			t.Errorf("node %d: process.roles = %v, want %v", n.ID, cfg.ProcessRoles, n.Roles)
		}
		if !slices.Equal(cfg.LogDirs, []string{n.Dir}) {
			t.Errorf("node %d: log.dirs = %v, want %s", n.ID, cfg.LogDirs, n.Dir)
		}
		if got := listenerAddr(cfg.Listeners, "CLIENT"); got != n.ClientAddr() {
			t.Errorf("node %d: CLIENT listener %q, want %q", n.ID, got, n.ClientAddr())
		}
		if got := listenerAddr(cfg.AdvertisedListeners, "CLIENT"); got != n.ClientAddr() {
			t.Errorf("node %d: advertised CLIENT %q, want %q", n.ID, got, n.ClientAddr())
		}
		if got := listenerAddr(cfg.Listeners, "INTERNAL"); got != n.internalAddr {
			t.Errorf("node %d: INTERNAL listener %q, want %q", n.ID, got, n.internalAddr)
		}
		if got := listenerAddr(cfg.AdvertisedListeners, "INTERNAL"); got != n.InternalAddr() || got == n.internalAddr {
			t.Errorf("node %d: advertised INTERNAL %q, want its proxy %q", n.ID, got, n.InternalAddr())
		}
		if got := listenerAddr(cfg.Listeners, "CONTROLLER"); got != n.ControllerAddr() {
			t.Errorf("node %d: CONTROLLER listener %q, want %q", n.ID, got, n.ControllerAddr())
		}
		if cfg.InterBrokerListenerName != "INTERNAL" || !slices.Equal(cfg.ControllerListenerNames, []string{"CONTROLLER"}) {
			t.Errorf("node %d: inter.broker.listener.name %q, controller.listener.names %v", n.ID, cfg.InterBrokerListenerName, cfg.ControllerListenerNames)
		}
		for _, l := range cfg.Listeners {
			if l.SecurityProtocol != "PLAINTEXT" {
				t.Errorf("node %d: listener %s has protocol %q", n.ID, l.Name, l.SecurityProtocol)
			}
		}
		voters, err := config.ParseVoters(cfg.ControllerQuorumVoters)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int32
		for _, v := range voters {
			ids = append(ids, v.ID)
			addr := net.JoinHostPort(v.Host, strconv.Itoa(v.Port))
			to := c.Node(v.ID)
			if v.ID == n.ID {
				if addr != n.ControllerAddr() {
					t.Errorf("node %d reaches itself at %s, want %s", n.ID, addr, n.ControllerAddr())
				}
				continue
			}
			p := c.mu.voter[[2]int32{n.ID, v.ID}]
			if p == nil || addr != p.Addr() || p.Target() != to.ControllerAddr() {
				t.Errorf("node %d reaches voter %d at %s, want the pair's proxy to %s", n.ID, v.ID, addr, to.ControllerAddr())
			}
		}
		if !slices.Equal(ids, []int32{1, 2, 3}) {
			t.Errorf("node %d: voters %v, want 1,2,3", n.ID, ids)
		}
		if cfg.BrokerSessionTimeoutMs != 2000 || cfg.BrokerHeartbeatIntervalMs != 200 {
			t.Errorf("node %d: session %d ms, heartbeat %d ms", n.ID, cfg.BrokerSessionTimeoutMs, cfg.BrokerHeartbeatIntervalMs)
		}
		if cfg.ReplicaLagTimeMaxMs != 5000 || cfg.NumPartitions != 4 {
			t.Errorf("node %d: Sets not applied: replica.lag.time.max.ms %d, num.partitions %d", n.ID, cfg.ReplicaLagTimeMaxMs, cfg.NumPartitions)
		}
		if wantRack := map[int32]string{2: "r2"}[n.ID]; cfg.BrokerRack != wantRack {
			t.Errorf("node %d: broker.rack %q, want %q", n.ID, cfg.BrokerRack, wantRack)
		}
		if cfg.OffsetsTopicReplicationFactor != 3 || cfg.TransactionStateLogMinIsr != 2 {
			t.Errorf("node %d: offsets RF %d, transaction min ISR %d", n.ID, cfg.OffsetsTopicReplicationFactor, cfg.TransactionStateLogMinIsr)
		}
	}
	// The added broker has no controller listener but names it.
	if n4 := c.Node(4); n4.ControllerAddr() != "" || !slices.Equal(n4.Roles, []string{"broker"}) {
		t.Errorf("node 4: roles %v, controller %q", n4.Roles, n4.ControllerAddr())
	}
}

// fakeNodes listens on every node's INTERNAL and CONTROLLER addresses with
// echo servers, standing in for the processes.
func fakeNodes(t *testing.T, c *Cluster) {
	t.Helper()
	for _, n := range c.Nodes() {
		if n.internalAddr != "" {
			startEchoOn(t, n.internalAddr)
		}
		if n.controllerAddr != "" {
			startEchoOn(t, n.controllerAddr)
		}
	}
}

// linkUp reports whether a connection through p reaches its target.
func linkUp(t *testing.T, p *Proxy) bool {
	t.Helper()
	c, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("link through %s neither answered nor closed", p.Addr())
	}
	return err == nil && line == "ping\n"
}

// TestClusterIsolateAndHeal checks which links Isolate cuts: exactly those
// with an isolated end, also for a broker added while a node is isolated.
func TestClusterIsolateAndHeal(t *testing.T) {
	c := layoutCluster(t, ClusterOptions{Nodes: 3})
	fakeNodes(t, c)
	check := func(step string, isolated ...int32) {
		t.Helper()
		for pair, p := range c.mu.voter {
			want := !slices.Contains(isolated, pair[0]) && !slices.Contains(isolated, pair[1])
			if got := linkUp(t, p); got != want {
				t.Errorf("%s: voter link %d->%d up = %v, want %v", step, pair[0], pair[1], got, want)
			}
		}
		for id, p := range c.mu.internal {
			if got, want := linkUp(t, p), !slices.Contains(isolated, id); got != want {
				t.Errorf("%s: INTERNAL proxy of node %d up = %v, want %v", step, id, got, want)
			}
		}
	}
	if len(c.mu.voter) != 6 || len(c.mu.internal) != 3 {
		t.Fatalf("%d voter proxies, %d internal, want 6 and 3", len(c.mu.voter), len(c.mu.internal))
	}
	check("start")
	c.Isolate(2)
	check("isolate 2", 2)
	c.Isolate(3)
	check("isolate 2 and 3", 2, 3)
	c.Heal(2)
	check("heal 2", 3)

	// A broker added now starts with its link to node 3 cut.
	n4 := c.layoutBroker(4)
	startEchoOn(t, n4.internalAddr)
	if len(c.mu.voter) != 9 {
		t.Fatalf("%d voter proxies after adding a broker, want 9", len(c.mu.voter))
	}
	check("add broker 4", 3)
	c.Isolate(4)
	check("isolate 4", 3, 4)
	c.Heal(3)
	c.Heal(4)
	check("heal all")
}

// TestClusterHelperDialer is not a test: run as a child process with
// GREGOR_TESTUTIL_DIAL set, it dials that address and copies stdin to the
// connection and the connection to stdout, standing in for a node's process.
func TestClusterHelperDialer(t *testing.T) {
	addr := os.Getenv("GREGOR_TESTUTIL_DIAL")
	if addr == "" {
		return
	}
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		os.Exit(2)
	}
	go func() {
		if _, err := io.Copy(conn, os.Stdin); err != nil {
			os.Exit(3)
		}
	}()
	if _, err := io.Copy(os.Stdout, conn); err != nil {
		os.Exit(4)
	}
	os.Exit(0)
}

// dialerRun starts a helper process as node n's process, connected to addr.
// It returns the process's stdin and stdout.
func dialerRun(t *testing.T, n *Node, addr string) (*nodeRun, io.Writer, *bufio.Reader) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestClusterHelperDialer$")
	cmd.Env = append(os.Environ(), "GREGOR_TESTUTIL_DIAL="+addr)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = outW
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	outW.Close()
	r := &nodeRun{cmd: cmd, done: make(chan struct{})}
	go func() {
		r.err = cmd.Wait()
		close(r.done)
	}()
	t.Cleanup(func() {
		if err := cmd.Process.Kill(); err != nil {
			t.Logf("kill helper: %v", err)
		}
		<-r.done
		outR.Close()
	})
	n.mu.Lock()
	n.mu.run = r
	n.mu.Unlock()
	return r, stdin, bufio.NewReader(outR)
}

// TestClusterIsolateRefusesTheNodesOwnConnections checks that isolating a
// node also cuts the connections its process opened to other brokers'
// INTERNAL proxies (found through /proc), and only those.
func TestClusterIsolateRefusesTheNodesOwnConnections(t *testing.T) {
	if _, err := os.Stat("/proc/net/tcp"); err != nil {
		t.Skip("needs Linux /proc")
	}
	c := layoutCluster(t, ClusterOptions{Nodes: 3})
	fakeNodes(t, c)
	n1, n2 := c.Node(1), c.Node(2)
	run, in, out := dialerRun(t, n1, n2.InternalAddr())
	echo := func(s string) error {
		if _, err := io.WriteString(in, s+"\n"); err != nil {
			return err
		}
		line, err := out.ReadString('\n')
		if err == nil && line != s+"\n" {
			t.Fatalf("echo %q, got %q", s, line)
		}
		return err
	}
	if err := echo("hello"); err != nil {
		t.Fatalf("node 1 through node 2's proxy: %v", err)
	}
	p2 := c.mu.internal[2]
	p2.mu.Lock()
	var peers []string
	for pair := range p2.mu.pairs {
		peers = append(peers, pair.peer)
	}
	p2.mu.Unlock()
	if !slices.Equal(peers, []string{"node-1"}) {
		t.Fatalf("node 2's proxy names its connections %q, want node-1", peers)
	}

	c.Isolate(1)
	select {
	case <-run.done:
	case <-time.After(10 * time.Second):
		t.Fatal("node 1's connection to node 2 still open after Isolate(1)")
	}
	// Others still reach node 2; nobody reaches node 1.
	if !linkUp(t, p2) {
		t.Error("node 2's INTERNAL proxy refuses a connection that is not node 1's")
	}
	if linkUp(t, c.mu.internal[1]) {
		t.Error("isolated node 1's INTERNAL proxy still forwards")
	}

	// While isolated, node 1 cannot connect again; after Heal it can.
	run, in, out = dialerRun(t, n1, n2.InternalAddr())
	select {
	case <-run.done:
	case <-time.After(10 * time.Second):
		t.Fatal("isolated node 1 connected to node 2's proxy")
	}
	c.Heal(1)
	_, in, out = dialerRun(t, n1, n2.InternalAddr())
	if err := echo("again"); err != nil {
		t.Fatalf("node 1 after Heal: %v", err)
	}
}

// A one-node cluster of a real process: Stop is a clean exit, Kill a crash,
// Start brings the node back on the same config and data dir, and a paused
// node answers nothing until resumed.
func TestClusterNodeLifecycle(t *testing.T) {
	c := StartCluster(t, ClusterOptions{Nodes: 1})
	n := c.Node(1)
	if !n.Running() || !slices.Equal(c.Bootstrap(), []string{n.ClientAddr()}) {
		t.Fatalf("running %v, bootstrap %v", n.Running(), c.Bootstrap())
	}
	// answers reports whether the node answers a Metadata request in time,
	// naming itself.
	answers := func(timeout time.Duration) bool {
		cl := c.Client(t)
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		md, err := kadm.NewClient(cl).BrokerMetadata(ctx)
		return err == nil && len(md.Brokers) == 1 && md.Brokers[0].NodeID == 1
	}
	if !answers(30 * time.Second) {
		t.Fatal("the started node does not answer")
	}
	meta := filepath.Join(n.Dir, "meta.properties")
	if _, err := os.Stat(meta); err != nil {
		t.Fatalf("log dir not formatted: %v", err)
	}

	if err := n.Stop(); err != nil {
		t.Fatalf("Stop: %v\n%s", err, tailFile(n.LogFile, 20))
	}
	if n.Running() || len(c.Bootstrap()) != 0 {
		t.Fatalf("after Stop: running %v, bootstrap %v", n.Running(), c.Bootstrap())
	}
	n.Start()
	if !answers(30 * time.Second) {
		t.Fatal("the node restarted after Stop does not answer")
	}
	n.Kill()
	if n.Running() {
		t.Fatal("running after Kill")
	}
	if err := n.Stop(); err == nil {
		t.Error("Stop after Kill reports a clean exit")
	}
	n.Start()
	if !answers(30 * time.Second) {
		t.Fatal("the node restarted after Kill does not answer")
	}

	n.Pause()
	if answers(time.Second) {
		t.Fatal("a paused node answered")
	}
	if !n.Running() {
		t.Error("a paused node is not running")
	}
	n.Resume()
	if !answers(30 * time.Second) {
		t.Fatal("the resumed node does not answer")
	}
	if got := strings.Count(readFile(t, n.LogFile), "=== "); got != 3 {
		t.Errorf("log file %s has %d start markers, want 3", n.LogFile, got)
	}
}
