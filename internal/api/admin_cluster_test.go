package api_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
)

// Admin requests forwarded to the controller quorum, over TCP against a one-node cluster
// (one broker that is also the only voter), with franz-go: each change is visible in the
// very next request to the same broker, without retries.

// metadataTopics asks the broker for the named topics (or all, with none) in one raw
// Metadata request, not letting the client retry, and returns them by name.
func metadataTopics(t *testing.T, cl *kgo.Client, names ...string) map[string]kmsg.MetadataResponseTopic {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	for _, n := range names {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(n)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := cl.SeedBrokers()[0].Request(ctxT(t), req)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]kmsg.MetadataResponseTopic{}
	for _, mt := range resp.(*kmsg.MetadataResponse).Topics {
		out[*mt.Topic] = mt
	}
	return out
}

func TestCreateDeleteVisibleAtOnce(t *testing.T) {
	b := testutil.StartBroker(t)
	cl := newClient(t, b.Addr())
	adm := kadm.NewClient(cl)
	ctx := ctxT(t)

	// CreateTopics v7 answers the topic id the metadata then shows.
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "now", 3, 1
	req.Topics = append(req.Topics, rt)
	ct := request[*kmsg.CreateTopicsResponse](t, cl, req).Topics[0]
	if ct.ErrorCode != 0 || ct.NumPartitions != 3 || ct.ReplicationFactor != 1 || ct.TopicID == [16]byte{} {
		t.Fatalf("create: %v %+v", kerr.ErrorForCode(ct.ErrorCode), ct)
	}
	mt, ok := metadataTopics(t, cl, "now")["now"]
	if !ok || mt.ErrorCode != 0 || len(mt.Partitions) != 3 || mt.TopicID != ct.TopicID {
		t.Fatalf("metadata right after create: %+v", mt)
	}
	for _, p := range mt.Partitions {
		if p.Leader != 1 || len(p.Replicas) != 1 || len(p.ISR) != 1 {
			t.Fatalf("partition %d: leader %d replicas %v isr %v", p.Partition, p.Leader, p.Replicas, p.ISR)
		}
	}
	produceSync(t, newClient(t, b.Addr(), kgo.DefaultProduceTopic("now")), &kgo.Record{Value: []byte("x")})

	// Grown, and the new count is in the next metadata.
	r, err := adm.CreatePartitions(ctx, 2, "now")
	if err != nil || r["now"].Err != nil {
		t.Fatalf("create partitions: %v %v", err, r)
	}
	if n := len(metadataTopics(t, cl, "now")["now"].Partitions); n != 5 {
		t.Fatalf("%d partitions right after growing to 5", n)
	}

	// Deleted by id (DeleteTopics v6), and gone from the next metadata.
	dreq := kmsg.NewPtrDeleteTopicsRequest()
	dreq.TimeoutMillis = 10000
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.TopicID = ct.TopicID
	dreq.Topics = append(dreq.Topics, dt)
	dr := request[*kmsg.DeleteTopicsResponse](t, cl, dreq).Topics[0]
	if dr.ErrorCode != 0 || dr.Topic == nil || *dr.Topic != "now" {
		t.Fatalf("delete by id: %v %v", kerr.ErrorForCode(dr.ErrorCode), dr.Topic)
	}
	if mt := metadataTopics(t, cl, "now")["now"]; mt.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("metadata right after delete: %v", kerr.ErrorForCode(mt.ErrorCode))
	}
	ddr, _ := adm.DeleteTopics(ctx, "now")
	if ddr["now"].Err != kerr.UnknownTopicOrPartition {
		t.Fatalf("delete of a deleted topic: %v", ddr["now"].Err)
	}
}

func TestCreateTopicsRefusals(t *testing.T) {
	b := testutil.StartBroker(t)
	cl := newClient(t, b.Addr())
	adm := kadm.NewClient(cl)
	ctx := ctxT(t)

	// The controller counts the live brokers: one.
	_, err := adm.CreateTopic(ctx, 1, 2, nil, "rf2")
	if err != kerr.InvalidReplicationFactor {
		t.Fatalf("replication factor 2 on one broker: %v", err)
	}
	// A manual assignment naming a broker that is not registered.
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "manual", -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, []int32{7}
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	req.Topics = append(req.Topics, rt)
	// The same name twice fails both entries; the third topic is created.
	for _, n := range []string{"twice", "twice", "once"} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = n, 1, 1
		req.Topics = append(req.Topics, rt)
	}
	var got []error
	for _, st := range request[*kmsg.CreateTopicsResponse](t, cl, req).Topics {
		got = append(got, kerr.ErrorForCode(st.ErrorCode))
	}
	want := []error{kerr.InvalidReplicaAssignment, kerr.InvalidRequest, kerr.InvalidRequest, nil}
	for i := range want {
		if len(got) != len(want) || got[i] != want[i] {
			t.Fatalf("codes %v, want %v", got, want)
		}
	}
	// A manual assignment on the one registered broker works.
	req.Topics = req.Topics[:1]
	req.Topics[0].ReplicaAssignment[0].Replicas = []int32{1}
	if st := request[*kmsg.CreateTopicsResponse](t, cl, req).Topics[0]; st.ErrorCode != 0 || st.NumPartitions != 1 {
		t.Fatalf("assignment on broker 1: %v", kerr.ErrorForCode(st.ErrorCode))
	}
	td, err := adm.ListTopics(ctx)
	if err != nil || len(td) != 2 || !td.Has("once") || !td.Has("manual") {
		t.Fatalf("topics: %v %v", td.Names(), err)
	}
}

func TestConfigsThroughController(t *testing.T) {
	b := testutil.StartBroker(t)
	adm := newAdmin(t, b.Addr())
	ctx := ctxT(t)
	createTopic(t, b.Addr(), "c", 1, nil)
	describe := func(key string) kadm.Config {
		rc, err := adm.DescribeTopicConfigs(ctx, "c")
		if err != nil {
			t.Fatal(err)
		}
		c, err := rc.On("c", nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range c.Configs {
			if e.Key == key {
				return e
			}
		}
		t.Fatalf("%s not described", key)
		return kadm.Config{}
	}

	// Validate-only changes nothing.
	vr, err := adm.ValidateAlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "segment.ms", Value: sp("60000")}}, "c")
	if err != nil || vr[0].Err != nil {
		t.Fatalf("validate: %v %v", err, vr)
	}
	if e := describe("segment.ms"); e.Source == kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("validate-only set segment.ms: %q", e.MaybeValue())
	}
	// APPEND adds a list item, and the next describe shows it.
	ar, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: sp("compact")}}, "c")
	if err != nil || ar[0].Err != nil {
		t.Fatalf("append: %v %v", err, ar)
	}
	if e := describe("cleanup.policy"); e.MaybeValue() != "delete,compact" && e.MaybeValue() != "compact" {
		t.Fatalf("cleanup.policy after APPEND compact: %q", e.MaybeValue())
	}

	// Broker configs: the cluster default and this broker's own, each in the next describe
	// with its source; this broker's own wins.
	brokerValue := func() kadm.Config {
		bc, err := adm.DescribeBrokerConfigs(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range bc[0].Configs {
			if e.Key == "log.retention.bytes" {
				return e
			}
		}
		t.Fatal("log.retention.bytes not described")
		return kadm.Config{}
	}
	br, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.retention.bytes", Value: sp("1000000")}})
	if err != nil || br[0].Err != nil {
		t.Fatalf("cluster default: %v %v", err, br)
	}
	if e := brokerValue(); e.MaybeValue() != "1000000" || e.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Fatalf("after the cluster default: %q from %v", e.MaybeValue(), e.Source)
	}
	br, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.retention.bytes", Value: sp("2000000")}}, 1)
	if err != nil || br[0].Err != nil {
		t.Fatalf("broker 1: %v %v", err, br)
	}
	if e := brokerValue(); e.MaybeValue() != "2000000" || e.Source != kmsg.ConfigSourceDynamicBrokerConfig {
		t.Fatalf("after broker 1's own: %q from %v", e.MaybeValue(), e.Source)
	}
	// Read-only and unknown keys are refused before they reach the controller.
	br, _ = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.dirs", Value: sp("/tmp/x")}}, 1)
	if br[0].Err != kerr.InvalidConfig {
		t.Fatalf("read-only key: %v", br[0].Err)
	}
}

func TestElectionAndReassignmentOnOneNode(t *testing.T) {
	b := testutil.StartBroker(t)
	adm := newAdmin(t, b.Addr())
	ctx := ctxT(t)
	createTopic(t, b.Addr(), "e", 2, nil)

	set := kadm.TopicsSet{}
	set.Add("e", 0, 1)
	er, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, set)
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 2; p++ {
		if res := er["e"][p]; res.Err != kerr.ElectionNotNeeded {
			t.Fatalf("preferred election of e-%d led by its preferred replica: %v", p, res.Err)
		}
	}

	lr, err := adm.ListPartitionReassignments(ctx, nil)
	if err != nil || len(lr) != 0 {
		t.Fatalf("ongoing reassignments on a fresh cluster: %v %v", lr, err)
	}
	var ar kadm.AlterPartitionAssignmentsReq
	ar.Assign("e", 0, []int32{1, 9})
	res, err := adm.AlterPartitionAssignments(ctx, ar)
	if err != nil {
		t.Fatal(err)
	}
	if r := res["e"][0]; r.Err != kerr.InvalidReplicaAssignment {
		t.Fatalf("reassignment to an unregistered broker: %v", r.Err)
	}
	lr, err = adm.ListPartitionReassignments(ctx, nil)
	if err != nil || len(lr) != 0 {
		t.Fatalf("a refused reassignment is listed: %v %v", lr, err)
	}
}

func TestInitProducerIDsAreDistinct(t *testing.T) {
	b := testutil.StartBroker(t)
	cl := newClient(t, b.Addr())
	seen := map[int64]bool{}
	for i := 0; i < 3; i++ {
		resp := request[*kmsg.InitProducerIDResponse](t, cl, kmsg.NewPtrInitProducerIDRequest())
		if resp.ErrorCode != 0 || resp.ProducerID < 0 || seen[resp.ProducerID] {
			t.Fatalf("InitProducerId %d: %v id %d (seen %v)", i, kerr.ErrorForCode(resp.ErrorCode), resp.ProducerID, seen)
		}
		seen[resp.ProducerID] = true
	}
	// After a restart the broker gets a new block: no id is handed out again.
	b = b.Restart()
	resp := request[*kmsg.InitProducerIDResponse](t, newClient(t, b.Addr()), kmsg.NewPtrInitProducerIDRequest())
	if resp.ErrorCode != 0 || seen[resp.ProducerID] {
		t.Fatalf("InitProducerId after restart: %v id %d (seen %v)", kerr.ErrorForCode(resp.ErrorCode), resp.ProducerID, seen)
	}
}
