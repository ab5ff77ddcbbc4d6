package metadata

import (
	"bytes"
	"slices"
	"sort"

	"github.com/gregor-project/gregor/internal/authz"
	"github.com/gregor-project/gregor/internal/controller/state"
)

// The security part of an Image: the ACLs the authorizer enforces and the SCRAM
// credentials SASL/SCRAM authenticates against. Both are kept behind a pointer that an
// Image shares with the previous one until a record changes them, so a broker finds out
// whether to rebuild its authorizer with one comparison (SameACLs) however many ACLs
// there are, and a publish that touches neither costs nothing here.

// ScramCredential is what the broker keeps of one user's SCRAM password for one
// mechanism (see state.ScramCredential). The slices are never modified.
type ScramCredential struct {
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int32
}

// aclSet is the ACLs of an Image, sorted (sortBindings); never modified once published.
type aclSet struct {
	bindings []authz.Binding
}

// scramSet is the credentials of an Image; never modified once published.
type scramSet struct {
	creds map[state.ScramKey]ScramCredential
	users []string // every user with a credential, sorted
}

// ACLs returns every ACL binding, sorted by resource type, pattern type, resource name,
// principal, host, operation and permission. The slice is shared by every Image until
// the ACLs change and must not be modified.
func (im *Image) ACLs() []authz.Binding {
	if im.acls == nil {
		return nil
	}
	return im.acls.bindings
}

// SameACLs reports whether im and other hold the same ACL set object: true when no ACL
// record applied between them (or both have none). It is cheap; a broker rebuilds its
// authorizer only when it is false. A false answer may still mean equal contents (an ACL
// deleted and created again).
func (im *Image) SameACLs(other *Image) bool {
	return other != nil && im.acls == other.acls
}

// ScramCredential returns user's credential for mechanism (state.ScramSHA256 or
// state.ScramSHA512).
func (im *Image) ScramCredential(user string, mechanism int8) (ScramCredential, bool) {
	if im.scram == nil {
		return ScramCredential{}, false
	}
	c, ok := im.scram.creds[state.ScramKey{User: user, Mechanism: mechanism}]
	return c, ok
}

// ScramUsers returns every user that has a SCRAM credential, sorted. The slice must not be
// modified.
func (im *Image) ScramUsers() []string {
	if im.scram == nil {
		return nil
	}
	return im.scram.users
}

// SameScramCredentials reports whether im and other hold the same credential set object
// (see SameACLs).
func (im *Image) SameScramCredentials(other *Image) bool {
	return other != nil && im.scram == other.scram
}

// newACLSet copies the ACLs out of st (nil when there are none).
func newACLSet(st *state.Image) *aclSet {
	acls := st.ACLs()
	if len(acls) == 0 {
		return nil
	}
	bs := make([]authz.Binding, len(acls))
	for i, a := range acls {
		bs[i] = a.Binding
	}
	sortBindings(bs)
	return &aclSet{bindings: bs}
}

// sortBindings orders bindings as ACLs documents.
func sortBindings(bs []authz.Binding) {
	sort.Slice(bs, func(i, j int) bool {
		a, b := bs[i], bs[j]
		switch {
		case a.ResourceType != b.ResourceType:
			return a.ResourceType < b.ResourceType
		case a.PatternType != b.PatternType:
			return a.PatternType < b.PatternType
		case a.Pattern.Name != b.Pattern.Name:
			return a.Pattern.Name < b.Pattern.Name
		case a.Principal != b.Principal:
			return a.Principal < b.Principal
		case a.Host != b.Host:
			return a.Host < b.Host
		case a.Operation != b.Operation:
			return a.Operation < b.Operation
		}
		return a.Permission < b.Permission
	})
}

// newScramSet copies the credentials out of st (nil when there are none).
func newScramSet(st *state.Image) *scramSet {
	keys := st.ScramKeys() // sorted by user
	if len(keys) == 0 {
		return nil
	}
	s := &scramSet{creds: make(map[state.ScramKey]ScramCredential, len(keys))}
	for _, k := range keys {
		c, _ := st.ScramCredential(k.User, k.Mechanism)
		s.creds[k] = ScramCredential{
			Salt: bytes.Clone(c.Salt), StoredKey: bytes.Clone(c.StoredKey), ServerKey: bytes.Clone(c.ServerKey),
			Iterations: c.Iterations,
		}
		if n := len(s.users); n == 0 || s.users[n-1] != k.User {
			s.users = append(s.users, k.User)
		}
	}
	return s
}

func equalACLSets(a, b *aclSet) bool {
	if a == nil || b == nil {
		return a == b
	}
	return slices.Equal(a.bindings, b.bindings)
}

func equalScramSets(a, b *scramSet) bool {
	if a == nil || b == nil {
		return a == b
	}
	if len(a.creds) != len(b.creds) {
		return false
	}
	for k, x := range a.creds {
		y, ok := b.creds[k]
		if !ok || x.Iterations != y.Iterations || !bytes.Equal(x.Salt, y.Salt) ||
			!bytes.Equal(x.StoredKey, y.StoredKey) || !bytes.Equal(x.ServerKey, y.ServerKey) {
			return false
		}
	}
	return true
}
