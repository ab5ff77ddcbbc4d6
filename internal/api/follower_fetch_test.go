package api_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/api"
	"github.com/gregor-project/gregor/internal/config"
	"github.com/gregor-project/gregor/internal/replica"
	"github.com/gregor-project/gregor/internal/testutil"
	"github.com/gregor-project/gregor/internal/wire"
)

// Consumers reading from the closest replica (KIP-392), over real TCP against one broker whose
// partition rep-0 is given replication roles by hand, with broker 99 (played by this test) as
// the other replica, as in replication_test.go.

// A follower serves a consumer's Fetch v11+ up to its own high watermark, fenced by the
// current leader epoch; an older consumer is refused; an offset between the high watermark and
// the log end is answered empty (and a parked fetch is woken when the high watermark moves),
// one past the log end OFFSET_OUT_OF_RANGE.
func TestConsumerFetchFromFollower(t *testing.T) {
	b := testutil.StartBroker(t)
	createTopic(t, b.Addr(), "rep", 1, nil)
	h := b.Handler()
	cl := newClient(t, b.Addr(), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	for _, v := range []string{"a", "b", "c"} {
		produceSync(t, cl, &kgo.Record{Topic: "rep", Value: []byte(v)})
	}
	p := h.Replicas.Get("rep", 0)
	e := followerRoles(t, h.NodeID, h.Replicas, p)
	// One record the leader (this broker, still) appends that broker 99 never fetches: the
	// log ends at 4, the high watermark stays at 3.
	produceSync(t, cl, &kgo.Record{Topic: "rep", Value: []byte("uncommitted")})
	if err := p.MakeFollower(replica.LeaderAndISR{Leader: fakeFollower, LeaderEpoch: e + 1, PartitionEpoch: 10, Replicas: []int32{h.NodeID, fakeFollower}, ISR: []int32{fakeFollower}}); err != nil {
		t.Fatal(err)
	}
	if leo, hw := p.Log().LogEndOffset(), p.HighWatermark(); leo != 4 || hw != 3 {
		t.Fatalf("follower log end %d, high watermark %d; want 4, 3", leo, hw)
	}
	conn, err := wire.Dial(ctxT(t), b.Addr(), "consumer")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	for _, c := range []struct {
		name    string
		version int16
		epoch   int32
		offset  int64
		code    int16
		records int
	}{
		{"v11 from the start", 11, -1, 0, 0, 3},
		{"v17 in the current epoch", 17, e + 1, 1, 0, 2},
		{"at the high watermark", 12, e + 1, 3, 0, 0},
		{"between the high watermark and the log end", 12, e + 1, 4, 0, 0},
		{"past the log end", 12, e + 1, 5, kerr.OffsetOutOfRange.Code, 0},
		{"a stale epoch", 12, e, 0, kerr.FencedLeaderEpoch.Code, 0},
		{"an epoch not known yet", 12, e + 2, 0, kerr.UnknownLeaderEpoch.Code, 0},
		{"v10: leader only", 10, -1, 0, kerr.NotLeaderForPartition.Code, 0},
	} {
		got := consumerFetch(t, conn, c.version, "", c.epoch, c.offset, 0)
		if got.ErrorCode != c.code || replRecordCount(t, got.RecordBatches) != c.records {
			t.Errorf("%s: %v, %d records; want %v, %d", c.name, kerr.ErrorForCode(got.ErrorCode), replRecordCount(t, got.RecordBatches), kerr.ErrorForCode(c.code), c.records)
		}
		if c.code == 0 && (got.HighWatermark != 3 || got.LogStartOffset != 0 || got.PreferredReadReplica != -1) {
			t.Errorf("%s: high watermark %d, log start %d, preferred replica %d; want 3, 0, -1", c.name, got.HighWatermark, got.LogStartOffset, got.PreferredReadReplica)
		}
	}

	// A consumer parked at the high watermark gets the record once the leader's answer moves
	// the follower's high watermark.
	parked := make(chan kmsg.FetchResponseTopicPartition, 1)
	go func() {
		c, err := wire.Dial(context.Background(), b.Addr(), "parked")
		if err != nil {
			parked <- kmsg.FetchResponseTopicPartition{ErrorCode: -2}
			return
		}
		defer c.Close()
		parked <- consumerFetchOn(c, 12, "", e+1, 3, 20_000)
	}()
	p.SetFollowerHighWatermark(4)
	select {
	case got := <-parked:
		if got.ErrorCode != 0 || got.HighWatermark != 4 || replRecordCount(t, got.RecordBatches) != 1 {
			t.Fatalf("parked fetch: %v, hw %d, %d records", kerr.ErrorForCode(got.ErrorCode), got.HighWatermark, replRecordCount(t, got.RecordBatches))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a consumer parked on a follower was not woken by its high watermark")
	}
}

// A leader under RackAwareReplicaSelector directs a consumer of another rack to the in-sync
// follower of that rack: preferred_read_replica and no records, at once. A consumer of the
// leader's rack, of no rack, an older consumer, and a follower out of the ISR or fenced read
// from the leader.
func TestLeaderPrefersFollowerInConsumerRack(t *testing.T) {
	b := testutil.StartBroker(t, "broker.rack=r1", "replica.selector.class="+config.RackAwareReplicaSelector,
		"broker.session.timeout.ms=60000")
	createTopic(t, b.Addr(), "rep", 1, nil)
	h := b.Handler()
	produceSync(t, newClient(t, b.Addr()), &kgo.Record{Topic: "rep", Value: []byte("a")}, &kgo.Record{Topic: "rep", Value: []byte("b")})
	p := h.Replicas.Get("rep", 0)
	e := followerRoles(t, h.NodeID, h.Replicas, p)
	epoch99 := registerFakeBroker(t, h, "r2")
	conn, err := wire.Dial(ctxT(t), b.Addr(), "consumer")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Broker 99 fetched at 1: it holds offset 0 only.
	if got := replFetch(t, conn, fakeFollower, e, 1, -1); got.ErrorCode != 0 {
		t.Fatalf("follower fetch: %v", kerr.ErrorForCode(got.ErrorCode))
	}

	check := func(what string, version int16, rack string, offset int64, want int32, records int) {
		t.Helper()
		wait := int32(0)
		if want >= 0 {
			wait = 30_000 // answered at once all the same
		}
		got := consumerFetch(t, conn, version, rack, e, offset, wait)
		if got.ErrorCode != 0 || got.PreferredReadReplica != want || replRecordCount(t, got.RecordBatches) != records || got.HighWatermark != 2 {
			t.Fatalf("%s: %v, preferred %d, %d records, hw %d; want preferred %d, %d records, hw 2", what, kerr.ErrorForCode(got.ErrorCode),
				got.PreferredReadReplica, replRecordCount(t, got.RecordBatches), got.HighWatermark, want, records)
		}
	}
	start := time.Now()
	check("rack r2", 11, "r2", 0, fakeFollower, 0)
	check("rack r2 at the follower's log end", 17, "r2", 1, fakeFollower, 0)
	// Two answers that waited out max_wait would take a minute; two immediate ones take
	// milliseconds, and the bound leaves a loaded machine plenty of room.
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("a preferred replica answer waited %v for max_wait", d)
	}
	check("the leader's rack", 12, "r1", 0, -1, 2)
	check("no rack", 12, "", 0, -1, 2)
	check("a rack without replicas", 12, "r3", 0, -1, 2)
	check("v10", 10, "r2", 0, -1, 2)
	check("past the follower's log end", 12, "r2", 2, -1, 0)

	// Out of the ISR (a newer partition epoch of the same leadership): the leader serves.
	if err := p.MakeLeader(replica.LeaderAndISR{Leader: h.NodeID, LeaderEpoch: e, PartitionEpoch: 20, Replicas: []int32{h.NodeID, fakeFollower}, ISR: []int32{h.NodeID}}, time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	check("a follower out of the ISR", 12, "r2", 0, -1, 2)
	if err := p.MakeLeader(replica.LeaderAndISR{Leader: h.NodeID, LeaderEpoch: e, PartitionEpoch: 21, Replicas: []int32{h.NodeID, fakeFollower}, ISR: []int32{h.NodeID, fakeFollower}}, time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	check("back in the ISR", 12, "r2", 0, fakeFollower, 0)

	// Fenced: clients could not reach it.
	hb := kmsg.NewPtrBrokerHeartbeatRequest()
	hb.SetVersion(1)
	hb.BrokerID, hb.BrokerEpoch, hb.WantFence, hb.CurrentMetadataOffset = fakeFollower, epoch99, true, h.Meta.Image().Offset
	if _, err := h.Controller.Request(ctxT(t), hb); err != nil {
		t.Fatal(err)
	}
	replWaitUntil(t, "broker 99 fenced in the image", func() bool {
		br := h.Meta.Image().Broker(fakeFollower)
		return br != nil && br.Fenced
	})
	check("a fenced follower", 12, "r2", 0, -1, 2)
}

// followerRoles makes this broker the leader of p with broker 99 as an in-sync follower, in a
// new leader epoch, which it returns.
func followerRoles(t *testing.T, local int32, rm *replica.Manager, p *replica.Partition) int32 {
	t.Helper()
	if p == nil {
		t.Fatal("partition not open")
	}
	leader, epoch, leads := p.Role()
	if !leads {
		t.Fatalf("broker does not lead its partition (leader %d)", leader)
	}
	if leader < 0 {
		rm.SetReplication(replica.ReplicationOptions{LocalID: local})
	}
	e := epoch + 1
	reg := replica.LeaderAndISR{Leader: local, LeaderEpoch: e, PartitionEpoch: p.Registration().PartitionEpoch + 1,
		Replicas: []int32{local, fakeFollower}, ISR: []int32{local, fakeFollower}}
	if err := p.MakeLeader(reg, time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	return e
}

// registerFakeBroker registers broker 99 in rack with the controller, with this broker's
// PLAINTEXT listener, and unfences it; it returns its broker epoch once the broker's image
// shows it unfenced.
func registerFakeBroker(t *testing.T, h *api.Handler, rack string) int64 {
	t.Helper()
	reg := kmsg.NewPtrBrokerRegistrationRequest()
	reg.SetVersion(1)
	reg.BrokerID, reg.ClusterID, reg.Rack = fakeFollower, h.ClusterID, &rack
	reg.IncarnationID = [16]byte{9, 9}
	host, port, ok := h.Meta.Image().Endpoint(h.NodeID, "PLAINTEXT")
	if !ok {
		t.Fatal("the broker has no PLAINTEXT endpoint in its image")
	}
	l := kmsg.NewBrokerRegistrationRequestListener()
	l.Name, l.Host, l.Port = "PLAINTEXT", host, uint16(port)
	reg.Listeners = append(reg.Listeners, l)
	resp, err := h.Controller.Request(ctxT(t), reg)
	if err != nil {
		t.Fatal(err)
	}
	rr := resp.(*kmsg.BrokerRegistrationResponse)
	if err := kerr.ErrorForCode(rr.ErrorCode); err != nil {
		t.Fatalf("registering broker 99: %v", err)
	}
	replWaitUntil(t, "broker 99 unfenced in the image", func() bool {
		hb := kmsg.NewPtrBrokerHeartbeatRequest()
		hb.SetVersion(1)
		hb.BrokerID, hb.BrokerEpoch, hb.CurrentMetadataOffset = fakeFollower, rr.BrokerEpoch, 1<<62
		if _, err := h.Controller.Request(ctxT(t), hb); err != nil {
			t.Fatal(err)
		}
		b := h.Meta.Image().Broker(fakeFollower)
		return b != nil && !b.Fenced
	})
	return rr.BrokerEpoch
}

// consumerFetch sends one consumer Fetch of rep-0 at version (rack from v11) and returns the
// partition's answer.
func consumerFetch(t *testing.T, conn *wire.Conn, version int16, rack string, currentEpoch int32, offset int64, maxWaitMs int32) kmsg.FetchResponseTopicPartition {
	t.Helper()
	got := consumerFetchOn(conn, version, rack, currentEpoch, offset, maxWaitMs)
	if got.ErrorCode == -2 {
		t.Fatal("fetch failed")
	}
	return got
}

// consumerFetchOn is consumerFetch for any goroutine: a failed round trip or a malformed
// answer is error code -2.
func consumerFetchOn(conn *wire.Conn, version int16, rack string, currentEpoch int32, offset int64, maxWaitMs int32) kmsg.FetchResponseTopicPartition {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(version)
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, maxWaitMs, 1, 1<<20
	req.Rack = rack
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "rep"
	if version >= 13 {
		rt.TopicID = topicIDOf(conn, "rep")
	}
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.CurrentLeaderEpoch, rp.PartitionMaxBytes = offset, currentEpoch, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := conn.Request(ctx, req)
	if err != nil {
		return kmsg.FetchResponseTopicPartition{ErrorCode: -2}
	}
	fr := resp.(*kmsg.FetchResponse)
	if fr.ErrorCode != 0 || len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 {
		return kmsg.FetchResponseTopicPartition{ErrorCode: -2}
	}
	return fr.Topics[0].Partitions[0]
}

// topicIDOf asks Metadata for a topic's id (zero on failure).
func topicIDOf(conn *wire.Conn, topic string) [16]byte {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := conn.Request(ctx, req)
	if err != nil {
		return [16]byte{}
	}
	for _, t := range resp.(*kmsg.MetadataResponse).Topics {
		if t.Topic != nil && *t.Topic == topic {
			return t.TopicID
		}
	}
	return [16]byte{}
}
