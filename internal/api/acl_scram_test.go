package api_test

import (
	"errors"
	"sort"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
)

// withAuthorizer are the configs of a broker that serves the ACL APIs: without an
// authorizer they are SECURITY_DISABLED, as in Kafka. The test's own connections are
// anonymous, so the anonymous user is a super user.
var withAuthorizer = []string{
	"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
	"super.users=User:ANONYMOUS",
}

// describedACLs renders every ACL a describe found, sorted, as "type name pattern
// principal host operation permission".
func describedACLs(t *testing.T, adm *kadm.Client, b *kadm.ACLBuilder) []string {
	t.Helper()
	rs, err := adm.DescribeACLs(ctxT(t), b)
	if err != nil {
		t.Fatalf("describe ACLs: %v", err)
	}
	var out []string
	for _, r := range rs {
		if r.Err != nil {
			t.Fatalf("describe ACLs: %v (%s)", r.Err, r.ErrMessage)
		}
		for _, d := range r.Described {
			out = append(out, d.Type.String()+" "+d.Name+" "+d.Pattern.String()+" "+d.Principal+" "+d.Host+" "+d.Operation.String()+" "+d.Permission.String())
		}
	}
	sort.Strings(out)
	return out
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func createACLs(t *testing.T, adm *kadm.Client, b *kadm.ACLBuilder) {
	t.Helper()
	rs, err := adm.CreateACLs(ctxT(t), b)
	if err != nil {
		t.Fatalf("create ACLs: %v", err)
	}
	for _, r := range rs {
		if r.Err != nil {
			t.Fatalf("create ACL %+v: %v (%s)", r, r.Err, r.ErrMessage)
		}
	}
}

func TestACLsCreateDescribeDelete(t *testing.T) {
	b := testutil.StartBroker(t, withAuthorizer...)
	adm := newAdmin(t, b.Addr())
	ctx := ctxT(t)

	createACLs(t, adm, kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpRead, kadm.OpDescribe))
	createACLs(t, adm, kadm.NewACLs().Allow("User:bob").AllowHosts("10.0.0.1").Topics("ord").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpWrite))
	createACLs(t, adm, kadm.NewACLs().Deny("User:*").Topics("*").Operations(kadm.OpDelete))
	createACLs(t, adm, kadm.NewACLs().Allow("User:alice").Groups("g1").Operations(kadm.OpRead))
	createACLs(t, adm, kadm.NewACLs().Allow("User:admin").Clusters().Operations(kadm.OpAlter))
	// Creating an existing ACL again succeeds and adds nothing.
	createACLs(t, adm, kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpRead))

	all := describedACLs(t, adm, kadm.NewACLs().AnyResource().Allow().AllowHosts().Deny().DenyHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
	want := []string{
		"CLUSTER kafka-cluster LITERAL User:admin * ALTER ALLOW",
		"GROUP g1 LITERAL User:alice * READ ALLOW",
		"TOPIC * LITERAL User:* * DELETE DENY",
		"TOPIC ord PREFIXED User:bob 10.0.0.1 WRITE ALLOW",
		"TOPIC orders LITERAL User:alice * DESCRIBE ALLOW",
		"TOPIC orders LITERAL User:alice * READ ALLOW",
	}
	if !equalStrings(all, want) {
		t.Fatalf("all ACLs:\n%q\nwant\n%q", all, want)
	}

	// LITERAL finds the exact name only; PREFIXED the prefixed binding of that exact name;
	// MATCH every ACL that applies to the named topic.
	lit := describedACLs(t, adm, kadm.NewACLs().Topics("orders").Allow().AllowHosts().Deny().DenyHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternLiteral))
	if !equalStrings(lit, want[4:6]) {
		t.Errorf("literal orders: %q", lit)
	}
	pre := describedACLs(t, adm, kadm.NewACLs().Topics("ord").Allow().AllowHosts().Deny().DenyHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternPrefixed))
	if !equalStrings(pre, want[3:4]) {
		t.Errorf("prefixed ord: %q", pre)
	}
	match := describedACLs(t, adm, kadm.NewACLs().Topics("orders").Allow().AllowHosts().Deny().DenyHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternMatch))
	if !equalStrings(match, want[2:6]) {
		t.Errorf("match orders: %q", match)
	}
	other := describedACLs(t, adm, kadm.NewACLs().Topics("payments").Allow().AllowHosts().Deny().DenyHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternMatch))
	if !equalStrings(other, want[2:3]) {
		t.Errorf("match payments: %q", other)
	}
	byPrincipal := describedACLs(t, adm, kadm.NewACLs().AnyResource().Allow("User:alice").AllowHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
	if !equalStrings(byPrincipal, []string{want[1], want[4], want[5]}) {
		t.Errorf("alice's: %q", byPrincipal)
	}

	// DeleteAcls with MATCH removes what applies to orders-eu (the wildcard deny and bob's
	// prefix), and reports it.
	dels, err := adm.DeleteACLs(ctx, kadm.NewACLs().Topics("orders-eu").Allow().AllowHosts().Deny().DenyHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternMatch))
	if err != nil {
		t.Fatal(err)
	}
	var deleted []string
	for _, d := range dels {
		if d.Err != nil {
			t.Fatalf("delete: %v", d.Err)
		}
		for _, x := range d.Deleted {
			if x.Err != nil {
				t.Fatalf("delete: %v", x.Err)
			}
			deleted = append(deleted, x.Name+" "+x.Principal)
		}
	}
	sort.Strings(deleted)
	if !equalStrings(deleted, []string{"* User:*", "ord User:bob"}) {
		t.Fatalf("deleted %q", deleted)
	}
	// The broker answered after its own image dropped them: a describe sees it at once.
	left := describedACLs(t, adm, kadm.NewACLs().AnyResource().Allow().AllowHosts().Deny().DenyHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
	if !equalStrings(left, []string{want[0], want[1], want[4], want[5]}) {
		t.Fatalf("left after delete: %q", left)
	}
}

func TestACLErrors(t *testing.T) {
	b := testutil.StartBroker(t, withAuthorizer...)
	cl := newClient(t, b.Addr())

	creation := func(mod func(*kmsg.CreateACLsRequestCreation)) kmsg.CreateACLsRequestCreation {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, "t", kmsg.ACLResourcePatternTypeLiteral
		c.Principal, c.Host, c.Operation, c.PermissionType = "User:alice", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
		mod(&c)
		return c
	}
	req := kmsg.NewPtrCreateACLsRequest()
	req.Creations = []kmsg.CreateACLsRequestCreation{
		creation(func(*kmsg.CreateACLsRequestCreation) {}),
		creation(func(c *kmsg.CreateACLsRequestCreation) { c.ResourcePatternType = kmsg.ACLResourcePatternTypeMatch }),
		creation(func(c *kmsg.CreateACLsRequestCreation) { c.ResourceType = kmsg.ACLResourceTypeAny }),
		creation(func(c *kmsg.CreateACLsRequestCreation) { c.Operation = kmsg.ACLOperationAny }),
		creation(func(c *kmsg.CreateACLsRequestCreation) { c.PermissionType = kmsg.ACLPermissionTypeAny }),
		creation(func(c *kmsg.CreateACLsRequestCreation) { c.ResourceName = "" }),
		creation(func(c *kmsg.CreateACLsRequestCreation) { c.ResourceType = kmsg.ACLResourceTypeCluster }),
		creation(func(c *kmsg.CreateACLsRequestCreation) { c.Principal = "alice" }),
	}
	resp := request[*kmsg.CreateACLsResponse](t, cl, req)
	if len(resp.Results) != len(req.Creations) {
		t.Fatalf("%d results", len(resp.Results))
	}
	for i, r := range resp.Results {
		want := kerr.InvalidRequest.Code
		if i == 0 {
			want = 0
		}
		if r.ErrorCode != want {
			t.Errorf("creation %d: code %d (%v), want %d", i, r.ErrorCode, r.ErrorMessage, want)
		}
	}

	dreq := kmsg.NewPtrDescribeACLsRequest()
	dreq.ResourceType, dreq.ResourcePatternType = kmsg.ACLResourceTypeUnknown, kmsg.ACLResourcePatternTypeAny
	dreq.Operation, dreq.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	if d := request[*kmsg.DescribeACLsResponse](t, cl, dreq); d.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("describe with an UNKNOWN resource type: code %d", d.ErrorCode)
	}

	del := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	f.Operation, f.PermissionType = kmsg.ACLOperationUnknown, kmsg.ACLPermissionTypeAny
	del.Filters = append(del.Filters, f)
	if d := request[*kmsg.DeleteACLsResponse](t, cl, del); len(d.Results) != 1 || d.Results[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("delete with an UNKNOWN operation: %+v", d.Results)
	}

	// Without an authorizer, Kafka's brokers answer the ACL APIs SECURITY_DISABLED.
	plain := testutil.StartBroker(t)
	adm := newAdmin(t, plain.Addr())
	rs, err := adm.CreateACLs(ctxT(t), kadm.NewACLs().Allow("User:alice").Topics("t").Operations(kadm.OpRead))
	if err != nil || len(rs) != 1 || !errors.Is(rs[0].Err, kerr.SecurityDisabled) {
		t.Errorf("create without an authorizer: %v %+v", err, rs)
	}
	if d := request[*kmsg.DescribeACLsResponse](t, newClient(t, plain.Addr()), dreq); d.ErrorCode != kerr.SecurityDisabled.Code {
		t.Errorf("describe without an authorizer: code %d", d.ErrorCode)
	}
}

func TestUserSCRAMs(t *testing.T) {
	b := testutil.StartBroker(t)
	adm := newAdmin(t, b.Addr())
	ctx := ctxT(t)

	altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 8192, Password: "alice-secret"},
		{User: "bob", Mechanism: kadm.ScramSha512, Password: "bob-secret"},
	})
	if err != nil || !altered.Ok() || len(altered) != 2 {
		t.Fatalf("upsert: %v %+v", err, altered)
	}
	altered, err = adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "alice-secret"}})
	if err != nil || !altered.Ok() {
		t.Fatalf("second mechanism: %v %+v", err, altered)
	}

	// Every user (the broker answered after its image had the change).
	described, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil || !described.Ok() {
		t.Fatalf("describe all: %v %+v", err, described)
	}
	got := map[string][]string{}
	for _, d := range described.Sorted() {
		for _, c := range d.CredInfos {
			got[d.User] = append(got[d.User], c.Mechanism.String()+"/"+strconv.Itoa(int(c.Iterations)))
		}
	}
	if len(got) != 2 || !equalStrings(got["alice"], []string{"SCRAM-SHA-256/8192", "SCRAM-SHA-512/4096"}) || !equalStrings(got["bob"], []string{"SCRAM-SHA-512/4096"}) {
		t.Fatalf("described %v", got)
	}

	// Named users: an unknown one is RESOURCE_NOT_FOUND, one named twice DUPLICATE_RESOURCE.
	described, err = adm.DescribeUserSCRAMs(ctx, "alice", "nobody", "bob", "bob")
	if err != nil {
		t.Fatal(err)
	}
	if d := described["alice"]; d.Err != nil || len(d.CredInfos) != 2 {
		t.Errorf("alice: %+v", d)
	}
	if d := described["nobody"]; !errors.Is(d.Err, kerr.ResourceNotFound) {
		t.Errorf("nobody: %+v", d)
	}
	if d := described["bob"]; !errors.Is(d.Err, kerr.DuplicateResource) {
		t.Errorf("bob twice: %+v", d)
	}

	// Delete one of alice's mechanisms; deleting it again is RESOURCE_NOT_FOUND.
	altered, err = adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "alice", Mechanism: kadm.ScramSha256}}, nil)
	if err != nil || !altered.Ok() {
		t.Fatalf("delete: %v %+v", err, altered)
	}
	described, err = adm.DescribeUserSCRAMs(ctx, "alice")
	if err != nil || len(described["alice"].CredInfos) != 1 || described["alice"].CredInfos[0].Mechanism != kadm.ScramSha512 {
		t.Fatalf("alice after delete: %v %+v", err, described)
	}
	altered, err = adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "alice", Mechanism: kadm.ScramSha256}}, nil)
	if err != nil || !errors.Is(altered["alice"].Err, kerr.ResourceNotFound) {
		t.Fatalf("delete again: %v %+v", err, altered)
	}
	// The same user twice in one request.
	altered, err = adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "bob", Mechanism: kadm.ScramSha512}},
		[]kadm.UpsertSCRAM{{User: "bob", Mechanism: kadm.ScramSha256, Password: "x"}})
	if err != nil || !errors.Is(altered["bob"].Err, kerr.DuplicateResource) {
		t.Fatalf("bob twice: %v %+v", err, altered)
	}

	// What kadm refuses before sending, sent raw: an unknown mechanism, too few and too many
	// iterations, an empty user name.
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	up := func(user string, mech int8, iter int32) kmsg.AlterUserSCRAMCredentialsRequestUpsertion {
		u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = user, mech, iter, []byte("salt"), []byte("salted")
		return u
	}
	req.Upsertions = append(req.Upsertions, up("m", 3, 8192), up("few", 1, 4095), up("many", 2, 16385), up("", 1, 8192))
	resp := request[*kmsg.AlterUserSCRAMCredentialsResponse](t, newClient(t, b.Addr()), req)
	codes := map[string]int16{}
	for _, r := range resp.Results {
		codes[r.User] = r.ErrorCode
	}
	wantCodes := map[string]int16{"m": kerr.UnsupportedSaslMechanism.Code, "few": kerr.UnacceptableCredential.Code, "many": kerr.UnacceptableCredential.Code, "": kerr.UnacceptableCredential.Code}
	if len(codes) != len(wantCodes) {
		t.Fatalf("results %+v", resp.Results)
	}
	for u, c := range wantCodes {
		if codes[u] != c {
			t.Errorf("user %q: code %d, want %d", u, codes[u], c)
		}
	}
}

// TestACLsAndSCRAMsSurviveRestart: both live in the metadata log, which a restarted broker
// replays.
func TestACLsAndSCRAMsSurviveRestart(t *testing.T) {
	b := testutil.StartBroker(t, withAuthorizer...)
	adm := newAdmin(t, b.Addr())
	createACLs(t, adm, kadm.NewACLs().Allow("User:alice").Topics("orders").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpRead))
	if altered, err := adm.AlterUserSCRAMs(ctxT(t), nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 5000, Password: "pw"}}); err != nil || !altered.Ok() {
		t.Fatalf("upsert: %v %+v", err, altered)
	}

	b = b.Restart()
	adm = newAdmin(t, b.Addr())
	acls := describedACLs(t, adm, kadm.NewACLs().AnyResource().Allow().AllowHosts().Deny().DenyHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
	if !equalStrings(acls, []string{"TOPIC orders PREFIXED User:alice * READ ALLOW"}) {
		t.Fatalf("ACLs after restart: %q", acls)
	}
	described, err := adm.DescribeUserSCRAMs(ctxT(t), "alice")
	if err != nil || described["alice"].Err != nil || len(described["alice"].CredInfos) != 1 || described["alice"].CredInfos[0].Iterations != 5000 {
		t.Fatalf("credentials after restart: %v %+v", err, described)
	}
}
