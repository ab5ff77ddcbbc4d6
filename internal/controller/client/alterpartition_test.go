package client

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/controller/state"
)

// The partition leader shrinks its ISR with AlterPartition (v3, broker epochs per member);
// a change based on a stale partition epoch is INVALID_UPDATE_VERSION; v0 names the topic.
// AllocateProducerIds hands out disjoint blocks.
func TestAlterPartitionAndProducerIDs(t *testing.T) {
	c := newCluster(t, 3, nil)
	c.waitActive()
	cl := c.client()
	epochs := map[int32]int64{}
	for id := range int32(3) {
		registerUnfenced(t, cl, id)
	}
	// registerUnfenced does not return the epoch; read the registrations from the log.
	_, _ = readUntil(t, cl.MetadataLog(), 1, func(recs []state.Record) bool {
		for _, r := range recs {
			if rb, ok := r.(*state.RegisterBrokerRecord); ok {
				epochs[rb.NodeID] = rb.BrokerEpoch
			}
		}
		return len(epochs) == 3
	})
	rt := createTopic(t, cl, "isr", 1, 3)
	if rt.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(rt.ErrorCode))
	}
	var part *state.PartitionRecord
	readUntil(t, cl.MetadataLog(), 1, func(recs []state.Record) bool {
		for _, r := range recs {
			if p, ok := r.(*state.PartitionRecord); ok && p.TopicID == state.UUID(rt.TopicID) {
				part = p
			}
		}
		return part != nil
	})
	leader := part.Leader
	var newISR []kmsg.AlterPartitionRequestTopicPartitionNewEpochISR
	for _, r := range part.ISR[:2] {
		newISR = append(newISR, kmsg.AlterPartitionRequestTopicPartitionNewEpochISR{BrokerID: r, BrokerEpoch: epochs[r]})
	}
	if !slices.Contains(part.ISR[:2], leader) {
		newISR[1] = kmsg.AlterPartitionRequestTopicPartitionNewEpochISR{BrokerID: leader, BrokerEpoch: epochs[leader]}
	}
	alter := func(partitionEpoch int32) *kmsg.AlterPartitionResponse {
		req := kmsg.NewPtrAlterPartitionRequest()
		req.BrokerID, req.BrokerEpoch = leader, epochs[leader]
		req.Topics = []kmsg.AlterPartitionRequestTopic{{TopicID: rt.TopicID, Partitions: []kmsg.AlterPartitionRequestTopicPartition{{
			Partition: 0, LeaderEpoch: part.LeaderEpoch, PartitionEpoch: partitionEpoch, NewEpochISR: newISR,
		}}}}
		r, err := cl.Request(testCtx(t), req)
		if err != nil {
			t.Fatal(err)
		}
		if req.Version != 3 {
			t.Fatalf("AlterPartition sent at v%d, want the highest (3)", req.Version)
		}
		return r.(*kmsg.AlterPartitionResponse)
	}
	resp := alter(part.PartitionEpoch)
	p := resp.Topics[0].Partitions[0]
	if resp.ErrorCode != 0 || p.ErrorCode != 0 || len(p.ISR) != 2 || p.PartitionEpoch != part.PartitionEpoch+1 || p.LeaderID != leader {
		t.Fatalf("shrink: top %v, partition %v %+v", kerr.ErrorForCode(resp.ErrorCode), kerr.ErrorForCode(p.ErrorCode), p)
	}
	if p := alter(part.PartitionEpoch).Topics[0].Partitions[0]; p.ErrorCode != kerr.InvalidUpdateVersion.Code {
		t.Fatalf("stale partition epoch: %v", kerr.ErrorForCode(p.ErrorCode))
	}

	// v1 names the topic; an unknown name is UNKNOWN_TOPIC_OR_PARTITION.
	req := kmsg.NewPtrAlterPartitionRequest()
	req.SetVersion(1)
	req.BrokerID, req.BrokerEpoch = leader, epochs[leader]
	req.Topics = []kmsg.AlterPartitionRequestTopic{{Topic: "nope", Partitions: []kmsg.AlterPartitionRequestTopicPartition{{Partition: 0, NewISR: []int32{leader}}}}}
	r, err := cl.Request(testCtx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if code := r.(*kmsg.AlterPartitionResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("v1 unknown topic name: %v", kerr.ErrorForCode(code))
	}

	var starts, lens []int64
	for range 2 {
		req := kmsg.NewPtrAllocateProducerIDsRequest()
		req.BrokerID, req.BrokerEpoch = 0, epochs[0]
		r, err := cl.Request(testCtx(t), req)
		if err != nil {
			t.Fatal(err)
		}
		resp := r.(*kmsg.AllocateProducerIDsResponse)
		if resp.ErrorCode != 0 || resp.ProducerIDLen <= 0 {
			t.Fatalf("allocate: %v %+v", kerr.ErrorForCode(resp.ErrorCode), resp)
		}
		starts, lens = append(starts, resp.ProducerIDStart), append(lens, int64(resp.ProducerIDLen))
	}
	if starts[1] < starts[0]+lens[0] {
		t.Fatalf("producer id blocks overlap: %v", starts)
	}
}
