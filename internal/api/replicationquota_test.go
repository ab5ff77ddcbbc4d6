package api_test

import (
	"crypto/rand"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/replica"
	"github.com/gregor-project/gregor/internal/testutil"
	"github.com/gregor-project/gregor/internal/wire"
)

// The leader's replication quota: with leader.replication.throttled.rate set and the topic's
// leader.replication.throttled.replicas naming this broker, a follower's fetches get records
// until the quota's one-second burst is spent, then none until it refills; a consumer's fetch
// is not throttled. Without the replica listed, the follower reads everything at once.
func TestLeaderReplicationQuota(t *testing.T) {
	const rate = 20_000
	b := testutil.StartBroker(t, "leader.replication.throttled.rate=20000")
	star := "*"
	createTopic(t, b.Addr(), "rep", 1, map[string]*string{"leader.replication.throttled.replicas": &star})
	h := b.Handler()
	cl := newClient(t, b.Addr())
	for range 50 { // ~50 kB that does not compress: two and a half seconds of quota
		v := make([]byte, 1000)
		rand.Read(v)
		produceSync(t, cl, &kgo.Record{Topic: "rep", Value: v})
	}
	p := h.Replicas.Get("rep", 0)
	_, epoch, _ := p.Role()
	reg := replica.LeaderAndISR{Leader: h.NodeID, LeaderEpoch: epoch + 1, PartitionEpoch: p.Registration().PartitionEpoch + 1,
		Replicas: []int32{h.NodeID, fakeFollower}, ISR: []int32{h.NodeID}}
	if err := p.MakeLeader(reg, time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	conn, err := wire.Dial(ctxT(t), b.Addr(), "test-follower")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	// Fetch as the follower, 8 kB at a time, until a fetch comes back empty although the
	// follower is behind: the quota is spent.
	var offset int64
	got, empty := 0, false
	for range 100 {
		fp := quotaFetch(t, conn, epoch+1, offset)
		n := replRecordCount(t, fp.RecordBatches)
		if n == 0 {
			empty = offset < fp.HighWatermark || offset < p.Log().LogEndOffset()
			break
		}
		got += len(fp.RecordBatches)
		offset += int64(n)
	}
	if !empty {
		t.Fatalf("the follower read %d bytes (offset %d) without meeting the quota", got, offset)
	}
	if got > 2*rate {
		t.Fatalf("the follower read %d bytes before the quota held it, more than two seconds' worth", got)
	}
	// The quota refills: the follower reaches the end.
	replWaitUntil(t, "the throttled follower catching up", func() bool {
		fp := quotaFetch(t, conn, epoch+1, offset)
		offset += int64(replRecordCount(t, fp.RecordBatches))
		return offset == p.Log().LogEndOffset()
	})
}

// quotaFetch is broker 99's fetch of rep-0 from offset, at most 8 kB.
func quotaFetch(t *testing.T, conn *wire.Conn, epoch int32, offset int64) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = fakeFollower, 0, 1, 8000
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "rep"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.PartitionMaxBytes = offset, epoch, -1, 8000
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := conn.Request(ctxT(t), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
}
