package replication

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/internal/storage"
	"github.com/gregor-project/gregor/internal/testutil"
)

// errAcksOne marks records produced with acks=1 in a Result: acknowledged
// by the leader alone, so a leader change may lose them. They go in
// Result.Failed, which the verifier counts but does not require.
var errAcksOne = errors.New("acks=1: acknowledged by the leader alone")

// Test 3, the KIP-101 cases. Partition of replication factor 2 on nodes A
// (leader) and B of a three-node cluster (the third keeps the controller
// quorum alive while A or B is down), min.insync.replicas 1.
//
// Phase 1, a follower restarts before learning the high watermark that
// covers its last batch. Controlled: batch X is produced with acks=all while
// the ISR is {A, B}, so B has X when the acknowledgement arrives, and B is
// killed (SIGKILL) at that moment; B checkpoints its high watermark only
// every few seconds and learns a new one only from its next fetch, so its
// checkpoint almost surely lies below X's end (read from B's files and
// logged; best-effort). A restarted B must not truncate to that high
// watermark (Kafka's pre-KIP-101 behaviour): its files are polled from its
// start until it is back in the ISR, and its log end must never drop below
// X's end (best-effort: a drop between two polls goes unseen, but then the
// final checks below still hold). This controller takes a restarted broker
// out of every ISR, so B cannot lead before it has fetched again; A is
// killed the moment B is back in the ISR, the earliest B can take over, and
// B must lead with X and everything acknowledged.
//
// Phase 2, divergence (KIP-101's second case, KIP-279): just before A dies,
// B is cut off from the other nodes (Isolate, well under the session
// timeout) and batch Y is produced to A with acks=1, so A's log has a batch
// B never fetched. Controlled: B cannot fetch Y while isolated (checked in
// its files). B leads, batch Z is written through it with acks=all (ISR
// {B}), then A returns and must truncate Y and fetch Z.
//
// In every interleaving: no acks=all record is lost or duplicated and the
// two logs are byte-identical below the high watermark (Verify).
func TestKIP101FollowerRestartThenLeaderDies(t *testing.T) {
	c := testutil.StartCluster(t, testutil.ClusterOptions{Nodes: 3})
	const topic = "kip101"
	st := CreateTopic(t, c, topic, 2, map[string]string{"min.insync.replicas": "1"})
	a := st.Leader
	b := st.Replicas[0]
	if b == a {
		b = st.Replicas[1]
	}
	t.Logf("replicas %v: A = node %d leads, B = node %d follows", st.Replicas, a, b)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dirB := filepath.Join(c.Node(b).Dir, topic+"-0")

	all := Result{Topic: topic, Acked: map[string]int64{}, Failed: map[string]error{}}
	seq := 0
	produce := func(cl *kgo.Client, n int, acksOne bool) (first, end int64) {
		t.Helper()
		var recs []*kgo.Record
		for range n {
			recs = append(recs, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "w0-%d", seq)})
			seq++
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		for _, r := range recs {
			if acksOne {
				all.Failed[string(r.Value)] = errAcksOne
			} else {
				all.Acked[string(r.Value)] = r.Offset
			}
		}
		all.Sent += n
		return recs[0].Offset, recs[n-1].Offset + 1
	}
	// Linger so each ProduceSync goes out as one batch.
	acksAll := c.Client(t, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(5*time.Millisecond))
	produce(acksAll, 100, false)

	// Phase 1.
	WaitPartition(t, c, topic, 0, 30*time.Second, PartitionState.FullISR, "A and B in the ISR")
	xFirst, xEnd := produce(acksAll, 20, false)
	c.Node(b).Kill()
	_, endB, err := ReadLogBelow(dirB, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	if endB < xEnd {
		t.Fatalf("B's log ends at %d after an acks=all produce of [%d, %d) with B in the ISR", endB, xFirst, xEnd)
	}
	hws, err := storage.ReadCheckpoint(storage.OS, filepath.Join(c.Node(b).Dir, storage.ReplicationOffsetCheckpointFile))
	if err != nil {
		t.Fatal(err)
	}
	hwB, ok := hws[storage.TopicPartition{Topic: topic, Partition: 0}]
	t.Logf("batch X = [%d, %d) acknowledged; B killed with log end %d, checkpointed high watermark %d (present %v; the case needs it below %d: %v)",
		xFirst, xEnd, endB, hwB, ok, xEnd, !ok || hwB < xEnd)

	c.Node(b).Start()
	lowest := int64(math.MaxInt64)
	poll := func() {
		if _, end, err := ReadLogBelow(dirB, math.MaxInt64); err == nil {
			lowest = min(lowest, end)
		}
	}
	// The controller takes B out of the ISR when B's session expires or its
	// new process registers, whichever comes first; A adds it back once it
	// has caught up. B's new process is unfenced once its metadata image
	// holds its registration, so from then on B's own metadata shows B in
	// the ISR only after A added it back.
	c.WaitFor(t, 30*time.Second, func() bool {
		poll()
		return linesInNodeLog(t, c.Node(b), "broker fencing changed\" fenced=false") >= 2
	}, "B's new process registered and unfenced")
	WaitPartition(t, c, topic, 0, 30*time.Second, func(s PartitionState) bool {
		poll()
		return s.Leader == a && s.InISR(b)
	}, "B back in the ISR", c.Node(b).ClientAddr())
	t.Logf("restarted B back in the ISR; the lowest log end seen on B meanwhile: %d", lowest)
	if lowest < xEnd {
		t.Errorf("restarted B truncated its log to %d, below batch X's end %d: it truncated to its stale high watermark", lowest, xEnd)
	}

	// Phase 2: Y reaches A only, then A dies.
	acksOneToA := c.Client(t, kgo.SeedBrokers(c.Node(a).ClientAddr()), kgo.RequiredAcks(kgo.LeaderAck()),
		kgo.DisableIdempotentWrite(), kgo.ProducerLinger(5*time.Millisecond))
	// A's client learns the partition's leader before B is cut off.
	if err := acksOneToA.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	_, endBefore, err := ReadLogBelow(dirB, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	c.Isolate(b)
	yFirst, yEnd := produce(acksOneToA, 10, true)
	c.Node(a).Kill()
	_, endIsolated, err := ReadLogBelow(dirB, math.MaxInt64)
	c.Heal(b)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("batch Y = [%d, %d) acknowledged by A alone; B's log end %d before the cut, %d when A died", yFirst, yEnd, endBefore, endIsolated)

	others := []string{c.Node(b).ClientAddr()}
	for _, n := range c.Nodes() {
		if n.ID != a && n.ID != b {
			others = append(others, n.ClientAddr())
		}
	}
	lead := WaitPartition(t, c, topic, 0, 30*time.Second, func(s PartitionState) bool { return s.Leader == b },
		"B to lead", others...)
	t.Logf("B leads at epoch %d, ISR %v", lead.LeaderEpoch, lead.ISR)
	// Everything acknowledged with acks=all is on the new leader, X included:
	// its high watermark (it is the whole ISR) reaches X's end.
	hw := int64(-1)
	c.WaitFor(t, 10*time.Second, func() bool {
		hw, err = HighWatermark(ctx, c, topic, 0)
		return err == nil && hw >= xEnd
	}, fmt.Sprintf("B's high watermark to pass batch X's end %d (last %d, %v)", xEnd, hw, err))
	zFirst, zEnd := produce(acksAll, 20, false)
	t.Logf("batch Z = [%d, %d) acknowledged by B", zFirst, zEnd)
	if zFirst < yEnd && endIsolated < yEnd {
		t.Logf("Z overwrites Y's offsets on B: A must truncate Y when it returns")
	}

	c.Node(a).Start()
	WaitPartition(t, c, topic, 0, 30*time.Second, PartitionState.FullISR, "A back in the ISR")
	rep := Verify(t, c, topic, all)
	if rep.Acked != 140 {
		t.Errorf("%d acks=all records acknowledged, want 140", rep.Acked)
	}
	t.Logf("Y survived: %d of %d records (Y may survive only if B fetched it)", rep.FailedPresent, yEnd-yFirst)
	if rep.FailedPresent > 0 && endIsolated < yEnd {
		t.Errorf("%d records of Y are in the final log though B never had them and A had to truncate them", rep.FailedPresent)
	}
	if !slices.Equal(rep.ISR, []int32{min(a, b), max(a, b)}) {
		t.Errorf("final ISR %v, want A and B", rep.ISR)
	}
}

// linesInNodeLog counts the lines of node n's log (all its processes) that
// contain s.
func linesInNodeLog(t testing.TB, n *testutil.Node, s string) int {
	t.Helper()
	data, err := os.ReadFile(n.LogFile)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(data), s)
}
