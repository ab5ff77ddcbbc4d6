package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
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

// A three-node cluster refuses bad input, each time with an error that says
// what is wrong, and is unchanged after it: a second process with a node id
// in use, a broker of another cluster, malformed reassignment plans, and a
// reassignment onto a broker that is down (the controller accepts it, as
// Kafka's does, while the reassign tool refuses it).
func TestBadInput(t *testing.T) {
	c := testutil.StartCluster(t, testutil.ClusterOptions{Nodes: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	all := []int32{1, 2, 3}
	cls := nodeClients(t, c)
	// StartCluster returns once the nodes listen, not once they are registered: an RF 2
	// topic before then can be INVALID_REPLICATION_FACTOR.
	waitSameView(ctx, t, cls, 30*time.Second, func(v clusterView) error { return wantBrokers(v, all) })
	if err := createTopic(ctx, cls[1], "moves", 2, 2, nil); err != nil {
		t.Fatal(err)
	}
	for _, id := range all {
		waitFor(t, 20*time.Second, fmt.Sprintf("node %d to see moves fully replicated", id), func() bool {
			return fullyReplicated(ctx, cls[id], "moves", 2, 2)
		})
	}
	before := waitSameView(ctx, t, cls, 20*time.Second, func(v clusterView) error { return wantBrokers(v, all) })
	// unchanged checks that every node still shows before's brokers and topics.
	unchanged := func(t *testing.T, what string) {
		t.Helper()
		v := waitSameView(ctx, t, nodeClients(t, c), 10*time.Second, func(v clusterView) error { return wantBrokers(v, all) })
		if !equalTopics(v, before) {
			t.Fatalf("after %s the cluster changed:\nbefore %v\nafter  %v", what, before, v)
		}
	}

	steps := []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"MalformedPlan", func(t *testing.T) {
			// The reassign tool refuses malformed files before asking the cluster.
			for _, tc := range []struct{ plan, want string }{
				{`{"version":1,"partitions":[{"topic":"moves","partition":0,"replicas":[]}]}`, "no replicas"},
				{`{"version":1,"partitions":[{"topic":"moves","partition":0,"replicas":[1,1]}]}`, "broker 1 listed twice"},
				{`{"version":1,"partitions":[{"topic":"moves","partition":0,"replicas":[-1,2]}]}`, "negative broker id -1"},
				{`{"version":1,"partitions":[{"topic":"moves","replicas":[1,2]}]}`, `no "partition"`},
				{`{"version":2,"partitions":[]}`, "unsupported reassignment plan version 2"},
				{`{"version":1,"partitions":[{"topic":"moves"`, "malformed reassignment plan"},
			} {
				_, err := cli.ParsePlan([]byte(tc.plan))
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("ParsePlan(%s) = %v, want an error containing %q", tc.plan, err, tc.want)
				}
			}
			// A well-formed plan naming a broker or partition the cluster lacks is refused
			// against the cluster, and ExecuteReassignment sends nothing.
			plan, err := cli.ParsePlan([]byte(`{"version":1,"partitions":[{"topic":"moves","partition":0,"replicas":[1,99]},{"topic":"moves","partition":7,"replicas":[1,2]}]}`))
			if err != nil {
				t.Fatal(err)
			}
			current := cli.Assignment{}
			for p, r := range before.Topics["moves"].Replicas {
				current.Set("moves", p, r)
			}
			err = cli.CheckPlan(plan, current, before.MetaBrokers)
			for _, want := range []string{"broker 99 is not in the cluster", "unknown partition"} {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("CheckPlan = %v, want an error containing %q", err, want)
				}
			}
			err = cli.ExecuteReassignment(ctx, c.Client(t), plan, cli.ExecuteOptions{}, io.Discard)
			if err == nil || !strings.Contains(err.Error(), "broker 99 is not in the cluster") {
				t.Errorf("ExecuteReassignment of a plan naming broker 99 = %v, want the plan refused", err)
			}

			// The broker itself refuses the same over the wire, whatever the client checked.
			cl := c.Client(t)
			for _, tc := range []struct {
				replicas []int32
				want     error
				msg      string
			}{
				{[]int32{}, kerr.InvalidReplicaAssignment, "empty replica list"},
				{[]int32{1, 99}, kerr.InvalidReplicaAssignment, "broker 99 is not registered"},
				{[]int32{2, 2}, kerr.InvalidReplicaAssignment, "not distinct"},
			} {
				err := reassign(ctx, cl, "moves", 0, tc.replicas)
				if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
					t.Errorf("AlterPartitionReassignments moves-0 -> %v: %v, want %v (%s)", tc.replicas, err, tc.want, tc.msg)
				}
			}
			if err := reassign(ctx, cl, "nosuchtopic", 0, []int32{1, 2}); !errors.Is(err, kerr.UnknownTopicOrPartition) {
				t.Errorf("AlterPartitionReassignments of an unknown topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
			}
			if err := reassign(ctx, cl, "moves", 9, []int32{1, 2}); !errors.Is(err, kerr.UnknownTopicOrPartition) {
				t.Errorf("AlterPartitionReassignments of an unknown partition: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
			}
			noReassignments(ctx, t, cl)
			unchanged(t, "malformed reassignments")
		}},

		{"DuplicateNodeID", func(t *testing.T) {
			// A broker-only process configured with node 2's id registers with the same
			// quorum while node 2 heartbeats.
			dup := startExtraBroker(t, c, 2, c.ClusterID())
			// It is refused for longer than a session timeout (2 s), so the live node's
			// session did not lapse in its favour.
			waitFor(t, 20*time.Second, "the duplicate refused for longer than a session", func() bool {
				log := dup.Log()
				if strings.Contains(log, "registered with the controller") {
					t.Fatalf("a second process with node id 2 registered:\n%s", log)
				}
				times := logTimes(log, "DUPLICATE_BROKER_REGISTRATION")
				return len(times) >= 2 && times[len(times)-1].Sub(times[0]) > 3*time.Second
			})
			if !strings.Contains(dup.Log(), "node_id=2") {
				t.Errorf("the duplicate's log does not name node id 2:\n%s", dup.Log())
			}
			if exited, err := dup.Exited(); exited {
				t.Logf("the duplicate exited: %v", err)
			} else {
				t.Logf("the duplicate keeps retrying its registration (%d refusals logged), without exiting",
					len(logTimes(dup.Log(), "DUPLICATE_BROKER_REGISTRATION")))
			}
			// Every node still shows node 2 at its own address, and node 2 still
			// replicates: acks=all with it in every ISR.
			for id, cl := range nodeClients(t, c) {
				if addr := brokerAddr(ctx, t, cl, 2); addr != c.Node(2).ClientAddr() {
					t.Errorf("node %d shows broker 2 at %s, want %s", id, addr, c.Node(2).ClientAddr())
				}
			}
			if err := createTopic(ctx, cls[1], "dup-check", 3, 3, nil); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 20*time.Second, "dup-check fully replicated", func() bool {
				return fullyReplicated(ctx, cls[2], "dup-check", 3, 3)
			})
			p := c.Client(t, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("dup-check"))
			for i := range 30 {
				if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
					t.Fatalf("produce with acks=all while the duplicate runs: %v", err)
				}
			}
			if lost := logTimes(readFile(t, c.Node(2).LogFile), "registration lost"); len(lost) > 0 {
				t.Errorf("node 2 lost its registration %d times while the duplicate ran", len(lost))
			}
			dup.Kill()
			before.Topics["dup-check"] = waitSameView(ctx, t, cls, 10*time.Second, nil).Topics["dup-check"]
			unchanged(t, "the duplicate node id")
		}},

		{"OtherClusterID", func(t *testing.T) {
			other := config.NewClusterID()
			p := startExtraBroker(t, c, 4, other)
			waitFor(t, 20*time.Second, "the broker of another cluster to exit", func() bool {
				exited, _ := p.Exited()
				return exited
			})
			_, err := p.Exited()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() == 0 {
				t.Errorf("the broker of another cluster exited with %v, want a non-zero status", err)
			}
			if !strings.Contains(p.Log(), "INCONSISTENT_CLUSTER_ID") {
				t.Errorf("its log does not name INCONSISTENT_CLUSTER_ID:\n%s", p.Log())
			}
			t.Logf("the broker of cluster %s exited (%v); last line: %s", other, err, lastLine(p.Log()))
			// It never appeared, not even fenced.
			for id, cl := range nodeClients(t, c) {
				d, err := cli.DescribeCluster(ctx, cl)
				if err != nil {
					t.Fatal(err)
				}
				for _, b := range d.Brokers {
					if b.ID == 4 {
						t.Errorf("node %d describes broker 4 of another cluster: %+v", id, b)
					}
				}
			}
			unchanged(t, "a broker of another cluster")
		}},

		{"ReassignToDeadBroker", func(t *testing.T) {
			// A topic on the active controller and one other node; the third node dies.
			leader := waitLeader(ctx, t, quorumClients(t, c), 10*time.Second)
			dead := without(all, leader)[0]
			live := without(all, dead)
			if err := createAssignedTopic(ctx, cls[leader], "to-dead", live); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 20*time.Second, "to-dead fully replicated", func() bool {
				return fullyReplicated(ctx, cls[leader], "to-dead", 1, 2)
			})
			c.Node(dead).Kill()
			survivors := map[int32]*kgo.Client{}
			for _, id := range live {
				survivors[id] = cls[id]
			}
			// Fenced when its session lapses: gone from Metadata, still registered (the
			// controller's refusal below says fenced, not unknown).
			killed := time.Now()
			was := waitSameView(ctx, t, survivors, 20*time.Second, func(v clusterView) error { return wantBrokers(v, live) })
			t.Logf("broker %d killed: fenced after %v", dead, time.Since(killed))

			// The controller accepts a registered but fenced target, as Kafka's KRaft
			// controller does: the reassignment waits for the broker, and is cancelled here.
			cl := c.Client(t)
			for _, target := range [][]int32{{live[0], dead}, {live[0], live[1], dead}, {dead}} {
				if err := reassign(ctx, cl, "to-dead", 0, target); err != nil {
					t.Errorf("reassigning to-dead-0 to %v (broker %d dead, still registered): %v", target, dead, err)
					continue
				}
				if err := reassign(ctx, cl, "to-dead", 0, nil); err != nil {
					t.Errorf("cancelling the reassignment of to-dead-0 to %v: %v", target, err)
				}
			}
			if err := reassign(ctx, cl, "to-dead", 0, []int32{live[0], 99}); !errors.Is(err, kerr.InvalidReplicaAssignment) || !strings.Contains(err.Error(), "broker 99 is not registered") {
				t.Errorf("reassigning to-dead-0 to unregistered broker 99: %v, want INVALID_REPLICA_ASSIGNMENT naming it", err)
			}
			// The tool, like kafka-reassign-partitions.sh, refuses a broker the cluster does not describe.
			plan := cli.ReassignmentPlan{Version: cli.PlanVersion, Partitions: []cli.PlanPartition{{Topic: "to-dead", Partition: 0, Replicas: []int32{live[0], dead}}}}
			if err := cli.ExecuteReassignment(ctx, cl, plan, cli.ExecuteOptions{}, io.Discard); err == nil {
				t.Errorf("reassign execute onto dead broker %d succeeded", dead)
			} else {
				t.Logf("reassign execute onto dead broker %d: %v", dead, err)
			}
			noReassignments(ctx, t, cl)
			now := waitSameView(ctx, t, survivors, 10*time.Second, func(v clusterView) error { return wantBrokers(v, live) })
			if !equalTopics(now, was) {
				t.Errorf("the refused reassignments changed the cluster:\nbefore %v\nafter  %v", was, now)
			}
		}},
	}
	for _, s := range steps {
		if !t.Run(s.name, s.fn) {
			return
		}
	}
}

// equalTopics reports whether a and b show the same topics, ids and
// replicas.
func equalTopics(a, b clusterView) bool {
	if len(a.Topics) != len(b.Topics) {
		return false
	}
	for name, ta := range a.Topics {
		tb, ok := b.Topics[name]
		if !ok || ta.ID != tb.ID || len(ta.Replicas) != len(tb.Replicas) {
			return false
		}
		for p, r := range ta.Replicas {
			if !slices.Equal(r, tb.Replicas[p]) {
				return false
			}
		}
	}
	return true
}

// reassign sends AlterPartitionReassignments for one partition and returns
// its error, with the broker's message.
func reassign(ctx context.Context, cl *kgo.Client, topic string, partition int32, replicas []int32) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	req.TimeoutMillis = 5000
	rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
	rp.Partition, rp.Replicas = partition, replicas
	rt.Partitions = []kmsg.AlterPartitionAssignmentsRequestTopicPartition{rp}
	req.Topics = []kmsg.AlterPartitionAssignmentsRequestTopic{rt}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("%w: %s", err, derefString(resp.ErrorMessage))
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return fmt.Errorf("AlterPartitionReassignments answered %d topics", len(resp.Topics))
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		return fmt.Errorf("%w: %s", err, derefString(p.ErrorMessage))
	}
	return nil
}

// noReassignments fails the test if any partition is being reassigned. It
// sends ListPartitionReassignments with null topics (all of them) itself:
// kadm's ListPartitionReassignments answers an empty set without asking.
func noReassignments(ctx context.Context, t *testing.T, cl *kgo.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrListPartitionReassignmentsRequest()
	req.TimeoutMillis = 5000
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		t.Fatalf("list reassignments: %v", err)
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			t.Errorf("%s-%d is being reassigned: replicas %v, adding %v, removing %v",
				rt.Topic, rp.Partition, rp.Replicas, rp.AddingReplicas, rp.RemovingReplicas)
		}
	}
}

// brokerAddr is the address the node behind cl gives broker id ("" if it
// lists no such broker).
func brokerAddr(ctx context.Context, t *testing.T, cl *kgo.Client, id int32) string {
	t.Helper()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	for _, b := range resp.Brokers {
		if b.NodeID == id {
			return net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		}
	}
	return ""
}

// logTime matches the time= field of a log line.
var logTime = regexp.MustCompile(`^time=(\S+)`)

// logTimes returns the times of the log lines that contain s.
func logTimes(log, s string) []time.Time {
	var out []time.Time
	for line := range strings.Lines(log) {
		if !strings.Contains(line, s) {
			continue
		}
		if m := logTime.FindStringSubmatch(line); m != nil {
			if at, err := time.Parse(time.RFC3339Nano, m[1]); err == nil {
				out = append(out, at)
			}
		}
	}
	return out
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	return s[strings.LastIndexByte(s, '\n')+1:]
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func derefString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
