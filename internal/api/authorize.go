package api

import (
	"context"
	"net"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/authz"
	"github.com/gregor-project/gregor/internal/config"
	"github.com/gregor-project/gregor/internal/metadata"
)

// Authorization: every handler asks the broker's authorizer, with the connection's principal
// and the client's IP address, before it acts on a resource, as Apache Kafka's KafkaApis
// does (and its ControllerApis, for the admin requests a KRaft broker forwards: Gregor
// forwards without the principal, so the broker checks them before forwarding). Each check
// sits in its handler's file, where the answer it shapes is built; this file holds the
// helpers and the table below, which is the contract: per API, the operation and resource
// checked, and where the error goes. "Hidden" means the resource is left out of the answer
// without an error.
//
//	API                          operation, resource            denied
//	Produce                      WRITE TRANSACTIONAL_ID          every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED
//	                               (transactional records)
//	                             WRITE TOPIC                     the topic's partitions TOPIC_AUTHORIZATION_FAILED
//	Fetch (consumer)             READ TOPIC                      the topic's partitions TOPIC_AUTHORIZATION_FAILED
//	Fetch (replica_id >= 0)      CLUSTER_ACTION CLUSTER          every partition TOPIC_AUTHORIZATION_FAILED
//	ListOffsets                  DESCRIBE TOPIC                  partition TOPIC_AUTHORIZATION_FAILED
//	OffsetForLeaderEpoch         CLUSTER_ACTION CLUSTER, else    partition TOPIC_AUTHORIZATION_FAILED
//	                               DESCRIBE TOPIC
//	Metadata                     DESCRIBE TOPIC                  named: TOPIC_AUTHORIZATION_FAILED (by id:
//	                                                               TOPIC_AUTHORIZATION_FAILED, no name); all: hidden
//	  auto-creation              CREATE CLUSTER or CREATE TOPIC  TOPIC_AUTHORIZATION_FAILED, not created
//	  authorized operations      topic: every op of the topic; cluster (v8-v10): DESCRIBE CLUSTER, else 0
//	CreateTopics                 CREATE CLUSTER or CREATE TOPIC  topic TOPIC_AUTHORIZATION_FAILED
//	  configs in the answer      DESCRIBE_CONFIGS TOPIC          topic_config_error_code TOPIC_AUTHORIZATION_FAILED
//	DeleteTopics                 DESCRIBE TOPIC, DELETE TOPIC    TOPIC_AUTHORIZATION_FAILED (by id, not
//	                                                               describable: UNKNOWN_TOPIC_ID)
//	CreatePartitions             ALTER TOPIC                     topic TOPIC_AUTHORIZATION_FAILED
//	DescribeConfigs              DESCRIBE_CONFIGS TOPIC          resource TOPIC_AUTHORIZATION_FAILED
//	                             DESCRIBE_CONFIGS CLUSTER        broker / broker logger CLUSTER_AUTHORIZATION_FAILED
//	                               (BROKER, BROKER_LOGGER)
//	AlterConfigs,                ALTER_CONFIGS TOPIC / CLUSTER   as DescribeConfigs
//	  IncrementalAlterConfigs
//	DeleteRecords                DELETE TOPIC                    partition TOPIC_AUTHORIZATION_FAILED
//	DescribeCluster              none for the answer; cluster authorized operations need DESCRIBE CLUSTER, else 0
//	DescribeLogDirs              DESCRIBE CLUSTER                no results, CLUSTER_AUTHORIZATION_FAILED (v3+)
//	AlterReplicaLogDirs          ALTER CLUSTER                   every partition CLUSTER_AUTHORIZATION_FAILED
//	InitProducerId               WRITE TRANSACTIONAL_ID          TRANSACTIONAL_ID_AUTHORIZATION_FAILED
//	  (no transactional id)      IDEMPOTENT_WRITE CLUSTER, or    CLUSTER_AUTHORIZATION_FAILED
//	                               WRITE on some TOPIC (KIP-679)
//	FindCoordinator              DESCRIBE GROUP                  GROUP_AUTHORIZATION_FAILED (per key, v4+)
//	                             DESCRIBE TRANSACTIONAL_ID       TRANSACTIONAL_ID_AUTHORIZATION_FAILED
//	  (SHARE key, v6+)           CLUSTER_ACTION CLUSTER          CLUSTER_AUTHORIZATION_FAILED (per key)
//	JoinGroup, SyncGroup,        READ GROUP                      GROUP_AUTHORIZATION_FAILED
//	  Heartbeat, LeaveGroup
//	OffsetCommit                 READ GROUP                      every partition GROUP_AUTHORIZATION_FAILED
//	                             READ TOPIC                      the topic's partitions TOPIC_AUTHORIZATION_FAILED
//	OffsetFetch                  DESCRIBE GROUP                  GROUP_AUTHORIZATION_FAILED (group; v0-v1: partitions)
//	                             DESCRIBE TOPIC                  named: partition TOPIC_AUTHORIZATION_FAILED; all: hidden
//	OffsetDelete                 DELETE GROUP                    GROUP_AUTHORIZATION_FAILED
//	                             READ TOPIC                      partition TOPIC_AUTHORIZATION_FAILED
//	DescribeGroups               DESCRIBE GROUP                  group GROUP_AUTHORIZATION_FAILED; authorized
//	                                                               operations: every op of the group
//	ListGroups                   DESCRIBE CLUSTER, else          hidden
//	                               DESCRIBE GROUP per group
//	DeleteGroups                 DELETE GROUP                    group GROUP_AUTHORIZATION_FAILED
//	ConsumerGroupHeartbeat       READ GROUP                      GROUP_AUTHORIZATION_FAILED
//	                             DESCRIBE TOPIC (subscribed)     TOPIC_AUTHORIZATION_FAILED
//	ConsumerGroupDescribe        DESCRIBE GROUP                  group GROUP_AUTHORIZATION_FAILED; authorized operations
//	ShareGroupHeartbeat          READ GROUP                      GROUP_AUTHORIZATION_FAILED
//	                             DESCRIBE TOPIC (subscribed)     TOPIC_AUTHORIZATION_FAILED
//	ShareGroupDescribe           DESCRIBE GROUP                  group GROUP_AUTHORIZATION_FAILED
//	ShareFetch, ShareAcknowledge READ GROUP                      GROUP_AUTHORIZATION_FAILED (top level)
//	                             READ TOPIC                      partition TOPIC_AUTHORIZATION_FAILED
//	DescribeShareGroupOffsets    DESCRIBE GROUP                  group GROUP_AUTHORIZATION_FAILED
//	                             DESCRIBE TOPIC                  partition TOPIC_AUTHORIZATION_FAILED
//	AlterShareGroupOffsets       READ GROUP                      GROUP_AUTHORIZATION_FAILED (top level)
//	                             READ TOPIC                      partition TOPIC_AUTHORIZATION_FAILED
//	DeleteShareGroupOffsets      DELETE GROUP                    GROUP_AUTHORIZATION_FAILED (top level)
//	                             READ TOPIC                      topic TOPIC_AUTHORIZATION_FAILED
//	AddPartitionsToTxn v0-v3     WRITE TRANSACTIONAL_ID          every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED
//	                             WRITE TOPIC                     TOPIC_AUTHORIZATION_FAILED, the others
//	                                                               OPERATION_NOT_ATTEMPTED
//	AddPartitionsToTxn v4+       CLUSTER_ACTION CLUSTER          CLUSTER_AUTHORIZATION_FAILED (top level)
//	  (broker to broker)         WRITE TOPIC                     as v0-v3
//	AddOffsetsToTxn              WRITE TRANSACTIONAL_ID          TRANSACTIONAL_ID_AUTHORIZATION_FAILED
//	                             READ GROUP                      GROUP_AUTHORIZATION_FAILED
//	EndTxn                       WRITE TRANSACTIONAL_ID          TRANSACTIONAL_ID_AUTHORIZATION_FAILED
//	TxnOffsetCommit              WRITE TRANSACTIONAL_ID          every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED
//	                             READ GROUP                      every partition GROUP_AUTHORIZATION_FAILED
//	                             READ TOPIC                      the topic's partitions TOPIC_AUTHORIZATION_FAILED
//	WriteTxnMarkers              CLUSTER_ACTION CLUSTER          every partition CLUSTER_AUTHORIZATION_FAILED
//	Read/Write/Delete/Initialize CLUSTER_ACTION CLUSTER          every partition CLUSTER_AUTHORIZATION_FAILED
//	  ShareGroupState,
//	  ReadShareGroupStateSummary
//	DescribeTransactions         DESCRIBE TRANSACTIONAL_ID       TRANSACTIONAL_ID_AUTHORIZATION_FAILED
//	                             DESCRIBE TOPIC                  the transaction's partitions of the topic hidden
//	ListTransactions             DESCRIBE TRANSACTIONAL_ID       hidden
//	DescribeProducers            READ TOPIC                      partition TOPIC_AUTHORIZATION_FAILED
//	ElectLeaders                 ALTER CLUSTER                   CLUSTER_AUTHORIZATION_FAILED (top level, partitions)
//	AlterPartitionReassignments  ALTER CLUSTER                   CLUSTER_AUTHORIZATION_FAILED (top level)
//	ListPartitionReassignments   DESCRIBE CLUSTER                CLUSTER_AUTHORIZATION_FAILED (top level)
//	UnregisterBroker             ALTER CLUSTER                   CLUSTER_AUTHORIZATION_FAILED
//	DescribeQuorum               DESCRIBE CLUSTER                CLUSTER_AUTHORIZATION_FAILED (top level)
//	CreateAcls, DeleteAcls       ALTER CLUSTER                   every result CLUSTER_AUTHORIZATION_FAILED
//	DescribeAcls                 DESCRIBE CLUSTER                CLUSTER_AUTHORIZATION_FAILED
//	AlterUserScramCredentials    ALTER CLUSTER                   every result CLUSTER_AUTHORIZATION_FAILED
//	DescribeUserScramCredentials DESCRIBE CLUSTER                CLUSTER_AUTHORIZATION_FAILED
//	ApiVersions, SaslHandshake,  none (they come before or without a principal)
//	  SaslAuthenticate
//
// As in Kafka, a resource is checked before its existence: a principal that may not describe
// a topic learns nothing of it, not even whether it exists. The checks are written out per
// handler rather than driven by one table because where a denial lands (top level, per
// resource, per partition, hidden) is part of each API's answer.

// authzState is the standard authorizer built from one metadata image and one set of
// authorization configs.
type authzState struct {
	im         *metadata.Image
	superUsers []string
	allowIfNo  bool
	acls       *authz.ACLs
}

// authorizer is the broker's authorizer for the current image and configs: authz.AllowAll
// without authorizer.class.name, else Kafka's StandardAuthorizer over the image's ACLs. The
// ACLs are rebuilt only when the image's ACLs or the configs changed; a newer image with the
// same ACLs reuses the snapshot.
//
// Kafka answers AUTHORIZER_NOT_READY until the authorizer has loaded the metadata log up to
// the broker's start-up offset. A Gregor broker opens its listeners to clients only once its
// image has caught up with the log, so the current image is always a loaded one and this
// builds from it without a readiness state.
func (h *Handler) authorizer() authz.Authorizer {
	cfg := h.Cfg.Current()
	if cfg.AuthorizerClassName != config.StandardAuthorizer {
		return authz.AllowAll{}
	}
	im := h.Meta.Image()
	cur := h.authz.Load()
	sameCfg := cur != nil && cur.allowIfNo == cfg.AllowEveryoneIfNoACLFound && slices.Equal(cur.superUsers, cfg.SuperUsers)
	if sameCfg && cur.im == im {
		return cur.acls
	}
	next := &authzState{im: im, superUsers: slices.Clone(cfg.SuperUsers), allowIfNo: cfg.AllowEveryoneIfNoACLFound}
	if sameCfg && im.SameACLs(cur.im) {
		next.acls = cur.acls
	} else {
		next.acls = authz.NewACLs(im.ACLs(), authz.Options{SuperUsers: cfg.SuperUsers, AllowEveryoneIfNoACLFound: cfg.AllowEveryoneIfNoACLFound})
	}
	// Two requests may race to store; either snapshot is right for its image.
	h.authz.Store(next)
	return next.acls
}

// authorizing reports whether the broker has an authorizer (authorizer.class.name set).
func (h *Handler) authorizing() bool {
	_, all := h.authorizer().(authz.AllowAll)
	return !all
}

// connHost is the client's IP address without the port, the host ACLs name.
func connHost(c *Conn) string {
	host, _, err := net.SplitHostPort(c.RemoteAddr)
	if err != nil {
		return c.RemoteAddr
	}
	return host
}

// authorized reports whether the connection's principal may perform op on the resource.
func (h *Handler) authorized(c *Conn, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	a := h.authorizer()
	if _, all := a.(authz.AllowAll); all {
		return true // without an authorizer, not even the client's address is looked at
	}
	return a.Authorize(c.Principal, connHost(c), op, rt, name)
}

// authorizedCluster reports whether the connection's principal may perform op on the cluster.
func (h *Handler) authorizedCluster(c *Conn, op kmsg.ACLOperation) bool {
	return h.authorized(c, op, kmsg.ACLResourceTypeCluster, authz.ClusterName)
}

// authorizedOps is the bit field of the operations the connection's principal may perform on
// the resource, for the authorized_operations fields.
func (h *Handler) authorizedOps(c *Conn, rt kmsg.ACLResourceType, name string) int32 {
	return h.authorizer().AuthorizedOperations(c.Principal, connHost(c), rt, name)
}

// authorizedSet is an authorization memo for one request: each name is asked once, however
// many partitions of it the request names.
type authorizedSet struct {
	c    *Conn
	a    authz.Authorizer
	host string
	op   kmsg.ACLOperation
	rt   kmsg.ACLResourceType
	all  bool // the authorizer is AllowAll: no memo needed
	seen map[string]bool
}

// authorizedNames makes the memo of op on resources of type rt for the connection.
func (h *Handler) authorizedNames(c *Conn, op kmsg.ACLOperation, rt kmsg.ACLResourceType) *authorizedSet {
	a := h.authorizer()
	if _, all := a.(authz.AllowAll); all {
		return &authorizedSet{all: true}
	}
	return &authorizedSet{c: c, a: a, host: connHost(c), op: op, rt: rt}
}

// ok reports whether the principal may perform the memo's operation on name.
func (s *authorizedSet) ok(name string) bool {
	if s.all {
		return true
	}
	if v, found := s.seen[name]; found {
		return v
	}
	if s.seen == nil {
		s.seen = make(map[string]bool)
	}
	v := s.a.Authorize(s.c.Principal, s.host, s.op, s.rt, name)
	s.seen[name] = v
	return v
}

// authorizedOnSomeResource is Kafka's Authorizer.authorizeByResourceType: whether the
// principal may perform op on at least one resource of type rt, judged from the ACLs alone.
// A principal allowed op on a resource no ACL names (a super user, or anyone under
// allow.everyone.if.no.acl.found with no ACL on that name) is allowed. Otherwise a LITERAL
// "*" DENY denies; a LITERAL "*" ALLOW allows; a LITERAL ALLOW allows unless the same name
// is denied literally or by a PREFIXED DENY of one of its prefixes; a PREFIXED ALLOW allows
// unless a PREFIXED DENY names one of its prefixes. Only ACLs of op or ALL count (no implied
// operations), matching the principal (or User:*) and the host (or *).
func (h *Handler) authorizedOnSomeResource(c *Conn, op kmsg.ACLOperation, rt kmsg.ACLResourceType) bool {
	a := h.authorizer()
	host := connHost(c)
	// As Kafka, a name no ACL is expected to name: the super user's and the no-ACL answer.
	if a.Authorize(c.Principal, host, op, rt, "hardcode") {
		return true
	}
	acls, ok := a.(*authz.ACLs)
	if !ok {
		return false
	}
	pstr := c.Principal.String()
	denyLit, denyPre := map[string]bool{}, map[string]bool{}
	var allowLit, allowPre []string
	for _, b := range acls.Bindings() {
		if b.ResourceType != rt || (b.Host != host && b.Host != "*") {
			continue
		}
		if !principalMatches(b.Principal, pstr, c.Principal) || (b.Operation != op && b.Operation != kmsg.ACLOperationAll) {
			continue
		}
		switch {
		case b.Permission == kmsg.ACLPermissionTypeAllow && b.PatternType == kmsg.ACLResourcePatternTypeLiteral:
			if b.Pattern.Name == "*" {
				// A wildcard allow wins unless a wildcard deny exists (checked below).
				allowPre = append(allowPre, "")
				continue
			}
			allowLit = append(allowLit, b.Pattern.Name)
		case b.Permission == kmsg.ACLPermissionTypeAllow && b.PatternType == kmsg.ACLResourcePatternTypePrefixed:
			allowPre = append(allowPre, b.Pattern.Name)
		case b.Permission != kmsg.ACLPermissionTypeAllow && b.PatternType == kmsg.ACLResourcePatternTypeLiteral:
			if b.Pattern.Name == "*" {
				return false
			}
			denyLit[b.Pattern.Name] = true
		case b.Permission != kmsg.ACLPermissionTypeAllow && b.PatternType == kmsg.ACLResourcePatternTypePrefixed:
			denyPre[b.Pattern.Name] = true
		}
	}
	dominated := func(name string) bool {
		for i := 1; i <= len(name); i++ {
			if denyPre[name[:i]] {
				return true
			}
		}
		return false
	}
	for _, n := range allowPre {
		if n == "" || !dominated(n) {
			return true
		}
	}
	for _, n := range allowLit {
		if !denyLit[n] && !dominated(n) {
			return true
		}
	}
	return false
}

// principalMatches reports whether an ACL's principal ("Type:Name") names p (whose string is
// pstr): itself, or the wildcard User:*.
func principalMatches(aclPrincipal, pstr string, p authz.Principal) bool {
	if aclPrincipal == "User:*" || aclPrincipal == pstr {
		return true
	}
	typ, name, ok := strings.Cut(aclPrincipal, ":")
	return ok && typ == p.Type && name == p.Name
}

// clusterDenied is CLUSTER_AUTHORIZATION_FAILED when the connection's principal may not
// perform op on the cluster, else nil.
func (h *Handler) clusterDenied(c *Conn, op kmsg.ACLOperation) error {
	if !h.authorizedCluster(c, op) {
		return kerr.ClusterAuthorizationFailed
	}
	return nil
}

// forwardIfAuthorized forwards req to the controller when the connection's principal may
// perform op on the cluster, and is CLUSTER_AUTHORIZATION_FAILED otherwise (the admin
// requests ControllerApis authorizes on the cluster as a whole).
func (h *Handler) forwardIfAuthorized(ctx context.Context, c *Conn, op kmsg.ACLOperation, req kmsg.Request) (kmsg.Response, error) {
	if err := h.clusterDenied(c, op); err != nil {
		return nil, err
	}
	return h.forward(ctx, req)
}

// txnDenied is the authorization error of a transactional request for the connection, or nil:
// WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then, when group is
// not empty, READ on the group (GROUP_AUTHORIZATION_FAILED).
func (h *Handler) txnDenied(c *Conn, transactionalID, group string) *kerr.Error {
	if !h.authorized(c, kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTransactionalId, transactionalID) {
		return kerr.TransactionalIDAuthorizationFailed
	}
	if group != "" && !h.groupReadable(c, group) {
		return kerr.GroupAuthorizationFailed
	}
	return nil
}
