package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeCluster v0-v1: the cluster id, the active controller and the brokers.

func handleDescribeCluster(h *Handler, _ context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.EndpointType = req.EndpointType
	resp.ClusterID = h.ClusterID
	im := h.Meta.Image()
	resp.ControllerID = h.controllerID(im)
	resp.ClusterAuthorizedOperations = authorizedOpsUnset
	for _, lb := range liveBrokers(im, h.listenerOf(c)) {
		resp.Brokers = append(resp.Brokers, kmsg.DescribeClusterResponseBroker{NodeID: lb.id, Host: lb.host, Port: lb.port, Rack: lb.rackPtr()})
	}
	return msg(resp)
}
