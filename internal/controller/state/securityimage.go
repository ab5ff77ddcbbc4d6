package state

import (
	"bytes"
	"fmt"
	"sort"

	"github.com/gregor-project/gregor/internal/authz"
)

// SCRAM credentials and ACLs as the image holds them.
//
// Invariants (checked by Image.Check and kept by every Apply):
//   - every credential has a non-empty user name and a known mechanism;
//   - every ACL is valid (authz.Binding.Validate) and has a non-zero id;
//   - no two ACLs have the same binding: acls and aclIDs are inverse maps.

// SCRAM mechanisms, numbered as Kafka's ScramMechanism (and the wire's mechanism field).
const (
	ScramSHA256 int8 = 1
	ScramSHA512 int8 = 2
)

// ScramMechanismName is the SASL name of a mechanism ("SCRAM-SHA-256"), "" if unknown.
func ScramMechanismName(m int8) string {
	switch m {
	case ScramSHA256:
		return "SCRAM-SHA-256"
	case ScramSHA512:
		return "SCRAM-SHA-512"
	}
	return ""
}

// ScramMechanism is the mechanism of a SASL name ("SCRAM-SHA-256"); ok false if it is not a
// SCRAM mechanism.
func ScramMechanism(name string) (m int8, ok bool) {
	switch name {
	case "SCRAM-SHA-256":
		return ScramSHA256, true
	case "SCRAM-SHA-512":
		return ScramSHA512, true
	}
	return 0, false
}

// ScramKey names one credential: a user may have one per mechanism.
type ScramKey struct {
	User      string
	Mechanism int8
}

// ScramCredential is what a server keeps of a SCRAM password (RFC 5802): the salt and
// iteration count it hands the client, StoredKey = H(ClientKey) to check the client's
// proof, and ServerKey to sign its own answer. The slices are never modified.
type ScramCredential struct {
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int32
}

// ACL is one ACL with the id the metadata log knows it by.
type ACL struct {
	ID UUID
	authz.Binding
}

// ScramCredential returns the credential of user for mechanism. The slices must not be
// modified.
func (im *Image) ScramCredential(user string, mechanism int8) (ScramCredential, bool) {
	c, ok := im.scram[ScramKey{user, mechanism}]
	return c, ok
}

// ScramKeys returns the key of every credential, sorted by user then mechanism.
func (im *Image) ScramKeys() []ScramKey {
	ks := make([]ScramKey, 0, len(im.scram))
	for k := range im.scram {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool {
		if ks[i].User != ks[j].User {
			return ks[i].User < ks[j].User
		}
		return ks[i].Mechanism < ks[j].Mechanism
	})
	return ks
}

// NumACLs is the number of ACLs.
func (im *Image) NumACLs() int { return len(im.acls) }

// ACLs returns every ACL, sorted by id.
func (im *Image) ACLs() []ACL {
	out := make([]ACL, 0, len(im.acls))
	for id, b := range im.acls {
		out = append(out, ACL{ID: id, Binding: b})
	}
	sort.Slice(out, func(i, j int) bool { return bytes.Compare(out[i].ID[:], out[j].ID[:]) < 0 })
	return out
}

// ACLID returns the id of the ACL with binding b, if there is one.
func (im *Image) ACLID(b authz.Binding) (UUID, bool) {
	id, ok := im.aclIDs[b]
	return id, ok
}

func (im *Image) applyScramCredential(r *UserScramCredentialRecord) error {
	if r.Name == "" || ScramMechanismName(r.Mechanism) == "" {
		return reject("SCRAM credential of user %q mechanism %d: empty user or unknown mechanism", r.Name, r.Mechanism)
	}
	im.scram[ScramKey{r.Name, r.Mechanism}] = ScramCredential{
		Salt: r.Salt, StoredKey: r.StoredKey, ServerKey: r.ServerKey, Iterations: r.Iterations,
	}
	return nil
}

func (im *Image) applyRemoveScramCredential(r *RemoveUserScramCredentialRecord) error {
	k := ScramKey{r.Name, r.Mechanism}
	if _, ok := im.scram[k]; !ok {
		return reject("remove SCRAM credential of user %q mechanism %d: none", r.Name, r.Mechanism)
	}
	delete(im.scram, k)
	return nil
}

func (im *Image) applyACL(r *AccessControlEntryRecord) error {
	if r.ID == (UUID{}) {
		return reject("ACL with a zero id")
	}
	if err := r.Binding.Validate(); err != nil {
		return reject("ACL %s: %v", r.ID, err)
	}
	if _, ok := im.acls[r.ID]; ok {
		return reject("ACL %s: the id exists", r.ID)
	}
	if id, ok := im.aclIDs[r.Binding]; ok {
		return reject("ACL %s: ACL %s has the same binding %v", r.ID, id, r.Binding)
	}
	im.acls[r.ID] = r.Binding
	im.aclIDs[r.Binding] = r.ID
	return nil
}

func (im *Image) applyRemoveACL(r *RemoveAccessControlEntryRecord) error {
	b, ok := im.acls[r.ID]
	if !ok {
		return reject("remove ACL %s: unknown", r.ID)
	}
	delete(im.acls, r.ID)
	delete(im.aclIDs, b)
	return nil
}

// checkSecurity verifies the invariants above.
func (im *Image) checkSecurity() error {
	for k := range im.scram {
		if k.User == "" || ScramMechanismName(k.Mechanism) == "" {
			return fmt.Errorf("SCRAM credential %+v", k)
		}
	}
	if len(im.acls) != len(im.aclIDs) {
		return fmt.Errorf("%d ACLs by id, %d by binding", len(im.acls), len(im.aclIDs))
	}
	for id, b := range im.acls {
		if id == (UUID{}) || im.aclIDs[b] != id {
			return fmt.Errorf("ACL %s %v indexed wrongly", id, b)
		}
		if err := b.Validate(); err != nil {
			return fmt.Errorf("ACL %s: %w", id, err)
		}
	}
	return nil
}

// securityRecords returns the records that rebuild the credentials and ACLs (snapshots):
// a UserScramCredentialRecord per credential by user and mechanism, then an
// AccessControlEntryRecord per ACL by id.
func (im *Image) securityRecords() []Record {
	recs := make([]Record, 0, len(im.scram)+len(im.acls))
	for _, k := range im.ScramKeys() {
		c := im.scram[k]
		recs = append(recs, &UserScramCredentialRecord{
			Name: k.User, Mechanism: k.Mechanism, Salt: c.Salt, StoredKey: c.StoredKey,
			ServerKey: c.ServerKey, Iterations: c.Iterations,
		})
	}
	for _, a := range im.ACLs() {
		recs = append(recs, &AccessControlEntryRecord{ID: a.ID, Binding: a.Binding})
	}
	return recs
}
