package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/replica"
)

// DescribeProducers v0: the active producers of each partition as this replica's producer
// state has them (Partition.ActiveProducers): id, epoch, last sequence and timestamp, the
// coordinator epoch of its last marker and the first offset of its ongoing transaction (-1:
// none), as kafka-transactions.sh describe-producers and find-hanging read them. Any replica
// answers, a follower from the batches it copied (Kafka's Partition.activeProducerState needs
// only the local log); a broker without the partition answers NOT_LEADER_OR_FOLLOWER.

func handleDescribeProducers(h *Handler, _ context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	readable := h.authorizedNames(c, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic) // authorize.go
	for _, rt := range req.Topics {
		st := kmsg.NewDescribeProducersResponseTopic()
		st.Topic = rt.Topic
		for _, idx := range rt.Partitions {
			sp := kmsg.NewDescribeProducersResponseTopicPartition()
			sp.Partition = idx
			var p *replica.Partition
			err := error(kerr.TopicAuthorizationFailed)
			if readable.ok(rt.Topic) {
				p, err = h.partition(rt.Topic, idx)
			}
			if err != nil {
				sp.ErrorCode, sp.ErrorMessage = code(err), errMsg(err)
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			for _, pi := range p.ActiveProducers() {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID, ap.ProducerEpoch = pi.ProducerID, int32(pi.Epoch)
				ap.LastSequence, ap.LastTimestamp = pi.LastSequence, pi.LastTimestamp
				ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = pi.CoordinatorEpoch, pi.TxnStartOffset
				sp.ActiveProducers = append(sp.ActiveProducers, ap)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return msg(resp)
}
