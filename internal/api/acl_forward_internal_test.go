package api

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/config"
)

// A controller that cannot be reached leaves every ACL creation and deletion and every
// user's credential change REQUEST_TIMED_OUT, one answer per item.
func TestSecurityForwardWithoutController(t *testing.T) {
	h := testHandler(t, nil)
	// No ACL exists, so allow.everyone.if.no.acl.found lets the request through the broker's
	// authorization (ALTER on the cluster) to the forwarding this test is about.
	cfg, err := config.Load("", []string{"log.dirs=" + t.TempDir(), "authorizer.class.name=" + config.StandardAuthorizer,
		"allow.everyone.if.no.acl.found=true"})
	if err != nil {
		t.Fatal(err)
	}
	h.Cfg = cfg

	cr := kmsg.NewPtrCreateACLsRequest()
	cr.Creations = make([]kmsg.CreateACLsRequestCreation, 2)
	cresp := h.Handle(context.Background(), &Conn{}, cr).Msg.(*kmsg.CreateACLsResponse)
	if len(cresp.Results) != 2 || cresp.Results[0].ErrorCode != kerr.RequestTimedOut.Code || cresp.Results[1].ErrorCode != kerr.RequestTimedOut.Code {
		t.Fatalf("CreateAcls: %+v", cresp.Results)
	}
	dr := kmsg.NewPtrDeleteACLsRequest()
	dr.Filters = make([]kmsg.DeleteACLsRequestFilter, 3)
	dresp := h.Handle(context.Background(), &Conn{}, dr).Msg.(*kmsg.DeleteACLsResponse)
	if len(dresp.Results) != 3 || dresp.Results[2].ErrorCode != kerr.RequestTimedOut.Code {
		t.Fatalf("DeleteAcls: %+v", dresp.Results)
	}
	ar := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	ar.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{{Name: "a", Mechanism: 1}, {Name: "a", Mechanism: 2}}
	ar.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{{Name: "b", Mechanism: 1, Iterations: 4096}}
	aresp := h.Handle(context.Background(), &Conn{}, ar).Msg.(*kmsg.AlterUserSCRAMCredentialsResponse)
	if len(aresp.Results) != 2 || aresp.Results[0].User != "a" || aresp.Results[1].User != "b" ||
		aresp.Results[0].ErrorCode != kerr.RequestTimedOut.Code || aresp.Results[1].ErrorCode != kerr.RequestTimedOut.Code {
		t.Fatalf("AlterUserScramCredentials: %+v", aresp.Results)
	}

	// Without an authorizer the ACL APIs are SECURITY_DISABLED before anything is forwarded.
	h.Cfg = config.Default()
	cresp = h.Handle(context.Background(), &Conn{}, cr).Msg.(*kmsg.CreateACLsResponse)
	if cresp.Results[0].ErrorCode != kerr.SecurityDisabled.Code {
		t.Fatalf("CreateAcls without an authorizer: %+v", cresp.Results)
	}
}
