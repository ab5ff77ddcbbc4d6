package compaction

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/testutil"
	"github.com/gregor-project/gregor/test/replication"
)

// keptRecord is a record as a replica's segment files hold it.
type keptRecord struct {
	off        int64
	key, value string
}

// replicaRecords reads the records of a partition directory's segment files (a running
// broker's too: a torn tail or a file renamed away ends what is read, and the caller polls).
func replicaRecords(dir string) ([]keptRecord, error) {
	b, _, err := replication.ReadLogBelow(dir, 1<<62)
	if err != nil {
		return nil, err
	}
	var out []keptRecord
	for len(b) > 0 {
		h, err := batch.ParseHeader(b)
		if err != nil {
			return nil, err
		}
		recs, err := batch.Records(b[:h.Size()])
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			out = append(out, keptRecord{h.BaseOffset + int64(r.OffsetDelta), string(r.Key), string(r.Value)})
		}
		b = b[h.Size():]
	}
	return out, nil
}

// lastPerKey is the model of a fully compacted log: the last record written of each key, in
// offset order.
func lastPerKey(written []keptRecord) []keptRecord {
	last := map[string]keptRecord{}
	for _, r := range written {
		last[r.key] = r
	}
	return slices.SortedFunc(maps.Values(last), func(a, b keptRecord) int { return int(a.off - b.off) })
}

// createAssigned creates a one-partition topic on the given replicas.
func createAssigned(t *testing.T, cl *kgo.Client, topic string, replicas []int32, cfg map[string]string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	a.Partition, a.Replicas = 0, replicas
	rt.ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{a}
	for k, v := range cfg {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = []kmsg.CreateTopicsRequestTopic{rt}
	resp, err := req.RequestWith(ctxT(t, 15*time.Second), cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("create %s on %v: %v", topic, replicas, err)
	}
}

func reassign(t *testing.T, cl *kgo.Client, topic string, replicas []int32) {
	t.Helper()
	req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	req.TimeoutMillis = 10000
	rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
	rp.Partition, rp.Replicas = 0, replicas
	rt.Partitions = []kmsg.AlterPartitionAssignmentsRequestTopicPartition{rp}
	req.Topics = []kmsg.AlterPartitionAssignmentsRequestTopic{rt}
	resp, err := req.RequestWith(ctxT(t, 15*time.Second), cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("reassign %s to %v: %v", topic, replicas, err)
	}
}

// versions returns n versions of keys key-0..key-<k-1>, then m filler records of distinct
// keys (so that the last versions lie in sealed, cleanable segments).
func versions(topic, tag string, n, k, m int) []*kgo.Record {
	var recs []*kgo.Record
	for v := range n {
		for i := range k {
			recs = append(recs, record(topic, fmt.Sprintf("key-%d", i), fmt.Sprintf("%s-%d-%d", tag, i, v)))
		}
	}
	for i := range m {
		recs = append(recs, record(topic, fmt.Sprintf("%s-filler-%03d", tag, i), "f"))
	}
	return recs
}

// onceEach reports whether every key appears once among recs.
func onceEach(recs []keptRecord) (bool, string) {
	seen := map[string]int64{}
	for _, r := range recs {
		if o, ok := seen[r.key]; ok {
			return false, fmt.Sprintf("%d records; key %s at %d and %d", len(recs), r.key, o, r.off)
		}
		seen[r.key] = r.off
	}
	return true, ""
}

// TestReplicasCompactToTheSameRecords: in a 3-node cluster a compacted topic with small
// segments is written on replicas [1 2] while 2 is down (kill -9); the leader compacts; 2
// comes back and catches up from the compacted leader, and a reassignment adds 3, which
// copies the compacted log. Then more versions of the same keys reach all three replicas
// uncompacted (acks=all), and each replica's own cleaner compacts them. After killing the
// nodes every replica's segment files hold exactly the last record of each key, at the
// offset it was written at, the same on all three.
func TestReplicasCompactToTheSameRecords(t *testing.T) {
	c := testutil.StartCluster(t, testutil.ClusterOptions{Nodes: 3, Sets: cleanerSets})
	const topic = "kv"
	cl := c.Client(t, kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	c.WaitFor(t, 30*time.Second, func() bool {
		req := kmsg.NewPtrMetadataRequest()
		resp, err := req.RequestWith(ctxT(t, 5*time.Second), cl)
		return err == nil && len(resp.Brokers) == 3
	}, "3 brokers in metadata")
	createAssigned(t, cl, topic, []int32{1, 2}, map[string]string{
		"cleanup.policy": "compact", "segment.bytes": "2048", "min.cleanable.dirty.ratio": "0.01",
	})
	replication.WaitPartition(t, c, topic, 0, 30*time.Second, func(s replication.PartitionState) bool {
		return s.Leader == 1 && len(s.ISR) == 2
	}, "leader 1 and ISR [1 2]")
	dir := func(id int32) string { return filepath.Join(c.Node(id).Dir, topic+"-0") }

	c.Node(2).Kill()
	var written []keptRecord
	produceAll := func(recs []*kgo.Record) {
		t.Helper()
		for len(recs) > 0 {
			n := min(50, len(recs))
			res := cl.ProduceSync(ctxT(t, 30*time.Second), recs[:n]...)
			if err := res.FirstErr(); err != nil {
				t.Fatal(err)
			}
			for _, r := range res {
				written = append(written, keptRecord{r.Record.Offset, string(r.Record.Key), string(r.Record.Value)})
			}
			recs = recs[n:]
		}
	}
	produceAll(versions(topic, "a", 100, 5, 100))
	waitFor(t, 30*time.Second, "the leader compacting while 2 is down", func() (bool, string) {
		recs, err := replicaRecords(dir(1))
		if err != nil {
			return false, err.Error()
		}
		return onceEach(recs)
	})

	c.Node(2).Start()
	reassign(t, cl, topic, []int32{1, 2, 3})
	replication.WaitPartition(t, c, topic, 0, 60*time.Second, func(s replication.PartitionState) bool {
		return slices.Equal(s.Replicas, []int32{1, 2, 3}) && slices.Equal(s.ISR, []int32{1, 2, 3})
	}, "replicas and ISR [1 2 3]")
	// The replicas that caught up from the compacted leader hold its gaps.
	for _, id := range []int32{2, 3} {
		recs, err := replicaRecords(dir(id))
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(recs)) >= int64(len(written)) {
			t.Fatalf("node %d caught up with %d records of %d written: not the compacted log", id, len(recs), len(written))
		}
	}

	// Acknowledged by all three: each holds these versions until its own cleaner runs.
	produceAll(versions(topic, "b", 100, 5, 100))
	for _, id := range []int32{1, 2, 3} {
		waitFor(t, 30*time.Second, fmt.Sprintf("node %d compacting its own log", id), func() (bool, string) {
			recs, err := replicaRecords(dir(id))
			if err != nil {
				return false, err.Error()
			}
			if n := len(recs); n == 0 || recs[n-1].off != written[len(written)-1].off {
				return false, fmt.Sprintf("%d records, not up to offset %d", n, written[len(written)-1].off)
			}
			return onceEach(recs)
		})
	}
	for _, n := range c.Nodes() {
		n.Kill()
	}
	want := lastPerKey(written)
	for _, id := range []int32{1, 2, 3} {
		got, err := replicaRecords(dir(id))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			i := 0
			for i < len(got) && i < len(want) && got[i] == want[i] {
				i++
			}
			t.Errorf("node %d: %d records, want the %d last of each key; from record %d got %v, want %v",
				id, len(got), len(want), i, got[i:min(len(got), i+3)], want[i:min(len(want), i+3)])
		}
	}
	t.Logf("%d records written; each of 3 replicas holds the %d last of each key at their offsets", len(written), len(want))
}
