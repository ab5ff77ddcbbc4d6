package api_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
)

// DeleteRecords answers each partition as Kafka does (Partition.deleteRecordsOnLeader,
// ReplicaManager.deleteRecordsOnLocalLog, KafkaApis.handleDeleteRecordsRequest): -1 deletes
// up to the high watermark; an offset below -1 or above the high watermark is
// OFFSET_OUT_OF_RANGE; a topic compacted only is POLICY_VIOLATION; an internal topic
// INVALID_TOPIC_EXCEPTION; an unknown topic or partition UNKNOWN_TOPIC_OR_PARTITION. A
// failed partition's low watermark is -1. (Waiting for followers: test/replication.)
func TestDeleteRecordsErrors(t *testing.T) {
	b := testutil.StartBroker(t)
	compact := "compact"
	both := "compact,delete"
	createTopic(t, b.Addr(), "dre", 1, nil)
	createTopic(t, b.Addr(), "drc", 1, map[string]*string{"cleanup.policy": &compact})
	createTopic(t, b.Addr(), "drb", 1, map[string]*string{"cleanup.policy": &both})
	cl := newClient(t, b.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for _, topic := range []string{"dre", "drc", "drb"} {
		for i := range 10 {
			produceSync(t, cl, &kgo.Record{Topic: topic, Key: []byte{byte(i)}, Value: []byte{byte(i)}})
		}
	}
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey, fc.CoordinatorKeys = "g", []string{"g"} // creates __consumer_offsets
	request[*kmsg.FindCoordinatorResponse](t, cl, fc)

	for _, c := range []struct {
		topic     string
		partition int32
		offset    int64
		err       error
		lw        int64
	}{
		{"dre", 0, 3, nil, 3},
		{"dre", 0, 2, nil, 3}, // below the log start: nothing moves
		{"dre", 0, -1, nil, 10},
		{"dre", 0, 11, kerr.OffsetOutOfRange, -1},
		{"dre", 0, -2, kerr.OffsetOutOfRange, -1},
		{"dre", 1, 0, kerr.UnknownTopicOrPartition, -1},
		{"nope", 0, 0, kerr.UnknownTopicOrPartition, -1},
		{"drc", 0, 5, kerr.PolicyViolation, -1},
		{"drb", 0, 5, nil, 5},
		{"__consumer_offsets", 0, 0, kerr.InvalidTopicException, -1},
	} {
		req := kmsg.NewPtrDeleteRecordsRequest()
		req.TimeoutMillis = 5000
		rt := kmsg.NewDeleteRecordsRequestTopic()
		rt.Topic = c.topic
		rp := kmsg.NewDeleteRecordsRequestTopicPartition()
		rp.Partition, rp.Offset = c.partition, c.offset
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := cl.SeedBrokers()[0].Request(ctxT(t), req)
		if err != nil {
			t.Fatal(err)
		}
		r := resp.(*kmsg.DeleteRecordsResponse)
		if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
			t.Fatalf("%s-%d: answer %+v", c.topic, c.partition, r)
		}
		p := r.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(p.ErrorCode); err != c.err || p.LowWatermark != c.lw {
			t.Errorf("delete %s-%d below %d: low watermark %d, %v; want %d, %v", c.topic, c.partition, c.offset, p.LowWatermark, err, c.lw, c.err)
		}
	}
}
