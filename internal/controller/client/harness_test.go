package client

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/config"
	"github.com/gregor-project/gregor/internal/controller/quorum"
	"github.com/gregor-project/gregor/internal/controller/rpc"
	"github.com/gregor-project/gregor/internal/controller/state"
	"github.com/gregor-project/gregor/internal/server"
)

const testCluster = "client-test"

// controller is one in-process controller as the broker binary runs it: one listener split
// by a Mux into raft peer traffic (the quorum) and the Kafka protocol (server + rpc).
type controller struct {
	node *quorum.Node
	mux  *server.Mux
	srv  *server.Server
}

func (c *controller) close(t testing.TB) {
	c.srv.Close()
	if err := c.node.Close(); err != nil {
		t.Errorf("close node: %v", err)
	}
	c.mux.Close()
}

type cluster struct {
	t      testing.TB
	voters []config.Voter
	ctrls  []*controller // nil once closed
}

func testLogger() *slog.Logger {
	if os.Getenv("CONTROLLER_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func newCluster(t testing.TB, n int, mod func(*quorum.Config)) *cluster {
	c := &cluster{t: t}
	dir := t.TempDir()
	lns := make([]net.Listener, n)
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
		c.voters = append(c.voters, config.Voter{ID: int32(i), Host: "127.0.0.1", Port: ln.Addr().(*net.TCPAddr).Port})
	}
	log := testLogger()
	for i := range n {
		mux := server.NewMux(lns[i], quorum.HelloMagic, log)
		cfg := quorum.Config{
			NodeID: int32(i), Voters: c.voters, ClusterID: testCluster,
			Dir: filepath.Join(dir, fmt.Sprintf("node%d", i)), Listener: mux.Matched(),
			TickInterval: 10 * time.Millisecond, ElectionTicks: 10, HeartbeatTicks: 1,
			State: state.Config{SessionTimeoutMs: 30_000}, Logger: log,
		}
		if mod != nil {
			mod(&cfg)
		}
		node, err := quorum.Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		srv := server.New("CONTROLLER", rpc.New(rpc.Config{Node: node, Logger: log}), log)
		srv.Use(mux.Other())
		go srv.Serve(context.Background())
		c.ctrls = append(c.ctrls, &controller{node: node, mux: mux, srv: srv})
	}
	t.Cleanup(func() {
		for i := range c.ctrls {
			c.stop(i)
		}
	})
	return c
}

func (c *cluster) stop(i int) {
	if c.ctrls[i] != nil {
		c.ctrls[i].close(c.t)
		c.ctrls[i] = nil
	}
}

// waitActive waits for one running controller to be active and returns its index.
func (c *cluster) waitActive() int {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for i, ct := range c.ctrls {
			if ct != nil && ct.node.Status().Active {
				return i
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.t.Fatal("no active controller")
	return -1
}

// waitApplied waits until every running controller applied offset.
func (c *cluster) waitApplied(offset int64) {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, ct := range c.ctrls {
		for ct != nil && ct.node.Status().Applied < offset {
			if time.Now().After(deadline) {
				c.t.Fatalf("controller %d applied %d, want %d", ct.node.Status().NodeID, ct.node.Status().Applied, offset)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

func (c *cluster) client(voters ...config.Voter) *Client {
	if len(voters) == 0 {
		voters = c.voters
	}
	cl := New(Config{Voters: voters, NodeID: 100, ClusterID: testCluster, Logger: testLogger()})
	c.t.Cleanup(func() { cl.Close() })
	return cl
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// register registers broker id (with cluster id cluster) and returns the response.
func register(t testing.TB, cl *Client, id int32, cluster string) *kmsg.BrokerRegistrationResponse {
	t.Helper()
	req := kmsg.NewPtrBrokerRegistrationRequest()
	req.BrokerID, req.ClusterID, req.IncarnationID = id, cluster, [16]byte{byte(id), 1}
	req.Listeners = []kmsg.BrokerRegistrationRequestListener{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: uint16(9000 + id)}}
	r, err := cl.Request(testCtx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	return r.(*kmsg.BrokerRegistrationResponse)
}

// registerUnfenced registers broker id and heartbeats until it is unfenced.
func registerUnfenced(t testing.TB, cl *Client, id int32) {
	t.Helper()
	reg := register(t, cl, id, testCluster)
	if err := kerr.ErrorForCode(reg.ErrorCode); err != nil {
		t.Fatalf("register %d: %v", id, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		hb := kmsg.NewPtrBrokerHeartbeatRequest()
		hb.BrokerID, hb.BrokerEpoch, hb.CurrentMetadataOffset = id, reg.BrokerEpoch, 1<<40
		r, err := cl.Request(testCtx(t), hb)
		if err != nil {
			t.Fatal(err)
		}
		resp := r.(*kmsg.BrokerHeartbeatResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			t.Fatalf("heartbeat %d: %v", id, err)
		}
		if !resp.IsFenced && resp.IsCaughtUp {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker %d still fenced", id)
		}
	}
}

func createTopic(t testing.TB, cl *Client, name string, partitions int32, rf int16) *kmsg.CreateTopicsResponseTopic {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, rf
	req.Topics = append(req.Topics, rt)
	r, err := cl.Request(testCtx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	resp := r.(*kmsg.CreateTopicsResponse)
	return &resp.Topics[0]
}
