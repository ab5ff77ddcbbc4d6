package state

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// manual creates topic name with one partition per assignment.
func (h *harness) manual(name string, assignments ...[]int32) *Topic {
	h.t.Helper()
	recs, res := h.c.CreateTopics(CreateTopicsRequest{Topics: []CreatableTopic{{Name: name, NumPartitions: -1, ReplicationFactor: -1, Assignments: assignments}}})
	if res[0].Err != nil {
		h.t.Fatalf("create %s: %v", name, res[0].Err)
	}
	h.apply(recs)
	return h.c.Image().Topic(name)
}

// alterISR sends an AlterPartition from the current leader with the current epochs.
func (h *harness) alterISR(topic string, p int32, isr ...int32) AlterPartitionResult {
	h.t.Helper()
	t := h.c.Image().Topic(topic)
	cur := h.part(topic, p)
	recs, res, err := h.c.AlterPartition(AlterPartitionRequest{BrokerID: cur.Leader, BrokerEpoch: h.epoch(cur.Leader), Partitions: []AlterPartitionItem{
		{TopicID: t.ID, Partition: p, LeaderEpoch: cur.LeaderEpoch, PartitionEpoch: cur.PartitionEpoch, NewISR: isr},
	}})
	if err != nil {
		h.t.Fatal(err)
	}
	h.apply(recs)
	return res[0]
}

func TestAlterPartition(t *testing.T) {
	h := newHarness(t)
	h.brokers(4)
	tp := h.manual("t", ids(1, 2, 3))
	// Shrink, then expand.
	res := h.alterISR("t", 0, 1, 2)
	wantErr(t, res.Err, nil)
	p := h.part("t", 0)
	if !slices.Equal(p.ISR, ids(1, 2)) || p.PartitionEpoch != 1 || p.LeaderEpoch != 0 || res.PartitionEpoch != 1 || !slices.Equal(res.ISR, ids(1, 2)) {
		t.Fatalf("after shrink %v, result %+v", p, res)
	}
	res = h.alterISR("t", 0, 1, 2, 3)
	wantErr(t, res.Err, nil)
	if p := h.part("t", 0); !slices.Equal(p.ISR, ids(1, 2, 3)) || p.PartitionEpoch != 2 {
		t.Fatalf("after expand %v", p)
	}
	// Unchanged ISR: no record, current state returned.
	before := h.offset
	res = h.alterISR("t", 0, 1, 2, 3)
	if res.Err != nil || h.offset != before || res.PartitionEpoch != 2 {
		t.Fatalf("no-op: %+v", res)
	}

	cur := h.part("t", 0)
	item := func(mod func(*AlterPartitionItem)) AlterPartitionItem {
		it := AlterPartitionItem{TopicID: tp.ID, Partition: 0, LeaderEpoch: cur.LeaderEpoch, PartitionEpoch: cur.PartitionEpoch, NewISR: ids(1, 2)}
		mod(&it)
		return it
	}
	for _, tc := range []struct {
		name   string
		broker int32
		epoch  int64
		it     AlterPartitionItem
		want   *kerr.Error
	}{
		{"not the leader", 2, h.epoch(2), item(func(*AlterPartitionItem) {}), kerr.NotLeaderForPartition},
		{"old leader epoch", 1, h.epoch(1), item(func(i *AlterPartitionItem) { i.LeaderEpoch-- }), kerr.FencedLeaderEpoch},
		{"newer leader epoch", 1, h.epoch(1), item(func(i *AlterPartitionItem) { i.LeaderEpoch++ }), kerr.FencedLeaderEpoch},
		{"old partition epoch", 1, h.epoch(1), item(func(i *AlterPartitionItem) { i.PartitionEpoch-- }), kerr.InvalidUpdateVersion},
		{"leader missing from ISR", 1, h.epoch(1), item(func(i *AlterPartitionItem) { i.NewISR = ids(2, 3) }), kerr.InvalidRequest},
		{"not a set", 1, h.epoch(1), item(func(i *AlterPartitionItem) { i.NewISR = ids(1, 1) }), kerr.InvalidRequest},
		{"not a replica", 1, h.epoch(1), item(func(i *AlterPartitionItem) { i.NewISR = ids(1, 4) }), kerr.IneligibleReplica},
		{"unknown topic", 1, h.epoch(1), item(func(i *AlterPartitionItem) { i.TopicID = UUID{5} }), kerr.UnknownTopicID},
		{"unknown partition", 1, h.epoch(1), item(func(i *AlterPartitionItem) { i.Partition = 3 }), kerr.UnknownTopicOrPartition},
	} {
		recs, res, err := h.c.AlterPartition(AlterPartitionRequest{BrokerID: tc.broker, BrokerEpoch: tc.epoch, Partitions: []AlterPartitionItem{tc.it}})
		if err != nil || recs != nil || !isKafka(res[0].Err, tc.want) {
			t.Errorf("%s: %v / %v (%d records)", tc.name, err, res[0].Err, len(recs))
		}
	}
	_, _, err := h.c.AlterPartition(AlterPartitionRequest{BrokerID: 1, BrokerEpoch: h.epoch(1) + 5})
	wantErr(t, err, kerr.StaleBrokerEpoch)

	// A fenced broker may not rejoin the ISR.
	h.alterISR("t", 0, 1, 2)
	recs, _ := h.c.Heartbeat(h.now, HeartbeatRequest{NodeID: 3, BrokerEpoch: h.epoch(3), CurrentMetadataOffset: h.offset, WantFence: true})
	h.apply(recs)
	res = h.alterISR("t", 0, 1, 2, 3)
	wantErr(t, res.Err, kerr.IneligibleReplica)
}

func TestElectLeaders(t *testing.T) {
	h := newHarness(t)
	h.brokers(3)
	h.manual("t", ids(1, 2, 3), ids(2, 3, 1))
	// Fence 1: t-0 moves to 2. Bring 1 back: t-0 stays on 2 (no automatic move back).
	recs, _ := h.c.Heartbeat(h.now, HeartbeatRequest{NodeID: 1, BrokerEpoch: h.epoch(1), CurrentMetadataOffset: h.offset, WantFence: true})
	h.apply(recs)
	if p := h.part("t", 0); p.Leader != 2 {
		t.Fatalf("%v", p)
	}
	h.heartbeat(1, h.epoch(1))
	// Preferred election: 1 is not in the ISR yet.
	recs, res := h.c.ElectLeaders(ElectLeadersRequest{Type: ElectPreferred, Partitions: []TopicPartition{{"t", 0}, {"t", 1}, {"t", 7}}})
	wantErr(t, res[0].Err, kerr.PreferredLeaderNotAvailable)
	wantErr(t, res[1].Err, kerr.ElectionNotNeeded)
	wantErr(t, res[2].Err, kerr.UnknownTopicOrPartition)
	if recs != nil {
		t.Fatal("records")
	}
	h.alterISR("t", 0, 2, 3, 1)
	le := h.part("t", 0).LeaderEpoch
	recs, res = h.c.ElectLeaders(ElectLeadersRequest{Type: ElectPreferred}) // all partitions
	if len(res) != 1 || res[0].TopicPartition != (TopicPartition{"t", 0}) || res[0].Err != nil {
		t.Fatalf("all-partitions preferred election: %+v", res)
	}
	h.apply(recs)
	if p := h.part("t", 0); p.Leader != 1 || p.LeaderEpoch != le+1 {
		t.Fatalf("after preferred election %v", p)
	}

	// Unclean: make t-1 leaderless with ISR [2], broker 2 fenced.
	h.alterISR("t", 1, 2)
	recs, _ = h.c.Heartbeat(h.now, HeartbeatRequest{NodeID: 2, BrokerEpoch: h.epoch(2), CurrentMetadataOffset: h.offset, WantFence: true})
	h.apply(recs)
	if p := h.part("t", 1); p.Leader != NoLeader {
		t.Fatalf("%v", p)
	}
	recs, res = h.c.ElectLeaders(ElectLeadersRequest{Type: ElectUnclean, Partitions: []TopicPartition{{"t", 0}, {"t", 1}}})
	wantErr(t, res[0].Err, kerr.ElectionNotNeeded)
	wantErr(t, res[1].Err, nil)
	h.apply(recs)
	if p := h.part("t", 1); p.Leader != 3 || !slices.Equal(p.ISR, ids(3)) {
		t.Fatalf("after unclean election %v", p)
	}
	// Nobody left: ELIGIBLE_LEADERS_NOT_AVAILABLE.
	for _, id := range ids(1, 3) {
		recs, _ = h.c.Heartbeat(h.now, HeartbeatRequest{NodeID: id, BrokerEpoch: h.epoch(id), CurrentMetadataOffset: h.offset, WantFence: true})
		h.apply(recs)
	}
	_, res = h.c.ElectLeaders(ElectLeadersRequest{Type: ElectUnclean, Partitions: []TopicPartition{{"t", 1}}})
	wantErr(t, res[0].Err, kerr.EligibleLeadersNotAvailable)
}

func TestReassignment(t *testing.T) {
	h := newHarness(t)
	h.brokers(5)
	h.manual("t", ids(1, 2, 3), ids(1, 2, 3), ids(1, 2, 3))
	reassign := func(p int32, replicas []int32) ReassignmentResult {
		recs, res := h.c.AlterPartitionReassignments([]ReassignmentRequest{{Topic: "t", Partition: p, Replicas: replicas}})
		h.apply(recs)
		return res[0]
	}
	wantErr(t, reassign(1, ids(1, 2)).Err, nil)

	// Move t-0 from [1 2 3] to [4 5 3]: leader 1 is not in the target.
	wantErr(t, reassign(0, ids(4, 5, 3)).Err, nil)
	p := h.part("t", 0)
	if !slices.Equal(p.Replicas, ids(4, 5, 3, 1, 2)) || !slices.Equal(p.Adding, ids(4, 5)) || !slices.Equal(p.Removing, ids(1, 2)) || p.Leader != 1 {
		t.Fatalf("moving: %v", p)
	}
	if got := h.c.ListPartitionReassignments(nil); len(got) != 1 || got[0].Partition != 0 {
		t.Fatalf("list %+v", got)
	}
	// 4 catches up: still moving.
	wantErr(t, h.alterISR("t", 0, 1, 2, 3, 4).Err, nil)
	if p := h.part("t", 0); !p.Reassigning() {
		t.Fatalf("completed early: %v", p)
	}
	// 5 catches up: completes, leader switches to 4, old replicas leave, leader epoch bumps.
	le := h.part("t", 0).LeaderEpoch
	res := h.alterISR("t", 0, 1, 2, 3, 4, 5)
	wantErr(t, res.Err, kerr.NewLeaderElected)
	p = h.part("t", 0)
	if !slices.Equal(p.Replicas, ids(4, 5, 3)) || !slices.Equal(p.ISR, ids(3, 4, 5)) || p.Leader != 4 || p.Reassigning() || p.LeaderEpoch != le+1 {
		t.Fatalf("completed: %v", p)
	}
	if res.Leader != 4 || res.LeaderEpoch != p.LeaderEpoch {
		t.Fatalf("result %+v", res)
	}

	// Pure removal (t-2 [1 2 3] -> [1 2]) completes at once; the leader epoch bumps so the
	// removed replica is fenced.
	le = h.part("t", 2).LeaderEpoch
	wantErr(t, reassign(2, ids(1, 2)).Err, nil)
	if p := h.part("t", 2); !slices.Equal(p.Replicas, ids(1, 2)) || p.Reassigning() || p.LeaderEpoch != le+1 || p.Leader != 1 {
		t.Fatalf("removal: %v", p)
	}
	// Reorder only: immediate, new preferred leader.
	wantErr(t, reassign(2, ids(2, 1)).Err, nil)
	if p := h.part("t", 2); !slices.Equal(p.Replicas, ids(2, 1)) || p.Reassigning() || p.Leader != 1 {
		t.Fatalf("reorder: %v", p)
	}
	// Same replicas: no-op.
	before := h.offset
	wantErr(t, reassign(2, ids(2, 1)).Err, nil)
	if h.offset != before {
		t.Fatal("no-op reassignment wrote records")
	}

	// Cancel: t-1 [1 2] -> [3 4], then cancel before it catches up.
	wantErr(t, reassign(1, ids(3, 4)).Err, nil)
	wantErr(t, h.alterISR("t", 1, 1, 2, 3).Err, nil)
	wantErr(t, reassign(1, nil).Err, nil)
	if p := h.part("t", 1); !slices.Equal(p.Replicas, ids(1, 2)) || !slices.Equal(p.ISR, ids(1, 2)) || p.Reassigning() || p.Leader != 1 {
		t.Fatalf("cancelled: %v", p)
	}
	wantErr(t, reassign(1, nil).Err, kerr.NoReassignmentInProgress)

	// Replace a reassignment in flight: [1 2] -> [3 4], then -> [1 5]: 3 and 4 go again.
	wantErr(t, reassign(1, ids(3, 4)).Err, nil)
	wantErr(t, reassign(1, ids(1, 5)).Err, nil)
	p = h.part("t", 1)
	if !slices.Equal(p.Replicas, ids(1, 5, 3, 4, 2)) || !slices.Equal(p.Adding, ids(5)) || !slices.Equal(p.Removing, ids(3, 4, 2)) {
		t.Fatalf("replaced: %v", p)
	}
	wantErr(t, h.alterISR("t", 1, 1, 2, 5).Err, nil)
	if p := h.part("t", 1); !slices.Equal(p.Replicas, ids(1, 5)) || p.Reassigning() || p.Leader != 1 {
		t.Fatalf("replaced, completed: %v", p)
	}

	// Bad requests leave the cluster unchanged.
	recs, _ := h.c.Heartbeat(h.now, HeartbeatRequest{NodeID: 5, BrokerEpoch: h.epoch(5), CurrentMetadataOffset: h.offset, WantFence: true})
	h.apply(recs)
	snap := string(h.c.Image().Snapshot())
	for _, tc := range []struct {
		name string
		r    ReassignmentRequest
		want *kerr.Error
	}{
		{"unknown broker", ReassignmentRequest{"t", 2, ids(2, 9)}, kerr.InvalidReplicaAssignment},
		{"duplicate replica", ReassignmentRequest{"t", 2, ids(2, 2)}, kerr.InvalidReplicaAssignment},
		{"empty", ReassignmentRequest{"t", 2, []int32{}}, kerr.InvalidReplicaAssignment},
		{"unknown topic", ReassignmentRequest{"x", 0, ids(1)}, kerr.UnknownTopicOrPartition},
		{"unknown partition", ReassignmentRequest{"t", 9, ids(1)}, kerr.UnknownTopicOrPartition},
	} {
		recs, res := h.c.AlterPartitionReassignments([]ReassignmentRequest{tc.r})
		if recs != nil || !isKafka(res[0].Err, tc.want) {
			t.Errorf("%s: %v", tc.name, res[0].Err)
		}
	}
	recs, res2 := h.c.AlterPartitionReassignments([]ReassignmentRequest{{"t", 2, ids(1, 2)}, {"t", 2, ids(2, 1)}})
	if recs != nil || !isKafka(res2[0].Err, kerr.InvalidRequest) {
		t.Errorf("duplicate partition: %v", res2[0].Err)
	}
	if snap != string(h.c.Image().Snapshot()) {
		t.Fatal("cluster changed")
	}
}

// A registered broker that is fenced may be a reassignment's target, as Kafka's KRaft
// controller allows (only an unregistered one is INVALID_REPLICA_ASSIGNMENT): the
// reassignment is accepted and stays in progress until the broker is back and in the ISR.
func TestReassignToFencedBroker(t *testing.T) {
	h := newHarness(t)
	h.brokers(3)
	h.manual("t", ids(1, 2))
	recs, _ := h.c.Heartbeat(h.now, HeartbeatRequest{NodeID: 3, BrokerEpoch: h.epoch(3), CurrentMetadataOffset: h.offset, WantFence: true})
	h.apply(recs)
	if !h.c.Image().Broker(3).Fenced {
		t.Fatal("broker 3 not fenced")
	}
	recs, res := h.c.AlterPartitionReassignments([]ReassignmentRequest{{Topic: "t", Partition: 0, Replicas: ids(1, 2, 3)}})
	wantErr(t, res[0].Err, nil)
	h.apply(recs)
	p := h.part("t", 0)
	if !slices.Equal(p.Replicas, ids(1, 2, 3)) || !slices.Equal(p.Adding, ids(3)) || p.Removing != nil || !slices.Equal(p.ISR, ids(1, 2)) || p.Leader != 1 {
		t.Fatalf("moving to fenced 3: %v", p)
	}
	if got := h.c.ListPartitionReassignments(nil); len(got) != 1 || !slices.Equal(got[0].Adding, ids(3)) {
		t.Fatalf("list %+v", got)
	}
	// Broker 3 comes back and catches up: the reassignment completes.
	h.heartbeat(3, h.epoch(3))
	if h.c.Image().Broker(3).Fenced {
		t.Fatal("broker 3 still fenced")
	}
	wantErr(t, h.alterISR("t", 0, 1, 2, 3).Err, nil)
	if p := h.part("t", 0); !slices.Equal(p.Replicas, ids(1, 2, 3)) || p.Reassigning() || !slices.Equal(p.ISR, ids(1, 2, 3)) {
		t.Fatalf("completed: %v", p)
	}
	// An unregistered broker is still refused.
	_, res = h.c.AlterPartitionReassignments([]ReassignmentRequest{{Topic: "t", Partition: 0, Replicas: ids(1, 9)}})
	wantErr(t, res[0].Err, kerr.InvalidReplicaAssignment)
}

func TestReassignmentSurvivesLeaderFailure(t *testing.T) {
	h := newHarness(t)
	h.brokers(4)
	h.manual("t", ids(1, 2))
	recs, _ := h.c.AlterPartitionReassignments([]ReassignmentRequest{{"t", 0, ids(3, 4)}})
	h.apply(recs)
	h.alterISR("t", 0, 1, 2, 3)
	// Leader 1 dies: 2 leads (replica order, in ISR), reassignment still in progress.
	recs, _ = h.c.Heartbeat(h.now, HeartbeatRequest{NodeID: 1, BrokerEpoch: h.epoch(1), CurrentMetadataOffset: h.offset, WantFence: true})
	h.apply(recs)
	p := h.part("t", 0)
	if !p.Reassigning() || p.Leader == 1 || contains(p.ISR, 1) {
		t.Fatalf("%v", p)
	}
	// 4 catches up (ISR now 2,3,4): completes; the leader must be a target replica.
	h.alterISR("t", 0, append(slices.Clone(p.ISR), 4)...)
	p = h.part("t", 0)
	if p.Reassigning() || !slices.Equal(p.Replicas, ids(3, 4)) || !contains(ids(3, 4), p.Leader) {
		t.Fatalf("%v", p)
	}
}
