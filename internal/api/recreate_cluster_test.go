package api_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
)

// Deleting a topic and creating one of the same name right after, on a cluster of three
// real processes, leaves the new topic complete: a new topic id, every partition led and
// replicated on three brokers, writable with acks=all and readable from offset 0, holding
// only its own records (nothing of the deleted topic's data comes back on any replica).
func TestDeleteAndRecreateTopicAtOnce(t *testing.T) {
	c := testutil.StartCluster(t, testutil.ClusterOptions{Nodes: 3})
	const topic, parts = "again", 6
	on := func(id int32) *kgo.Client { return newClient(t, c.Node(id).ClientAddr()) }
	ask := func(id int32, req kmsg.Request) kmsg.Response {
		t.Helper()
		resp, err := on(id).SeedBrokers()[0].Request(ctxT(t), req)
		if err != nil {
			t.Fatalf("%T to broker %d: %v", req, id, err)
		}
		return resp
	}
	create := func(id int32) kmsg.CreateTopicsResponseTopic {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 15000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, parts, 3
		req.Topics = append(req.Topics, rt)
		return ask(id, req).(*kmsg.CreateTopicsResponse).Topics[0]
	}
	var ct kmsg.CreateTopicsResponseTopic
	c.WaitFor(t, 30*time.Second, func() bool {
		ct = create(1)
		return ct.ErrorCode != kerr.InvalidReplicationFactor.Code
	}, "three active brokers")
	if ct.ErrorCode != 0 {
		t.Fatalf("create: %v", kerr.ErrorForCode(ct.ErrorCode))
	}
	ids := map[[16]byte]bool{ct.TopicID: true}
	produceAll := func(round int) {
		t.Helper()
		cl := c.Client(t, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		var rs []*kgo.Record
		for p := int32(0); p < parts; p++ {
			for i := 0; i <= int(p); i++ { // partition p gets p+1 records
				rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprintf("round%d-p%d-%d", round, p, i))})
			}
		}
		if err := cl.ProduceSync(ctxT(t), rs...).FirstErr(); err != nil {
			t.Fatalf("round %d: produce: %v", round, err)
		}
	}
	produceAll(0)

	for round := 1; round <= 3; round++ {
		// Delete through one broker and create through another, with nothing in between.
		del := kmsg.NewPtrDeleteTopicsRequest()
		del.TimeoutMillis = 15000
		dt := kmsg.NewDeleteTopicsRequestTopic()
		dt.Topic = kmsg.StringPtr(topic)
		del.Topics = append(del.Topics, dt)
		if st := ask(2, del).(*kmsg.DeleteTopicsResponse).Topics[0]; st.ErrorCode != 0 {
			t.Fatalf("round %d: delete: %v", round, kerr.ErrorForCode(st.ErrorCode))
		}
		ct := create(3)
		if ct.ErrorCode != 0 || ids[ct.TopicID] {
			t.Fatalf("round %d: create right after the delete: %v, topic id %x (seen before: %v)", round, kerr.ErrorForCode(ct.ErrorCode), ct.TopicID, ids[ct.TopicID])
		}
		ids[ct.TopicID] = true

		// Every broker's metadata shows the new topic whole, each partition led, three
		// replicas in sync.
		for _, id := range []int32{1, 2, 3} {
			c.WaitFor(t, 30*time.Second, func() bool {
				req := kmsg.NewPtrMetadataRequest()
				mt := kmsg.NewMetadataRequestTopic()
				mt.Topic = kmsg.StringPtr(topic)
				req.Topics = append(req.Topics, mt)
				md := ask(id, req).(*kmsg.MetadataResponse)
				if len(md.Topics) != 1 || md.Topics[0].ErrorCode != 0 || md.Topics[0].TopicID != ct.TopicID || len(md.Topics[0].Partitions) != parts {
					return false
				}
				for _, p := range md.Topics[0].Partitions {
					if p.ErrorCode != 0 || p.Leader < 0 || len(p.ISR) != 3 {
						return false
					}
				}
				return true
			}, fmt.Sprintf("round %d: broker %d's metadata of the new topic", round, id))
		}

		// Empty: the earliest and latest offsets of every partition are 0 on its leader.
		cl := c.Client(t)
		for p := int32(0); p < parts; p++ {
			for _, ts := range []int64{-2, -1} {
				if off := listOffsetsOffset(t, cl, topic, p, ts); off != 0 {
					t.Fatalf("round %d: partition %d of the new topic: offset %d for timestamp %d, want 0", round, p, off, ts)
				}
			}
		}
		produceAll(round)

		// Readable from offset 0, only this round's records.
		want := parts * (parts + 1) / 2
		recs := consumeN(t, c.Node(1).ClientAddr(), topic, want)
		perPart := map[int32]int64{}
		for _, r := range recs {
			if !strings.HasPrefix(string(r.Value), fmt.Sprintf("round%d-", round)) {
				t.Fatalf("round %d: read %q at %d-%d, a record of another round", round, r.Value, r.Partition, r.Offset)
			}
			if r.Offset != perPart[r.Partition] {
				t.Fatalf("round %d: partition %d read offset %d, want %d", round, r.Partition, r.Offset, perPart[r.Partition])
			}
			perPart[r.Partition]++
		}
		if len(recs) != want {
			t.Fatalf("round %d: read %d records, want %d", round, len(recs), want)
		}
		// Every replica holds the same bytes (the records were acknowledged by all three):
		// none kept data of a deleted topic under the partition's directory name.
		sizes := map[int32]map[int32]int64{} // partition -> broker -> size
		for _, id := range []int32{1, 2, 3} {
			req := kmsg.NewPtrDescribeLogDirsRequest()
			dt := kmsg.NewDescribeLogDirsRequestTopic()
			dt.Topic = topic
			for p := int32(0); p < parts; p++ {
				dt.Partitions = append(dt.Partitions, p)
			}
			req.Topics = append(req.Topics, dt)
			for _, d := range ask(id, req).(*kmsg.DescribeLogDirsResponse).Dirs {
				for _, tp := range d.Topics {
					for _, pp := range tp.Partitions {
						if sizes[pp.Partition] == nil {
							sizes[pp.Partition] = map[int32]int64{}
						}
						sizes[pp.Partition][id] = pp.Size
					}
				}
			}
		}
		for p := int32(0); p < parts; p++ {
			if len(sizes[p]) != 3 || sizes[p][1] != sizes[p][2] || sizes[p][2] != sizes[p][3] || sizes[p][1] == 0 {
				t.Fatalf("round %d: partition %d replica sizes by broker %v, want three equal", round, p, sizes[p])
			}
		}
	}
}
