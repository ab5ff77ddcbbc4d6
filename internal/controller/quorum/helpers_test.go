package quorum

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gregor-project/gregor/internal/config"
	"github.com/gregor-project/gregor/internal/controller/state"
	"github.com/gregor-project/gregor/internal/lowport"
)

const testCluster = "quorum-test"

// cluster is n in-process controllers over loopback TCP.
type cluster struct {
	t      testing.TB
	dir    string
	voters []config.Voter
	nodes  []*Node // nil while stopped
	mod    func(*Config)

	mu      sync.Mutex
	commits map[int32][]Committed // OnCommit calls per node
}

func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() && os.Getenv("QUORUM_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// newCluster reserves n loopback ports and starts a controller on each.
func newCluster(t testing.TB, n int, mod func(*Config)) *cluster {
	c := &cluster{t: t, dir: t.TempDir(), mod: mod, commits: map[int32][]Committed{}}
	lns := make([]net.Listener, n)
	for i := range n {
		ln, err := lowport.Listen()
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
		c.voters = append(c.voters, config.Voter{ID: int32(i), Host: "127.0.0.1", Port: ln.Addr().(*net.TCPAddr).Port})
	}
	c.nodes = make([]*Node, n)
	for i := range n {
		c.start(i, lns[i])
	}
	t.Cleanup(c.stopAll)
	return c
}

func (c *cluster) config(i int, ln net.Listener) Config {
	cfg := Config{
		NodeID: int32(i), Voters: c.voters, ClusterID: testCluster,
		Dir:          filepath.Join(c.dir, fmt.Sprintf("node%d", i)),
		Listener:     ln,
		TickInterval: 10 * time.Millisecond, ElectionTicks: 10, HeartbeatTicks: 1,
		State:  state.Config{SessionTimeoutMs: 9000},
		Logger: testLogger(c.t),
	}
	id := int32(i)
	cfg.OnCommit = func(cm Committed) {
		c.mu.Lock()
		c.commits[id] = append(c.commits[id], cm)
		c.mu.Unlock()
	}
	if c.mod != nil {
		c.mod(&cfg)
	}
	return cfg
}

// start starts node i (ln nil: listen on its voter address again).
func (c *cluster) start(i int, ln net.Listener) {
	c.t.Helper()
	var err error
	if ln == nil {
		// The old listener's port may linger briefly; retry.
		deadline := time.Now().Add(10 * time.Second)
		for {
			ln, err = net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", c.voters[i].Port))
			if err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			c.t.Fatal(err)
		}
	}
	c.mu.Lock()
	c.commits[int32(i)] = nil
	c.mu.Unlock()
	n, err := Start(c.config(i, ln))
	if err != nil {
		ln.Close()
		c.t.Fatal(err)
	}
	c.nodes[i] = n
}

func (c *cluster) stop(i int) {
	c.t.Helper()
	if c.nodes[i] == nil {
		return
	}
	if err := c.nodes[i].Close(); err != nil {
		c.t.Errorf("close node %d: %v", i, err)
	}
	c.nodes[i] = nil
}

func (c *cluster) stopAll() {
	for i := range c.nodes {
		c.stop(i)
	}
}

// waitActive waits for exactly one running node to be the active controller and returns it.
func (c *cluster) waitActive(timeout time.Duration) int {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		active := -1
		count := 0
		for i, n := range c.nodes {
			if n != nil && n.Status().Active {
				active = i
				count++
			}
		}
		if count == 1 {
			return active
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.t.Fatalf("no single active controller within %v", timeout)
	return -1
}

// waitApplied waits until every running node has applied at least offset.
func (c *cluster) waitApplied(offset int64, timeout time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		behind := -1
		for i, n := range c.nodes {
			if n != nil && n.Status().Applied < offset {
				behind = i
			}
		}
		if behind < 0 {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("node %d applied %d, want %d", behind, c.nodes[behind].Status().Applied, offset)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// image returns node i's image snapshot and offset.
func (c *cluster) image(i int) ([]byte, int64) {
	c.t.Helper()
	var b []byte
	var off int64
	if err := c.nodes[i].Read(context.Background(), func(ctrl *state.Controller) {
		b, off = ctrl.Snapshot(), ctrl.Image().Offset()
	}); err != nil {
		c.t.Fatal(err)
	}
	return b, off
}

// sameImages checks that every running node holds the same image.
func (c *cluster) sameImages() []byte {
	c.t.Helper()
	var want []byte
	wantNode := -1
	for i, n := range c.nodes {
		if n == nil {
			continue
		}
		b, _ := c.image(i)
		if want == nil {
			want, wantNode = b, i
		} else if !bytes.Equal(b, want) {
			c.t.Fatalf("node %d's image differs from node %d's", i, wantNode)
		}
	}
	return want
}

func ctx(t testing.TB) context.Context {
	cx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return cx
}

// registerBroker registers and unfences a broker through the quorum.
func registerBroker(t testing.TB, n *Node, id int32) int64 {
	t.Helper()
	resp, err := Do(ctx(t), n, func(c *state.Controller, now int64) ([]state.Record, state.RegisterBrokerResponse) {
		return c.RegisterBroker(now, state.RegisterBrokerRequest{NodeID: id, IncarnationID: state.UUID{byte(id), 7}, ClusterID: testCluster})
	})
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("register %d: %v", id, err)
	}
	hb, err := Do(ctx(t), n, func(c *state.Controller, now int64) ([]state.Record, state.HeartbeatResponse) {
		return c.Heartbeat(now, state.HeartbeatRequest{NodeID: id, BrokerEpoch: resp.BrokerEpoch, CurrentMetadataOffset: c.Image().Offset()})
	})
	if err == nil {
		err = hb.Err
	}
	if err != nil || hb.IsFenced {
		t.Fatalf("heartbeat %d: %v fenced=%v", id, err, hb.IsFenced)
	}
	return resp.BrokerEpoch
}

func createTopic(cx context.Context, n *Node, name string, partitions int32, rf int16) (state.CreateTopicResult, error) {
	res, err := Do(cx, n, func(c *state.Controller, _ int64) ([]state.Record, []state.CreateTopicResult) {
		return c.CreateTopics(state.CreateTopicsRequest{Topics: []state.CreatableTopic{{Name: name, NumPartitions: partitions, ReplicationFactor: rf}}})
	})
	if err != nil {
		return state.CreateTopicResult{}, err
	}
	return res[0], res[0].Err
}
