package api

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/metadata"
)

// UnregisterBroker v0: removes a broker's registration to decommission it (KIP-631,
// kafka-cluster.sh unregister), decided by the controller and answered as it answers
// (forward.go): BROKER_ID_NOT_REGISTERED for an id with no registration. The controller
// first gives up the broker's leaderships (new leaders from the ISR) and ISR memberships.
//
// On success the answer waits until this broker's image no longer holds the registration
// it held when the request arrived (the broker is gone, or a new process of it registered
// since), so a Metadata or DescribeCluster sent here next does not list it. A Kafka broker
// answers as soon as the controller does; the wait only makes the answer safe to act on.
// A registration still shown when the request's time runs out is REQUEST_TIMED_OUT with a
// message saying the controller did unregister it.

func handleUnregisterBroker(h *Handler, ctx context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.UnregisterBrokerRequest)
	ctx, cancel := adminContext(ctx, req)
	defer cancel()
	before := h.Meta.Image().Broker(req.BrokerID)
	resp, err := h.forwardIfAuthorized(ctx, c, kmsg.ACLOperationAlter, req) // authorize.go
	if err == nil && resp.(*kmsg.UnregisterBrokerResponse).ErrorCode != 0 {
		return msg(resp)
	}
	if err == nil {
		h.Log.Info("unregistered broker", "broker", req.BrokerID)
		if h.awaitMetadata(ctx, func(im *metadata.Image) bool {
			b := im.Broker(req.BrokerID)
			return b == nil || before == nil || b.Epoch != before.Epoch
		}, 0) == nil {
			return msg(resp)
		}
		err = fmt.Errorf("%w: broker %d was unregistered but broker %d still sees it", errTimedOut, req.BrokerID, h.NodeID)
	}
	out := req.ResponseKind().(*kmsg.UnregisterBrokerResponse)
	out.ErrorCode, out.ErrorMessage = code(err), errMsg(err)
	return msg(out)
}
