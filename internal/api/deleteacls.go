package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/authz"
	"github.com/gregor-project/gregor/internal/metadata"
)

// DeleteAcls v0-v3: decided by the controller (each filter removes and lists the ACLs it
// matches, authz.Filter.Matches; a filter with an UNKNOWN field is INVALID_REQUEST), then
// answered once this broker's image holds none of the ACLs removed, at most
// configVisibleTimeout later (an ACL created again meanwhile stays; it is answered as the
// controller answered). SECURITY_DISABLED for every filter without an authorizer (acls.go).

func handleDeleteACLs(h *Handler, ctx context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.DeleteACLsRequest)
	out := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	fail := func(err error) Reply {
		for range req.Filters {
			res := kmsg.NewDeleteACLsResponseResult()
			res.ErrorCode, res.ErrorMessage = code(err), errMsg(err)
			out.Results = append(out.Results, res)
		}
		return msg(out)
	}
	ctx, cancel := adminContext(ctx, req)
	defer cancel()
	resp, err := h.forwardACLChange(ctx, c, req)
	if err != nil {
		return fail(err)
	}
	dr := resp.(*kmsg.DeleteACLsResponse)
	if len(dr.Results) != len(req.Filters) {
		return fail(errAnswerCount(req, len(dr.Results), len(req.Filters)))
	}
	var removed []authz.Binding
	for _, res := range dr.Results {
		for _, m := range res.MatchingACLs {
			if m.ErrorCode == 0 {
				removed = append(removed, authz.NewBinding(m.ResourceType, m.ResourceName, m.ResourcePatternType, m.Principal, m.Host, m.Operation, m.PermissionType))
			}
		}
	}
	if err := h.awaitMetadata(ctx, func(im *metadata.Image) bool { return aclsShown(im, removed, false) }, configVisibleTimeout); err != nil {
		h.Log.Warn("deleted ACLs still shown in this broker's metadata", "err", err)
	}
	return msg(resp)
}
