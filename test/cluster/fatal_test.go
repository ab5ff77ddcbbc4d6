package cluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"

	"github.com/gregor-project/gregor/internal/testutil"
)

// stopBound is a generous bound on a SIGTERM'd node's exit when its controller is gone: the
// controlled shutdown gives up after broker.session.timeout.ms (2 s here), and nothing after
// it may wait on the controller. It is not a timing: a shutdown that waits on the controller
// waits for as long as the controller is gone.
const stopBound = 30 * time.Second

// SIGTERM of a broker whose whole controller quorum is paused (SIGSTOP: its sockets stay
// open and answer nothing) exits cleanly within a bound, with a CreateTopics forwarded to
// the paused controller still in flight.
func TestSIGTERMWithControllerPaused(t *testing.T) {
	c := testutil.StartCluster(t, testutil.ClusterOptions{Nodes: 1})
	b := c.AddBroker(2)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	waitSameView(ctx, t, nodeClients(t, c), 30*time.Second, func(v clusterView) error { return wantBrokers(v, []int32{1, 2}) })

	c.Node(1).Pause()
	t.Cleanup(c.Node(1).Resume)
	cl := pinnedClient(t, b.ClientAddr())
	created := make(chan error, 1)
	go func() {
		// Forwarded to the paused controller: it waits for its 60 s timeout, or the broker's
		// shutdown (it may also arrive only after the SIGTERM, and be refused).
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 60_000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "never", 1, 1
		req.Topics = append(req.Topics, rt)
		_, err := req.RequestWith(ctx, cl)
		created <- err
	}()
	start := time.Now()
	if err := b.StopWithin(stopBound); err != nil {
		t.Fatalf("SIGTERM with the controller paused: %v", err)
	}
	t.Logf("broker 2 exited %v after SIGTERM", time.Since(start).Round(time.Millisecond))
	select {
	case err := <-created:
		t.Logf("the CreateTopics in flight ended with: %v", err)
	case <-ctx.Done():
		t.Fatal("the CreateTopics in flight did not end when its broker exited")
	}
}

// A controller that cannot write its metadata log (its raft WAL made immutable: even root's
// writes fail) stops its process with a clear message and a non-zero exit status, instead of
// lingering with a dead controller.
func TestControllerWALFailureExits(t *testing.T) {
	c := testutil.StartCluster(t, testutil.ClusterOptions{Nodes: 1})
	n := c.Node(1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := pinnedClient(t, n.ClientAddr())
	waitSameView(ctx, t, nodeClients(t, c), 30*time.Second, func(v clusterView) error { return wantBrokers(v, []int32{1}) })

	dir := filepath.Join(n.Dir, "__cluster_metadata-0")
	immutable(t, dir)
	// A metadata change needs a WAL write; the controller fails under it.
	if err := createTopic(ctx, cl, "after-failure", 1, 1, nil); err != nil {
		t.Logf("CreateTopics during the failure: %v", err)
	}
	exited, err := n.WaitExit(stopBound)
	if !exited {
		t.Fatalf("the process still runs %v after its controller's WAL became unwritable", stopBound)
	}
	if err == nil {
		t.Fatal("the process exited with status 0 after a controller storage failure")
	}
	log := readFile(t, n.LogFile)
	if !strings.Contains(log, "the controller cannot write its metadata log: this process stops") {
		t.Fatalf("no clear log line for the failure; log tail:\n%s", tail(log, 2000))
	}
	t.Logf("exit: %v; last line: %s", err, lastLine(log))
}

// immutable sets the immutable attribute (chattr +i) on dir and every file in it, so every
// write, rename and create there fails with EPERM, root's too; it is cleared when the test
// ends (the temp dir could not be removed otherwise).
func immutable(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	paths := []string{dir}
	for _, e := range entries {
		paths = append(paths, filepath.Join(dir, e.Name()))
	}
	for _, p := range paths {
		setImmutable(t, p, true)
		t.Cleanup(func() { setImmutable(t, p, false) })
	}
}

// fsImmutableFL is FS_IMMUTABLE_FL of <linux/fs.h> (x/sys/unix does not name it).
const fsImmutableFL = 0x10

func setImmutable(t *testing.T, path string, on bool) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if err != nil {
		t.Fatalf("FS_IOC_GETFLAGS %s: %v", path, err)
	}
	if on {
		flags |= fsImmutableFL
	} else {
		flags &^= fsImmutableFL
	}
	if err := unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, int(flags)); err != nil {
		t.Fatalf("FS_IOC_SETFLAGS %s (needs CAP_LINUX_IMMUTABLE and ext4/xfs/btrfs): %v", path, err)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// SIGTERM of a voter whose two peers are paused (the quorum lost: no controller can
// answer) exits cleanly within a bound too.
func TestSIGTERMWithQuorumLost(t *testing.T) {
	c := testutil.StartCluster(t, testutil.ClusterOptions{Nodes: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	waitSameView(ctx, t, nodeClients(t, c), 30*time.Second, func(v clusterView) error { return wantBrokers(v, []int32{1, 2, 3}) })
	for _, id := range []int32{2, 3} {
		c.Node(id).Pause()
		t.Cleanup(c.Node(id).Resume)
	}
	start := time.Now()
	if err := c.Node(1).StopWithin(stopBound); err != nil {
		t.Fatalf("SIGTERM with the quorum lost: %v", err)
	}
	t.Logf("node 1 exited %v after SIGTERM", time.Since(start).Round(time.Millisecond))
}
