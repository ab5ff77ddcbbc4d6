package metadata

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/authz"
	"github.com/gregor-project/gregor/internal/controller/state"
)

// checkSecurity compares im's ACLs and credentials with the controller's.
func checkSecurity(t testing.TB, im *Image, st *state.Image) {
	t.Helper()
	var want []authz.Binding
	for _, a := range st.ACLs() {
		want = append(want, a.Binding)
	}
	sortBindings(want)
	if !slices.Equal(im.ACLs(), want) {
		t.Fatalf("ACLs %v, state has %v", im.ACLs(), want)
	}
	var users []string
	for _, k := range st.ScramKeys() {
		if n := len(users); n == 0 || users[n-1] != k.User {
			users = append(users, k.User)
		}
		sc, _ := st.ScramCredential(k.User, k.Mechanism)
		c, ok := im.ScramCredential(k.User, k.Mechanism)
		if !ok || c.Iterations != sc.Iterations || !bytes.Equal(c.Salt, sc.Salt) ||
			!bytes.Equal(c.StoredKey, sc.StoredKey) || !bytes.Equal(c.ServerKey, sc.ServerKey) {
			t.Fatalf("credential %v: %+v, state has %+v", k, c, sc)
		}
	}
	if !slices.Equal(im.ScramUsers(), users) {
		t.Fatalf("SCRAM users %v, state has %v", im.ScramUsers(), users)
	}
}

func dumpSecurity(b *strings.Builder, im *Image) {
	for _, a := range im.ACLs() {
		fmt.Fprintf(b, "acl %v\n", a)
	}
	for _, u := range im.ScramUsers() {
		for m := state.ScramSHA256; m <= state.ScramSHA512; m++ {
			if c, ok := im.ScramCredential(u, m); ok {
				fmt.Fprintf(b, "scram %s %d %+v\n", u, m, c)
			}
		}
	}
}

func testACL(name string, pt kmsg.ACLResourcePatternType, principal string) authz.Binding {
	return authz.Binding{
		Pattern: authz.Pattern{ResourceType: kmsg.ACLResourceTypeTopic, Name: name, PatternType: pt},
		Entry:   authz.Entry{Principal: principal, Host: "*", Operation: kmsg.ACLOperationRead, Permission: kmsg.ACLPermissionTypeAllow},
	}
}

func (h *harness) createACLs(bs ...authz.Binding) {
	h.t.Helper()
	recs, errs := h.c.CreateAcls(bs)
	for _, err := range errs {
		if err != nil {
			h.t.Fatalf("create ACLs: %v", err)
		}
	}
	h.apply(recs)
}

func (h *harness) alterScram(req state.AlterScramRequest) {
	h.t.Helper()
	recs, res := h.c.AlterUserScramCredentials(req)
	for _, r := range res {
		if r.Err != nil {
			h.t.Fatalf("alter SCRAM of %q: %v", r.User, r.Err)
		}
	}
	h.apply(recs)
}

func TestPublisherSecurity(t *testing.T) {
	h := newHarness(t)
	h.register(1)
	im0 := h.p.Image()
	if im0.ACLs() != nil || im0.ScramUsers() != nil {
		t.Fatal("empty image has ACLs or credentials")
	}
	if _, ok := im0.ScramCredential("alice", state.ScramSHA256); ok {
		t.Fatal("credential in an empty image")
	}

	h.createACLs(testACL("orders", kmsg.ACLResourcePatternTypeLiteral, "User:alice"), testACL("ord", kmsg.ACLResourcePatternTypePrefixed, "User:bob"))
	im1 := h.p.Image()
	if im1.SameACLs(im0) || len(im1.ACLs()) != 2 {
		t.Fatalf("after CreateAcls: same %v, ACLs %v", im1.SameACLs(im0), im1.ACLs())
	}
	// Records that touch neither keep both sets, pointer for pointer.
	h.createTopic("t", 1, 1)
	im2 := h.p.Image()
	if !im2.SameACLs(im1) || !im2.SameScramCredentials(im1) {
		t.Fatal("a topic record replaced the ACL or credential set")
	}

	salted := []byte("salted")
	h.alterScram(state.AlterScramRequest{Upsertions: []state.ScramUpsertion{
		{User: "alice", Mechanism: state.ScramSHA256, Iterations: 4096, Salt: []byte("s1"), SaltedPassword: salted},
		{User: "bob", Mechanism: state.ScramSHA512, Iterations: 8192, Salt: []byte("s2"), SaltedPassword: salted},
	}})
	im3 := h.p.Image()
	if !im3.SameACLs(im2) || im3.SameScramCredentials(im2) {
		t.Fatal("a credential record: ACLs replaced or credentials kept")
	}
	if c, ok := im3.ScramCredential("bob", state.ScramSHA512); !ok || c.Iterations != 8192 || string(c.Salt) != "s2" {
		t.Fatalf("bob: %+v %v", c, ok)
	}
	if _, ok := im3.ScramCredential("bob", state.ScramSHA256); ok {
		t.Fatal("bob has a SHA-256 credential")
	}
	h.alterScram(state.AlterScramRequest{Upsertions: []state.ScramUpsertion{
		{User: "alice", Mechanism: state.ScramSHA512, Iterations: 4096, Salt: []byte("s3"), SaltedPassword: salted},
	}})
	if users := h.p.Image().ScramUsers(); !slices.Equal(users, []string{"alice", "bob"}) {
		t.Fatalf("users %v", users)
	}
	h.alterScram(state.AlterScramRequest{Deletions: []state.ScramDeletion{{User: "bob", Mechanism: state.ScramSHA512}}})
	if users := h.p.Image().ScramUsers(); !slices.Equal(users, []string{"alice"}) {
		t.Fatalf("users %v after deleting bob's", users)
	}

	recs, _ := h.c.DeleteAcls([]authz.Filter{{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}})
	h.apply(recs)
	im4 := h.p.Image()
	if acls := im4.ACLs(); len(acls) != 1 || acls[0].PatternType != kmsg.ACLResourcePatternTypePrefixed {
		t.Fatalf("ACLs after deleting the literal ones: %v", acls)
	}

	// A snapshot of the same state keeps the sets' pointers; a fresh publisher restores them.
	prev := h.p.Image()
	if err := h.p.ApplyBatch([]Entry{{Offset: h.offset + 1, Snapshot: snapshotAt(t, h, h.offset+1)}}); err != nil {
		t.Fatal(err)
	}
	if next := h.p.Image(); !next.SameACLs(prev) || !next.SameScramCredentials(prev) {
		t.Fatal("an unchanged snapshot replaced the ACL or credential set")
	}
	fresh := NewPublisher()
	if err := fresh.ApplyBatch([]Entry{{Offset: h.offset + 1, Snapshot: snapshotAt(t, h, h.offset+1)}}); err != nil {
		t.Fatal(err)
	}
	checkSecurity(t, fresh.Image(), h.c.Image())
	if dump(fresh.Image()) != dump(h.p.Image()) {
		t.Fatalf("restored:\n%s\nincremental:\n%s", dump(fresh.Image()), dump(h.p.Image()))
	}
}
