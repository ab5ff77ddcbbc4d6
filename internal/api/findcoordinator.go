package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FindCoordinator v0-v6: the broker coordinating a group (key type 0) is the leader of its
// __consumer_offsets partition, this node; the topic is created on first use. v4+ asks for
// a batch of keys. Transaction coordinators (key type 1) do not exist yet:
// COORDINATOR_NOT_AVAILABLE. Other key types are INVALID_REQUEST.

const (
	coordinatorGroup       = 0
	coordinatorTransaction = 1
)

func handleFindCoordinator(h *Handler, _ context.Context, _ *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	for _, key := range keys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key = key
		var err *kerr.Error
		switch req.CoordinatorType {
		case coordinatorGroup:
			err = h.Groups.FindCoordinator(key)
		case coordinatorTransaction:
			err = kerr.CoordinatorNotAvailable
		default:
			err = kerr.InvalidRequest
		}
		if err != nil {
			c.ErrorCode, c.ErrorMessage = err.Code, &err.Message
			c.NodeID, c.Port = -1, -1
		} else {
			c.NodeID, c.Host, c.Port = h.NodeID, h.AdvertisedHost, h.AdvertisedPort
		}
		resp.Coordinators = append(resp.Coordinators, c)
	}
	if req.Version < 4 {
		c := resp.Coordinators[0]
		resp.ErrorCode, resp.ErrorMessage = c.ErrorCode, c.ErrorMessage
		resp.NodeID, resp.Host, resp.Port = c.NodeID, c.Host, c.Port
		resp.Coordinators = nil
	}
	return msg(resp)
}
