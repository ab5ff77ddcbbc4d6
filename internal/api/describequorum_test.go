package api_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
)

// DescribeQuorum sent to a broker's client listener is answered by the controller, as a Kafka
// broker forwards it (Kafka's Java Admin.describeMetadataQuorum, kafka-metadata-quorum.sh
// --bootstrap-server): the metadata log's leader, epoch and voters.
func TestDescribeQuorumThroughBroker(t *testing.T) {
	b := testutil.StartBroker(t)
	cl := newClient(t, b.Addr())
	req := kmsg.NewPtrDescribeQuorumRequest()
	req.SetVersion(2)
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rt.Partitions = append(rt.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxT(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("error %v, topics %+v", kerr.ErrorForCode(resp.ErrorCode), resp.Topics)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.LeaderID < 0 || p.LeaderEpoch < 1 || p.HighWatermark <= 0 {
		t.Fatalf("partition: error %v, leader %d, epoch %d, high watermark %d", kerr.ErrorForCode(p.ErrorCode), p.LeaderID, p.LeaderEpoch, p.HighWatermark)
	}
	if len(p.CurrentVoters) != 1 || p.CurrentVoters[0].ReplicaID != p.LeaderID || len(resp.Nodes) != 1 || resp.Nodes[0].NodeID != p.LeaderID {
		t.Fatalf("voters %+v, nodes %+v: want the one controller, leading", p.CurrentVoters, resp.Nodes)
	}
}
