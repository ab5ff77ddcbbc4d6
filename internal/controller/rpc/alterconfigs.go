package rpc

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/controller/state"
)

// AlterConfigs v0-v2 and IncrementalAlterConfigs v0-v1 -> state.Controller.AlterConfigs,
// for topic resources, broker resources (name "" is the cluster-wide default, else a
// broker id) and group resources (type 32, a group's overrides; never name ""); the state
// machine refuses other resource types with INVALID_REQUEST and validates keys and values
// (INVALID_CONFIG; a group's whole set against this node's group.* bounds). A null value is INVALID_CONFIG, except for an
// incremental DELETE, which takes none.

func handleAlterConfigs(h *Handler, ctx context.Context, r kmsg.Request) kmsg.Response {
	req := r.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	sreq := state.AlterConfigsRequest{ValidateOnly: req.ValidateOnly}
	pre := make([]error, len(req.Resources))
	for i, rr := range req.Resources {
		res := state.AlterConfigsResource{Type: int8(rr.ResourceType), Name: rr.ResourceName}
		for _, c := range rr.Configs {
			if c.Value == nil {
				pre[i] = fmt.Errorf("%w: null value for config %q", kerr.InvalidConfig, c.Name)
				break
			}
			res.Changes = append(res.Changes, state.ConfigChange{Key: c.Name, Op: state.OpSet, Value: *c.Value})
		}
		sreq.Resources = append(sreq.Resources, res)
	}
	errs := alterConfigs(ctx, h, sreq, pre)
	for i, rr := range req.Resources {
		t := kmsg.NewAlterConfigsResponseResource()
		t.ResourceType, t.ResourceName = rr.ResourceType, rr.ResourceName
		t.ErrorCode, t.ErrorMessage = code(errs[i]), errMsg(errs[i])
		resp.Resources = append(resp.Resources, t)
	}
	return resp
}

func handleIncrementalAlterConfigs(h *Handler, ctx context.Context, r kmsg.Request) kmsg.Response {
	req := r.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	sreq := state.AlterConfigsRequest{Incremental: true, ValidateOnly: req.ValidateOnly}
	pre := make([]error, len(req.Resources))
	for i, rr := range req.Resources {
		res := state.AlterConfigsResource{Type: int8(rr.ResourceType), Name: rr.ResourceName}
		for _, c := range rr.Configs {
			ch := state.ConfigChange{Key: c.Name, Op: state.ConfigOp(c.Op)}
			switch {
			case c.Value != nil:
				ch.Value = *c.Value
			case ch.Op != state.OpDelete:
				pre[i] = fmt.Errorf("%w: null value for config %q", kerr.InvalidConfig, c.Name)
			}
			res.Changes = append(res.Changes, ch)
		}
		sreq.Resources = append(sreq.Resources, res)
	}
	errs := alterConfigs(ctx, h, sreq, pre)
	for i, rr := range req.Resources {
		t := kmsg.NewIncrementalAlterConfigsResponseResource()
		t.ResourceType, t.ResourceName = rr.ResourceType, rr.ResourceName
		t.ErrorCode, t.ErrorMessage = code(errs[i]), errMsg(errs[i])
		resp.Resources = append(resp.Resources, t)
	}
	return resp
}

// alterConfigs runs the resources without an error in pre and returns each resource's error.
func alterConfigs(ctx context.Context, h *Handler, sreq state.AlterConfigsRequest, pre []error) []error {
	run := sreq
	run.Resources = nil
	var index []int
	for i, r := range sreq.Resources {
		if pre[i] == nil {
			run.Resources = append(run.Resources, r)
			index = append(index, i)
		}
	}
	errs := append([]error(nil), pre...)
	results, err := do(ctx, h, 0, func(c *state.Controller, _ int64) ([]state.Record, []state.AlterConfigsResult) {
		return c.AlterConfigs(run)
	})
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	for j, i := range index {
		errs[i] = results[j].Err
	}
	return errs
}
