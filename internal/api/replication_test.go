package api_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/replica"
	"github.com/gregor-project/gregor/internal/testutil"
	"github.com/gregor-project/gregor/internal/wire"
)

// The leader's side of replication over real TCP: a broker leads a partition whose ISR also
// holds broker 99, which this test plays with raw requests on a broker-to-broker connection
// (replica_id 99). An acks=all produce is answered only once broker 99's fetch passed it;
// OffsetForLeaderEpoch answers from the leader epoch cache; a diverging last fetched epoch is
// answered with the epoch's end; a consumer reads only up to the high watermark and only from
// the leader.

const fakeFollower = 99

func TestFollowerFetchCommitsAcksAll(t *testing.T) {
	b := testutil.StartBroker(t)
	createTopic(t, b.Addr(), "rep", 1, nil)
	h := b.Handler()
	produceSync(t, newClient(t, b.Addr()), &kgo.Record{Topic: "rep", Value: []byte("before")})

	p := h.Replicas.Get("rep", 0)
	if p == nil {
		t.Fatal("partition not open")
	}
	leader, epoch, leads := p.Role()
	if !leads {
		t.Fatalf("broker does not lead its partition (leader %d)", leader)
	}
	if leader < 0 {
		// A broker without replication (single node): give it what a cluster broker has.
		h.Replicas.SetReplication(replica.ReplicationOptions{LocalID: h.NodeID})
	}
	e := epoch + 1
	reg := replica.LeaderAndISR{Leader: h.NodeID, LeaderEpoch: e, PartitionEpoch: p.Registration().PartitionEpoch + 1,
		Replicas: []int32{h.NodeID, fakeFollower}, ISR: []int32{h.NodeID, fakeFollower}}
	if err := p.MakeLeader(reg, time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}

	conn, err := wire.Dial(ctxT(t), b.Addr(), "test-follower")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	// OffsetForLeaderEpoch: epoch `epoch` holds offset 0 and ends at 1, where e starts.
	for _, c := range []struct {
		current, asked int32
		code           int16
		epoch          int32
		end            int64
	}{
		{e, epoch, 0, epoch, 1},
		{e, e, 0, e, 1},
		{-1, e + 3, 0, -1, -1},
		{epoch, epoch, kerr.FencedLeaderEpoch.Code, -1, -1},
		{e + 1, epoch, kerr.UnknownLeaderEpoch.Code, -1, -1},
	} {
		got := replOffsetForLeaderEpoch(t, conn, "rep", 0, c.current, c.asked)
		if got.ErrorCode != c.code || got.LeaderEpoch != c.epoch || got.EndOffset != c.end {
			t.Fatalf("OffsetForLeaderEpoch(current %d, epoch %d) = %v %d/%d, want %v %d/%d", c.current, c.asked,
				kerr.ErrorForCode(got.ErrorCode), got.LeaderEpoch, got.EndOffset, kerr.ErrorForCode(c.code), c.epoch, c.end)
		}
	}
	if got := replOffsetForLeaderEpoch(t, conn, "rep", 7, -1, e); got.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("OffsetForLeaderEpoch of an unknown partition: %v", kerr.ErrorForCode(got.ErrorCode))
	}

	// An acks=all produce waits for broker 99.
	produced := make(chan kgo.ProduceResults, 1)
	cl := newClient(t, b.Addr(), kgo.RequiredAcks(kgo.AllISRAcks()))
	go func() {
		produced <- cl.ProduceSync(context.Background(), &kgo.Record{Topic: "rep", Value: []byte("acked")})
	}()
	replWaitUntil(t, "the acks=all produce appended", func() bool { return p.Log().LogEndOffset() == 2 })
	if p.HighWatermark() != 1 {
		t.Fatalf("high watermark %d before the follower fetched", p.HighWatermark())
	}
	// A consumer sees only the committed record.
	if got := replFetch(t, conn, -1, e, 0, -1); got.ErrorCode != 0 || got.HighWatermark != 1 || replRecordCount(t, got.RecordBatches) != 1 {
		t.Fatalf("consumer fetch: %v, hw %d, %d records", kerr.ErrorForCode(got.ErrorCode), got.HighWatermark, replRecordCount(t, got.RecordBatches))
	}
	select {
	case r := <-produced:
		t.Fatalf("acks=all answered before the follower had the record: %v", r.FirstErr())
	default:
	}

	// The follower fetches from 0: it gets both records up to the log end offset; its
	// position 0 moves nothing.
	got := replFetch(t, conn, fakeFollower, e, 0, -1)
	if got.ErrorCode != 0 || got.HighWatermark != 1 || replRecordCount(t, got.RecordBatches) != 2 {
		t.Fatalf("follower fetch at 0: %v, hw %d, %d records", kerr.ErrorForCode(got.ErrorCode), got.HighWatermark, replRecordCount(t, got.RecordBatches))
	}
	// A follower at 2 whose last batch is of the old epoch diverges: that epoch ends at 1 on
	// the leader. It is not the follower's position: the high watermark stays.
	got = replFetch(t, conn, fakeFollower, e, 2, epoch)
	if got.ErrorCode != 0 || got.DivergingEpoch.Epoch != epoch || got.DivergingEpoch.EndOffset != 1 || len(got.RecordBatches) != 0 || p.HighWatermark() != 1 {
		t.Fatalf("diverging fetch: %v %+v, %d record bytes, hw %d", kerr.ErrorForCode(got.ErrorCode), got.DivergingEpoch, len(got.RecordBatches), p.HighWatermark())
	}
	// A last fetched epoch newer than any the leader knows cannot be placed (as Kafka).
	if got = replFetch(t, conn, fakeFollower, e, 2, e+5); got.ErrorCode != kerr.OffsetOutOfRange.Code || p.HighWatermark() != 1 {
		t.Fatalf("fetch with last epoch %d: %v, hw %d", e+5, kerr.ErrorForCode(got.ErrorCode), p.HighWatermark())
	}
	// At 2 the follower has everything: the high watermark moves and the produce is answered.
	got = replFetch(t, conn, fakeFollower, e, 2, e)
	if got.ErrorCode != 0 || got.HighWatermark != 2 || got.DivergingEpoch.Epoch != -1 {
		t.Fatalf("follower fetch at 2: %v, hw %d, diverging %+v", kerr.ErrorForCode(got.ErrorCode), got.HighWatermark, got.DivergingEpoch)
	}
	select {
	case r := <-produced:
		if err := r.FirstErr(); err != nil || r[0].Record.Offset != 1 {
			t.Fatalf("acks=all produce: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("acks=all produce not answered after the follower caught up")
	}
	// Stale and unknown epochs, and a broker that is not a replica, are refused.
	for _, c := range []struct {
		replica, epoch int32
		code           int16
	}{
		{fakeFollower, epoch, kerr.FencedLeaderEpoch.Code},
		{fakeFollower, e + 1, kerr.UnknownLeaderEpoch.Code},
		{-1, epoch, kerr.FencedLeaderEpoch.Code},
		{fakeFollower + 1, e, kerr.NotLeaderForPartition.Code},
	} {
		if got := replFetch(t, conn, c.replica, c.epoch, 2, -1); got.ErrorCode != c.code {
			t.Fatalf("fetch by %d in epoch %d: %v, want %v", c.replica, c.epoch, kerr.ErrorForCode(got.ErrorCode), kerr.ErrorForCode(c.code))
		}
	}

	// acks=all that broker 99 never fetches is answered REQUEST_TIMED_OUT at the request's
	// timeout (the record stays in the log, uncommitted).
	if c := produceRep(t, conn, -1, 100); c != kerr.RequestTimedOut.Code {
		t.Fatalf("acks=all without the follower: %v", kerr.ErrorForCode(c))
	}
	if p.Log().LogEndOffset() != 3 || p.HighWatermark() != 2 {
		t.Fatalf("after the timed out produce: leo %d, hw %d", p.Log().LogEndOffset(), p.HighWatermark())
	}

	// Once broker 99 leads, this broker takes no produces; a consumer's Fetch v12 it serves as
	// a follower (KIP-392), up to its high watermark (follower_fetch_test.go has the rest).
	if err := p.MakeFollower(replica.LeaderAndISR{Leader: fakeFollower, LeaderEpoch: e + 1, PartitionEpoch: reg.PartitionEpoch + 1, Replicas: reg.Replicas, ISR: []int32{fakeFollower}}); err != nil {
		t.Fatal(err)
	}
	if got := replFetch(t, conn, -1, -1, 0, -1); got.ErrorCode != 0 || got.HighWatermark != 2 || replRecordCount(t, got.RecordBatches) != 2 {
		t.Fatalf("consumer fetch from a follower: %v, hw %d, %d records", kerr.ErrorForCode(got.ErrorCode), got.HighWatermark, replRecordCount(t, got.RecordBatches))
	}
	if got := replOffsetForLeaderEpoch(t, conn, "rep", 0, -1, e); got.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("OffsetForLeaderEpoch on a follower: %v", kerr.ErrorForCode(got.ErrorCode))
	}
	if c := produceRep(t, conn, 1, 5000); c != kerr.NotLeaderForPartition.Code {
		t.Fatalf("produce to a follower: %v", kerr.ErrorForCode(c))
	}
	if p.Log().LogEndOffset() != 3 {
		t.Fatal("a follower appended a produce")
	}
}

// produceRep produces one record to rep-0 and returns the partition's error code.
func produceRep(t *testing.T, conn *wire.Conn, acks int16, timeoutMs int32) int16 {
	t.Helper()
	pr := kmsg.NewPtrProduceRequest()
	pr.SetVersion(9)
	pr.Acks, pr.TimeoutMillis = acks, timeoutMs
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "rep"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = producerBatch(t, -1, -1, -1, 1)
	rt.Partitions = append(rt.Partitions, rp)
	pr.Topics = append(pr.Topics, rt)
	resp, err := conn.Request(ctxT(t), pr)
	if err != nil {
		t.Fatal(err)
	}
	return resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
}

// replFetch sends one Fetch v12 of rep-0 as replicaID and returns the partition's answer.
func replFetch(t *testing.T, conn *wire.Conn, replicaID, currentEpoch int32, offset int64, lastFetchedEpoch int32) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = replicaID, 0, 1, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "rep"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.PartitionMaxBytes = offset, currentEpoch, lastFetchedEpoch, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := conn.Request(ctxT(t), req)
	if err != nil {
		t.Fatal(err)
	}
	fr := resp.(*kmsg.FetchResponse)
	if fr.ErrorCode != 0 || len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch answer %+v", fr)
	}
	return fr.Topics[0].Partitions[0]
}

func replOffsetForLeaderEpoch(t *testing.T, conn *wire.Conn, topic string, part, current, epoch int32) kmsg.OffsetForLeaderEpochResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.SetVersion(4)
	req.ReplicaID = fakeFollower
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = part, current, epoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := conn.Request(ctxT(t), req)
	if err != nil {
		t.Fatal(err)
	}
	r := resp.(*kmsg.OffsetForLeaderEpochResponse)
	return r.Topics[0].Partitions[0]
}

// replRecordCount is the number of records in raw batches.
func replRecordCount(t *testing.T, raw []byte) int {
	t.Helper()
	n := 0
	for len(raw) > 0 {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(raw); err != nil {
			t.Fatal(err)
		}
		n += int(rb.NumRecords)
		raw = raw[12+int(rb.Length):]
	}
	return n
}

func replWaitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
