package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/authz"
)

// DescribeCluster v0-v1: the cluster id, the active controller and the brokers.

func handleDescribeCluster(h *Handler, _ context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.EndpointType = req.EndpointType
	resp.ClusterID = h.ClusterID
	im := h.Meta.Image()
	resp.ControllerID = h.controllerID(im)
	// As Kafka, the answer needs no authorization; the cluster's authorized operations,
	// when asked for, need DESCRIBE on it (0 otherwise).
	resp.ClusterAuthorizedOperations = authorizedOpsUnset
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = 0
		if h.authorizedCluster(c, kmsg.ACLOperationDescribe) {
			resp.ClusterAuthorizedOperations = h.authorizedOps(c, kmsg.ACLResourceTypeCluster, authz.ClusterName)
		}
	}
	for _, lb := range liveBrokers(im, h.listenerOf(c)) {
		resp.Brokers = append(resp.Brokers, kmsg.DescribeClusterResponseBroker{NodeID: lb.id, Host: lb.host, Port: lb.port, Rack: lb.rackPtr()})
	}
	return msg(resp)
}
