package rpc

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeQuorum v0-v2 for __cluster_metadata partition 0. LeaderID is the active
// controller as this node knows it (-1 while none is known): the raft leader, except that
// a node that leads but is not active yet (it has not applied its term's first entry)
// reports -1, so a client never sends commands to a leader that would refuse them.
// LeaderEpoch is the raft term, HighWatermark this node's applied offset. Only this node's
// own log end offset is known; the other voters' are -1.

func handleDescribeQuorum(h *Handler, _ context.Context, r kmsg.Request) kmsg.Response {
	req := r.(*kmsg.DescribeQuorumRequest)
	resp := req.ResponseKind().(*kmsg.DescribeQuorumResponse)
	st := h.node.Status()
	leader := st.Leader
	if leader == st.NodeID && !st.Active {
		leader = -1
	}
	voters := h.node.Voters()
	for _, rt := range req.Topics {
		t := kmsg.NewDescribeQuorumResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewDescribeQuorumResponseTopicPartition()
			p.Partition = rp.Partition
			if rt.Topic != MetadataTopic || rp.Partition != 0 {
				p.ErrorCode = kerr.UnknownTopicOrPartition.Code
				t.Partitions = append(t.Partitions, p)
				continue
			}
			p.LeaderID, p.LeaderEpoch, p.HighWatermark = leader, int32(st.Term), st.Applied
			for _, v := range voters {
				rs := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
				rs.ReplicaID, rs.LogEndOffset = v.ID, -1
				if v.ID == st.NodeID {
					rs.LogEndOffset = st.Applied
				}
				p.CurrentVoters = append(p.CurrentVoters, rs)
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	if req.Version >= 2 {
		for _, v := range voters {
			n := kmsg.NewDescribeQuorumResponseNode()
			n.NodeID = v.ID
			n.Listeners = []kmsg.DescribeQuorumResponseNodeListener{{Name: h.cfg.ListenerName, Host: v.Host, Port: uint16(v.Port)}}
			resp.Nodes = append(resp.Nodes, n)
		}
	}
	return resp
}
