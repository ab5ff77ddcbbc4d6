package rpc

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/authz"
	"github.com/gregor-project/gregor/internal/controller/state"
)

// DeleteAcls v0-v3 -> state.Controller.DeleteAcls: each filter removes every ACL it
// matches (authz.Filter.Matches) and lists them; a filter with an UNKNOWN field is
// INVALID_REQUEST. A request that would remove more than maxRecordsPerUserOp ACLs fails
// whole with POLICY_VIOLATION.

func handleDeleteACLs(h *Handler, ctx context.Context, r kmsg.Request) kmsg.Response {
	req := r.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	filters := make([]authz.Filter, len(req.Filters))
	for i, f := range req.Filters {
		filters[i] = authz.Filter{
			ResourceType: f.ResourceType, Name: f.ResourceName, PatternType: f.ResourcePatternType,
			Principal: f.Principal, Host: f.Host, Operation: f.Operation, Permission: f.PermissionType,
		}
	}
	results, err := do(ctx, h, 0, func(c *state.Controller, _ int64) ([]state.Record, []state.DeleteAclsResult) {
		recs, res := c.DeleteAcls(filters)
		if len(recs) > maxRecordsPerUserOp {
			for i := range res {
				res[i] = state.DeleteAclsResult{Err: errExcessiveBatch}
			}
			return nil, res
		}
		return recs, res
	})
	for i := range req.Filters {
		fr := kmsg.NewDeleteACLsResponseResult()
		e := err
		if e == nil {
			e = results[i].Err
		}
		fr.ErrorCode, fr.ErrorMessage = code(e), errMsg(e)
		if e == nil {
			for _, b := range results[i].Matched {
				m := kmsg.NewDeleteACLsResponseResultMatchingACL()
				m.ResourceType, m.ResourceName, m.ResourcePatternType = b.ResourceType, b.Name, b.PatternType
				m.Principal, m.Host, m.Operation, m.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
				fr.MatchingACLs = append(fr.MatchingACLs, m)
			}
		}
		resp.Results = append(resp.Results, fr)
	}
	return resp
}
