package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeCluster v0-v1: the cluster id, the active controller and the brokers.

func handleDescribeCluster(h *Handler, _ context.Context, _ *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.EndpointType = req.EndpointType
	resp.ClusterID = h.ClusterID
	resp.ControllerID = h.NodeID
	resp.ClusterAuthorizedOperations = authorizedOpsUnset
	b := h.broker()
	resp.Brokers = []kmsg.DescribeClusterResponseBroker{{NodeID: b.NodeID, Host: b.Host, Port: b.Port, Rack: b.Rack}}
	return msg(resp)
}
