package api

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/metadata"
)

// CreatePartitions v0-v3: raise a topic's partition count (never lower it), with an optional
// assignment for the new partitions, or just validate; decided by the controller
// (forward.go), which checks the counts, the assignment and duplicate topics. This broker
// refuses a request adding more than maxRecordsPerUserOp partitions (counted against its
// image) whole with POLICY_VIOLATION, and once the controller has grown a topic waits until
// its image shows the new count.

func handleCreatePartitions(h *Handler, ctx context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	ctx, cancel := adminContext(ctx, req)
	defer cancel()
	// One record per new partition, bounded per request as in Kafka.
	var records int64
	im := h.Meta.Image()
	for _, rt := range req.Topics {
		if t := im.Topic(rt.Topic); t != nil && rt.Count > t.Partitions {
			records += int64(rt.Count - t.Partitions)
		}
	}
	errs := make([]error, len(req.Topics))
	// Authorization (authorize.go): ALTER on each topic; a topic named twice is left to the
	// controller's INVALID_REQUEST, which Kafka answers before authorizing.
	alterable := h.authorizedNames(c, kmsg.ACLOperationAlter, kmsg.ACLResourceTypeTopic)
	named := map[string]int{}
	for _, rt := range req.Topics {
		named[rt.Topic]++
	}
	fwd := *req
	fwd.Topics = nil
	var fwdIdx []int
	for i, rt := range req.Topics {
		if named[rt.Topic] == 1 && !alterable.ok(rt.Topic) {
			errs[i] = kerr.TopicAuthorizationFailed
			continue
		}
		fwd.Topics, fwdIdx = append(fwd.Topics, rt), append(fwdIdx, i)
	}
	fwdErrs := make([]error, len(fwd.Topics))
	switch {
	case len(fwd.Topics) == 0:
	case records > maxRecordsPerUserOp:
		for i := range fwdErrs {
			fwdErrs[i] = errExcessiveBatch
		}
	default:
		h.forwardCreatePartitions(ctx, &fwd, fwdErrs)
	}
	for j, i := range fwdIdx {
		errs[i] = fwdErrs[j]
	}
	for i, rt := range req.Topics {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		st.ErrorCode, st.ErrorMessage = code(errs[i]), errMsg(errs[i])
		resp.Topics = append(resp.Topics, st)
	}
	return msg(resp)
}

// forwardCreatePartitions sends req as it is to the controller, sets errs[i] to its answer
// for req.Topics[i] and, unless validate-only, waits until this broker's image shows every
// grown topic with its new count (REQUEST_TIMED_OUT for those that do not in time).
func (h *Handler) forwardCreatePartitions(ctx context.Context, req *kmsg.CreatePartitionsRequest, errs []error) {
	r, err := h.forward(ctx, req)
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return
	}
	results := r.(*kmsg.CreatePartitionsResponse).Topics
	used := make([]bool, len(results))
	var grown []int
	for i, rt := range req.Topics {
		k := -1
		for j := range results {
			if !used[j] && results[j].Topic == rt.Topic {
				k = j
				break
			}
		}
		if k < 0 {
			errs[i] = fmt.Errorf("api: the controller did not answer for topic %q", rt.Topic)
			continue
		}
		used[k] = true
		if errs[i] = controllerError(results[k].ErrorCode, results[k].ErrorMessage); errs[i] == nil && !req.ValidateOnly {
			grown = append(grown, i)
		}
	}
	shown := func(im *metadata.Image, rt kmsg.CreatePartitionsRequestTopic) bool {
		t := im.Topic(rt.Topic)
		return t != nil && t.Partitions >= rt.Count
	}
	err = h.awaitMetadata(ctx, func(im *metadata.Image) bool {
		for _, i := range grown {
			if !shown(im, req.Topics[i]) {
				return false
			}
		}
		return true
	}, 0)
	if err != nil {
		im := h.Meta.Image()
		for _, i := range grown {
			if !shown(im, req.Topics[i]) {
				errs[i] = fmt.Errorf("%w: topic %q was grown but broker %d does not see it yet", errTimedOut, req.Topics[i].Topic, h.NodeID)
			}
		}
	}
}
