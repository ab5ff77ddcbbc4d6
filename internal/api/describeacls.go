package api

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/authz"
)

// DescribeAcls v0-v3: the ACLs of this broker's metadata image that the request's filter
// matches (authz.Filter.Matches), grouped by resource pattern. A filter with an UNKNOWN
// field is INVALID_REQUEST; without an authorizer the answer is SECURITY_DISABLED
// (acls.go). Version 0 carries no pattern type; kmsg reads it as LITERAL, as Kafka does.

func handleDescribeACLs(h *Handler, _ context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	f := authz.Filter{
		ResourceType: req.ResourceType, Name: req.ResourceName, PatternType: req.ResourcePatternType,
		Principal: req.Principal, Host: req.Host, Operation: req.Operation, Permission: req.PermissionType,
	}
	err := h.clusterDenied(c, kmsg.ACLOperationDescribe) // authorize.go
	if err == nil {
		err = h.aclsDisabled()
	}
	if err == nil {
		if verr := f.Validate(); verr != nil {
			err = fmt.Errorf("%w: %w", errInvalidRequest, verr)
		}
	}
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = code(err), errMsg(err)
		return msg(resp)
	}
	// The image's ACLs are sorted by resource type, pattern type and name: one resource's
	// ACLs are adjacent.
	var cur *kmsg.DescribeACLsResponseResource
	for _, b := range h.Meta.Image().ACLs() {
		if !f.Matches(b) {
			continue
		}
		if cur == nil || cur.ResourceType != b.ResourceType || cur.ResourcePatternType != b.PatternType || cur.ResourceName != b.Pattern.Name {
			resp.Resources = append(resp.Resources, kmsg.NewDescribeACLsResponseResource())
			cur = &resp.Resources[len(resp.Resources)-1]
			cur.ResourceType, cur.ResourceName, cur.ResourcePatternType = b.ResourceType, b.Pattern.Name, b.PatternType
		}
		a := kmsg.NewDescribeACLsResponseResourceACL()
		a.Principal, a.Host, a.Operation, a.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
		cur.ACLs = append(cur.ACLs, a)
	}
	return msg(resp)
}
