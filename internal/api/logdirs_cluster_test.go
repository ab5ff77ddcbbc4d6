package api_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
)

// A follower's replica moves to another of its log dirs while the leader takes acks=all
// writes: the follower keeps fetching into the replica being copied and stays in the ISR, and
// once the move is done it holds every acknowledged record (it leads after the leader stops,
// and serves them all).
func TestAlterReplicaLogDirsOnFollower(t *testing.T) {
	root := t.TempDir()
	dirA, dirB := filepath.Join(root, "n2-a"), filepath.Join(root, "n2-b")
	const throttle = "replica.alter.log.dirs.io.max.bytes.per.second"
	c := testutil.StartCluster(t, testutil.ClusterOptions{Nodes: 3, NodeSets: map[int32][]string{
		2: {"log.dirs=" + dirA + "," + dirB, throttle + "=65536"},
	}})
	adm := kadm.NewClient(c.Client(t))
	create := kmsg.NewPtrCreateTopicsRequest()
	create.TimeoutMillis = 15000
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "fm", -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, []int32{1, 2}
	ct.ReplicaAssignment = append(ct.ReplicaAssignment, ra)
	create.Topics = append(create.Topics, ct)
	c.WaitFor(t, 30*time.Second, func() bool {
		resp, err := create.RequestWith(ctxT(t), c.Client(t))
		if err != nil {
			return false
		}
		code := resp.Topics[0].ErrorCode
		if code != 0 && code != kerr.InvalidReplicaAssignment.Code && code != kerr.TopicAlreadyExists.Code {
			t.Fatalf("create fm: %v", kerr.ErrorForCode(code))
		}
		return code == 0 || code == kerr.TopicAlreadyExists.Code
	}, "topic fm on brokers 1 and 2")
	isrBoth := func() bool {
		md, err := adm.Metadata(ctxT(t), "fm")
		if err != nil {
			return false
		}
		p, ok := md.Topics["fm"].Partitions[0]
		return ok && p.Leader == 1 && len(p.ISR) == 2
	}
	c.WaitFor(t, 30*time.Second, isrBoth, "broker 2 in the ISR of fm-0")

	cl := c.Client(t, uncompressed, kgo.ProducerBatchMaxBytes(16<<10), kgo.ProducerLinger(0))
	const initial = 3000
	var rs []*kgo.Record
	for i := range initial {
		rs = append(rs, &kgo.Record{Topic: "fm", Value: value(i)})
	}
	produceSync(t, cl, rs...)
	stop, stopped := make(chan struct{}), make(chan error, 1)
	var acked atomicInt
	acked.set(initial)
	go func() {
		for i := initial; ; i++ {
			select {
			case <-stop:
				stopped <- nil
				return
			default:
			}
			if err := cl.ProduceSync(ctxT(t), &kgo.Record{Topic: "fm", Value: value(i)}).FirstErr(); err != nil {
				stopped <- fmt.Errorf("record %d: %w", i, err)
				return
			}
			acked.set(i + 1)
		}
	}()

	where := func() (cur, future string) {
		ds, err := adm.DescribeBrokerLogDirs(ctxT(t), 2, kadm.TopicsSet{"fm": {0: {}}})
		if err != nil {
			t.Fatal(err)
		}
		ds.EachPartition(func(p kadm.DescribedLogDirPartition) {
			if p.IsFuture {
				future = p.Dir
			} else {
				cur = p.Dir
			}
		})
		return cur, future
	}
	from, _ := where()
	if from != dirA && from != dirB {
		t.Fatalf("fm-0 on broker 2 is in %q", from)
	}
	dest := dirA
	if from == dirA {
		dest = dirB
	}
	var req kadm.AlterReplicaLogDirsReq
	req.Add(dest, kadm.TopicsSet{"fm": {0: {}}})
	resps, err := adm.AlterBrokerReplicaLogDirs(ctxT(t), 2, req)
	if err != nil {
		t.Fatal(err)
	}
	resps.Each(func(r kadm.AlterReplicaLogDirsResponse) {
		if r.Err != nil {
			t.Fatalf("alter %s-%d to %s: %v", r.Topic, r.Partition, r.Dir, r.Err)
		}
	})
	// Broker 3 has no replica of fm-0: REPLICA_NOT_AVAILABLE, as Kafka answers this API.
	var other kadm.AlterReplicaLogDirsReq
	other.Add(c.Node(3).Dir, kadm.TopicsSet{"fm": {0: {}}})
	r3, err := adm.AlterBrokerReplicaLogDirs(ctxT(t), 3, other)
	if err != nil {
		t.Fatal(err)
	}
	r3.Each(func(r kadm.AlterReplicaLogDirsResponse) {
		if !errors.Is(r.Err, kerr.ReplicaNotAvailable) {
			t.Fatalf("moving fm-0 on broker 3, which has no replica of it: %v", r.Err)
		}
	})
	if cur, fut := where(); cur != from || fut != dest {
		t.Fatalf("during the move: current in %q, future in %q", cur, fut)
	}
	unlimited := "9223372036854775807"
	if _, err := adm.AlterBrokerConfigs(ctxT(t), []kadm.AlterConfig{{Name: throttle, Value: &unlimited}}, 2); err != nil {
		t.Fatal(err)
	}
	c.WaitFor(t, 30*time.Second, func() bool { cur, fut := where(); return cur == dest && fut == "" }, "the move to finish")
	moved := acked.get()
	c.WaitFor(t, 30*time.Second, func() bool { return acked.get() >= moved+50 }, "records produced after the move")
	close(stop)
	if err := <-stopped; err != nil {
		t.Fatalf("producing during the move: %v", err)
	}
	n := acked.get()
	c.WaitFor(t, 30*time.Second, isrBoth, "broker 2 in the ISR after the move")

	// Broker 2's moved replica takes over and serves every acknowledged record.
	if err := c.Node(1).Stop(); err != nil {
		t.Fatal(err)
	}
	checkAll(t, c.Node(2).ClientAddr(), "fm", n)
	if !slices.Contains(partitionsIn(t, dest, "fm"), "fm-0") || slices.Contains(partitionsIn(t, from, "fm"), "fm-0") {
		t.Fatalf("fm-0 on disk: %s %v, %s %v", dest, partitionsIn(t, dest, "fm"), from, partitionsIn(t, from, "fm"))
	}
}
