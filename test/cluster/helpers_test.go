// Package cluster tests the control plane of a real gregor cluster: separate
// `gregor server` processes (internal/testutil.StartCluster) forming a
// controller quorum, losing and regaining its active controller, restarting
// as a whole, and refusing misconfigured nodes and bad reassignments.
//
// Every question about a node's view is asked of that node alone, with an
// uncached request: clients here dial one node's CLIENT (or CONTROLLER)
// listener whatever address they are told to reach, so "every node agrees"
// means every node was asked.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/cli"
	"github.com/gregor-project/gregor/internal/config"
	"github.com/gregor-project/gregor/internal/testutil"
)

// metadataTopic is the controller quorum's log, as DescribeQuorum names it.
const metadataTopic = "__cluster_metadata"

// pinnedClient returns a franz-go client that reaches only addr: every
// connection it opens, to whichever broker, goes there. It is closed when
// the test ends.
func pinnedClient(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	d := &net.Dialer{Timeout: 2 * time.Second}
	opts = append([]kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.Dialer(func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		}),
		kgo.RequestRetries(0),
		kgo.RetryTimeout(time.Second),
	}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatalf("client of %s: %v", addr, err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// nodeClients returns a pinned client of every broker node of c that is
// running, by node id.
func nodeClients(t testing.TB, c *testutil.Cluster) map[int32]*kgo.Client {
	t.Helper()
	out := map[int32]*kgo.Client{}
	for _, n := range c.Nodes() {
		if n.ClientAddr() != "" && n.Running() {
			out[n.ID] = pinnedClient(t, n.ClientAddr())
		}
	}
	return out
}

// clusterView is what one broker says about the cluster.
type clusterView struct {
	ClusterID string
	// MetaController and MetaBrokers are Metadata's controller id and
	// brokers; DescribeController and DescribeBrokers DescribeCluster's
	// (unfenced brokers only).
	MetaController     int32
	MetaBrokers        []int32
	DescribeController int32
	DescribeBrokers    []int32
	Topics             map[string]topicView
}

// topicView is one topic as Metadata shows it.
type topicView struct {
	ID       [16]byte
	Replicas map[int32][]int32 // partition -> replicas, preferred leader first
}

func (v clusterView) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cluster %s, controller %d/%d, brokers %v/%v, topics:", v.ClusterID,
		v.MetaController, v.DescribeController, v.MetaBrokers, v.DescribeBrokers)
	for _, name := range slices.Sorted(maps.Keys(v.Topics)) {
		tv := v.Topics[name]
		fmt.Fprintf(&b, " %s(%x)%v", name, tv.ID[:4], tv.Replicas)
	}
	return b.String()
}

// viewOf asks the node behind cl for its Metadata (all topics) and its
// DescribeCluster, through the cluster describe tool's entry point.
func viewOf(ctx context.Context, cl *kgo.Client) (clusterView, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	meta, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		return clusterView{}, fmt.Errorf("metadata: %w", err)
	}
	v := clusterView{MetaController: meta.ControllerID, Topics: map[string]topicView{}}
	for _, b := range meta.Brokers {
		v.MetaBrokers = append(v.MetaBrokers, b.NodeID)
	}
	slices.Sort(v.MetaBrokers)
	for _, t := range meta.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return clusterView{}, fmt.Errorf("metadata of topic %s: %w", *t.Topic, err)
		}
		tv := topicView{ID: t.TopicID, Replicas: map[int32][]int32{}}
		for _, p := range t.Partitions {
			tv.Replicas[p.Partition] = p.Replicas
		}
		v.Topics[*t.Topic] = tv
	}
	d, err := cli.DescribeCluster(ctx, cl)
	if err != nil {
		return clusterView{}, fmt.Errorf("describe cluster: %w", err)
	}
	v.ClusterID, v.DescribeController = d.ClusterID, d.ControllerID
	for _, b := range d.Brokers {
		if !b.Fenced && !b.Offline {
			v.DescribeBrokers = append(v.DescribeBrokers, b.ID)
		}
	}
	return v, nil
}

// consistent reports why v is not a settled view of one cluster: Metadata
// and DescribeCluster must name the same brokers and controller.
func (v clusterView) consistent() error {
	switch {
	case !slices.Equal(v.MetaBrokers, v.DescribeBrokers):
		return fmt.Errorf("Metadata lists brokers %v, DescribeCluster %v", v.MetaBrokers, v.DescribeBrokers)
	case v.MetaController != v.DescribeController:
		return fmt.Errorf("Metadata names controller %d, DescribeCluster %d", v.MetaController, v.DescribeController)
	}
	return nil
}

// waitSameView polls every client in cls until all of them answer the same
// consistent view and cond (if not nil) accepts it, and returns that view.
// It fails the test with the last answers after timeout.
func waitSameView(ctx context.Context, t testing.TB, cls map[int32]*kgo.Client, timeout time.Duration, cond func(clusterView) error) clusterView {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		views := map[int32]clusterView{}
		problem := error(nil)
		for _, id := range slices.Sorted(maps.Keys(cls)) {
			v, err := viewOf(ctx, cls[id])
			if err == nil {
				err = v.consistent()
			}
			if err == nil && cond != nil {
				err = cond(v)
			}
			if err != nil {
				problem = fmt.Errorf("node %d: %w", id, err)
				break
			}
			views[id] = v
		}
		var first clusterView
		if problem == nil {
			for id, v := range views {
				if first.Topics == nil {
					first = v
				} else if !reflect.DeepEqual(v, first) {
					problem = fmt.Errorf("nodes disagree: node %d says %v", id, v)
				}
			}
		}
		if problem == nil {
			return first
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("no common view of the cluster after %v: %v (first view: %v)", timeout, problem, first)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// quorumLeader asks the node whose CONTROLLER listener is addr, with
// DescribeQuorum, which controller it knows as active (-1: none).
func quorumLeader(ctx context.Context, cl *kgo.Client) (int32, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = metadataTopic
	rt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
	req.Topics = []kmsg.DescribeQuorumRequestTopic{rt}
	seeds := cl.SeedBrokers()
	if len(seeds) == 0 {
		return -1, errors.New("no seed broker")
	}
	r, err := seeds[0].Request(ctx, req)
	if err != nil {
		return -1, err
	}
	resp := r.(*kmsg.DescribeQuorumResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return -1, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return -1, fmt.Errorf("DescribeQuorum answered %d topics", len(resp.Topics))
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		return -1, err
	}
	return p.LeaderID, nil
}

// quorumClients returns a pinned client of every running controller's
// CONTROLLER listener, by node id.
func quorumClients(t testing.TB, c *testutil.Cluster) map[int32]*kgo.Client {
	t.Helper()
	out := map[int32]*kgo.Client{}
	for _, n := range c.Nodes() {
		if n.ControllerAddr() != "" && n.Running() {
			out[n.ID] = pinnedClient(t, n.ControllerAddr())
		}
	}
	return out
}

// agreedLeader returns the active controller every client in qcls names,
// or an error saying why there is none yet.
func agreedLeader(ctx context.Context, qcls map[int32]*kgo.Client) (int32, error) {
	leader := int32(-2)
	for _, id := range slices.Sorted(maps.Keys(qcls)) {
		l, err := quorumLeader(ctx, qcls[id])
		switch {
		case err != nil:
			return -1, fmt.Errorf("controller %d: %w", id, err)
		case l < 0:
			return -1, fmt.Errorf("controller %d knows no active controller", id)
		case leader != -2 && l != leader:
			return -1, fmt.Errorf("controller %d names %d, another %d", id, l, leader)
		}
		leader = l
	}
	return leader, nil
}

// waitLeader waits until every client in qcls names the same active
// controller, and returns it.
func waitLeader(ctx context.Context, t testing.TB, qcls map[int32]*kgo.Client, timeout time.Duration) int32 {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		l, err := agreedLeader(ctx, qcls)
		if err == nil {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("no agreed active controller after %v: %v", timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// createTopic creates a topic through cl with the given configs and
// returns the first error, topic-level included.
func createTopic(ctx context.Context, cl *kgo.Client, name string, partitions int32, rf int16, configs map[string]string) error {
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, rf
	return sendCreateTopic(ctx, cl, rt, configs)
}

// createAssignedTopic creates a topic through cl with the replicas of each
// partition given (partitions 0..len-1).
func createAssignedTopic(ctx context.Context, cl *kgo.Client, name string, replicas ...[]int32) error {
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, -1, -1
	for i, r := range replicas {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(i), r
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	return sendCreateTopic(ctx, cl, rt, nil)
}

// sendCreateTopic sends CreateTopics for rt with configs.
func sendCreateTopic(ctx context.Context, cl *kgo.Client, rt kmsg.CreateTopicsRequestTopic, configs map[string]string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	name := rt.Topic
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 5000
	for _, k := range slices.Sorted(maps.Keys(configs)) {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(configs[k])
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = []kmsg.CreateTopicsRequestTopic{rt}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	if len(resp.Topics) != 1 {
		return fmt.Errorf("CreateTopics answered %d topics", len(resp.Topics))
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		msg := ""
		if resp.Topics[0].ErrorMessage != nil {
			msg = ": " + *resp.Topics[0].ErrorMessage
		}
		return fmt.Errorf("create %s: %w%s", name, err, msg)
	}
	return nil
}

// topicPartitions is topic's partitions in the Metadata of the node behind
// cl (asked with a 2 s bound).
func topicPartitions(ctx context.Context, cl *kgo.Client, topic string) ([]kmsg.MetadataResponseTopicPartition, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = []kmsg.MetadataRequestTopic{rt}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if len(resp.Topics) != 1 {
		return nil, fmt.Errorf("metadata of %s: %d topics", topic, len(resp.Topics))
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		return nil, fmt.Errorf("metadata of %s: %w", topic, err)
	}
	return resp.Topics[0].Partitions, nil
}

// fullyReplicated reports whether topic has partitions partitions, each
// with a leader and an ISR of rf, in the node behind cl's view.
func fullyReplicated(ctx context.Context, cl *kgo.Client, topic string, partitions, rf int) bool {
	ps, err := topicPartitions(ctx, cl, topic)
	if err != nil || len(ps) != partitions {
		return false
	}
	for _, p := range ps {
		if p.ErrorCode != 0 || p.Leader < 0 || len(p.Replicas) != rf || len(p.ISR) != rf {
			return false
		}
	}
	return true
}

// waitFor polls cond every 20 ms until it holds, failing the test with what
// after timeout; it returns how long it took.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > timeout {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// extraProcess is a `gregor server` the harness does not manage: a
// misconfigured broker started next to a cluster.
type extraProcess struct {
	LogFile string
	cmd     *exec.Cmd
	done    chan struct{}
	err     error // set before done is closed
}

// startExtraBroker starts a broker-only process with node id id and
// cluster.id clusterID (a fresh log dir) that dials c's controllers
// directly, with the harness's short sessions. It is killed when the test
// ends; its log is printed if the test failed.
func startExtraBroker(t testing.TB, c *testutil.Cluster, id int32, clusterID string) *extraProcess {
	t.Helper()
	var voters []config.Voter
	for _, n := range c.Nodes() {
		if n.ControllerAddr() == "" {
			continue
		}
		host, port, err := net.SplitHostPort(n.ControllerAddr())
		if err != nil {
			t.Fatal(err)
		}
		p, err := strconv.Atoi(port)
		if err != nil {
			t.Fatal(err)
		}
		voters = append(voters, config.Voter{ID: n.ID, Host: host, Port: p})
	}
	dir := t.TempDir()
	addr := func() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(testutil.FreePort(t))) }
	props := config.ClusterNodeProperties(config.ClusterNode{
		ID: id, Roles: []string{"broker"}, ClusterID: clusterID, LogDir: filepath.Join(dir, "data"),
		ClientAddr: addr(), InternalAddr: addr(), Voters: voters, Brokers: len(voters),
		Sets: []string{"broker.session.timeout.ms=2000", "broker.heartbeat.interval.ms=200", "http.listener=127.0.0.1:0"},
	})
	file := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(file, []byte(props), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &extraProcess{LogFile: filepath.Join(dir, "server.log"), done: make(chan struct{})}
	f, err := os.Create(p.LogFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p.cmd = exec.Command(testutil.Binary(t), "server", "--config", file)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("--- log of the extra broker %d (%s):\n%s", id, p.LogFile, p.Log())
		}
	})
	return p
}

// Log returns everything the process wrote so far.
func (p *extraProcess) Log() string {
	b, err := os.ReadFile(p.LogFile)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	return string(b)
}

// Exited reports whether the process has exited, and its exit error.
func (p *extraProcess) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Kill kills the process if it runs and waits for it.
func (p *extraProcess) Kill() {
	if exited, _ := p.Exited(); exited {
		return
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return
	}
	<-p.done
}
