package api_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
)

// A share-partition's state survives a restart (__share_group_state): records accepted
// before it never come back, records acquired and not acknowledged are delivered again
// with their delivery count kept, and nothing is skipped.
func TestShareStateSurvivesRestart(t *testing.T) {
	b := testutil.StartBroker(t, shareBroker...)
	c := shareTopic(t, b.Addr(), "durable", "g-durable", 1, 10)[0]
	got, _ := c.fetch(nil, 100, 0)
	if len(got) != 10 {
		t.Fatalf("acquired %v, want offsets 0-9", got)
	}
	if code := c.acknowledge(ack(0, 3, ackAccept), ack(4, 4, ackReject)); code != 0 {
		t.Fatalf("accept 0-3, reject 4: %v", kerr.ErrorForCode(code))
	}

	b = b.Restart()
	c = joinShare(t, b.Addr(), "g-durable", "durable", "g-durable-after")
	var again []shareRec
	for tries := 0; len(again) < 5 && tries < 40; tries++ {
		more, _ := c.fetch(nil, 100, 500)
		again = append(again, more...)
	}
	for i, r := range again {
		if r.off != int64(5+i) || r.deliveries != 2 {
			t.Fatalf("after the restart delivered %v, want offsets 5-9 with delivery count 2", again)
		}
	}
	if code := c.acknowledge(ack(5, 9, ackAccept)); code != 0 {
		t.Fatalf("accept 5-9 after the restart: %v", kerr.ErrorForCode(code))
	}

	b = b.Restart()
	c = joinShare(t, b.Addr(), "g-durable", "durable", "g-durable-last")
	if more, _ := c.fetch(nil, 100, 0); len(more) != 0 {
		t.Fatalf("after the second restart delivered %v, want nothing: 0-9 are done", more)
	}
}

// Records acquired but never acknowledged when the broker restarts are delivered again: the
// share-partition's start offset was made durable before its first fetch, so the new
// leader does not start afresh at the high watermark past them.
func TestShareStateRestartRedeliversUnacknowledged(t *testing.T) {
	b := testutil.StartBroker(t, shareBroker...)
	c := shareTopic(t, b.Addr(), "unacked", "g-unacked", 1, 10)[0]
	if got, _ := c.fetch(nil, 100, 0); len(got) != 10 {
		t.Fatalf("acquired %v, want offsets 0-9", got)
	}
	b = b.Restart()
	c = joinShare(t, b.Addr(), "g-unacked", "unacked", "g-unacked-after")
	var again []shareRec
	for tries := 0; len(again) < 10 && tries < 40; tries++ {
		more, _ := c.fetch(nil, 100, 500)
		again = append(again, more...)
	}
	if len(again) != 10 {
		t.Fatalf("after the restart delivered %v, want offsets 0-9", again)
	}
	for i, r := range again {
		if r.off != int64(i) {
			t.Fatalf("after the restart delivered %v, want offsets 0-9", again)
		}
	}
}

// InitializeShareGroupState sets a share-partition's state (start offset, state epoch, no
// batches, leader epoch 0) on its share coordinator, refusing an older state epoch and a
// partition the topic does not have; ReadShareGroupStateSummary reads it back without the
// batches, and a share-partition without state as start offset -1.
func TestShareStateInitializeAndSummary(t *testing.T) {
	b := testutil.StartBroker(t, shareBroker...)
	c := shareTopic(t, b.Addr(), "init", "g-init", 1, 10)[0]
	if got, _ := c.fetch(nil, 100, 0); len(got) != 10 {
		t.Fatalf("acquired %v, want offsets 0-9", got)
	}
	conn := dialGroupConn(t, b.Addr())
	summary := func(group string, partition int32) kmsg.ReadShareGroupStateSummaryResponseTopicPartition {
		t.Helper()
		r := kmsg.NewPtrReadShareGroupStateSummaryRequest()
		r.GroupID = group
		r.Topics = []kmsg.ReadShareGroupStateSummaryRequestTopic{{TopicID: c.topicID,
			Partitions: []kmsg.ReadShareGroupStateSummaryRequestTopicPartition{{Partition: partition, LeaderEpoch: -1}}}}
		return conn.do(r, 0).(*kmsg.ReadShareGroupStateSummaryResponse).Topics[0].Partitions[0]
	}
	initialize := func(partition, stateEpoch int32, start int64) int16 {
		t.Helper()
		r := kmsg.NewPtrInitializeShareGroupStateRequest()
		r.GroupID = "g-init"
		r.Topics = []kmsg.InitializeShareGroupStateRequestTopic{{TopicID: c.topicID,
			Partitions: []kmsg.InitializeShareGroupStateRequestTopicPartition{{Partition: partition, StateEpoch: stateEpoch, StartOffset: start}}}}
		return conn.do(r, 0).(*kmsg.InitializeShareGroupStateResponse).Topics[0].Partitions[0].ErrorCode
	}

	before := summary("g-init", 0)
	if before.ErrorCode != 0 || before.StartOffset != 0 {
		t.Fatalf("summary before: %+v, want start offset 0", before)
	}
	if code := initialize(0, before.StateEpoch+1, 7); code != 0 {
		t.Fatalf("initialize: %v", kerr.ErrorForCode(code))
	}
	after := summary("g-init", 0)
	if after.ErrorCode != 0 || after.StartOffset != 7 || after.StateEpoch != before.StateEpoch+1 || after.LeaderEpoch != 0 {
		t.Fatalf("summary after initialize: %+v, want start offset 7, state epoch %d, leader epoch 0", after, before.StateEpoch+1)
	}
	if code := initialize(0, before.StateEpoch, 3); code != kerr.FencedStateEpoch.Code {
		t.Fatalf("initialize in an older state epoch: %v, want FENCED_STATE_EPOCH", kerr.ErrorForCode(code))
	}
	if code := initialize(5, 1, 0); code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("initialize of a partition the topic lacks: %v", kerr.ErrorForCode(code))
	}
	if code := initialize(-1, 1, 0); code != kerr.InvalidRequest.Code {
		t.Fatalf("initialize of partition -1: %v", kerr.ErrorForCode(code))
	}
	if s := summary("g-init", 0); s.StartOffset != 7 {
		t.Fatalf("summary after refused initializes: %+v", s)
	}
}

// DescribeShareGroupOffsets answers a named share-partition this broker does not hold in
// memory from its share coordinator's summary: its persisted start offset, lag unknown.
func TestShareDescribeOffsetsFromSummary(t *testing.T) {
	b := testutil.StartBroker(t, shareBroker...)
	c := shareTopic(t, b.Addr(), "summ", "g-summ", 1, 10)[0]
	conn := dialGroupConn(t, b.Addr())
	// Another group's state for the same partition, written by the coordinator alone.
	init := kmsg.NewPtrInitializeShareGroupStateRequest()
	init.GroupID = "g-summ-other"
	init.Topics = []kmsg.InitializeShareGroupStateRequestTopic{{TopicID: c.topicID,
		Partitions: []kmsg.InitializeShareGroupStateRequestTopicPartition{{Partition: 0, StateEpoch: 1, StartOffset: 4}}}}
	for tries := 0; ; tries++ {
		code := conn.do(init, 0).(*kmsg.InitializeShareGroupStateResponse).Topics[0].Partitions[0].ErrorCode
		if code == 0 {
			break
		}
		if code != kerr.CoordinatorLoadInProgress.Code || tries > 1000 {
			t.Fatalf("initialize: %v", kerr.ErrorForCode(code))
		}
	}
	offs := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	offs.Groups = []kmsg.DescribeShareGroupOffsetsRequestGroup{{GroupID: "g-summ-other",
		Topics: []kmsg.DescribeShareGroupOffsetsRequestGroupTopic{{Topic: "summ", Partitions: []int32{0}}}}}
	for tries := 0; ; tries++ {
		g := conn.do(offs, 1).(*kmsg.DescribeShareGroupOffsetsResponse).Groups[0]
		if g.ErrorCode == kerr.CoordinatorLoadInProgress.Code && tries < 1000 {
			continue
		}
		if g.ErrorCode != 0 || len(g.Topics) != 1 || len(g.Topics[0].Partitions) != 1 {
			t.Fatalf("describe offsets: %+v", g)
		}
		if p := g.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.StartOffset != 4 || p.Lag != -1 {
			t.Fatalf("share-partition from the summary: %+v, want start offset 4, lag -1", p)
		}
		break
	}
}
