package state

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestRegisterBroker(t *testing.T) {
	h := newHarness(t)
	inc1, inc2 := UUID{1, 1}, UUID{1, 2}
	reg := func(id int32, inc UUID, cluster string) ([]Record, RegisterBrokerResponse) {
		return h.c.RegisterBroker(h.now, RegisterBrokerRequest{NodeID: id, IncarnationID: inc, ClusterID: cluster,
			Endpoints: []Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 9092}}})
	}

	// A fresh broker registers fenced, with epoch 0.
	recs, resp := reg(1, inc1, testCluster)
	wantErr(t, resp.Err, nil)
	h.apply(recs)
	b := h.c.Image().Broker(1)
	if !b.Fenced || b.Epoch != 0 || b.RegisteredOffset != h.offset || b.Endpoints[0].Port != 9092 {
		t.Fatalf("registered %+v", b)
	}

	for _, tc := range []struct {
		name    string
		id      int32
		inc     UUID
		cluster string
		want    *kerr.Error
	}{
		{"other cluster", 2, inc1, "other", kerr.InconsistentClusterID},
		{"negative id", -1, inc1, testCluster, kerr.InvalidRequest},
		{"no incarnation", 2, UUID{}, testCluster, kerr.InvalidRequest},
		{"another live process with the same id", 1, inc2, testCluster, kerr.DuplicateBrokerRegistration},
	} {
		recs, resp := reg(tc.id, tc.inc, tc.cluster)
		if !isKafka(resp.Err, tc.want) || recs != nil {
			t.Errorf("%s: %v (%d records), want %s", tc.name, resp.Err, len(recs), tc.want.Message)
		}
	}

	// The same incarnation retrying gets a new epoch.
	recs, resp = reg(1, inc1, testCluster)
	wantErr(t, resp.Err, nil)
	h.apply(recs)
	if resp.BrokerEpoch != 1 || h.epoch(1) != 1 {
		t.Fatalf("retry epoch %d / %d", resp.BrokerEpoch, h.epoch(1))
	}

	// Once the old session has expired a new process may take the id.
	h.now += 9001
	recs, resp = reg(1, inc2, testCluster)
	wantErr(t, resp.Err, nil)
	h.apply(recs)
	if h.c.Image().Broker(1).IncarnationID != inc2 || resp.BrokerEpoch != 2 {
		t.Fatalf("takeover: %+v", h.c.Image().Broker(1))
	}

	// Bad endpoints.
	_, resp = h.c.RegisterBroker(h.now, RegisterBrokerRequest{NodeID: 5, IncarnationID: inc1, ClusterID: testCluster,
		Endpoints: []Endpoint{{Name: "A", Port: 1}, {Name: "A", Port: 2}}})
	wantErr(t, resp.Err, kerr.InvalidRequest)
}

func TestHeartbeatUnfencesWhenCaughtUp(t *testing.T) {
	h := newHarness(t)
	recs, resp := h.c.RegisterBroker(h.now, RegisterBrokerRequest{NodeID: 1, IncarnationID: UUID{1}, ClusterID: testCluster})
	h.apply(recs)
	epoch := resp.BrokerEpoch
	regOffset := h.offset

	// Behind the registration: stays fenced, no records.
	recs, hb := h.c.Heartbeat(h.now, HeartbeatRequest{NodeID: 1, BrokerEpoch: epoch, CurrentMetadataOffset: regOffset - 1})
	if hb.Err != nil || hb.IsCaughtUp || !hb.IsFenced || recs != nil {
		t.Fatalf("behind: %+v %v", hb, recs)
	}
	// Caught up: unfenced.
	recs, hb = h.c.Heartbeat(h.now, HeartbeatRequest{NodeID: 1, BrokerEpoch: epoch, CurrentMetadataOffset: regOffset})
	if hb.Err != nil || !hb.IsCaughtUp || hb.IsFenced || len(recs) != 1 {
		t.Fatalf("caught up: %+v %v", hb, recs)
	}
	h.apply(recs)
	if h.c.Image().Broker(1).Fenced {
		t.Fatal("still fenced")
	}
	// Steady state: no records.
	recs, hb = h.c.Heartbeat(h.now, HeartbeatRequest{NodeID: 1, BrokerEpoch: epoch, CurrentMetadataOffset: h.offset})
	if hb.Err != nil || hb.IsFenced || recs != nil {
		t.Fatalf("steady: %+v %v", hb, recs)
	}
	// Wrong epoch, unknown broker.
	_, hb = h.c.Heartbeat(h.now, HeartbeatRequest{NodeID: 1, BrokerEpoch: epoch + 1})
	wantErr(t, hb.Err, kerr.StaleBrokerEpoch)
	_, hb = h.c.Heartbeat(h.now, HeartbeatRequest{NodeID: 9})
	wantErr(t, hb.Err, kerr.BrokerIDNotRegistered)
	// WantFence fences.
	recs, hb = h.c.Heartbeat(h.now, HeartbeatRequest{NodeID: 1, BrokerEpoch: epoch, CurrentMetadataOffset: h.offset, WantFence: true})
	h.apply(recs)
	if !hb.IsFenced || !h.c.Image().Broker(1).Fenced {
		t.Fatal("WantFence did not fence")
	}
}

func TestSessionExpiryFencesAndElects(t *testing.T) {
	for _, tc := range []struct {
		name           string
		brokerUnclean  bool
		topicUnclean   string // "" = no override
		wantUnclean    bool
		wantLeaderGone bool
	}{
		{name: "clean only", wantLeaderGone: true},
		{name: "broker default unclean", brokerUnclean: true, wantUnclean: true},
		{name: "topic override unclean", topicUnclean: "true", wantUnclean: true},
		{name: "topic override clean beats broker", brokerUnclean: true, topicUnclean: "false", wantLeaderGone: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.UncleanLeaderElection = tc.brokerUnclean })
			h.brokers(3)
			var cfg []string
			if tc.topicUnclean != "" {
				cfg = []string{"unclean.leader.election.enable", tc.topicUnclean}
			}
			h.createTopic("t", 3, 3, cfg...)
			h.c.ActivateSessions(h.now, -1)
			// Make partition 0: replicas [1 2 3], ISR [1] (2 and 3 fell behind), leader 1.
			p := h.part("t", 0)
			h.apply([]Record{&PartitionChangeRecord{TopicID: h.c.Image().Topic("t").ID, Partition: 0, PartitionEpoch: p.PartitionEpoch,
				Fields: ChangeLeader | ChangeISR, BumpLeaderEpoch: p.Leader != 1, Leader: 1, ISR: ids(1)}})
			before := map[int32]*Partition{}
			for i, p := range h.c.Image().Topic("t").Partitions {
				before[int32(i)] = p
			}

			// Brokers 2 and 3 heartbeat, 1 goes silent.
			for step := 0; step < 4; step++ {
				h.now += 3000
				h.heartbeat(2, h.epoch(2))
				h.heartbeat(3, h.epoch(3))
				recs, fenced, unclean := h.c.ExpireSessions(h.now)
				if step < 3 { // 3 s, 6 s, 9 s: within the 9 s session
					if recs != nil {
						t.Fatalf("step %d: fenced %v too early", step, fenced)
					}
					continue
				}
				if !slices.Equal(fenced, ids(1)) {
					t.Fatalf("fenced %v, want [1]", fenced)
				}
				h.apply(recs)
				if tc.wantUnclean != (len(unclean) == 1) {
					t.Fatalf("unclean elections %v", unclean)
				}
				break
			}
			if !h.c.Image().Broker(1).Fenced {
				t.Fatal("broker 1 not fenced")
			}
			for i, p := range h.c.Image().Topic("t").Partitions {
				old := before[int32(i)]
				if p.Leader == 1 || contains(p.ISR, 1) && len(p.ISR) > 1 {
					t.Errorf("partition %d still has broker 1: %v", i, p)
				}
				if old.Leader == 1 && p.LeaderEpoch != old.LeaderEpoch+1 {
					t.Errorf("partition %d leader epoch %d -> %d", i, old.LeaderEpoch, p.LeaderEpoch)
				}
			}
			p0 := h.part("t", 0)
			switch {
			case tc.wantLeaderGone:
				if p0.Leader != NoLeader || !slices.Equal(p0.ISR, ids(1)) {
					t.Fatalf("clean: partition 0 = %v, want no leader and ISR [1]", p0)
				}
			case tc.wantUnclean:
				if p0.Leader != 2 || !slices.Equal(p0.ISR, ids(2)) {
					t.Fatalf("unclean: partition 0 = %v, want leader 2 ISR [2]", p0)
				}
			}

			// Broker 1 comes back: re-registers (new incarnation), catches up, is unfenced,
			// and a leaderless partition whose ISR it is in gets it back as leader.
			recs, resp := h.c.RegisterBroker(h.now, RegisterBrokerRequest{NodeID: 1, IncarnationID: UUID{1, 9}, ClusterID: testCluster})
			wantErr(t, resp.Err, nil)
			h.apply(recs)
			h.heartbeat(1, resp.BrokerEpoch)
			if tc.wantLeaderGone {
				if p0 := h.part("t", 0); p0.Leader != 1 {
					t.Fatalf("after return: partition 0 = %v, want leader 1", p0)
				}
			}
		})
	}
}

// A fenced replica that unfences as the only live replica of a leaderless partition becomes
// its leader uncleanly (where the topic allows it), and its heartbeat says so, so the
// controller can log the election as it logs those of a session expiry.
func TestHeartbeatUnfenceReportsUncleanElection(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.UncleanLeaderElection = true })
	h.brokers(2)
	h.c.ActivateSessions(h.now, -1)
	h.manual("t", ids(1, 2))
	// Broker 2 is fenced (cut off), leaving ISR [1]; then broker 1's session expires.
	recs, _ := h.c.Heartbeat(h.now, HeartbeatRequest{NodeID: 2, BrokerEpoch: h.epoch(2), CurrentMetadataOffset: h.offset, WantFence: true})
	h.apply(recs)
	if p := h.part("t", 0); p.Leader != 1 || !slices.Equal(p.ISR, ids(1)) {
		t.Fatalf("partition 0 = %v, want leader 1, ISR [1] once 2 is fenced", p)
	}
	h.now += 10000
	recs, fenced, unclean := h.c.ExpireSessions(h.now)
	h.apply(recs)
	if !slices.Equal(fenced, ids(1)) || len(unclean) != 0 {
		t.Fatalf("expiry fenced %v, unclean %v; want [1] and no unclean election (2 is fenced)", fenced, unclean)
	}
	if p := h.part("t", 0); p.Leader != NoLeader {
		t.Fatalf("partition 0 = %v, want no leader", p)
	}
	hb := h.heartbeat(2, h.epoch(2))
	if p := h.part("t", 0); p.Leader != 2 || !slices.Equal(p.ISR, ids(2)) {
		t.Fatalf("partition 0 = %v, want leader 2, ISR [2]", p)
	}
	if !slices.Equal(hb.UncleanElected, []TopicPartition{{"t", 0}}) {
		t.Fatalf("heartbeat reports unclean elections %v, want [t-0]", hb.UncleanElected)
	}
}

func TestExpireSessionsStartsUnknownSessions(t *testing.T) {
	h := newHarness(t)
	h.brokers(2)
	// A new controller: no sessions known.
	c2 := New(h.c.Config())
	if err := c2.Restore(h.c.Snapshot()); err != nil {
		t.Fatal(err)
	}
	if recs, _, _ := c2.ExpireSessions(h.now + 100_000); recs != nil {
		t.Fatal("fenced brokers it never tracked")
	}
	if recs, fenced, _ := c2.ExpireSessions(h.now + 100_000 + 9001); len(fenced) != 2 || recs == nil {
		t.Fatalf("fenced %v after a full session without heartbeats", fenced)
	}
	// ActivateSessions restarts every session.
	c2.ActivateSessions(h.now+200_000, -1)
	if recs, _, _ := c2.ExpireSessions(h.now + 200_000 + 9000); recs != nil {
		t.Fatal("fenced within the session timeout after activation")
	}
}

func TestControlledShutdown(t *testing.T) {
	h := newHarness(t)
	h.brokers(3)
	h.createTopic("t", 6, 2)
	h.createTopic("solo", 1, 1) // partitions whose only replica may be broker 1
	// Make sure broker 1 is the only replica of "solo"'s partition 0.
	solo := h.part("solo", 0)
	led := 0
	for _, p := range h.c.Image().Topic("t").Partitions {
		if p.Leader == 1 {
			led++
		}
	}
	if led == 0 {
		t.Fatal("broker 1 leads nothing; placement test setup")
	}
	recs, hb := h.c.Heartbeat(h.now, HeartbeatRequest{NodeID: 1, BrokerEpoch: h.epoch(1), CurrentMetadataOffset: h.offset, WantShutDown: true})
	wantErr(t, hb.Err, nil)
	h.apply(recs)
	b := h.c.Image().Broker(1)
	if !b.InControlledShutdown || !b.Fenced {
		t.Fatalf("broker 1 %+v: want in controlled shutdown and, leading nothing, fenced", b)
	}
	for i, p := range h.c.Image().Topic("t").Partitions {
		if p.Leader == 1 || contains(p.ISR, 1) {
			t.Errorf("t-%d: %v still has broker 1", i, p)
		}
		if p.Leader == NoLeader {
			t.Errorf("t-%d lost its leader", i)
		}
	}
	p := h.part("solo", 0)
	if solo.Replicas[0] == 1 {
		if p.Leader != NoLeader || !slices.Equal(p.ISR, ids(1)) {
			t.Errorf("solo: %v", p)
		}
	}
	if !hb.ShouldShutDown {
		t.Error("ShouldShutDown false although broker 1 leads nothing now")
	}
	// Heartbeats while shutting down: no more records, ShouldShutDown stays.
	recs, hb = h.c.Heartbeat(h.now, HeartbeatRequest{NodeID: 1, BrokerEpoch: h.epoch(1), CurrentMetadataOffset: h.offset, WantShutDown: true})
	if recs != nil || !hb.ShouldShutDown {
		t.Fatalf("second shutdown heartbeat: %v %+v", recs, hb)
	}
	// A shutting-down broker receives no new replicas.
	recs, res := h.c.CreateTopics(CreateTopicsRequest{Topics: []CreatableTopic{{Name: "x", NumPartitions: 3, ReplicationFactor: 3}}})
	wantErr(t, res[0].Err, kerr.InvalidReplicationFactor)
	if recs != nil {
		t.Fatal("records for a failed create")
	}
	// Its next process registers at once: the stopped one's session ended with the shutdown.
	recs, reg := h.c.RegisterBroker(h.now+1, RegisterBrokerRequest{NodeID: 1, IncarnationID: UUID{9}, ClusterID: testCluster})
	wantErr(t, reg.Err, nil)
	h.apply(recs)
}

func TestActivateSessionsExpiresLocalBrokersEarlierProcess(t *testing.T) {
	h := newHarness(t)
	h.brokers(2)
	old := h.c.Image().Broker(1).IncarnationID
	// The controller process restarts with its co-located broker 1 (a new incarnation).
	c := New(Config{ClusterID: testCluster, HasLocalBroker: true, LocalBroker: 1, LocalIncarnation: UUID{7}})
	if err := c.Restore(h.c.Snapshot()); err != nil {
		t.Fatal(err)
	}
	c.ActivateSessions(h.now, -1)
	if _, resp := c.RegisterBroker(h.now, RegisterBrokerRequest{NodeID: 1, IncarnationID: UUID{7}, ClusterID: testCluster}); resp.Err != nil {
		t.Fatalf("restarted local broker (old incarnation %s): %v", old, resp.Err)
	}
	// Another broker's live registration is still protected.
	if _, resp := c.RegisterBroker(h.now, RegisterBrokerRequest{NodeID: 2, IncarnationID: UUID{8}, ClusterID: testCluster}); !isKafka(resp.Err, kerr.DuplicateBrokerRegistration) {
		t.Fatalf("broker 2 impostor: %v", resp.Err)
	}
}

func TestReRegistrationGivesUpLeadership(t *testing.T) {
	h := newHarness(t)
	h.brokers(3)
	h.createTopic("t", 3, 3)
	h.now += 20_000 // old session expired (a kill -9 and restart)
	recs, resp := h.c.RegisterBroker(h.now, RegisterBrokerRequest{NodeID: 2, IncarnationID: UUID{2, 2}, ClusterID: testCluster})
	wantErr(t, resp.Err, nil)
	h.apply(recs)
	for i, p := range h.c.Image().Topic("t").Partitions {
		if p.Leader == 2 || contains(p.ISR, 2) {
			t.Errorf("t-%d: %v: the restarted broker kept its leadership or ISR place", i, p)
		}
	}
}

func TestUnregisterBroker(t *testing.T) {
	h := newHarness(t)
	h.brokers(2)
	h.createTopic("t", 2, 2)
	recs, err := h.c.UnregisterBroker(1)
	wantErr(t, err, nil)
	h.apply(recs)
	if h.c.Image().Broker(1) != nil {
		t.Fatal("still registered")
	}
	for _, p := range h.c.Image().Topic("t").Partitions {
		if p.Leader != 2 || !slices.Equal(p.ISR, ids(2)) {
			t.Errorf("%v", p)
		}
	}
	_, err = h.c.UnregisterBroker(1)
	wantErr(t, err, kerr.BrokerIDNotRegistered)
}

func TestAllocateProducerIDs(t *testing.T) {
	h := newHarness(t)
	h.brokers(1)
	var starts []int64
	for range 3 {
		recs, resp := h.c.AllocateProducerIDs(1, h.epoch(1))
		wantErr(t, resp.Err, nil)
		h.apply(recs)
		starts = append(starts, resp.Start)
	}
	if !slices.Equal(starts, []int64{0, 1000, 2000}) || h.c.Image().NextProducerID() != 3000 {
		t.Fatalf("blocks %v next %d", starts, h.c.Image().NextProducerID())
	}
	_, resp := h.c.AllocateProducerIDs(1, 99)
	wantErr(t, resp.Err, kerr.StaleBrokerEpoch)
	_, resp = h.c.AllocateProducerIDs(7, 0)
	wantErr(t, resp.Err, kerr.BrokerIDNotRegistered)
}

// A newly active controller gives the broker on the former controller's node half a session:
// dead with its controller, it is fenced half a session timeout sooner than the others; alive,
// one heartbeat keeps it.
func TestActivateSessionsShortensFormerControllersBroker(t *testing.T) {
	h := newHarness(t)
	h.brokers(3)
	timeout := h.c.Config().SessionTimeoutMs
	h.c.ActivateSessions(h.now, 1)
	// Past half a session: broker 1 is fenced, 2 and 3 are not.
	_, fenced, _ := h.c.ExpireSessions(h.now + timeout/2 + 1)
	if !slices.Equal(fenced, ids(1)) {
		t.Fatalf("fenced %v half a session after activation, want [1] (the former controller's broker)", fenced)
	}
	// Alive, it heartbeats once and keeps a full session like the others.
	h.c.ActivateSessions(h.now, 1)
	if _, hb := h.c.Heartbeat(h.now+timeout/4, HeartbeatRequest{NodeID: 1, BrokerEpoch: h.epoch(1), CurrentMetadataOffset: h.offset}); hb.Err != nil {
		t.Fatal(hb.Err)
	}
	if _, fenced, _ := h.c.ExpireSessions(h.now + timeout/2 + 1); len(fenced) != 0 {
		t.Fatalf("fenced %v although broker 1 heartbeat", fenced)
	}
}
