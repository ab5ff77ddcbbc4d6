package api

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/authz"
	"github.com/gregor-project/gregor/internal/metadata"
)

// ACLs shared by CreateAcls, DeleteAcls and DescribeAcls. The ACLs live in the metadata
// log: CreateAcls and DeleteAcls are decided by the controller (forward.go) and answered
// once this broker's image shows the outcome, DescribeAcls reads this broker's image. As
// in Kafka, a broker without an authorizer (authorizer.class.name empty) answers all three
// SECURITY_DISABLED: it would not enforce what they manage.

// errSecurityDisabled is SECURITY_DISABLED, the answer to the ACL APIs without an
// authorizer.
var errSecurityDisabled = fmt.Errorf("%w: no authorizer is configured on broker (authorizer.class.name)", kerr.SecurityDisabled)

// aclsDisabled returns errSecurityDisabled when this broker has no authorizer, else nil.
func (h *Handler) aclsDisabled() error {
	if h.Cfg.Current().AuthorizerClassName == "" {
		return errSecurityDisabled
	}
	return nil
}

// forwardACLChange runs what CreateAcls and DeleteAcls check before the controller decides
// (ALTER on the cluster, authorize.go; an authorizer configured) and forwards req.
func (h *Handler) forwardACLChange(ctx context.Context, c *Conn, req kmsg.Request) (kmsg.Response, error) {
	if err := h.clusterDenied(c, kmsg.ACLOperationAlter); err != nil {
		return nil, err
	}
	if err := h.aclsDisabled(); err != nil {
		return nil, err
	}
	return h.forward(ctx, req)
}

// aclsShown reports whether im holds every binding of want (present) or none of them
// (!present).
func aclsShown(im *metadata.Image, want []authz.Binding, present bool) bool {
	if len(want) == 0 {
		return true
	}
	have := make(map[authz.Binding]bool, len(im.ACLs()))
	for _, b := range im.ACLs() {
		have[b] = true
	}
	for _, b := range want {
		if have[b] != present {
			return false
		}
	}
	return true
}

// errAnswerCount is a controller answer with another number of results than the request
// has items (UNKNOWN_SERVER_ERROR for each).
func errAnswerCount(req kmsg.Request, got, want int) error {
	return fmt.Errorf("api: the controller answered %s with %d results for %d", kmsg.NameForKey(req.Key()), got, want)
}
