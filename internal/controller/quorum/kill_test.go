package quorum

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gregor-project/gregor/internal/config"
	"github.com/gregor-project/gregor/internal/controller/state"
	"github.com/gregor-project/gregor/internal/lowport"
)

// TestKill9 runs a one-controller quorum in a child process that creates topics as fast as
// it can and prints each acknowledged one, kills it with SIGKILL mid-stream several times,
// and checks after each restart that every acknowledged topic survived.
func TestKill9(t *testing.T) {
	if os.Getenv("QUORUM_KILL_CHILD") != "" {
		t.Skip("child mode runs through TestKill9Child")
	}
	dir := t.TempDir()
	acked := map[string]bool{}
	for round := range 3 {
		port := freePort(t)
		cmd := exec.Command(os.Args[0], "-test.run=^TestKill9Child$", "-test.count=1")
		cmd.Env = append(os.Environ(), "QUORUM_KILL_CHILD="+dir, "QUORUM_KILL_PORT="+strconv.Itoa(port), "QUORUM_KILL_ROUND="+strconv.Itoa(round))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		n := 0
		for sc.Scan() && n < 40+round*17 {
			if name, ok := strings.CutPrefix(sc.Text(), "ACK "); ok {
				acked[name] = true
				n++
			}
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		// Whatever the child acknowledged before dying counts too.
		for sc.Scan() {
			if name, ok := strings.CutPrefix(sc.Text(), "ACK "); ok {
				acked[name] = true
			}
		}
		_ = cmd.Wait()
		if n == 0 {
			t.Fatalf("round %d: the child acknowledged nothing", round)
		}
	}
	// Reopen in-process and check.
	port := freePort(t)
	node, err := Start(killConfig(dir, port))
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	waitActiveNode(t, node)
	var topics map[string]bool
	if err := node.Read(context.Background(), func(c *state.Controller) {
		topics = map[string]bool{}
		for _, n := range c.Image().TopicNames() {
			topics[n] = true
		}
	}); err != nil {
		t.Fatal(err)
	}
	for name := range acked {
		if !topics[name] {
			t.Fatalf("acknowledged topic %s lost (have %d topics, %d acknowledged)", name, len(topics), len(acked))
		}
	}
	t.Logf("%d acknowledged topics over 3 kill -9 rounds, all present (%d in the image)", len(acked), len(topics))
}

// TestKill9Child is the child process of TestKill9.
func TestKill9Child(t *testing.T) {
	dir := os.Getenv("QUORUM_KILL_CHILD")
	if dir == "" {
		t.Skip("only runs as TestKill9's child")
	}
	port, _ := strconv.Atoi(os.Getenv("QUORUM_KILL_PORT"))
	round := os.Getenv("QUORUM_KILL_ROUND")
	node, err := Start(killConfig(dir, port))
	if err != nil {
		t.Fatal(err)
	}
	waitActiveNode(t, node)
	if round == "0" {
		registerBroker(t, node, 0)
	}
	for i := 0; ; i++ {
		name := fmt.Sprintf("r%s-t%d", round, i)
		if _, err := createTopic(context.Background(), node, name, 1, 1); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("ACK %s\n", name)
	}
}

func killConfig(dir string, port int) Config {
	return Config{
		NodeID: 0, Voters: []config.Voter{{ID: 0, Host: "127.0.0.1", Port: port}}, ClusterID: testCluster,
		Dir: dir, TickInterval: 10 * time.Millisecond, ElectionTicks: 5,
		SnapshotEntries: 25, CatchUpEntries: 5, // snapshots and WAL rewrites happen while being killed
		Logger: testLogger(nil),
	}
}

func waitActiveNode(t *testing.T, n *Node) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !n.Status().Active {
		if time.Now().After(deadline) {
			t.Fatal("single controller did not become active")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := lowport.Listen() // the child binds it after this returns
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
