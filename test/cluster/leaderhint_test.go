package cluster

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/testutil"
	"github.com/gregor-project/gregor/internal/wire"
)

// A produce sent to a broker that is not the partition's leader is refused with
// NOT_LEADER_OR_FOLLOWER and, from Produce v10 (KIP-951), names the current leader, its
// epoch and its endpoint on the client's listener, so the producer need not ask Metadata.
// That holds on a follower and on a broker with no replica of the partition (Kafka answers
// UNKNOWN_TOPIC_OR_PARTITION only for a partition its metadata lacks).
func TestProduceNamesTheCurrentLeader(t *testing.T) {
	c := testutil.StartCluster(t, testutil.ClusterOptions{Nodes: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// StartCluster returns once the nodes listen, not once they are registered: the
	// replicas named below must be brokers the controller knows.
	waitSameView(ctx, t, nodeClients(t, c), 30*time.Second, func(v clusterView) error { return wantBrokers(v, []int32{1, 2, 3}) })
	admin := pinnedClient(t, c.Node(1).ClientAddr())
	if err := createAssignedTopic(ctx, admin, "hint", []int32{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if err := createAssignedTopic(ctx, admin, "elsewhere", []int32{1}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "hint fully replicated on node 2", func() bool {
		return fullyReplicated(ctx, pinnedClient(t, c.Node(2).ClientAddr()), "hint", 1, 3)
	})
	waitFor(t, 30*time.Second, "elsewhere in node 2's metadata", func() bool {
		return fullyReplicated(ctx, pinnedClient(t, c.Node(2).ClientAddr()), "elsewhere", 1, 1)
	})

	// A raw connection: a client library would pick its own version and acks.
	follower, err := wire.Dial(ctx, c.Node(2).ClientAddr(), "leaderhint-test")
	if err != nil {
		t.Fatal(err)
	}
	defer follower.Close()
	for _, tv := range []struct {
		topic string
		v     int16
	}{{"hint", 9}, {"hint", 11}, {"elsewhere", 9}, {"elsewhere", 11}} {
		v := tv.v
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(v)
		req.Acks, req.TimeoutMillis = -1, 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = tv.topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = oneRecordBatch(t)
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := follower.Request(ctx, req)
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		pr := resp.(*kmsg.ProduceResponse)
		sp := pr.Topics[0].Partitions[0]
		if sp.ErrorCode != kerr.NotLeaderForPartition.Code {
			t.Fatalf("%s v%d: error %v, want NOT_LEADER_OR_FOLLOWER", tv.topic, v, kerr.ErrorForCode(sp.ErrorCode))
		}
		if v < 10 {
			if sp.CurrentLeader.LeaderID != -1 || len(pr.Brokers) != 0 {
				t.Fatalf("v%d carries KIP-951 hints: %+v %+v", v, sp.CurrentLeader, pr.Brokers)
			}
			continue
		}
		if sp.CurrentLeader.LeaderID != 1 || sp.CurrentLeader.LeaderEpoch < 0 {
			t.Fatalf("%s v%d current leader %+v, want node 1", tv.topic, v, sp.CurrentLeader)
		}
		host, port, _ := net.SplitHostPort(c.Node(1).ClientAddr())
		if len(pr.Brokers) != 1 || pr.Brokers[0].NodeID != 1 || pr.Brokers[0].Host != host || strconv.Itoa(int(pr.Brokers[0].Port)) != port {
			t.Fatalf("v%d node endpoints %+v, want node 1 at %s", v, pr.Brokers, c.Node(1).ClientAddr())
		}
	}

	// A fetch from the broker with no replica is NOT_LEADER_OR_FOLLOWER too.
	fr := kmsg.NewPtrFetchRequest()
	fr.SetVersion(12)
	fr.ReplicaID, fr.SessionEpoch, fr.MaxBytes = -1, -1, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "elsewhere"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	fr.Topics = append(fr.Topics, ft)
	resp, err := follower.Request(ctx, fr)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("fetch of elsewhere from node 2: %v, want NOT_LEADER_OR_FOLLOWER", kerr.ErrorForCode(code))
	}
}

// oneRecordBatch is a v2 batch of one record, as a producer sends it.
func oneRecordBatch(t testing.TB) []byte {
	t.Helper()
	now := time.Now().UnixMilli()
	h := batch.Header{PartitionLeaderEpoch: -1, BaseTimestamp: now, MaxTimestamp: now, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	raw, err := batch.Build(h, []batch.Record{{Value: []byte("v")}}, batch.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
