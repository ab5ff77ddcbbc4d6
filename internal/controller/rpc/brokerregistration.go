package rpc

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/controller/state"
)

// BrokerRegistration v0-v4 -> state.Controller.RegisterBroker. Another cluster id is
// INCONSISTENT_CLUSTER_ID; a node id held by another live incarnation is
// DUPLICATE_BROKER_REGISTRATION; log dirs (v2+) repeated or reserved are INVALID_REGISTRATION.
// Features and PreviousBrokerEpoch are not used.

func handleBrokerRegistration(h *Handler, ctx context.Context, r kmsg.Request) kmsg.Response {
	req := r.(*kmsg.BrokerRegistrationRequest)
	resp := req.ResponseKind().(*kmsg.BrokerRegistrationResponse)
	sreq := state.RegisterBrokerRequest{NodeID: req.BrokerID, IncarnationID: state.UUID(req.IncarnationID), ClusterID: req.ClusterID}
	if req.Rack != nil {
		sreq.Rack = *req.Rack
	}
	for _, d := range req.LogDirs {
		sreq.LogDirs = append(sreq.LogDirs, state.UUID(d))
	}
	for _, l := range req.Listeners {
		sreq.Endpoints = append(sreq.Endpoints, state.Endpoint{Name: l.Name, Host: l.Host, Port: int32(l.Port), SecurityProtocol: l.SecurityProtocol})
	}
	res, err := do(ctx, h, 0, func(c *state.Controller, now int64) ([]state.Record, state.RegisterBrokerResponse) {
		return c.RegisterBroker(now, sreq)
	})
	if err == nil {
		err = res.Err
	}
	resp.ErrorCode = code(err)
	if err == nil {
		logUnclean(h, req.BrokerID, res.UncleanElected)
		resp.BrokerEpoch = res.BrokerEpoch
	} else {
		resp.BrokerEpoch = -1
	}
	return resp
}
