package api_test

import (
	"encoding/binary"
	"hash/crc32"
	"maps"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
)

// Error codes of the remaining error paths, each as Kafka answers it, over the wire with a
// real client. Each case sends one raw request and returns the error code the broker put in
// the field Kafka puts it in.
func TestErrorCodes(t *testing.T) {
	b := testutil.StartBroker(t)
	createTopic(t, b.Addr(), "known", 2, nil)
	createTopic(t, b.Addr(), "dotted.name", 1, nil)
	cl := newClient(t, b.Addr())

	cases := []struct {
		name string
		want *kerr.Error
		send func(t *testing.T) int16
	}{
		{"ListOffsets of an unknown partition", kerr.UnknownTopicOrPartition, func(t *testing.T) int16 {
			return listOffsets(t, cl, "known", 7, -2, -1)
		}},
		{"ListOffsets of an unknown topic", kerr.UnknownTopicOrPartition, func(t *testing.T) int16 {
			return listOffsets(t, cl, "unknown", 0, -1, -1)
		}},
		{"ListOffsets with a newer leader epoch", kerr.UnknownLeaderEpoch, func(t *testing.T) int16 {
			return listOffsets(t, cl, "known", 0, -1, 5)
		}},
		{"CreatePartitions of an unknown topic", kerr.UnknownTopicOrPartition, func(t *testing.T) int16 {
			req := kmsg.NewPtrCreatePartitionsRequest()
			rt := kmsg.NewCreatePartitionsRequestTopic()
			rt.Topic, rt.Count = "unknown", 4
			req.Topics = append(req.Topics, rt)
			req.TimeoutMillis = 5000
			return request[*kmsg.CreatePartitionsResponse](t, cl, req).Topics[0].ErrorCode
		}},
		{"DescribeConfigs of an unknown topic", kerr.UnknownTopicOrPartition, func(t *testing.T) int16 {
			req := kmsg.NewPtrDescribeConfigsRequest()
			rr := kmsg.NewDescribeConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "unknown"
			req.Resources = append(req.Resources, rr)
			return request[*kmsg.DescribeConfigsResponse](t, cl, req).Resources[0].ErrorCode
		}},
		{"IncrementalAlterConfigs with an unknown key", kerr.InvalidConfig, func(t *testing.T) int16 {
			return incrementalAlter(t, cl, "known", [2]string{"no.such.config", "1"})
		}},
		{"IncrementalAlterConfigs naming a key twice", kerr.InvalidRequest, func(t *testing.T) int16 {
			return incrementalAlter(t, cl, "known", [2]string{"retention.ms", "1000"}, [2]string{"retention.ms", "2000"})
		}},
		{"IncrementalAlterConfigs of an unknown topic", kerr.UnknownTopicOrPartition, func(t *testing.T) int16 {
			return incrementalAlter(t, cl, "unknown", [2]string{"retention.ms", "1000"})
		}},
		{"DeleteTopics v6 by an unknown topic id", kerr.UnknownTopicID, func(t *testing.T) int16 {
			req := kmsg.NewPtrDeleteTopicsRequest()
			req.SetVersion(6)
			req.TimeoutMillis = 5000
			rt := kmsg.NewDeleteTopicsRequestTopic()
			rt.TopicID = [16]byte{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
			req.Topics = append(req.Topics, rt)
			return request[*kmsg.DeleteTopicsResponse](t, cl, req).Topics[0].ErrorCode
		}},
		{"Fetch with a current leader epoch newer than the leader's", kerr.UnknownLeaderEpoch, func(t *testing.T) int16 {
			req := fetchReq(t, b.Addr(), "known", 0, 0, 0)
			req.SetVersion(12)
			req.Topics[0].Partitions[0].CurrentLeaderEpoch = 5
			return request[*kmsg.FetchResponse](t, cl, req).Topics[0].Partitions[0].ErrorCode
		}},
		{"Produce of a batch whose lastOffsetDelta disagrees with its record count", kerr.InvalidRecord, func(t *testing.T) int16 {
			bad := producerBatch(t, -1, -1, -1, 3)
			binary.BigEndian.PutUint32(bad[23:], 4) // lastOffsetDelta: 5 records claimed by offsets
			putCRC(bad)
			return produceRaw(t, cl, "known", bad).ErrorCode
		}},
		{"Produce of a batch whose record count disagrees with its lastOffsetDelta", kerr.InvalidRecord, func(t *testing.T) int16 {
			bad := producerBatch(t, -1, -1, -1, 3)
			binary.BigEndian.PutUint32(bad[57:], 2) // recordCount
			putCRC(bad)
			return produceRaw(t, cl, "known", bad).ErrorCode
		}},
		{"CreateTopics of a name differing only by '.' and '_' from an existing one", kerr.InvalidTopicException, func(t *testing.T) int16 {
			return createTopicRaw(t, cl, "dotted_name")
		}},
		{"CreateTopics of a name differing only by '_' and '.' from an existing one", kerr.InvalidTopicException, func(t *testing.T) int16 {
			createTopic(t, b.Addr(), "under_score", 1, nil)
			return createTopicRaw(t, cl, "under.score")
		}},
		// Kafka bounds the metadata records of one admin request (MAX_RECORDS_PER_USER_OP,
		// 10,000): more partitions than that in one request is POLICY_VIOLATION, found by
		// FuzzConn when a 65,538-partition CreateTopics ran the broker out of descriptors.
		{"CreateTopics of more than 10,000 partitions", kerr.PolicyViolation, func(t *testing.T) int16 {
			return createTopicsRaw(t, cl, map[string]int32{"huge": 10001})[0]
		}},
		{"CreateTopics of more than 10,000 partitions over two topics", kerr.PolicyViolation, func(t *testing.T) int16 {
			codes := createTopicsRaw(t, cl, map[string]int32{"half1": 6000, "half2": 6000})
			if codes[0] != codes[1] {
				t.Fatalf("the two topics got %v and %v", kerr.ErrorForCode(codes[0]), kerr.ErrorForCode(codes[1]))
			}
			return codes[0]
		}},
		{"CreatePartitions to more than 10,000 new partitions", kerr.PolicyViolation, func(t *testing.T) int16 {
			req := kmsg.NewPtrCreatePartitionsRequest()
			rt := kmsg.NewCreatePartitionsRequestTopic()
			rt.Topic, rt.Count = "known", 2+10001
			req.Topics = append(req.Topics, rt)
			req.TimeoutMillis = 5000
			return request[*kmsg.CreatePartitionsResponse](t, cl, req).Topics[0].ErrorCode
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.send(t); got != c.want.Code {
				t.Fatalf("got %v, want %v", kerr.ErrorForCode(got), c.want)
			}
		})
	}

	// None of the refused requests changed anything: the topics are as created, and the
	// colliding names were not created.
	md := request[*kmsg.MetadataResponse](t, cl, kmsg.NewPtrMetadataRequest())
	got := map[string]int{}
	for _, mt := range md.Topics {
		got[*mt.Topic] = len(mt.Partitions)
	}
	want := map[string]int{"known": 2, "dotted.name": 1, "under_score": 1}
	if len(got) != len(want) {
		t.Fatalf("topics after the refused requests: %v, want %v", got, want)
	}
	for n, p := range want {
		if got[n] != p {
			t.Fatalf("topics after the refused requests: %v, want %v", got, want)
		}
	}
	if off := listOffsetsOffset(t, cl, "known", 0, -1); off != 0 {
		t.Fatalf("refused batches were stored: log end offset %d", off)
	}
}

func putCRC(b []byte) {
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
}

func listOffsetsReq(topic string, part int32, ts int64, epoch int32) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = part, ts, epoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// listOffsets sends ListOffsets straight to the broker: franz-go would refuse to route a
// request for a partition its metadata does not have.
func listOffsets(t *testing.T, cl *kgo.Client, topic string, part int32, ts int64, epoch int32) int16 {
	t.Helper()
	resp, err := cl.SeedBrokers()[0].Request(ctxT(t), listOffsetsReq(topic, part, ts, epoch))
	if err != nil {
		t.Fatal(err)
	}
	return resp.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode
}

// listOffsetsOffset returns the offset ListOffsets answers for ts (-1 latest, -2 earliest).
func listOffsetsOffset(t *testing.T, cl *kgo.Client, topic string, part int32, ts int64) int64 {
	t.Helper()
	p := request[*kmsg.ListOffsetsResponse](t, cl, listOffsetsReq(topic, part, ts, -1)).Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("ListOffsets %s-%d: %v", topic, part, kerr.ErrorForCode(p.ErrorCode))
	}
	return p.Offset
}

func incrementalAlter(t *testing.T, cl *kgo.Client, topic string, kvs ...[2]string) int16 {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	for _, kv := range kvs {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = kv[0], kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(kv[1])
		rr.Configs = append(rr.Configs, c)
	}
	req.Resources = append(req.Resources, rr)
	return request[*kmsg.IncrementalAlterConfigsResponse](t, cl, req).Resources[0].ErrorCode
}

func createTopicRaw(t *testing.T, cl *kgo.Client, topic string) int16 {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 5000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, 1
	req.Topics = append(req.Topics, rt)
	return request[*kmsg.CreateTopicsResponse](t, cl, req).Topics[0].ErrorCode
}

// createTopicsRaw creates several topics in one request and returns their error codes in
// name order.
func createTopicsRaw(t *testing.T, cl *kgo.Client, partitions map[string]int32) []int16 {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 5000
	for _, name := range slices.Sorted(maps.Keys(partitions)) {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions[name], 1
		req.Topics = append(req.Topics, rt)
	}
	var codes []int16
	for _, rt := range request[*kmsg.CreateTopicsResponse](t, cl, req).Topics {
		codes = append(codes, rt.ErrorCode)
	}
	return codes
}
