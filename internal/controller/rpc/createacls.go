package rpc

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/authz"
	"github.com/gregor-project/gregor/internal/controller/state"
)

// CreateAcls v0-v3 -> state.Controller.CreateAcls: each binding is created (or found to
// exist, which also succeeds) or refused alone, INVALID_REQUEST for a binding Kafka's
// controller and broker would refuse (authz.Binding.Validate). Version 0 carries no
// pattern type; kmsg reads it as LITERAL, as Kafka does. A request that would write more
// than maxRecordsPerUserOp records fails whole with POLICY_VIOLATION.

func handleCreateACLs(h *Handler, ctx context.Context, r kmsg.Request) kmsg.Response {
	req := r.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	bindings := make([]authz.Binding, len(req.Creations))
	for i, c := range req.Creations {
		bindings[i] = authz.NewBinding(c.ResourceType, c.ResourceName, c.ResourcePatternType, c.Principal, c.Host, c.Operation, c.PermissionType)
	}
	errs, err := do(ctx, h, 0, func(c *state.Controller, _ int64) ([]state.Record, []error) {
		recs, errs := c.CreateAcls(bindings)
		if len(recs) > maxRecordsPerUserOp {
			for i := range errs {
				if errs[i] == nil {
					errs[i] = errExcessiveBatch
				}
			}
			return nil, errs
		}
		return recs, errs
	})
	for i := range req.Creations {
		res := kmsg.NewCreateACLsResponseResult()
		e := err
		if e == nil {
			e = errs[i]
		}
		res.ErrorCode, res.ErrorMessage = code(e), errMsg(e)
		resp.Results = append(resp.Results, res)
	}
	return resp
}
