package state

import (
	"bytes"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/authz"
)

func acl(rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType, principal string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) authz.Binding {
	return authz.Binding{
		Pattern: authz.Pattern{ResourceType: rt, Name: name, PatternType: pt},
		Entry:   authz.Entry{Principal: principal, Host: "*", Operation: op, Permission: perm},
	}
}

var (
	aclAliceReadOrders = acl(kmsg.ACLResourceTypeTopic, "orders", kmsg.ACLResourcePatternTypeLiteral, "User:alice", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow)
	aclBobWriteOrd     = acl(kmsg.ACLResourceTypeTopic, "ord", kmsg.ACLResourcePatternTypePrefixed, "User:bob", kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeAllow)
	aclAnyoneDenyAll   = acl(kmsg.ACLResourceTypeTopic, "*", kmsg.ACLResourcePatternTypeLiteral, "User:*", kmsg.ACLOperationAll, kmsg.ACLPermissionTypeDeny)
	aclAliceGroup      = acl(kmsg.ACLResourceTypeGroup, "g1", kmsg.ACLResourcePatternTypeLiteral, "User:alice", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow)
)

func sampleSecurityRecords() []Record {
	return []Record{
		&UserScramCredentialRecord{Name: "alice", Mechanism: ScramSHA256, Salt: []byte("salt"), StoredKey: bytes.Repeat([]byte{1}, 32), ServerKey: bytes.Repeat([]byte{2}, 32), Iterations: 8192},
		&UserScramCredentialRecord{Name: "bob", Mechanism: ScramSHA512, Iterations: 4096},
		&RemoveUserScramCredentialRecord{Name: "alice", Mechanism: ScramSHA256},
		&AccessControlEntryRecord{ID: UUID{7, 7}, Binding: aclAliceReadOrders},
		&AccessControlEntryRecord{ID: UUID{7, 8}, Binding: aclAnyoneDenyAll},
		&RemoveAccessControlEntryRecord{ID: UUID{7, 7}},
	}
}

func TestSecurityRecordsRoundTrip(t *testing.T) {
	recs := sampleSecurityRecords()
	good := EncodeBatch(recs)
	got, err := DecodeBatch(good)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, recs) {
		t.Fatalf("round trip:\n got %#v\nwant %#v", got, recs)
	}
	for typ := TypeUserScramCredential; typ <= TypeRemoveAccessControlEntry; typ++ {
		if newRecord(typ) == nil {
			t.Errorf("record type %d has no decoder", typ)
		}
	}
	for n := range len(good) {
		if _, err := DecodeBatch(good[:n]); err == nil {
			t.Fatalf("truncated to %d bytes: decoded", n)
		}
	}
	// An int8 field out of range is corrupt.
	bad := EncodeBatch([]Record{fakeRecord{typ: TypeRemoveUserScramCredential, body: []byte{1, 'a', 0x80, 0x02}}})
	if _, err := DecodeBatch(bad); !errors.Is(err, ErrCorruptRecord) {
		t.Errorf("mechanism 128: err %v", err)
	}
}

func TestApplySecurityRecords(t *testing.T) {
	im := NewImage()
	if err := im.Apply(0, sampleSecurityRecords()); err != nil {
		t.Fatal(err)
	}
	if err := im.Check(); err != nil {
		t.Fatal(err)
	}
	if _, ok := im.ScramCredential("alice", ScramSHA256); ok {
		t.Error("alice's removed credential is still there")
	}
	if c, ok := im.ScramCredential("bob", ScramSHA512); !ok || c.Iterations != 4096 {
		t.Errorf("bob: %+v %v", c, ok)
	}
	if acls := im.ACLs(); len(acls) != 1 || acls[0].Binding != aclAnyoneDenyAll || acls[0].ID != (UUID{7, 8}) {
		t.Errorf("ACLs %v", acls)
	}
	// Records that do not fit are rejected and change nothing.
	for _, r := range []Record{
		&RemoveUserScramCredentialRecord{Name: "alice", Mechanism: ScramSHA256},
		&UserScramCredentialRecord{Name: "", Mechanism: ScramSHA256},
		&UserScramCredentialRecord{Name: "carol", Mechanism: 3},
		&AccessControlEntryRecord{ID: UUID{9}, Binding: aclAnyoneDenyAll},      // same binding
		&AccessControlEntryRecord{ID: UUID{7, 8}, Binding: aclAliceReadOrders}, // same id
		&AccessControlEntryRecord{Binding: aclAliceReadOrders},                 // zero id
		&AccessControlEntryRecord{ID: UUID{9}, Binding: authz.Binding{}},       // invalid
		&RemoveAccessControlEntryRecord{ID: UUID{7, 7}},
	} {
		if err := im.Apply(im.Offset()+1, []Record{r}); !errors.Is(err, ErrRecordRejected) {
			t.Errorf("%#v: err %v", r, err)
		}
		if err := im.Check(); err != nil {
			t.Fatal(err)
		}
	}
	if im.NumACLs() != 1 || len(im.ScramKeys()) != 1 {
		t.Errorf("rejected records changed the image: %d ACLs, credentials %v", im.NumACLs(), im.ScramKeys())
	}
}

// replayAndRestore checks that replaying h's log from scratch, and restoring a snapshot of
// h's image, both give h's image.
func replayAndRestore(t *testing.T, h *harness) {
	t.Helper()
	want := h.c.Image().Snapshot()
	im := NewImage()
	for i, recs := range h.log {
		if err := im.Apply(int64(i+1), recs); err != nil {
			t.Fatalf("replay offset %d: %v", i+1, err)
		}
	}
	if got := im.Snapshot(); !bytes.Equal(got, want) {
		t.Fatal("replayed image differs")
	}
	restored, err := Restore(want)
	if err != nil {
		t.Fatal(err)
	}
	if err := restored.Check(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(restored.ACLs(), h.c.Image().ACLs()) {
		t.Fatalf("restored ACLs %v, want %v", restored.ACLs(), h.c.Image().ACLs())
	}
	for _, k := range h.c.Image().ScramKeys() {
		a, _ := h.c.Image().ScramCredential(k.User, k.Mechanism)
		b, ok := restored.ScramCredential(k.User, k.Mechanism)
		if !ok || !reflect.DeepEqual(a, b) {
			t.Fatalf("restored credential %v: %+v, want %+v", k, b, a)
		}
	}
	if !reflect.DeepEqual(restored.ScramKeys(), h.c.Image().ScramKeys()) {
		t.Fatalf("restored credentials %v, want %v", restored.ScramKeys(), h.c.Image().ScramKeys())
	}
	if got := restored.Snapshot(); !bytes.Equal(got, want) {
		t.Fatal("snapshot of the restored image differs")
	}
}

func TestCreateAcls(t *testing.T) {
	h := newHarness(t)
	invalid := aclAliceReadOrders
	invalid.PatternType = kmsg.ACLResourcePatternTypeMatch
	recs, errs := h.c.CreateAcls([]authz.Binding{aclAliceReadOrders, aclBobWriteOrd, invalid, aclAliceReadOrders})
	wantErr(t, errs[0], nil)
	wantErr(t, errs[1], nil)
	wantErr(t, errs[2], kerr.InvalidRequest)
	wantErr(t, errs[3], nil) // the same binding twice: one record, both succeed
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2", len(recs))
	}
	h.apply(recs)
	if h.c.Image().NumACLs() != 2 {
		t.Fatalf("%d ACLs", h.c.Image().NumACLs())
	}
	// An existing binding succeeds and writes nothing.
	recs, errs = h.c.CreateAcls([]authz.Binding{aclBobWriteOrd, aclAnyoneDenyAll})
	if errs[0] != nil || errs[1] != nil || len(recs) != 1 {
		t.Fatalf("create again: %v, %d records", errs, len(recs))
	}
	h.apply(recs)
	ids := map[UUID]bool{}
	for _, a := range h.c.Image().ACLs() {
		if ids[a.ID] {
			t.Fatalf("id %s twice", a.ID)
		}
		ids[a.ID] = true
	}
	replayAndRestore(t, h)
}

func TestDeleteAcls(t *testing.T) {
	h := newHarness(t)
	recs, _ := h.c.CreateAcls([]authz.Binding{aclAliceReadOrders, aclBobWriteOrd, aclAnyoneDenyAll, aclAliceGroup})
	h.apply(recs)
	anyF := authz.Filter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
	name := "orders"
	match := anyF
	match.ResourceType, match.PatternType, match.Name = kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeMatch, &name
	alice := "User:alice"
	byAlice := anyF
	byAlice.Principal = &alice
	unknown := anyF
	unknown.Operation = kmsg.ACLOperationUnknown

	recs, res := h.c.DeleteAcls([]authz.Filter{match, byAlice, unknown})
	wantErr(t, res[0].Err, nil)
	wantErr(t, res[1].Err, nil)
	wantErr(t, res[2].Err, kerr.InvalidRequest)
	if len(res[0].Matched) != 3 || len(res[1].Matched) != 2 || len(res[2].Matched) != 0 {
		t.Fatalf("matched %v / %v / %v", res[0].Matched, res[1].Matched, res[2].Matched)
	}
	if len(recs) != 4 { // alice's topic ACL matched twice, removed once
		t.Fatalf("%d records, want 4", len(recs))
	}
	h.apply(recs)
	if n := h.c.Image().NumACLs(); n != 0 {
		t.Fatalf("%d ACLs left", n)
	}
	// Nothing left to match: no records, empty matches.
	recs, res = h.c.DeleteAcls([]authz.Filter{anyF})
	if len(recs) != 0 || res[0].Err != nil || len(res[0].Matched) != 0 {
		t.Fatalf("delete from none: %d records, %+v", len(recs), res)
	}
	// Re-creating a deleted binding gives it a new id.
	recs, _ = h.c.CreateAcls([]authz.Binding{aclAliceReadOrders})
	h.apply(recs)
	replayAndRestore(t, h)
}

func TestAlterUserScramCredentials(t *testing.T) {
	h := newHarness(t)
	salted := []byte("salted-password")
	up := func(user string, mech int8, iter int32) ScramUpsertion {
		return ScramUpsertion{User: user, Mechanism: mech, Iterations: iter, Salt: []byte("salt-" + user), SaltedPassword: salted}
	}
	recs, res := h.c.AlterUserScramCredentials(AlterScramRequest{Upsertions: []ScramUpsertion{
		up("alice", ScramSHA256, 8192), up("bob", ScramSHA512, 4096), up("carol", ScramSHA256, 16384),
	}})
	for _, r := range res {
		wantErr(t, r.Err, nil)
	}
	h.apply(recs)
	c, ok := h.c.Image().ScramCredential("alice", ScramSHA256)
	stored, server := DeriveScramKeys(ScramSHA256, salted)
	if !ok || c.Iterations != 8192 || string(c.Salt) != "salt-alice" || !bytes.Equal(c.StoredKey, stored) || !bytes.Equal(c.ServerKey, server) {
		t.Fatalf("alice: %+v %v", c, ok)
	}
	if c, _ := h.c.Image().ScramCredential("bob", ScramSHA512); len(c.StoredKey) != 64 || len(c.ServerKey) != 64 {
		t.Fatalf("bob's SHA-512 keys: %d and %d bytes", len(c.StoredKey), len(c.ServerKey))
	}

	cases := []struct {
		name string
		req  AlterScramRequest
		want map[string]*kerr.Error
	}{
		{"empty user", AlterScramRequest{Deletions: []ScramDeletion{{"", ScramSHA256}}, Upsertions: []ScramUpsertion{up("", ScramSHA256, 8192)}},
			map[string]*kerr.Error{"": kerr.UnacceptableCredential}},
		{"unknown mechanism", AlterScramRequest{Deletions: []ScramDeletion{{"alice", 0}, {"bob", 10}}, Upsertions: []ScramUpsertion{up("dave", 0, 8192), up("erin", 3, 8192)}},
			map[string]*kerr.Error{"alice": kerr.UnsupportedSaslMechanism, "bob": kerr.UnsupportedSaslMechanism, "dave": kerr.UnsupportedSaslMechanism, "erin": kerr.UnsupportedSaslMechanism}},
		{"iterations", AlterScramRequest{Upsertions: []ScramUpsertion{up("dave", ScramSHA256, 4095), up("erin", ScramSHA512, 16385), up("frank", ScramSHA256, 4096)}},
			map[string]*kerr.Error{"dave": kerr.UnacceptableCredential, "erin": kerr.UnacceptableCredential, "frank": nil}},
		{"delete missing", AlterScramRequest{Deletions: []ScramDeletion{{"alice", ScramSHA512}, {"nobody", ScramSHA256}}},
			map[string]*kerr.Error{"alice": kerr.ResourceNotFound, "nobody": kerr.ResourceNotFound}},
		{"same user twice", AlterScramRequest{
			Deletions:  []ScramDeletion{{"alice", ScramSHA256}, {"bob", ScramSHA512}, {"bob", ScramSHA512}},
			Upsertions: []ScramUpsertion{up("alice", ScramSHA512, 8192), up("carol", ScramSHA256, 8192), up("carol", ScramSHA512, 8192), up("dave", ScramSHA256, 8192)}},
			map[string]*kerr.Error{"alice": kerr.DuplicateResource, "bob": kerr.DuplicateResource, "carol": kerr.DuplicateResource, "dave": nil}},
		{"first error sticks", AlterScramRequest{Deletions: []ScramDeletion{{"alice", 9}, {"alice", ScramSHA256}}},
			map[string]*kerr.Error{"alice": kerr.UnsupportedSaslMechanism}},
	}
	for _, tc := range cases {
		recs, res := h.c.AlterUserScramCredentials(tc.req)
		if len(res) != len(tc.want) {
			t.Fatalf("%s: results %+v", tc.name, res)
		}
		ok := 0
		for _, r := range res {
			want, found := tc.want[r.User]
			if !found {
				t.Fatalf("%s: result for %q", tc.name, r.User)
			}
			if want == nil {
				ok++
			}
			if want == nil && r.Err != nil || want != nil && !errors.Is(r.Err, want) {
				t.Errorf("%s: %q: %v, want %v", tc.name, r.User, r.Err, want)
			}
		}
		if len(recs) != ok {
			t.Errorf("%s: %d records for %d successes", tc.name, len(recs), ok)
		}
	}
	// Nothing above was applied: the three credentials are as they were.
	if ks := h.c.Image().ScramKeys(); len(ks) != 3 {
		t.Fatalf("credentials %v", ks)
	}
	// Delete one mechanism, replace another.
	recs, res = h.c.AlterUserScramCredentials(AlterScramRequest{
		Deletions:  []ScramDeletion{{"alice", ScramSHA256}},
		Upsertions: []ScramUpsertion{up("bob", ScramSHA512, 10000)},
	})
	if res[0].User != "alice" || res[0].Err != nil || res[1].User != "bob" || res[1].Err != nil {
		t.Fatalf("results %+v", res)
	}
	h.apply(recs)
	if _, ok := h.c.Image().ScramCredential("alice", ScramSHA256); ok {
		t.Fatal("alice's credential survived its deletion")
	}
	if c, _ := h.c.Image().ScramCredential("bob", ScramSHA512); c.Iterations != 10000 {
		t.Fatalf("bob's iterations %d", c.Iterations)
	}
	replayAndRestore(t, h)
}

// TestDeriveScramKeysRFC7677 checks the keys against the SCRAM-SHA-256 exchange of RFC 7677
// section 3: the server signature made with ServerKey and the client proof checked with
// StoredKey must be the RFC's.
func TestDeriveScramKeysRFC7677(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	salted, err := pbkdf2.Key(sha256.New, "pencil", salt, 4096, 32)
	if err != nil {
		t.Fatal(err)
	}
	stored, server := DeriveScramKeys(ScramSHA256, salted)
	authMessage := "n=user,r=rOprNGfwEbeRWgbNEkqO," +
		"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096," +
		"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
	mac := hmac.New(sha256.New, server)
	mac.Write([]byte(authMessage))
	if got := base64.StdEncoding.EncodeToString(mac.Sum(nil)); got != "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=" {
		t.Errorf("server signature %s", got)
	}
	proof, _ := base64.StdEncoding.DecodeString("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
	mac = hmac.New(sha256.New, stored)
	mac.Write([]byte(authMessage))
	clientKey := mac.Sum(nil)
	for i := range clientKey {
		clientKey[i] ^= proof[i]
	}
	if h := sha256.Sum256(clientKey); !bytes.Equal(h[:], stored) {
		t.Error("the RFC's client proof does not verify against StoredKey")
	}
}
