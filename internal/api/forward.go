package api

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/metadata"
)

// Admin requests that change metadata (CreateTopics, DeleteTopics, CreatePartitions,
// AlterConfigs, IncrementalAlterConfigs, ElectLeaders, AlterPartitionReassignments,
// ListPartitionReassignments, UnregisterBroker, DescribeQuorum, CreateAcls, DeleteAcls,
// AlterUserScramCredentials, and AllocateProducerIds for InitProducerId)
// are decided by the controller quorum, as a KRaft broker forwards them. A broker checks
// what needs no cluster state itself (names, config values, request shape) so that it
// answers those with its own messages and forwards only the rest, then waits until its own
// metadata image shows what the controller decided before it answers, so a client that asks
// this broker next sees the change at once.
//
// Deadlines: a request's own TimeoutMillis (where it has one and it is positive) bounds the
// whole forward-and-wait; others get defaultAdminTimeout. A controller that does not answer
// in time, a missing channel or a closed client connection is REQUEST_TIMED_OUT for every
// item forwarded: the broker never hangs on the controller.

// defaultAdminTimeout bounds a forwarded request that carries no timeout of its own
// (AlterConfigs, IncrementalAlterConfigs, ListPartitionReassignments, or a timeout <= 0).
const defaultAdminTimeout = 30 * time.Second

// configVisibleTimeout bounds the wait for a config change to show in this broker's image.
// The controller has applied the change by then; the wait only makes an immediate describe
// on this broker see it. It can fail to converge only when another client changed the same
// resource concurrently, and then the change is answered as done all the same.
const configVisibleTimeout = 5 * time.Second

// imagePoll bounds each wait for the next image, so the metadata wait looks again at least
// this often.
const imagePoll = 20 * time.Millisecond

// errTimedOut is REQUEST_TIMED_OUT, the code of every item the controller did not decide in
// time (or whose outcome this broker's image did not show in time).
var errTimedOut = kerr.RequestTimedOut

// adminContext derives the context of one forwarded admin request: its TimeoutMillis when
// it has a positive one, defaultAdminTimeout otherwise.
func adminContext(ctx context.Context, req kmsg.Request) (context.Context, context.CancelFunc) {
	d := defaultAdminTimeout
	if tr, ok := req.(kmsg.TimeoutRequest); ok && tr.Timeout() > 0 {
		d = time.Duration(tr.Timeout()) * time.Millisecond
	}
	return context.WithTimeout(ctx, d)
}

// forward sends req, at the version it carries, to the active controller and returns the
// answer, of req's key. The channel retries NOT_CONTROLLER and connection failures itself
// until ctx ends; every failure to get an answer is REQUEST_TIMED_OUT (the cause in the
// message). The caller bounds ctx (adminContext).
func (h *Handler) forward(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	if h.Controller == nil {
		return nil, fmt.Errorf("%w: broker %d has no channel to the controller quorum", errTimedOut, h.NodeID)
	}
	resp, err := h.Controller.Request(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("%w: the controller did not answer %s: %v", errTimedOut, kmsg.NameForKey(req.Key()), err)
	}
	if resp == nil || resp.Key() != req.Key() {
		return nil, fmt.Errorf("api: the controller answered %s with %T", kmsg.NameForKey(req.Key()), resp)
	}
	return resp, nil
}

// awaitMetadata returns once this broker's metadata image satisfies cond, and the
// image's subscribers (partitions opened or closed, configs applied) have run, or with
// REQUEST_TIMED_OUT when ctx ends or timeout (if positive) passes first. cond must be
// cheap and must not block: it runs on every new image.
func (h *Handler) awaitMetadata(ctx context.Context, cond func(*metadata.Image) bool, timeout time.Duration) error {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	for {
		im := h.Meta.Image()
		if cond(im) {
			if err := h.Meta.WaitForOffset(ctx, im.Offset); err != nil {
				return fmt.Errorf("%w: waiting for metadata offset %d on broker %d: %v", errTimedOut, im.Offset, h.NodeID, err)
			}
			return nil
		}
		// Wake on the next image; the short bound only guards against a publisher replaced
		// under us.
		wctx, cancel := context.WithTimeout(ctx, imagePoll)
		err := h.Meta.WaitForOffset(wctx, im.Offset+1)
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("%w: %v", errTimedOut, err)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w: broker %d's metadata does not show the change yet", errTimedOut, h.NodeID)
		}
	}
}

// remoteError is an error the controller answered for one item: its Kafka code, with the
// controller's message passed on as it gave it.
type remoteError struct {
	err *kerr.Error
	msg string
}

// controllerError is the error of an item the controller answered with code and msg (nil
// for code 0).
func controllerError(code int16, msg *string) error {
	if code == 0 {
		return nil
	}
	e := &remoteError{err: kerr.TypedErrorForCode(code)}
	if e.err == nil {
		e.err = kerr.UnknownServerError
	}
	if msg != nil {
		e.msg = *msg
	}
	return e
}

func (e *remoteError) Error() string {
	if e.msg != "" {
		return e.msg
	}
	return e.err.Error()
}

func (e *remoteError) Unwrap() error { return e.err }
