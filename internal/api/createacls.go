package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/authz"
	"github.com/gregor-project/gregor/internal/metadata"
)

// CreateAcls v0-v3: decided by the controller (the rules are authz.Binding.Validate's,
// INVALID_REQUEST; an ACL that exists already succeeds), then answered once this broker's
// image holds every ACL created, at most configVisibleTimeout later (an ACL deleted by
// another client meanwhile never shows; it is answered as the controller answered).
// SECURITY_DISABLED for every creation without an authorizer (acls.go).

func handleCreateACLs(h *Handler, ctx context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.CreateACLsRequest)
	out := req.ResponseKind().(*kmsg.CreateACLsResponse)
	fail := func(err error) Reply {
		for range req.Creations {
			res := kmsg.NewCreateACLsResponseResult()
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
	cr := resp.(*kmsg.CreateACLsResponse)
	if len(cr.Results) != len(req.Creations) {
		return fail(errAnswerCount(req, len(cr.Results), len(req.Creations)))
	}
	var created []authz.Binding
	for i, c := range req.Creations {
		if cr.Results[i].ErrorCode == 0 {
			created = append(created, authz.NewBinding(c.ResourceType, c.ResourceName, c.ResourcePatternType, c.Principal, c.Host, c.Operation, c.PermissionType))
		}
	}
	if err := h.awaitMetadata(ctx, func(im *metadata.Image) bool { return aclsShown(im, created, true) }, configVisibleTimeout); err != nil {
		h.Log.Warn("created ACLs not shown in this broker's metadata in time", "err", err)
	}
	return msg(resp)
}
