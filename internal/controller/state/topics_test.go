package state

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// spread returns, per broker, the replicas and leaders it holds over every partition.
func spread(im *Image) (replicas, leaders map[int32]int) {
	replicas, leaders = map[int32]int{}, map[int32]int{}
	for _, t := range im.topics {
		for _, p := range t.Partitions {
			for _, r := range p.Replicas {
				replicas[r]++
			}
			leaders[p.Leader]++
		}
	}
	return replicas, leaders
}

func minMax(m map[int32]int, keys []int32) (lo, hi int) {
	lo = -1
	for _, k := range keys {
		v := m[k]
		if lo < 0 || v < lo {
			lo = v
		}
		hi = max(hi, v)
	}
	return lo, hi
}

func TestPlacementBalanced(t *testing.T) {
	for _, tc := range []struct {
		brokers, partitions, rf int
	}{
		{1, 5, 1}, {3, 3, 3}, {3, 12, 2}, {4, 10, 3}, {5, 100, 3}, {7, 50, 2}, {10, 1000, 3}, {6, 6, 1},
	} {
		t.Run(fmt.Sprintf("b%d_p%d_rf%d", tc.brokers, tc.partitions, tc.rf), func(t *testing.T) {
			h := newHarness(t)
			h.brokers(tc.brokers)
			h.createTopic("t", int32(tc.partitions), int16(tc.rf))
			var all []int32
			for i := 1; i <= tc.brokers; i++ {
				all = append(all, int32(i))
			}
			for i, p := range h.c.Image().Topic("t").Partitions {
				if len(p.Replicas) != tc.rf || !distinct(p.Replicas) || p.Leader != p.Replicas[0] || !slices.Equal(p.ISR, p.Replicas) {
					t.Fatalf("partition %d: %v", i, p)
				}
			}
			replicas, leaders := spread(h.c.Image())
			if lo, hi := minMax(replicas, all); hi-lo > 1 {
				t.Errorf("replicas per broker %v (spread %d..%d)", replicas, lo, hi)
			}
			if lo, hi := minMax(leaders, all); hi-lo > 1 {
				t.Errorf("leaders per broker %v (spread %d..%d)", leaders, lo, hi)
			}
			// Followers vary: with enough partitions a leader's first follower is not always
			// the same broker.
			if tc.brokers >= 4 && tc.rf >= 2 && tc.partitions >= 4*tc.brokers {
				follow := map[int32]map[int32]bool{}
				for _, p := range h.c.Image().Topic("t").Partitions {
					if follow[p.Replicas[0]] == nil {
						follow[p.Replicas[0]] = map[int32]bool{}
					}
					follow[p.Replicas[0]][p.Replicas[1]] = true
				}
				for l, f := range follow {
					if len(f) < 2 {
						t.Errorf("leader %d always followed by %v", l, f)
					}
				}
			}
		})
	}
}

func TestPlacementRackAware(t *testing.T) {
	h := newHarness(t)
	h.brokers(6, "a", "b", "c") // 1,4 in a; 2,5 in b; 3,6 in c
	h.createTopic("t", 60, 3)
	rack := func(id int32) string { return h.c.Image().Broker(id).Rack }
	for i, p := range h.c.Image().Topic("t").Partitions {
		racks := map[string]bool{}
		for _, r := range p.Replicas {
			racks[rack(r)] = true
		}
		if len(racks) != 3 {
			t.Fatalf("partition %d: replicas %v span racks %v", i, p.Replicas, racks)
		}
	}
	replicas, leaders := spread(h.c.Image())
	all := ids(1, 2, 3, 4, 5, 6)
	if lo, hi := minMax(replicas, all); hi-lo > 1 {
		t.Errorf("replicas %v", replicas)
	}
	if lo, hi := minMax(leaders, all); hi-lo > 1 {
		t.Errorf("leaders %v", leaders)
	}
	// RF 2 over 3 racks: still two racks per partition.
	h.createTopic("u", 30, 2)
	for i, p := range h.c.Image().Topic("u").Partitions {
		if rack(p.Replicas[0]) == rack(p.Replicas[1]) {
			t.Fatalf("u-%d: %v in one rack", i, p.Replicas)
		}
	}
	// RF 4 over 3 racks: every rack used, one twice.
	h.createTopic("v", 12, 4)
	for i, p := range h.c.Image().Topic("v").Partitions {
		racks := map[string]int{}
		for _, r := range p.Replicas {
			racks[rack(r)]++
		}
		if len(racks) != 3 {
			t.Fatalf("v-%d: %v racks %v", i, p.Replicas, racks)
		}
	}
}

func TestPlacementPrefersEmptyBrokerAndSkipsFenced(t *testing.T) {
	h := newHarness(t)
	h.brokers(3)
	h.createTopic("old", 30, 2)
	h.register(4, "")
	h.createTopic("new", 10, 1)
	// A topic's leaders are striped over the brokers (within one of each other); among equals
	// the empty broker 4 comes first.
	led := map[int32]int{}
	for _, p := range h.c.Image().Topic("new").Partitions {
		led[p.Replicas[0]]++
	}
	for id := int32(1); id <= 4; id++ {
		if led[id] < 2 || led[id] > 3 || led[id] > led[4] {
			t.Fatalf("new's leaders per broker %v: want 2-3 each, broker 4 among the most", led)
		}
	}
	// Fence broker 4: it receives nothing more.
	recs, _ := h.c.Heartbeat(h.now, HeartbeatRequest{NodeID: 4, BrokerEpoch: h.epoch(4), CurrentMetadataOffset: h.offset, WantFence: true})
	h.apply(recs)
	h.createTopic("later", 20, 3)
	for i, p := range h.c.Image().Topic("later").Partitions {
		if contains(p.Replicas, 4) {
			t.Fatalf("later-%d placed on fenced broker 4", i)
		}
	}
	_, res := h.c.CreateTopics(CreateTopicsRequest{Topics: []CreatableTopic{{Name: "rf4", NumPartitions: 1, ReplicationFactor: 4}}})
	wantErr(t, res[0].Err, kerr.InvalidReplicationFactor)
}

func TestCreateTopicsValidation(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.DefaultPartitions = 3; c.DefaultReplicationFactor = 2 })
	h.brokers(3)
	h.createTopic("exists", 1, 1)
	long := strings.Repeat("x", 250)
	for _, tc := range []struct {
		name string
		ct   CreatableTopic
		want *kerr.Error
	}{
		{"ok defaults", CreatableTopic{Name: "d", NumPartitions: -1, ReplicationFactor: -1}, nil},
		{"empty name", CreatableTopic{Name: "", NumPartitions: 1, ReplicationFactor: 1}, kerr.InvalidTopicException},
		{"dot", CreatableTopic{Name: ".", NumPartitions: 1, ReplicationFactor: 1}, kerr.InvalidTopicException},
		{"bad char", CreatableTopic{Name: "a/b", NumPartitions: 1, ReplicationFactor: 1}, kerr.InvalidTopicException},
		{"too long", CreatableTopic{Name: long, NumPartitions: 1, ReplicationFactor: 1}, kerr.InvalidTopicException},
		{"exists", CreatableTopic{Name: "exists", NumPartitions: 1, ReplicationFactor: 1}, kerr.TopicAlreadyExists},
		{"zero partitions", CreatableTopic{Name: "z", NumPartitions: 0, ReplicationFactor: 1}, kerr.InvalidPartitions},
		{"too many partitions", CreatableTopic{Name: "z", NumPartitions: MaxPartitionsPerCommand + 1, ReplicationFactor: 1}, kerr.InvalidPartitions},
		{"zero rf", CreatableTopic{Name: "z", NumPartitions: 1, ReplicationFactor: 0}, kerr.InvalidReplicationFactor},
		{"rf above brokers", CreatableTopic{Name: "z", NumPartitions: 1, ReplicationFactor: 4}, kerr.InvalidReplicationFactor},
		{"bad config", CreatableTopic{Name: "z", NumPartitions: 1, ReplicationFactor: 1, Configs: map[string]string{"retention.ms": "soon"}}, kerr.InvalidConfig},
		{"unknown config", CreatableTopic{Name: "z", NumPartitions: 1, ReplicationFactor: 1, Configs: map[string]string{"no.such": "1"}}, kerr.InvalidConfig},
		{"assignment and count", CreatableTopic{Name: "z", NumPartitions: 1, ReplicationFactor: -1, Assignments: [][]int32{{1}}}, kerr.InvalidRequest},
		{"assignment dup", CreatableTopic{Name: "z", NumPartitions: -1, ReplicationFactor: -1, Assignments: [][]int32{{1, 1}}}, kerr.InvalidReplicaAssignment},
		{"assignment uneven", CreatableTopic{Name: "z", NumPartitions: -1, ReplicationFactor: -1, Assignments: [][]int32{{1, 2}, {3}}}, kerr.InvalidReplicaAssignment},
		{"assignment unknown broker", CreatableTopic{Name: "z", NumPartitions: -1, ReplicationFactor: -1, Assignments: [][]int32{{1, 9}}}, kerr.InvalidReplicaAssignment},
		{"assignment empty", CreatableTopic{Name: "z", NumPartitions: -1, ReplicationFactor: -1, Assignments: [][]int32{{}}}, kerr.InvalidReplicaAssignment},
	} {
		recs, res := h.c.CreateTopics(CreateTopicsRequest{Topics: []CreatableTopic{tc.ct}, ValidateOnly: true})
		if recs != nil {
			t.Errorf("%s: validate-only produced records", tc.name)
		}
		if tc.want == nil && res[0].Err != nil || tc.want != nil && !isKafka(res[0].Err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, res[0].Err, tc.want)
		}
	}
	// Defaults apply; one request's failures do not stop its other topics; duplicates fail.
	recs, res := h.c.CreateTopics(CreateTopicsRequest{Topics: []CreatableTopic{
		{Name: "d", NumPartitions: -1, ReplicationFactor: -1},
		{Name: "bad/", NumPartitions: 1, ReplicationFactor: 1},
		{Name: "m", NumPartitions: -1, ReplicationFactor: -1, Assignments: [][]int32{{3, 1}, {2, 3}}, Configs: map[string]string{"cleanup.policy": "compact"}},
		{Name: "twice", NumPartitions: 1, ReplicationFactor: 1},
		{Name: "twice", NumPartitions: 1, ReplicationFactor: 1},
	}})
	wantErr(t, res[0].Err, nil)
	wantErr(t, res[1].Err, kerr.InvalidTopicException)
	wantErr(t, res[2].Err, nil)
	wantErr(t, res[3].Err, kerr.InvalidRequest)
	wantErr(t, res[4].Err, kerr.InvalidRequest)
	h.apply(recs)
	d := h.c.Image().Topic("d")
	if len(d.Partitions) != 3 || len(d.Partitions[0].Replicas) != 2 || res[0].NumPartitions != 3 || res[0].ReplicationFactor != 2 || res[0].TopicID != d.ID {
		t.Fatalf("defaults: %+v %+v", d, res[0])
	}
	m := h.c.Image().Topic("m")
	if !slices.Equal(m.Partitions[0].Replicas, ids(3, 1)) || m.Partitions[0].Leader != 3 || !slices.Equal(m.Partitions[1].Replicas, ids(2, 3)) {
		t.Fatalf("manual assignment: %v %v", m.Partitions[0], m.Partitions[1])
	}
	if h.c.Image().Configs(ConfigResource{ResourceTopic, "m"})["cleanup.policy"] != "compact" {
		t.Fatal("topic config not recorded")
	}
	if h.c.Image().Topic("twice") != nil {
		t.Fatal("duplicate topic created")
	}
}

func TestManualAssignmentWithFencedReplica(t *testing.T) {
	h := newHarness(t)
	h.brokers(3)
	recs, _ := h.c.Heartbeat(h.now, HeartbeatRequest{NodeID: 1, BrokerEpoch: h.epoch(1), CurrentMetadataOffset: h.offset, WantFence: true})
	h.apply(recs)
	recs, res := h.c.CreateTopics(CreateTopicsRequest{Topics: []CreatableTopic{
		{Name: "a", NumPartitions: -1, ReplicationFactor: -1, Assignments: [][]int32{{1, 2}}},
		{Name: "b", NumPartitions: -1, ReplicationFactor: -1, Assignments: [][]int32{{1}}},
	}})
	wantErr(t, res[0].Err, nil)
	wantErr(t, res[1].Err, kerr.InvalidReplicaAssignment)
	h.apply(recs)
	if p := h.part("a", 0); p.Leader != 2 || !slices.Equal(p.ISR, ids(2)) {
		t.Fatalf("%v", p)
	}
}

func TestDeleteTopics(t *testing.T) {
	h := newHarness(t)
	h.brokers(1)
	a := h.createTopic("a", 2, 1, "retention.ms", "5")
	h.createTopic("b", 1, 1)
	recs, res := h.c.DeleteTopics(DeleteTopicsRequest{Names: []string{"a", "nope"}, IDs: []UUID{h.c.Image().Topic("b").ID, {7}, a.ID}})
	wantErr(t, res[0].Err, nil)
	wantErr(t, res[1].Err, kerr.UnknownTopicOrPartition)
	wantErr(t, res[2].Err, nil)
	wantErr(t, res[3].Err, kerr.UnknownTopicID)
	wantErr(t, res[4].Err, kerr.InvalidRequest) // "a" twice
	h.apply(recs)
	im := h.c.Image()
	if im.Topic("a") != nil || im.Topic("b") != nil || im.NumPartitions() != 0 || im.Configs(ConfigResource{ResourceTopic, "a"}) != nil {
		t.Fatal("topics or their configs left behind")
	}
	// The name can be reused, with a new id.
	a2 := h.createTopic("a", 1, 1)
	if a2.ID == a.ID {
		t.Fatal("topic id reused")
	}
}

func TestCreatePartitions(t *testing.T) {
	h := newHarness(t)
	h.brokers(3)
	h.createTopic("t", 2, 2)
	for _, tc := range []struct {
		name string
		ct   CreatePartitionsTopic
		want *kerr.Error
	}{
		{"unknown", CreatePartitionsTopic{Name: "x", Count: 3}, kerr.UnknownTopicOrPartition},
		{"not more", CreatePartitionsTopic{Name: "t", Count: 2}, kerr.InvalidPartitions},
		{"wrong assignment count", CreatePartitionsTopic{Name: "t", Count: 4, Assignments: [][]int32{{1, 2}}}, kerr.InvalidReplicaAssignment},
		{"wrong rf", CreatePartitionsTopic{Name: "t", Count: 3, Assignments: [][]int32{{1}}}, kerr.InvalidReplicaAssignment},
		{"unknown broker", CreatePartitionsTopic{Name: "t", Count: 3, Assignments: [][]int32{{1, 8}}}, kerr.InvalidReplicaAssignment},
	} {
		recs, res := h.c.CreatePartitions(CreatePartitionsRequest{Topics: []CreatePartitionsTopic{tc.ct}})
		if recs != nil || !isKafka(res[0].Err, tc.want) {
			t.Errorf("%s: %v", tc.name, res[0].Err)
		}
	}
	recs, res := h.c.CreatePartitions(CreatePartitionsRequest{Topics: []CreatePartitionsTopic{{Name: "t", Count: 5}}})
	wantErr(t, res[0].Err, nil)
	h.apply(recs)
	if replicas, _ := spread(h.c.Image()); func() bool { lo, hi := minMax(replicas, ids(1, 2, 3)); return hi-lo > 1 }() {
		t.Errorf("replicas after growing %v", replicas)
	}
	recs, res = h.c.CreatePartitions(CreatePartitionsRequest{Topics: []CreatePartitionsTopic{{Name: "t", Count: 6, Assignments: [][]int32{{3, 2}}}}})
	wantErr(t, res[0].Err, nil)
	h.apply(recs)
	tp := h.c.Image().Topic("t")
	if len(tp.Partitions) != 6 || !slices.Equal(tp.Partitions[5].Replicas, ids(3, 2)) {
		t.Fatalf("%d partitions, last %v", len(tp.Partitions), tp.Partitions[5])
	}
	for _, p := range tp.Partitions {
		if len(p.Replicas) != 2 {
			t.Fatalf("rf changed: %v", p)
		}
	}
}

func TestAlterConfigs(t *testing.T) {
	h := newHarness(t)
	h.brokers(1)
	h.createTopic("t", 1, 1, "retention.ms", "100", "cleanup.policy", "delete")
	topic := func() map[string]string { return h.c.Image().Configs(ConfigResource{ResourceTopic, "t"}) }
	run := func(req AlterConfigsRequest) []AlterConfigsResult {
		recs, res := h.c.AlterConfigs(req)
		h.apply(recs)
		return res
	}
	res := run(AlterConfigsRequest{Incremental: true, Resources: []AlterConfigsResource{{Type: ResourceTopic, Name: "t", Changes: []ConfigChange{
		{Key: "retention.ms", Op: OpDelete},
		{Key: "segment.bytes", Op: OpSet, Value: "1048576"},
		{Key: "cleanup.policy", Op: OpAppend, Value: "compact"},
	}}}})
	wantErr(t, res[0].Err, nil)
	if got := topic(); got["retention.ms"] != "" || got["segment.bytes"] != "1048576" || got["cleanup.policy"] != "delete,compact" {
		t.Fatalf("after incremental: %v", got)
	}
	res = run(AlterConfigsRequest{Incremental: true, Resources: []AlterConfigsResource{{Type: ResourceTopic, Name: "t", Changes: []ConfigChange{
		{Key: "cleanup.policy", Op: OpSubtract, Value: "delete"},
	}}}})
	wantErr(t, res[0].Err, nil)
	if topic()["cleanup.policy"] != "compact" {
		t.Fatalf("subtract: %v", topic())
	}
	// Legacy AlterConfigs replaces the whole set.
	res = run(AlterConfigsRequest{Resources: []AlterConfigsResource{{Type: ResourceTopic, Name: "t", Changes: []ConfigChange{{Key: "retention.ms", Value: "7"}}}}})
	wantErr(t, res[0].Err, nil)
	if got := topic(); len(got) != 1 || got["retention.ms"] != "7" {
		t.Fatalf("replace: %v", got)
	}
	// Broker resources: cluster default and per broker; unclean election default follows.
	res = run(AlterConfigsRequest{Incremental: true, Resources: []AlterConfigsResource{
		{Type: ResourceBroker, Name: "", Changes: []ConfigChange{{Key: "unclean.leader.election.enable", Value: "true"}}},
		{Type: ResourceBroker, Name: "1", Changes: []ConfigChange{{Key: "log.retention.ms", Value: "1000"}}},
	}})
	wantErr(t, res[0].Err, nil)
	wantErr(t, res[1].Err, nil)
	if !h.c.uncleanEnabled(h.c.Image().Topic("t")) {
		t.Fatal("cluster default unclean not seen")
	}
	// Errors leave everything unchanged.
	before := h.c.Image().Snapshot()
	for _, tc := range []struct {
		name string
		r    AlterConfigsResource
		want *kerr.Error
	}{
		{"unknown topic", AlterConfigsResource{Type: ResourceTopic, Name: "x", Changes: []ConfigChange{{Key: "retention.ms", Value: "1"}}}, kerr.UnknownTopicOrPartition},
		{"bad value", AlterConfigsResource{Type: ResourceTopic, Name: "t", Changes: []ConfigChange{{Key: "retention.ms", Value: "x"}}}, kerr.InvalidConfig},
		{"unknown key", AlterConfigsResource{Type: ResourceTopic, Name: "t", Changes: []ConfigChange{{Key: "nope", Value: "1"}}}, kerr.InvalidConfig},
		{"static broker key", AlterConfigsResource{Type: ResourceBroker, Name: "", Changes: []ConfigChange{{Key: "node.id", Value: "3"}}}, kerr.InvalidConfig},
		{"bad broker name", AlterConfigsResource{Type: ResourceBroker, Name: "b1", Changes: []ConfigChange{{Key: "log.retention.ms", Value: "1"}}}, kerr.InvalidRequest},
		{"bad type", AlterConfigsResource{Type: 9, Name: "t"}, kerr.InvalidRequest},
		{"dup key", AlterConfigsResource{Type: ResourceTopic, Name: "t", Changes: []ConfigChange{{Key: "retention.ms", Value: "1"}, {Key: "retention.ms", Op: OpDelete}}}, kerr.InvalidRequest},
		{"bad op", AlterConfigsResource{Type: ResourceTopic, Name: "t", Changes: []ConfigChange{{Key: "retention.ms", Op: 7}}}, kerr.InvalidRequest},
	} {
		recs, res := h.c.AlterConfigs(AlterConfigsRequest{Incremental: true, Resources: []AlterConfigsResource{tc.r}})
		if recs != nil || !isKafka(res[0].Err, tc.want) {
			t.Errorf("%s: %v (%d records)", tc.name, res[0].Err, len(recs))
		}
	}
	if string(before) != string(h.c.Image().Snapshot()) {
		t.Fatal("image changed")
	}
}
