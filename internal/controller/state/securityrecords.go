package state

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/authz"
)

// Records of the security model: SCRAM credentials (KIP-554) and ACLs (KIP-801's
// StandardAuthorizer keeps them in the metadata log). Field formats as in records.go.

// UserScramCredentialRecord sets one SCRAM credential of a user, adding it or replacing
// the one of the same user and mechanism. The server never sees the password: StoredKey
// and ServerKey are derived from the salted password by the controller (scram.go).
//
//	Name string | Mechanism int8 | Salt bytes | StoredKey bytes | ServerKey bytes |
//	Iterations int32
//
// Mechanism is ScramSHA256 or ScramSHA512; Name is not empty.
type UserScramCredentialRecord struct {
	Name       string
	Mechanism  int8
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int32
}

// RemoveUserScramCredentialRecord deletes one SCRAM credential, which must exist.
//
//	Name string | Mechanism int8
type RemoveUserScramCredentialRecord struct {
	Name      string
	Mechanism int8
}

// AccessControlEntryRecord creates one ACL under a new id. The binding is valid
// (authz.Binding.Validate) and no other ACL has the same binding: a CreateAcls of an
// existing binding writes nothing.
//
//	ID uuid | ResourceType int8 | ResourceName string | PatternType int8 | Principal string |
//	Host string | Operation int8 | Permission int8
//
// The int8 values are Kafka's codes (kmsg.ACLResourceType, ACLResourcePatternType,
// ACLOperation, ACLPermissionType).
type AccessControlEntryRecord struct {
	ID UUID
	authz.Binding
}

// RemoveAccessControlEntryRecord deletes the ACL with ID, which must exist.
//
//	ID uuid
type RemoveAccessControlEntryRecord struct {
	ID UUID
}

func (*UserScramCredentialRecord) Type() RecordType       { return TypeUserScramCredential }
func (*RemoveUserScramCredentialRecord) Type() RecordType { return TypeRemoveUserScramCredential }
func (*AccessControlEntryRecord) Type() RecordType        { return TypeAccessControlEntry }
func (*RemoveAccessControlEntryRecord) Type() RecordType  { return TypeRemoveAccessControlEntry }

func (*UserScramCredentialRecord) version() uint64       { return 0 }
func (*RemoveUserScramCredentialRecord) version() uint64 { return 0 }
func (*AccessControlEntryRecord) version() uint64        { return 0 }
func (*RemoveAccessControlEntryRecord) version() uint64  { return 0 }

// newSecurityRecord is newRecord for the types of this file (nil for any other).
func newSecurityRecord(t RecordType) Record {
	switch t {
	case TypeUserScramCredential:
		return &UserScramCredentialRecord{}
	case TypeRemoveUserScramCredential:
		return &RemoveUserScramCredentialRecord{}
	case TypeAccessControlEntry:
		return &AccessControlEntryRecord{}
	case TypeRemoveAccessControlEntry:
		return &RemoveAccessControlEntryRecord{}
	}
	return nil
}

func (r *UserScramCredentialRecord) encode(e *encoder) {
	e.string(r.Name)
	e.int8(r.Mechanism)
	e.bytes(r.Salt)
	e.bytes(r.StoredKey)
	e.bytes(r.ServerKey)
	e.int32(r.Iterations)
}

func (r *UserScramCredentialRecord) decode(d *decoder, _ uint64) {
	r.Name = d.string()
	r.Mechanism = d.int8()
	r.Salt = d.bytes()
	r.StoredKey = d.bytes()
	r.ServerKey = d.bytes()
	r.Iterations = d.int32()
}

func (r *RemoveUserScramCredentialRecord) encode(e *encoder) {
	e.string(r.Name)
	e.int8(r.Mechanism)
}

func (r *RemoveUserScramCredentialRecord) decode(d *decoder, _ uint64) {
	r.Name = d.string()
	r.Mechanism = d.int8()
}

func (r *AccessControlEntryRecord) encode(e *encoder) {
	e.uuid(r.ID)
	e.int8(int8(r.ResourceType))
	e.string(r.Name)
	e.int8(int8(r.PatternType))
	e.string(r.Principal)
	e.string(r.Host)
	e.int8(int8(r.Operation))
	e.int8(int8(r.Permission))
}

func (r *AccessControlEntryRecord) decode(d *decoder, _ uint64) {
	r.ID = d.uuid()
	r.ResourceType = kmsg.ACLResourceType(d.int8())
	r.Name = d.string()
	r.PatternType = kmsg.ACLResourcePatternType(d.int8())
	r.Principal = d.string()
	r.Host = d.string()
	r.Operation = kmsg.ACLOperation(d.int8())
	r.Permission = kmsg.ACLPermissionType(d.int8())
}

func (r *RemoveAccessControlEntryRecord) encode(e *encoder)           { e.uuid(r.ID) }
func (r *RemoveAccessControlEntryRecord) decode(d *decoder, _ uint64) { r.ID = d.uuid() }
