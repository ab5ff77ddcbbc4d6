package replication

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
)

// TestDeleteRecordsWaitsForFollowers: DeleteRecords on a partition with
// replication factor 3 is answered as Kafka answers it (ReplicaManager.
// deleteRecords, DelayedDeleteRecords): the leader moves its log start
// offset, and the answer waits until the low watermark, the smallest log
// start offset over the leader and every replica on a live (unfenced)
// broker, reaches the requested offset; the answer's low watermark is that
// low watermark.
//
//   - Every follower running: the answer's low watermark is the requested
//     offset, and by then each follower's own log start offset (ListOffsets
//     earliest with the debug replica id, which any replica answers) is too.
//   - One follower paused (SIGSTOP) and not yet fenced: the request times
//     out, REQUEST_TIMED_OUT with the low watermark as it was when the
//     request arrived; the leader's log start moved all the same.
//   - Once the paused follower's session expires and it is fenced, it no
//     longer counts (Kafka's lowWatermarkIfLeader counts alive brokers only):
//     the same request succeeds while it is still paused.
//   - Resumed, the follower learns the new log start from its fetches.
func TestDeleteRecordsWaitsForFollowers(t *testing.T) {
	// A 6 s broker session (test clusters use 2 s): the paused follower must stay unfenced
	// for the whole of the 500 ms request below, and on a loaded machine 2 s left little
	// room for the pause, the request's trip and its timeout.
	c := testutil.StartCluster(t, testutil.ClusterOptions{Nodes: 3, Sets: []string{"broker.session.timeout.ms=6000"}})
	const topic = "delete-records"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st := CreateTopic(t, c, topic, 3, nil)
	active := activeController(ctx, t, c)
	// Pause a follower that is not the active controller: the others then
	// fence it within the session timeout, with no controller election.
	paused := int32(-1)
	var running []int32 // the leader's followers that keep running
	for _, id := range st.Replicas {
		switch {
		case id == st.Leader:
		case paused < 0 && id != active:
			paused = id
		default:
			running = append(running, id)
		}
	}
	t.Logf("leader %d, active controller %d, follower to pause %d", st.Leader, active, paused)

	cl := c.Client(t, kgo.DefaultProduceTopic(topic))
	recs := make([]*kgo.Record, 100)
	for i := range recs {
		recs[i] = &kgo.Record{Value: []byte("r" + strconv.Itoa(i))}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	// DeleteRecords goes straight to the leader: kadm's routing refreshes metadata after
	// an error, and a refresh sent to the paused node waited out the client's request
	// timeout (twice: the fenced-follower step then took 25 s of its 30).
	leader := cl.Broker(int(st.Leader))

	// Every follower running.
	start := time.Now()
	r := deleteRecords(ctx, t, leader, topic, 40, 10_000)
	t.Logf("delete to 40 answered in %v: low watermark %d, %v", time.Since(start).Round(time.Millisecond), r.LowWatermark, r.Err)
	if r.Err != nil || r.LowWatermark != 40 {
		t.Fatalf("delete to 40: low watermark %d, error %v; want 40 and no error", r.LowWatermark, r.Err)
	}
	for _, id := range st.Replicas {
		if got := earliestOn(ctx, t, c.Node(id), topic); got != 40 {
			t.Errorf("replica %d has log start offset %d once the answer came, want 40", id, got)
		}
	}

	// One follower paused, not yet fenced (broker.session.timeout.ms is
	// 6 s here): the request times out.
	c.Node(paused).Pause()
	pausedAt := time.Now()
	r = deleteRecords(ctx, t, leader, topic, 60, 500)
	t.Logf("delete to 60 with node %d paused answered after %v: low watermark %d, %v",
		paused, time.Since(pausedAt).Round(time.Millisecond), r.LowWatermark, r.Err)
	if !errors.Is(r.Err, kerr.RequestTimedOut) || r.LowWatermark != 40 {
		t.Fatalf("delete to 60 with follower %d paused: low watermark %d, error %v; want REQUEST_TIMED_OUT with the low watermark 40",
			paused, r.LowWatermark, r.Err)
	}
	if got := earliestOn(ctx, t, c.Node(st.Leader), topic); got != 60 {
		t.Errorf("the leader's log start offset is %d after the timed-out request, want 60", got)
	}

	// Fenced, the paused follower no longer holds the low watermark back.
	var last deleted
	c.WaitFor(t, 30*time.Second, func() bool {
		last = deleteRecords(ctx, t, leader, topic, 60, 500)
		return last.Err == nil
	}, fmt.Sprintf("DeleteRecords to succeed without the paused node %d", paused))
	t.Logf("delete to 60 succeeded %v after the pause, low watermark %d", time.Since(pausedAt).Round(time.Millisecond), last.LowWatermark)
	if last.LowWatermark != 60 {
		t.Errorf("delete to 60 without the paused node: low watermark %d, want 60", last.LowWatermark)
	}
	for _, id := range append([]int32{st.Leader}, running...) {
		if got := earliestOn(ctx, t, c.Node(id), topic); got != 60 {
			t.Errorf("replica %d has log start offset %d, want 60", id, got)
		}
	}

	c.Node(paused).Resume()
	c.WaitFor(t, 30*time.Second, func() bool {
		return earliestOn(ctx, t, c.Node(paused), topic) == 60
	}, fmt.Sprintf("the resumed node %d to move its log start offset to 60", paused))
}

// deleted is a DeleteRecords answer for one partition.
type deleted struct {
	LowWatermark int64
	Err          error
}

// deleteRecords deletes topic's partition 0 below offset with one DeleteRecords request of
// timeoutMs to leader, and returns the partition's answer.
func deleteRecords(ctx context.Context, t *testing.T, leader *kgo.Broker, topic string, offset int64, timeoutMs int32) deleted {
	t.Helper()
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = timeoutMs
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = 0, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := leader.Request(ctx, req)
	if err != nil {
		t.Fatalf("delete records of %s[0] below %d: %v", topic, offset, err)
	}
	dr := resp.(*kmsg.DeleteRecordsResponse)
	if len(dr.Topics) != 1 || len(dr.Topics[0].Partitions) != 1 {
		t.Fatalf("no answer for %s[0] in %+v", topic, dr)
	}
	p := dr.Topics[0].Partitions[0]
	return deleted{LowWatermark: p.LowWatermark, Err: kerr.ErrorForCode(p.ErrorCode)}
}

// earliestOn is the log start offset of topic's partition 0 on node n's own
// replica: ListOffsets earliest with the debug replica id (-2), which a
// follower answers too. -1 when it cannot be read.
func earliestOn(ctx context.Context, t *testing.T, n *testutil.Node, topic string) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.ClientAddr()), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -2
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = 0, -2, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	kresp, err := cl.SeedBrokers()[0].Request(rctx, req) // n itself, not the leader
	if err != nil {
		return -1
	}
	resp := kresp.(*kmsg.ListOffsetsResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return -1
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		return -1
	}
	return p.Offset
}
