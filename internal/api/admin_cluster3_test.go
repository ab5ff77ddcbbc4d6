package api_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
)

// Admin requests on a three-node cluster of real processes, each sent to one chosen broker
// (not routed by the client): whichever broker takes a change forwards it to the active
// controller and answers once its own metadata shows it.
func TestAdminAcrossThreeNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	c := testutil.StartCluster(t, testutil.ClusterOptions{Nodes: 3})
	on := func(id int32) *kgo.Client { return newClient(t, c.Node(id).ClientAddr()) }
	ask := func(id int32, req kmsg.Request) kmsg.Response {
		t.Helper()
		resp, err := on(id).SeedBrokers()[0].Request(ctxT(t), req)
		if err != nil {
			t.Fatalf("%T to broker %d: %v", req, id, err)
		}
		return resp
	}
	createReq := func(name string, rf int16) *kmsg.CreateTopicsRequest {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 15000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 2, rf
		req.Topics = append(req.Topics, rt)
		return req
	}

	// The brokers must be registered (and unfenced) before a topic of three replicas fits.
	var ct kmsg.CreateTopicsResponseTopic
	c.WaitFor(t, 30*time.Second, func() bool {
		ct = ask(2, createReq("three", 3)).(*kmsg.CreateTopicsResponse).Topics[0]
		return ct.ErrorCode != kerr.InvalidReplicationFactor.Code
	}, "three active brokers")
	if ct.ErrorCode != 0 || ct.ReplicationFactor != 3 {
		t.Fatalf("create through broker 2: %v %+v", kerr.ErrorForCode(ct.ErrorCode), ct)
	}
	md := ask(2, kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse)
	found := false
	for _, mt := range md.Topics {
		if *mt.Topic == "three" {
			found = true
			if len(mt.Partitions) != 2 || len(mt.Partitions[0].Replicas) != 3 {
				t.Fatalf("broker 2's metadata right after the create: %+v", mt)
			}
		}
	}
	if !found {
		t.Fatal("broker 2's metadata right after the create lacks the topic")
	}
	if st := ask(1, createReq("four", 4)).(*kmsg.CreateTopicsResponse).Topics[0]; st.ErrorCode != kerr.InvalidReplicationFactor.Code {
		t.Fatalf("replication factor 4 on three brokers: %v", kerr.ErrorForCode(st.ErrorCode))
	}

	// Broker 3's own config, changed through broker 1, reaches broker 3.
	ia := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, "3"
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Value = "log.retention.bytes", kmsg.StringPtr("3000000")
	rr.Configs = append(rr.Configs, cfg)
	ia.Resources = append(ia.Resources, rr)
	if r := ask(1, ia).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]; r.ErrorCode != 0 {
		t.Fatalf("alter broker 3 through broker 1: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	brokerValue := func(id int32) string {
		dc := kmsg.NewPtrDescribeConfigsRequest()
		dr := kmsg.NewDescribeConfigsRequestResource()
		dr.ResourceType, dr.ResourceName, dr.ConfigNames = kmsg.ConfigResourceTypeBroker, "3", []string{"log.retention.bytes"}
		dc.Resources = append(dc.Resources, dr)
		res := ask(id, dc).(*kmsg.DescribeConfigsResponse).Resources[0]
		if res.ErrorCode != 0 || len(res.Configs) != 1 || res.Configs[0].Value == nil {
			t.Fatalf("describe broker 3 on broker %d: %v %+v", id, kerr.ErrorForCode(res.ErrorCode), res.Configs)
		}
		return *res.Configs[0].Value
	}
	c.WaitFor(t, 15*time.Second, func() bool { return brokerValue(3) == "3000000" }, "broker 3 to apply its new config")

	// Two brokers hand out producer ids from different blocks.
	id1 := ask(1, kmsg.NewPtrInitProducerIDRequest()).(*kmsg.InitProducerIDResponse)
	id2 := ask(2, kmsg.NewPtrInitProducerIDRequest()).(*kmsg.InitProducerIDResponse)
	if id1.ErrorCode != 0 || id2.ErrorCode != 0 || id1.ProducerID == id2.ProducerID {
		t.Fatalf("producer ids: broker 1 %d (%v), broker 2 %d (%v)", id1.ProducerID, kerr.ErrorForCode(id1.ErrorCode), id2.ProducerID, kerr.ErrorForCode(id2.ErrorCode))
	}

	// Deleted through broker 3, and gone from broker 3's next metadata.
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.TimeoutMillis = 15000
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.Topic = kmsg.StringPtr("three")
	del.Topics = append(del.Topics, dt)
	if st := ask(3, del).(*kmsg.DeleteTopicsResponse).Topics[0]; st.ErrorCode != 0 {
		t.Fatalf("delete through broker 3: %v", kerr.ErrorForCode(st.ErrorCode))
	}
	for _, mt := range ask(3, kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse).Topics {
		if *mt.Topic == "three" {
			t.Fatal("broker 3's metadata right after the delete still has the topic")
		}
	}
}
