package state

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Replicas in a failed log dir leave their ISRs and lose their leaderships, and only those:
// the broker keeps leading and following its other partitions.
func TestOfflineReplicasMoveOnlyThosePartitions(t *testing.T) {
	h := newHarness(t)
	h.brokers(3)
	top := h.createTopic("t", 6, 3)
	h.createTopic("solo", 1, 1)
	before := map[int32]Partition{}
	for i, p := range top.Partitions {
		before[int32(i)] = *p
	}
	// Broker 1's failed dir held the even partitions of t.
	var failed []TopicIDPartition
	for i := int32(0); i < 6; i += 2 {
		failed = append(failed, TopicIDPartition{top.ID, i})
	}
	solo := h.c.Image().Topic("solo")
	soloOn1 := solo.Partitions[0].Replicas[0] == 1
	if soloOn1 {
		failed = append(failed, TopicIDPartition{solo.ID, 0})
	}
	recs, resp := h.c.OfflineReplicas(OfflineReplicasRequest{NodeID: 1, BrokerEpoch: h.epoch(1), Dir: UUID{9}, Partitions: failed})
	if resp.Err != nil || slices.ContainsFunc(resp.Errors, func(e error) bool { return e != nil }) {
		t.Fatalf("OfflineReplicas: %v %v", resp.Err, resp.Errors)
	}
	h.apply(recs)
	for i, p := range h.c.Image().Topic("t").Partitions {
		old := before[int32(i)]
		if i%2 == 0 {
			if p.Leader == 1 || contains(p.ISR, 1) || p.Leader == NoLeader {
				t.Errorf("failed partition %d = %+v, want broker 1 out, another leader", i, p)
			}
			if old.Leader == 1 && p.LeaderEpoch != old.LeaderEpoch+1 {
				t.Errorf("partition %d leader epoch %d -> %d", i, old.LeaderEpoch, p.LeaderEpoch)
			}
		} else if p.Leader != old.Leader || !slices.Equal(p.ISR, old.ISR) || p.LeaderEpoch != old.LeaderEpoch {
			t.Errorf("healthy partition %d changed: %+v -> %+v", i, old, *p)
		}
	}
	if soloOn1 {
		if p := h.c.Image().Topic("solo").Partitions[0]; p.Leader != NoLeader {
			t.Errorf("a partition whose only replica failed has leader %d", p.Leader)
		}
	}
	if h.c.Image().Broker(1).Fenced {
		t.Error("broker 1 fenced by one failed dir")
	}

	// Errors: a stale epoch, an unknown topic, a partition without a replica on the broker.
	_, resp = h.c.OfflineReplicas(OfflineReplicasRequest{NodeID: 1, BrokerEpoch: h.epoch(1) + 1})
	wantErr(t, resp.Err, kerr.StaleBrokerEpoch)
	other := h.createTopic("other", 1, 1)
	onOther := other.Partitions[0].Replicas[0]
	notOn := int32(1)
	if onOther == 1 {
		notOn = 2
	}
	_, resp = h.c.OfflineReplicas(OfflineReplicasRequest{NodeID: notOn, BrokerEpoch: h.epoch(notOn),
		Partitions: []TopicIDPartition{{UUID{0xEE}, 0}, {other.ID, 0}}})
	if resp.Err != nil || !isKafka(resp.Errors[0], kerr.UnknownTopicID) || !isKafka(resp.Errors[1], kerr.NotLeaderForPartition) {
		t.Errorf("errors %v %v", resp.Err, resp.Errors)
	}
}

// A registration naming a directory id twice, or a reserved one, is INVALID_REGISTRATION.
func TestRegisterBrokerChecksLogDirs(t *testing.T) {
	h := newHarness(t)
	reg := func(dirs ...UUID) error {
		_, resp := h.c.RegisterBroker(h.now, RegisterBrokerRequest{NodeID: 1, IncarnationID: UUID{1, 1}, ClusterID: testCluster,
			Endpoints: []Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 9092}}, LogDirs: dirs})
		return resp.Err
	}
	lost := UUID{}
	lost[15] = 2
	wantErr(t, reg(UUID{7}, UUID{7}), kerr.InvalidRegistration)
	wantErr(t, reg(UUID{7}, lost), kerr.InvalidRegistration)
	wantErr(t, reg(UUID{7}, UUID{8}), nil)
	wantErr(t, reg(), nil)
}
