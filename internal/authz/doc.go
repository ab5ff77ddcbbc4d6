// Package authz is authorization: it decides whether a principal, connected from a host, may
// perform an operation on a resource, by Kafka's ACLs and the rules of Kafka's
// StandardAuthorizer (org.apache.kafka.metadata.authorizer.StandardAuthorizer and
// StandardAuthorizerData).
//
// # Shape
//
// The package is a deterministic core with no goroutines, no clock, no I/O and no locks:
//
//   - binding.go: the types (Principal, Pattern, Entry, Binding, Filter) shared with
//     CreateAcls, DescribeAcls, DeleteAcls and the metadata records that store ACLs.
//   - filter.go: Filter matching and binding validation, for the ACL admin APIs.
//   - authorizer.go: the Authorizer interface; ACLs, Kafka's StandardAuthorizer over one
//     immutable set of bindings; AllowAll, the authorizer of a broker without one.
//   - index.go: how ACLs finds the bindings that apply to a resource quickly: by resource
//     type, a map of literal names (the wildcard is the literal "*") and a path-compressed
//     prefix tree of prefixed names; large rule sets are indexed by principal too.
//
// # Rules
//
// ACLs.Authorize(p, host, op, resourceType, name) answers, in order:
//
//  1. A super user (p.String() is one of super.users) is allowed everything; no ACL is read.
//  2. The ACLs that apply to the resource are those of its resource type whose pattern is
//     LITERAL with its name, LITERAL with the wildcard name "*", or PREFIXED with a name that
//     is a prefix of its name (the whole name included).
//  3. An applying ACL matches the request when its principal is p (both split at the first
//     colon, compared as type and name) or is "User:*" (which matches every principal,
//     whatever its type), and its host is the client's address or "*".
//  4. A matching DENY ACL whose operation is op or ALL denies, whatever ALLOW ACLs say: a DENY
//     on a prefix beats an ALLOW on the literal name. A DENY denies only its own operation: a
//     DENY READ does not deny DESCRIBE.
//  5. Otherwise a matching ALLOW ACL allows when its operation is op or ALL, or implies op:
//     READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS.
//  6. Otherwise, when at least one ACL applies to the resource (rule 2, for any principal,
//     host, operation or permission), the request is denied.
//  7. Otherwise (no ACL on the resource at all) the answer is allow.everyone.if.no.acl.found.
//
// ACLs.AuthorizedOperations is rules 1 to 7 applied to each of the operations valid for the
// resource type (SupportedOperations, Kafka's AclEntry.supportedOperations), as the bit field
// (bit i for operation code i) that Metadata (topic_authorized_operations and
// cluster_authorized_operations), DescribeCluster and DescribeGroups return. AllowAll allows
// everything and answers every supported operation, as Kafka's broker does without an
// authorizer. (Whether the request asked for the field, and the schema's default
// -2147483648 when it did not, is the api handler's business.)
//
// As in Kafka, an ACL whose permission is not ALLOW acts as a DENY. Where ACLs differs from
// Kafka, it is for input Kafka never reaches its authorizer with: a binding whose pattern
// type is neither LITERAL nor PREFIXED applies to nothing, one whose principal has no colon
// matches no one (Kafka fails the request), and an operation code outside 0..31 is allowed
// only to super users.
//
// # Invariants
//
// An ACLs never changes once NewACLs returns it, so any number of requests may read it without
// a lock. The broker replaces the whole snapshot when the ACLs in its metadata image or the
// authorization configs change; a request holds the snapshot it started with. The indexed
// answer equals a linear scan of every binding by the rules above (the property test checks it
// over random bindings and requests).
//
// # Who uses it
//
// The broker builds the Authorizer from its configs: authorizer.class.name empty gives
// AllowAll; the standard authorizer gives an ACLs built with NewACLs from the ACL bindings of
// its metadata image and super.users and allow.everyone.if.no.acl.found (internal/config's
// AuthorizerClassName, SuperUsers and AllowEveryoneIfNoACLFound). The connection's principal
// comes from authentication at the connection edge (internal/server, internal/security).
// internal/api asks the Authorizer before acting on a resource; this package imports none of
// them and never calls back. Until its metadata image is loaded a broker has no ACLs to
// build a snapshot from: Kafka's authorizer then allows super users and fails everyone else
// with AUTHORIZER_NOT_READY, so a broker must not authorize requests against an empty
// snapshot before it has caught up.
package authz
