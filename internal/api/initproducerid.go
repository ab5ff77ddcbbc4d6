package api

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// InitProducerId v0-v5. With a transactional id the request goes to the transaction
// coordinator (internal/txn), which answers it whole: the id's producer id with a bumped
// epoch, fencing older ones, NOT_COORDINATOR on a broker that does not coordinate the id.
// For idempotent producers (no transactional id) every call hands out a fresh producer id
// with epoch 0. Ids come from blocks the controller allocates to this broker
// (AllocateProducerIds, with the broker epoch of this broker's registration as its image
// shows it), so no id is handed out twice in the cluster, even across restarts. While no
// block can be had (the broker is not registered yet, the controller does not answer) the
// answer is the retriable COORDINATOR_LOAD_IN_PROGRESS, as Kafka answers when its block is
// used up.

// producerIDTimeout bounds the wait for a new block of producer ids.
const producerIDTimeout = 10 * time.Second

func handleInitProducerID(h *Handler, ctx context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	// Authorization (authorize.go): a transactional producer needs WRITE on its
	// transactional id; an idempotent one IDEMPOTENT_WRITE on the cluster or WRITE on some
	// topic (KIP-679).
	switch {
	case req.TransactionalID != nil && !h.authorized(c, kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTransactionalId, *req.TransactionalID):
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return msg(resp)
	case req.TransactionalID == nil && !h.authorizedCluster(c, kmsg.ACLOperationIdempotentWrite) &&
		!h.authorizedOnSomeResource(c, kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTopic):
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return msg(resp)
	}
	if req.TransactionalID != nil {
		if h.Txns == nil {
			resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
			return msg(resp)
		}
		return msg(h.Txns.InitProducerID(ctx, req))
	}
	ctx, cancel := context.WithTimeout(ctx, producerIDTimeout)
	defer cancel()
	id, err := h.producerIDs().Next(ctx, h)
	if err != nil {
		h.Log.Warn("no producer id to hand out", "err", err)
		resp.ErrorCode = code(err)
		return msg(resp)
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return msg(resp)
}

// ProducerIDs is a broker's current block of producer ids, [next, end). A new block is
// asked of the controller when the current one is used up.
//
// Lock rule: sem (capacity 1) is held by the one caller that may read or change next and
// end; it stays held across the request for a new block, and waiting for it honours the
// caller's context.
type ProducerIDs struct {
	sem       chan struct{}
	next, end int64 // guarded by sem
}

// NewProducerIDs returns an empty block: the first Next asks the controller for one.
func NewProducerIDs() *ProducerIDs { return &ProducerIDs{sem: make(chan struct{}, 1)} }

// Next hands out the next id of the block, first getting a new block from the controller
// through h when the block is used up. Errors are COORDINATOR_LOAD_IN_PROGRESS.
func (p *ProducerIDs) Next(ctx context.Context, h *Handler) (int64, error) {
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return -1, fmt.Errorf("%w: waiting for a block of producer ids: %v", kerr.CoordinatorLoadInProgress, ctx.Err())
	}
	defer func() { <-p.sem }()
	if p.next >= p.end {
		start, n, err := h.allocateProducerIDs(ctx)
		if err != nil {
			return -1, fmt.Errorf("%w: no block of producer ids: %v", kerr.CoordinatorLoadInProgress, err)
		}
		p.next, p.end = start, start+n
	}
	id := p.next
	p.next++
	return id, nil
}

// allocateProducerIDs asks the controller for a block of producer ids for this broker.
func (h *Handler) allocateProducerIDs(ctx context.Context) (start, n int64, err error) {
	b := h.Meta.Image().Broker(h.NodeID)
	if b == nil {
		return 0, 0, fmt.Errorf("broker %d is not registered with the controller yet", h.NodeID)
	}
	req := kmsg.NewPtrAllocateProducerIDsRequest()
	req.SetVersion(0)
	req.BrokerID, req.BrokerEpoch = h.NodeID, b.Epoch
	r, err := h.forward(ctx, req)
	if err != nil {
		return 0, 0, err
	}
	resp := r.(*kmsg.AllocateProducerIDsResponse)
	if err := controllerError(resp.ErrorCode, nil); err != nil {
		return 0, 0, err
	}
	if resp.ProducerIDStart < 0 || resp.ProducerIDLen <= 0 {
		return 0, 0, fmt.Errorf("the controller answered an empty block [%d, +%d)", resp.ProducerIDStart, resp.ProducerIDLen)
	}
	return resp.ProducerIDStart, int64(resp.ProducerIDLen), nil
}

// producerIDs returns h's block, created on first use (Handler is built as a literal, so
// the block is made lazily, as the fetch session cache is).
func (h *Handler) producerIDs() *ProducerIDs {
	h.pidsOnce.Do(func() { h.pids = NewProducerIDs() })
	return h.pids
}
