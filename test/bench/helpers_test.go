// Package bench measures a real cluster of `gregor server` processes (started by
// testutil.StartCluster) the way an operator would see it: how long writes stop when a
// leader dies or shuts down, how long a large CreateTopics takes to be served, how fast a
// controller holding 100,000 partitions restarts, and what the metadata of 100,000
// partitions costs a broker. Each test logs its figures (go test -v); docs/benchmarks.md
// quotes them with the commands that reproduce them.
//
// The failover test runs by default with one round of each case and fails if writes do
// not resume. The scale tests need GREGOR_BENCH_SCALE=1 (they create tens of thousands of
// partitions); GREGOR_BENCH_ROUNDS=N repeats the failover cases N times.
package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/config"
	"github.com/gregor-project/gregor/internal/controller/client"
	"github.com/gregor-project/gregor/internal/testutil"
)

// rounds is GREGOR_BENCH_ROUNDS, or def.
func rounds(def int) int {
	if n, err := strconv.Atoi(os.Getenv("GREGOR_BENCH_ROUNDS")); err == nil && n > 0 {
		return n
	}
	return def
}

// needScale skips t unless GREGOR_BENCH_SCALE is set.
func needScale(t *testing.T) {
	t.Helper()
	if os.Getenv("GREGOR_BENCH_SCALE") == "" {
		t.Skip("set GREGOR_BENCH_SCALE=1 to run (creates tens of thousands of partitions)")
	}
}

// nodePID finds the running process of n by its config file on the command line (the
// harness does not export pids).
func nodePID(t *testing.T, n *testutil.Node) int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := bytes.Split(bytes.TrimRight(cmd, "\x00"), []byte{0})
		if len(args) >= 4 && string(args[1]) == "server" && string(args[3]) == n.ConfigFile {
			return pid
		}
	}
	t.Fatalf("no process of node %d (%s)", n.ID, n.ConfigFile)
	return 0
}

// memKB reads VmRSS and RssAnon (kB) of process pid.
func memKB(t *testing.T, pid int) (rss, anon int64) {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			rss = n
		case "RssAnon":
			anon = n
		}
	}
	return rss, anon
}

// logTimes returns the time of the last "=== <time>: starting node" line of the node's
// log file and of the first line after it containing each of msgs (zero if none).
func logTimes(t *testing.T, n *testutil.Node, msgs ...string) (start time.Time, at []time.Time) {
	t.Helper()
	data, err := os.ReadFile(n.LogFile)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	from := 0
	for i, l := range lines {
		if rest, ok := strings.CutPrefix(l, "=== "); ok && strings.Contains(l, ": starting node") {
			ts, _, _ := strings.Cut(rest, ": starting node")
			if st, err := time.Parse(time.RFC3339Nano, ts); err == nil {
				start, from = st, i
			}
		}
	}
	at = make([]time.Time, len(msgs))
	for _, l := range lines[from:] {
		for i, m := range msgs {
			if at[i].IsZero() && strings.Contains(l, `msg="`+m+`"`) {
				if ts, ok := strings.CutPrefix(strings.Fields(l)[0], "time="); ok {
					at[i], _ = time.Parse(time.RFC3339Nano, ts)
				}
			}
		}
	}
	return start, at
}

// createAssigned creates topic with one replica list per partition in one CreateTopics
// sent to the cluster, and fails the test on any error.
func createAssigned(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, assignment [][]int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 60_000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	for p, replicas := range assignment {
		ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		ra.Partition, ra.Replicas = int32(p), replicas
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	for _, r := range resp.Topics {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			msg := ""
			if r.ErrorMessage != nil {
				msg = *r.ErrorMessage
			}
			t.Fatalf("create %s: %v %s", topic, err, msg)
		}
	}
}

// fakeBroker is a broker registration with no process behind it: it registers with the
// controller quorum and heartbeats as caught up, so partitions can be placed on it without
// any real broker opening their logs. That isolates the controller's and the metadata
// image's cost of many partitions from the cost of hosting them (three descriptors per
// partition log, which this machine's limit of 20,000 open files would not allow for
// 100,000).
type fakeBroker struct {
	id     int32
	ctrl   *client.Client
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     struct {
		sync.Mutex
		err error
	}
}

// startFakeBroker registers broker id with the quorum of c (its voters' CONTROLLER
// listeners) and heartbeats every 200 ms until the test ends. It returns once the
// controller has unfenced it.
func startFakeBroker(t *testing.T, c *testutil.Cluster, id int32) *fakeBroker {
	t.Helper()
	var voters []config.Voter
	for _, n := range c.Nodes() {
		if a := n.ControllerAddr(); a != "" {
			host, port, _ := strings.Cut(a, ":")
			p, _ := strconv.Atoi(port)
			voters = append(voters, config.Voter{ID: n.ID, Host: host, Port: p})
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	fb := &fakeBroker{id: id, cancel: cancel}
	fb.ctrl = client.New(client.Config{Voters: voters, NodeID: id, ClusterID: c.ClusterID()})
	t.Cleanup(func() {
		cancel()
		fb.wg.Wait()
		fb.ctrl.Close()
	})
	reg := kmsg.NewPtrBrokerRegistrationRequest()
	reg.SetVersion(1)
	reg.BrokerID, reg.ClusterID = id, c.ClusterID()
	reg.IncarnationID = [16]byte{1, byte(id)}
	for _, name := range []string{"CLIENT", "INTERNAL"} {
		l := kmsg.NewBrokerRegistrationRequestListener()
		l.Name, l.Host, l.Port, l.SecurityProtocol = name, "127.0.0.1", 1, 0
		reg.Listeners = append(reg.Listeners, l)
	}
	rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
	defer rcancel()
	resp, err := fb.ctrl.Request(rctx, reg)
	if err != nil {
		t.Fatalf("fake broker %d: register: %v", id, err)
	}
	r := resp.(*kmsg.BrokerRegistrationResponse)
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		t.Fatalf("fake broker %d: register: %v", id, err)
	}
	epoch := r.BrokerEpoch
	unfenced := make(chan struct{})
	var once sync.Once
	fb.wg.Add(1)
	go func() {
		defer fb.wg.Done()
		for ctx.Err() == nil {
			hb := kmsg.NewPtrBrokerHeartbeatRequest()
			hb.SetVersion(1)
			hb.BrokerID, hb.BrokerEpoch, hb.CurrentMetadataOffset = id, epoch, math.MaxInt64
			hctx, hcancel := context.WithTimeout(ctx, 5*time.Second)
			resp, err := fb.ctrl.Request(hctx, hb)
			hcancel()
			if err == nil {
				r := resp.(*kmsg.BrokerHeartbeatResponse)
				err = kerr.ErrorForCode(r.ErrorCode)
				if err == nil && !r.IsFenced {
					once.Do(func() { close(unfenced) })
				}
			}
			if err != nil && ctx.Err() == nil {
				fb.mu.Lock()
				fb.mu.err = err
				fb.mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	select {
	case <-unfenced:
	case <-time.After(30 * time.Second):
		t.Fatalf("fake broker %d was not unfenced within 30s", id)
	}
	return fb
}
