package api_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/config"
	"github.com/gregor-project/gregor/internal/testutil"
	"github.com/gregor-project/gregor/internal/wire"
)

// Until SASL principals reach these tests, every PLAINTEXT connection is User:ANONYMOUS. The
// tests tell two clients apart the way Kafka's ACLs can: by host. The operator connects from
// 127.0.0.2 and is allowed everything on every resource (ALLOW ALL on the cluster and on the
// LITERAL "*" of every other resource type); the user connects from 127.0.0.1 and gets only
// the ACLs each test grants it. Since the operator's wildcard ACLs apply to every resource,
// the user is denied whatever it is not granted, whatever allow.everyone.if.no.acl.found says.

const (
	anonymous = "User:ANONYMOUS"
	userHost  = "127.0.0.1"
	adminHost = "127.0.0.2"
)

// authzEnv is a broker running the standard authorizer, an operator and a user.
type authzEnv struct {
	b     *testutil.Broker
	admin *kadm.Client
	user  *wire.Conn // raw requests, from userHost, at the versions they are set to
}

// startAuthz starts a broker with the standard authorizer and sets up the operator's ACLs
// (made by the operator itself: with no ACL at all, allow.everyone.if.no.acl.found lets it).
func startAuthz(t *testing.T, sets ...string) *authzEnv {
	t.Helper()
	b := testutil.StartBroker(t, append([]string{
		"authorizer.class.name=" + config.StandardAuthorizer,
		"allow.everyone.if.no.acl.found=true",
	}, sets...)...)
	e := &authzEnv{b: b}
	e.admin = kadm.NewClient(e.operator(t))
	e.create(t, kadm.NewACLs().Allow(anonymous).AllowHosts(adminHost).
		Clusters().Topics("*").Groups("*").TransactionalIDs("*").Operations(kadm.OpAll))
	conn, err := wire.Dial(ctxT(t), b.Addr(), "authz-user")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	e.user = conn
	return e
}

// operator is a client connecting from the operator's host.
func (e *authzEnv) operator(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(adminHost)}, Timeout: 10 * time.Second}
	return newClient(t, e.b.Addr(), append([]kgo.Opt{kgo.Dialer(d.DialContext)}, opts...)...)
}

// create makes ACLs as the operator and fails the test on any error.
func (e *authzEnv) create(t *testing.T, b *kadm.ACLBuilder) {
	t.Helper()
	results, err := e.admin.CreateACLs(ctxT(t), b)
	if err != nil {
		t.Fatalf("create ACLs: %v", err)
	}
	for _, r := range results {
		if r.Err != nil {
			t.Fatalf("create ACL %v: %v", r, r.Err)
		}
	}
}

// grant allows the user op on the resources b names (LITERAL unless b says otherwise).
func (e *authzEnv) grant(t *testing.T, b *kadm.ACLBuilder, ops ...kadm.ACLOperation) {
	t.Helper()
	e.create(t, b.Allow(anonymous).AllowHosts(userHost).Operations(ops...))
}

// topic creates a topic as the operator.
func (e *authzEnv) topic(t *testing.T, name string) {
	t.Helper()
	resp, err := e.admin.CreateTopic(ctxT(t), 1, 1, nil, name)
	if err != nil || resp.Err != nil {
		t.Fatalf("create topic %s: %v %v", name, err, resp.Err)
	}
}

// send sends a raw request as the user.
func (e *authzEnv) send(t *testing.T, req kmsg.Request) kmsg.Response {
	t.Helper()
	resp, err := e.user.Request(ctxT(t), req)
	if err != nil {
		t.Fatalf("%T: %v", req, err)
	}
	return resp
}

// authzCase is one API: the user's request, the error code it answers (where Kafka puts
// it), the error a user without the ACLs gets, the ACLs that lift it, and the code then.
type authzCase struct {
	name   string
	req    func() kmsg.Request
	code   func(kmsg.Response) int16
	denied *kerr.Error
	grant  func(t *testing.T, e *authzEnv)
	// after is the code once granted; anyOther accepts every code but denied's (the
	// request then fails, if at all, for a reason that is not authorization).
	after    int16
	anyOther bool
}

func literal() *kadm.ACLBuilder  { return kadm.NewACLs() }
func prefixed() *kadm.ACLBuilder { return kadm.NewACLs().ResourcePatternType(kadm.ACLPatternPrefixed) }

func authzFetchReq(topic string, replicaID int32) func() kmsg.Request {
	return func() kmsg.Request {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(12)
		req.ReplicaID, req.MaxBytes = replicaID, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes = 1 << 20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return req
	}
}

func fetchCode(r kmsg.Response) int16 {
	return r.(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode
}

// TestAuthzMatrix sends each API a client can send as a user without the ACLs it needs (the
// exact authorization error, where Kafka puts it), then with them.
func TestAuthzMatrix(t *testing.T) {
	e := startAuthz(t)
	for _, n := range []string{"idem", "meta", "fetch", "lo", "oe", "cp", "del", "cfg", "recs", "commit", "ofetch", "txn-t", "prod", "follow"} {
		e.topic(t, n)
	}
	cases := []authzCase{
		{
			// First: any WRITE grant on a topic would satisfy it (KIP-679).
			name: "InitProducerId idempotent",
			req: func() kmsg.Request {
				r := kmsg.NewPtrInitProducerIDRequest()
				r.SetVersion(4)
				r.ProducerID, r.ProducerEpoch = -1, -1
				return r
			},
			code:   func(r kmsg.Response) int16 { return r.(*kmsg.InitProducerIDResponse).ErrorCode },
			denied: kerr.ClusterAuthorizationFailed,
			grant:  func(t *testing.T, e *authzEnv) { e.grant(t, prefixed().Topics("idem"), kadm.OpWrite) },
		},
		{
			name: "Metadata",
			req: func() kmsg.Request {
				r := kmsg.NewPtrMetadataRequest()
				r.SetVersion(12)
				rt := kmsg.NewMetadataRequestTopic()
				rt.Topic = kmsg.StringPtr("meta")
				r.Topics = append(r.Topics, rt)
				return r
			},
			code:   func(r kmsg.Response) int16 { return r.(*kmsg.MetadataResponse).Topics[0].ErrorCode },
			denied: kerr.TopicAuthorizationFailed,
			grant:  func(t *testing.T, e *authzEnv) { e.grant(t, literal().Topics("meta"), kadm.OpDescribe) },
		},
		{
			name:   "Fetch",
			req:    authzFetchReq("fetch", -1),
			code:   fetchCode,
			denied: kerr.TopicAuthorizationFailed,
			grant:  func(t *testing.T, e *authzEnv) { e.grant(t, literal().Topics("fetch"), kadm.OpRead) },
		},
		{
			name: "ListOffsets",
			req: func() kmsg.Request {
				r := kmsg.NewPtrListOffsetsRequest()
				r.SetVersion(7)
				r.ReplicaID = -1
				rt := kmsg.NewListOffsetsRequestTopic()
				rt.Topic = "lo"
				rp := kmsg.NewListOffsetsRequestTopicPartition()
				rp.Timestamp = -1
				rt.Partitions = append(rt.Partitions, rp)
				r.Topics = append(r.Topics, rt)
				return r
			},
			code:   func(r kmsg.Response) int16 { return r.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode },
			denied: kerr.TopicAuthorizationFailed,
			grant:  func(t *testing.T, e *authzEnv) { e.grant(t, literal().Topics("lo"), kadm.OpDescribe) },
		},
		{
			name: "OffsetForLeaderEpoch",
			req: func() kmsg.Request {
				r := kmsg.NewPtrOffsetForLeaderEpochRequest()
				r.SetVersion(4)
				r.ReplicaID = -1
				rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
				rt.Topic = "oe"
				rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
				rp.CurrentLeaderEpoch, rp.LeaderEpoch = -1, 0
				rt.Partitions = append(rt.Partitions, rp)
				r.Topics = append(r.Topics, rt)
				return r
			},
			code: func(r kmsg.Response) int16 {
				return r.(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0].ErrorCode
			},
			denied: kerr.TopicAuthorizationFailed,
			grant:  func(t *testing.T, e *authzEnv) { e.grant(t, literal().Topics("oe"), kadm.OpDescribe) },
		},
		{
			name: "CreateTopics",
			req: func() kmsg.Request {
				r := kmsg.NewPtrCreateTopicsRequest()
				r.SetVersion(7)
				r.TimeoutMillis = 10000
				rt := kmsg.NewCreateTopicsRequestTopic()
				rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "new-topic", 1, 1
				r.Topics = append(r.Topics, rt)
				return r
			},
			code:   func(r kmsg.Response) int16 { return r.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode },
			denied: kerr.TopicAuthorizationFailed,
			grant:  func(t *testing.T, e *authzEnv) { e.grant(t, prefixed().Topics("new-"), kadm.OpCreate) },
		},
		{
			name: "CreatePartitions",
			req: func() kmsg.Request {
				r := kmsg.NewPtrCreatePartitionsRequest()
				r.SetVersion(3)
				r.TimeoutMillis = 10000
				rt := kmsg.NewCreatePartitionsRequestTopic()
				rt.Topic, rt.Count = "cp", 2
				r.Topics = append(r.Topics, rt)
				return r
			},
			code:   func(r kmsg.Response) int16 { return r.(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode },
			denied: kerr.TopicAuthorizationFailed,
			grant:  func(t *testing.T, e *authzEnv) { e.grant(t, literal().Topics("cp"), kadm.OpAlter) },
		},
		{
			name: "DeleteTopics",
			req: func() kmsg.Request {
				r := kmsg.NewPtrDeleteTopicsRequest()
				r.SetVersion(6)
				r.TimeoutMillis = 10000
				rt := kmsg.NewDeleteTopicsRequestTopic()
				rt.Topic = kmsg.StringPtr("del")
				r.Topics = append(r.Topics, rt)
				return r
			},
			code:   func(r kmsg.Response) int16 { return r.(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode },
			denied: kerr.TopicAuthorizationFailed,
			grant:  func(t *testing.T, e *authzEnv) { e.grant(t, literal().Topics("del"), kadm.OpDelete) },
		},
		{
			name:   "DescribeConfigs topic",
			req:    describeConfigsReq(kmsg.ConfigResourceTypeTopic, "cfg"),
			code:   func(r kmsg.Response) int16 { return r.(*kmsg.DescribeConfigsResponse).Resources[0].ErrorCode },
			denied: kerr.TopicAuthorizationFailed,
			grant:  func(t *testing.T, e *authzEnv) { e.grant(t, literal().Topics("cfg"), kadm.OpDescribeConfigs) },
		},
		{
			name: "IncrementalAlterConfigs topic",
			req: func() kmsg.Request {
				r := kmsg.NewPtrIncrementalAlterConfigsRequest()
				r.SetVersion(1)
				rr := kmsg.NewIncrementalAlterConfigsRequestResource()
				rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "cfg"
				c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
				c.Name, c.Value = "retention.ms", kmsg.StringPtr("3600000")
				rr.Configs = append(rr.Configs, c)
				r.Resources = append(r.Resources, rr)
				return r
			},
			code:   func(r kmsg.Response) int16 { return r.(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode },
			denied: kerr.TopicAuthorizationFailed,
			grant:  func(t *testing.T, e *authzEnv) { e.grant(t, literal().Topics("cfg"), kadm.OpAlterConfigs) },
		},
		{
			name:   "DescribeConfigs broker",
			req:    describeConfigsReq(kmsg.ConfigResourceTypeBroker, ""),
			code:   func(r kmsg.Response) int16 { return r.(*kmsg.DescribeConfigsResponse).Resources[0].ErrorCode },
			denied: kerr.ClusterAuthorizationFailed,
			grant:  func(t *testing.T, e *authzEnv) { e.grant(t, literal().Clusters(), kadm.OpDescribeConfigs) },
		},
		{
			name: "DeleteRecords",
			req: func() kmsg.Request {
				r := kmsg.NewPtrDeleteRecordsRequest()
				r.SetVersion(2)
				r.TimeoutMillis = 10000
				rt := kmsg.NewDeleteRecordsRequestTopic()
				rt.Topic = "recs"
				rp := kmsg.NewDeleteRecordsRequestTopicPartition()
				rp.Offset = 0
				rt.Partitions = append(rt.Partitions, rp)
				r.Topics = append(r.Topics, rt)
				return r
			},
			code:   func(r kmsg.Response) int16 { return r.(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0].ErrorCode },
			denied: kerr.TopicAuthorizationFailed,
			grant:  func(t *testing.T, e *authzEnv) { e.grant(t, literal().Topics("recs"), kadm.OpDelete) },
		},
		{
			name:     "FindCoordinator group",
			req:      findCoordinatorReq(0, "g-find"),
			code:     func(r kmsg.Response) int16 { return r.(*kmsg.FindCoordinatorResponse).Coordinators[0].ErrorCode },
			denied:   kerr.GroupAuthorizationFailed,
			grant:    func(t *testing.T, e *authzEnv) { e.grant(t, literal().Groups("g-find"), kadm.OpDescribe) },
			anyOther: true, // the offsets topic may still be on its way
		},
		{
			name:     "FindCoordinator transaction",
			req:      findCoordinatorReq(1, "tx-find"),
			code:     func(r kmsg.Response) int16 { return r.(*kmsg.FindCoordinatorResponse).Coordinators[0].ErrorCode },
			denied:   kerr.TransactionalIDAuthorizationFailed,
			grant:    func(t *testing.T, e *authzEnv) { e.grant(t, literal().TransactionalIDs("tx-find"), kadm.OpDescribe) },
			anyOther: true,
		},
		{
			name: "JoinGroup",
			req: func() kmsg.Request {
				r := kmsg.NewPtrJoinGroupRequest()
				r.SetVersion(9)
				r.Group, r.SessionTimeoutMillis, r.RebalanceTimeoutMillis, r.ProtocolType = "g-join", 10000, 10000, "consumer"
				p := kmsg.NewJoinGroupRequestProtocol()
				p.Name, p.Metadata = "range", []byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 0}
				r.Protocols = append(r.Protocols, p)
				return r
			},
			code:   func(r kmsg.Response) int16 { return r.(*kmsg.JoinGroupResponse).ErrorCode },
			denied: kerr.GroupAuthorizationFailed,
			grant:  func(t *testing.T, e *authzEnv) { e.grant(t, literal().Groups("g-join"), kadm.OpRead) },
			after:  kerr.MemberIDRequired.Code,
		},
		{
			name: "Heartbeat",
			req: func() kmsg.Request {
				r := kmsg.NewPtrHeartbeatRequest()
				r.SetVersion(4)
				r.Group, r.MemberID, r.Generation = "g-hb", "m", 1
				return r
			},
			code:     func(r kmsg.Response) int16 { return r.(*kmsg.HeartbeatResponse).ErrorCode },
			denied:   kerr.GroupAuthorizationFailed,
			grant:    func(t *testing.T, e *authzEnv) { e.grant(t, literal().Groups("g-hb"), kadm.OpRead) },
			anyOther: true,
		},
		{
			name: "SyncGroup",
			req: func() kmsg.Request {
				r := kmsg.NewPtrSyncGroupRequest()
				r.SetVersion(5)
				r.Group, r.MemberID, r.Generation = "g-sync", "m", 1
				r.ProtocolType, r.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
				return r
			},
			code:     func(r kmsg.Response) int16 { return r.(*kmsg.SyncGroupResponse).ErrorCode },
			denied:   kerr.GroupAuthorizationFailed,
			grant:    func(t *testing.T, e *authzEnv) { e.grant(t, literal().Groups("g-sync"), kadm.OpRead) },
			anyOther: true,
		},
		{
			name: "LeaveGroup",
			req: func() kmsg.Request {
				r := kmsg.NewPtrLeaveGroupRequest()
				r.SetVersion(5)
				r.Group = "g-leave"
				m := kmsg.NewLeaveGroupRequestMember()
				m.MemberID = "m"
				r.Members = append(r.Members, m)
				return r
			},
			code:     func(r kmsg.Response) int16 { return r.(*kmsg.LeaveGroupResponse).ErrorCode },
			denied:   kerr.GroupAuthorizationFailed,
			grant:    func(t *testing.T, e *authzEnv) { e.grant(t, literal().Groups("g-leave"), kadm.OpRead) },
			anyOther: true,
		},
		{
			name:   "OffsetCommit without the group",
			req:    offsetCommitReq("g-commit", "commit"),
			code:   offsetCommitCode,
			denied: kerr.GroupAuthorizationFailed,
			grant:  func(t *testing.T, e *authzEnv) { e.grant(t, literal().Groups("g-commit"), kadm.OpRead) },
			after:  kerr.TopicAuthorizationFailed.Code,
		},
		{
			name:   "OffsetCommit without the topic",
			req:    offsetCommitReq("g-commit", "commit"),
			code:   offsetCommitCode,
			denied: kerr.TopicAuthorizationFailed,
			grant:  func(t *testing.T, e *authzEnv) { e.grant(t, literal().Topics("commit"), kadm.OpRead) },
		},
		{
			name:   "OffsetFetch without the group",
			req:    offsetFetchReq("g-ofetch", "ofetch"),
			code:   func(r kmsg.Response) int16 { return r.(*kmsg.OffsetFetchResponse).Groups[0].ErrorCode },
			denied: kerr.GroupAuthorizationFailed,
			grant:  func(t *testing.T, e *authzEnv) { e.grant(t, literal().Groups("g-ofetch"), kadm.OpDescribe) },
		},
		{
			name: "OffsetFetch without the topic",
			req:  offsetFetchReq("g-ofetch", "ofetch"),
			code: func(r kmsg.Response) int16 {
				return r.(*kmsg.OffsetFetchResponse).Groups[0].Topics[0].Partitions[0].ErrorCode
			},
			denied: kerr.TopicAuthorizationFailed,
			grant:  func(t *testing.T, e *authzEnv) { e.grant(t, literal().Topics("ofetch"), kadm.OpDescribe) },
		},
		{
			name: "DescribeGroups",
			req: func() kmsg.Request {
				r := kmsg.NewPtrDescribeGroupsRequest()
				r.SetVersion(5)
				r.Groups = []string{"g-desc"}
				return r
			},
			code:   func(r kmsg.Response) int16 { return r.(*kmsg.DescribeGroupsResponse).Groups[0].ErrorCode },
			denied: kerr.GroupAuthorizationFailed,
			grant:  func(t *testing.T, e *authzEnv) { e.grant(t, literal().Groups("g-desc"), kadm.OpDescribe) },
		},
		{
			name: "DeleteGroups",
			req: func() kmsg.Request {
				r := kmsg.NewPtrDeleteGroupsRequest()
				r.SetVersion(2)
				r.Groups = []string{"g-del"}
				return r
			},
			code:     func(r kmsg.Response) int16 { return r.(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode },
			denied:   kerr.GroupAuthorizationFailed,
			grant:    func(t *testing.T, e *authzEnv) { e.grant(t, literal().Groups("g-del"), kadm.OpDelete) },
			anyOther: true, // GROUP_ID_NOT_FOUND
		},
		{
			name: "OffsetDelete",
			req: func() kmsg.Request {
				r := kmsg.NewPtrOffsetDeleteRequest()
				r.Group = "g-odel"
				return r
			},
			code:     func(r kmsg.Response) int16 { return r.(*kmsg.OffsetDeleteResponse).ErrorCode },
			denied:   kerr.GroupAuthorizationFailed,
			grant:    func(t *testing.T, e *authzEnv) { e.grant(t, literal().Groups("g-odel"), kadm.OpDelete) },
			anyOther: true,
		},
		{
			name: "ConsumerGroupHeartbeat",
			req: func() kmsg.Request {
				r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
				r.SetVersion(0)
				r.Group, r.MemberID, r.MemberEpoch, r.RebalanceTimeoutMillis = "g-cgh", "", 0, 10000
				r.SubscribedTopicNames = []string{"fetch"}
				r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
				return r
			},
			code:     func(r kmsg.Response) int16 { return r.(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode },
			denied:   kerr.GroupAuthorizationFailed,
			grant:    func(t *testing.T, e *authzEnv) { e.grant(t, literal().Groups("g-cgh"), kadm.OpRead) },
			anyOther: true,
		},
		{
			name: "ConsumerGroupHeartbeat subscribed topic",
			req: func() kmsg.Request {
				r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
				r.SetVersion(0)
				r.Group, r.MemberID, r.MemberEpoch, r.RebalanceTimeoutMillis = "g-cgh", "", 0, 10000
				r.SubscribedTopicNames = []string{"secret-sub"}
				r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
				return r
			},
			code:     func(r kmsg.Response) int16 { return r.(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode },
			denied:   kerr.TopicAuthorizationFailed,
			grant:    func(t *testing.T, e *authzEnv) { e.grant(t, literal().Topics("secret-sub"), kadm.OpDescribe) },
			anyOther: true,
		},
		{
			name: "ConsumerGroupDescribe",
			req: func() kmsg.Request {
				r := kmsg.NewPtrConsumerGroupDescribeRequest()
				r.SetVersion(0)
				r.Groups = []string{"g-cgd"}
				return r
			},
			code:     func(r kmsg.Response) int16 { return r.(*kmsg.ConsumerGroupDescribeResponse).Groups[0].ErrorCode },
			denied:   kerr.GroupAuthorizationFailed,
			grant:    func(t *testing.T, e *authzEnv) { e.grant(t, literal().Groups("g-cgd"), kadm.OpDescribe) },
			anyOther: true, // GROUP_ID_NOT_FOUND
		},
		{
			name: "InitProducerId transactional",
			req: func() kmsg.Request {
				r := kmsg.NewPtrInitProducerIDRequest()
				r.SetVersion(4)
				r.TransactionalID, r.TransactionTimeoutMillis = kmsg.StringPtr("tx"), 10000
				r.ProducerID, r.ProducerEpoch = -1, -1
				return r
			},
			code:     func(r kmsg.Response) int16 { return r.(*kmsg.InitProducerIDResponse).ErrorCode },
			denied:   kerr.TransactionalIDAuthorizationFailed,
			grant:    func(t *testing.T, e *authzEnv) { e.grant(t, literal().TransactionalIDs("tx"), kadm.OpWrite) },
			anyOther: true, // the coordinator may still be loading
		},
		{
			name: "AddPartitionsToTxn without the topic",
			req: func() kmsg.Request {
				r := kmsg.NewPtrAddPartitionsToTxnRequest()
				r.SetVersion(3)
				r.TransactionalID, r.ProducerID, r.ProducerEpoch = "tx", 1, 0
				rt := kmsg.NewAddPartitionsToTxnRequestTopic()
				rt.Topic, rt.Partitions = "txn-t", []int32{0}
				r.Topics = append(r.Topics, rt)
				return r
			},
			code: func(r kmsg.Response) int16 {
				return r.(*kmsg.AddPartitionsToTxnResponse).Topics[0].Partitions[0].ErrorCode
			},
			denied:   kerr.TopicAuthorizationFailed,
			grant:    func(t *testing.T, e *authzEnv) { e.grant(t, literal().Topics("txn-t"), kadm.OpWrite) },
			anyOther: true,
		},
		{
			name: "AddOffsetsToTxn without the group",
			req: func() kmsg.Request {
				r := kmsg.NewPtrAddOffsetsToTxnRequest()
				r.SetVersion(3)
				r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Group = "tx", 1, 0, "g-txn"
				return r
			},
			code:     func(r kmsg.Response) int16 { return r.(*kmsg.AddOffsetsToTxnResponse).ErrorCode },
			denied:   kerr.GroupAuthorizationFailed,
			grant:    func(t *testing.T, e *authzEnv) { e.grant(t, literal().Groups("g-txn"), kadm.OpRead) },
			anyOther: true,
		},
		{
			name: "EndTxn",
			req: func() kmsg.Request {
				r := kmsg.NewPtrEndTxnRequest()
				r.SetVersion(3)
				r.TransactionalID, r.ProducerID, r.ProducerEpoch = "tx-end", 1, 0
				return r
			},
			code:     func(r kmsg.Response) int16 { return r.(*kmsg.EndTxnResponse).ErrorCode },
			denied:   kerr.TransactionalIDAuthorizationFailed,
			grant:    func(t *testing.T, e *authzEnv) { e.grant(t, literal().TransactionalIDs("tx-end"), kadm.OpWrite) },
			anyOther: true,
		},
		{
			name: "TxnOffsetCommit",
			req: func() kmsg.Request {
				r := kmsg.NewPtrTxnOffsetCommitRequest()
				r.SetVersion(3)
				r.TransactionalID, r.Group, r.ProducerID, r.ProducerEpoch = "tx-toc", "g-toc", 1, 0
				rt := kmsg.NewTxnOffsetCommitRequestTopic()
				rt.Topic = "commit"
				rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
				rt.Partitions = append(rt.Partitions, rp)
				r.Topics = append(r.Topics, rt)
				return r
			},
			code: func(r kmsg.Response) int16 {
				return r.(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
			},
			denied: kerr.TransactionalIDAuthorizationFailed,
			grant: func(t *testing.T, e *authzEnv) {
				e.grant(t, literal().TransactionalIDs("tx-toc"), kadm.OpWrite)
				e.grant(t, literal().Groups("g-toc"), kadm.OpRead)
			},
			anyOther: true,
		},
		{
			name: "DescribeTransactions",
			req: func() kmsg.Request {
				r := kmsg.NewPtrDescribeTransactionsRequest()
				r.TransactionalIDs = []string{"tx-desc"}
				return r
			},
			code: func(r kmsg.Response) int16 {
				return r.(*kmsg.DescribeTransactionsResponse).TransactionStates[0].ErrorCode
			},
			denied:   kerr.TransactionalIDAuthorizationFailed,
			grant:    func(t *testing.T, e *authzEnv) { e.grant(t, literal().TransactionalIDs("tx-desc"), kadm.OpDescribe) },
			anyOther: true,
		},
		{
			name: "DescribeProducers",
			req: func() kmsg.Request {
				r := kmsg.NewPtrDescribeProducersRequest()
				rt := kmsg.NewDescribeProducersRequestTopic()
				rt.Topic, rt.Partitions = "prod", []int32{0}
				r.Topics = append(r.Topics, rt)
				return r
			},
			code: func(r kmsg.Response) int16 {
				return r.(*kmsg.DescribeProducersResponse).Topics[0].Partitions[0].ErrorCode
			},
			denied: kerr.TopicAuthorizationFailed,
			grant:  func(t *testing.T, e *authzEnv) { e.grant(t, literal().Topics("prod"), kadm.OpRead) },
		},
		{
			name: "DescribeLogDirs",
			req: func() kmsg.Request {
				r := kmsg.NewPtrDescribeLogDirsRequest()
				r.SetVersion(4)
				return r
			},
			code:   func(r kmsg.Response) int16 { return r.(*kmsg.DescribeLogDirsResponse).ErrorCode },
			denied: kerr.ClusterAuthorizationFailed,
			grant:  func(t *testing.T, e *authzEnv) { e.grant(t, literal().Clusters(), kadm.OpDescribe) },
		},
		{
			// DESCRIBE on the cluster is granted by now.
			name: "ListPartitionReassignments",
			req: func() kmsg.Request {
				r := kmsg.NewPtrListPartitionReassignmentsRequest()
				r.TimeoutMillis = 10000
				return r
			},
			code:   func(r kmsg.Response) int16 { return r.(*kmsg.ListPartitionReassignmentsResponse).ErrorCode },
			denied: nil,
		},
		{
			name: "DescribeAcls",
			req: func() kmsg.Request {
				r := kmsg.NewPtrDescribeACLsRequest()
				r.SetVersion(3)
				r.ResourceType, r.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
				r.Operation, r.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
				return r
			},
			code: func(r kmsg.Response) int16 { return r.(*kmsg.DescribeACLsResponse).ErrorCode },
		},
		{
			name: "ElectLeaders",
			req: func() kmsg.Request {
				r := kmsg.NewPtrElectLeadersRequest()
				r.SetVersion(2)
				r.TimeoutMillis = 10000
				rt := kmsg.NewElectLeadersRequestTopic()
				rt.Topic, rt.Partitions = "cp", []int32{0}
				r.Topics = append(r.Topics, rt)
				return r
			},
			code:     func(r kmsg.Response) int16 { return r.(*kmsg.ElectLeadersResponse).ErrorCode },
			denied:   kerr.ClusterAuthorizationFailed,
			grant:    func(t *testing.T, e *authzEnv) { e.grant(t, literal().Clusters(), kadm.OpAlter) },
			anyOther: true,
		},
		{
			// ALTER on the cluster is granted by now.
			name: "CreateAcls",
			req: func() kmsg.Request {
				r := kmsg.NewPtrCreateACLsRequest()
				r.SetVersion(3)
				c := kmsg.NewCreateACLsRequestCreation()
				c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, "other", kmsg.ACLResourcePatternTypeLiteral
				c.Principal, c.Host, c.Operation, c.PermissionType = "User:other", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
				r.Creations = append(r.Creations, c)
				return r
			},
			code: func(r kmsg.Response) int16 { return r.(*kmsg.CreateACLsResponse).Results[0].ErrorCode },
		},
		{
			name:   "Fetch as a follower",
			req:    authzFetchReq("follow", 5),
			code:   fetchCode,
			denied: kerr.TopicAuthorizationFailed,
			grant:  func(t *testing.T, e *authzEnv) { e.grant(t, literal().Clusters(), kadm.OpClusterAction) },
			// This broker does not host replica 5: a fetch as it is no longer refused for
			// authorization, and fails for what it is.
			anyOther: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.denied != nil {
				if got := tc.code(e.send(t, tc.req())); got != tc.denied.Code {
					t.Fatalf("without the ACL: %v, want %v", kerr.ErrorForCode(got), tc.denied)
				}
				tc.grant(t, e)
			}
			got := tc.code(e.send(t, tc.req()))
			switch {
			case tc.anyOther && tc.denied != nil && got == tc.denied.Code:
				t.Fatalf("with the ACL: still %v", kerr.ErrorForCode(got))
			case !tc.anyOther && got != tc.after:
				t.Fatalf("with the ACL: %v, want %v", kerr.ErrorForCode(got), kerr.ErrorForCode(tc.after))
			}
		})
	}
}

// TestAuthzClusterAdmin: the cluster-level admin APIs are CLUSTER_AUTHORIZATION_FAILED where
// Kafka puts it for a user without ALTER or DESCRIBE on the cluster, and the ACL and SCRAM
// APIs with them.
func TestAuthzClusterAdmin(t *testing.T) {
	e := startAuthz(t)
	e.topic(t, "t")
	cases := []struct {
		name string
		req  kmsg.Request
		code func(kmsg.Response) int16
	}{
		{"DescribeLogDirs", func() kmsg.Request { r := kmsg.NewPtrDescribeLogDirsRequest(); r.SetVersion(4); return r }(),
			func(r kmsg.Response) int16 { return r.(*kmsg.DescribeLogDirsResponse).ErrorCode }},
		{"ListPartitionReassignments", kmsg.NewPtrListPartitionReassignmentsRequest(),
			func(r kmsg.Response) int16 { return r.(*kmsg.ListPartitionReassignmentsResponse).ErrorCode }},
		{"AlterPartitionReassignments", func() kmsg.Request {
			r := kmsg.NewPtrAlterPartitionAssignmentsRequest()
			rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
			rt.Topic = "t"
			p := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
			rt.Partitions = append(rt.Partitions, p)
			r.Topics = append(r.Topics, rt)
			return r
		}(), func(r kmsg.Response) int16 { return r.(*kmsg.AlterPartitionAssignmentsResponse).ErrorCode }},
		{"ElectLeaders", func() kmsg.Request { r := kmsg.NewPtrElectLeadersRequest(); r.SetVersion(2); return r }(),
			func(r kmsg.Response) int16 { return r.(*kmsg.ElectLeadersResponse).ErrorCode }},
		{"UnregisterBroker", func() kmsg.Request { r := kmsg.NewPtrUnregisterBrokerRequest(); r.BrokerID = 77; return r }(),
			func(r kmsg.Response) int16 { return r.(*kmsg.UnregisterBrokerResponse).ErrorCode }},
		{"DescribeQuorum", func() kmsg.Request { r := kmsg.NewPtrDescribeQuorumRequest(); r.SetVersion(2); return r }(),
			func(r kmsg.Response) int16 { return r.(*kmsg.DescribeQuorumResponse).ErrorCode }},
		{"DescribeAcls", func() kmsg.Request {
			r := kmsg.NewPtrDescribeACLsRequest()
			r.SetVersion(3)
			r.ResourceType, r.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
			r.Operation, r.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
			return r
		}(), func(r kmsg.Response) int16 { return r.(*kmsg.DescribeACLsResponse).ErrorCode }},
		{"CreateAcls", func() kmsg.Request {
			r := kmsg.NewPtrCreateACLsRequest()
			r.SetVersion(3)
			c := kmsg.NewCreateACLsRequestCreation()
			c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, "t", kmsg.ACLResourcePatternTypeLiteral
			c.Principal, c.Host, c.Operation, c.PermissionType = anonymous, "*", kmsg.ACLOperationAll, kmsg.ACLPermissionTypeAllow
			r.Creations = append(r.Creations, c)
			return r
		}(), func(r kmsg.Response) int16 { return r.(*kmsg.CreateACLsResponse).Results[0].ErrorCode }},
		{"DeleteAcls", func() kmsg.Request {
			r := kmsg.NewPtrDeleteACLsRequest()
			r.SetVersion(3)
			f := kmsg.NewDeleteACLsRequestFilter()
			f.ResourceType, f.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
			f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
			r.Filters = append(r.Filters, f)
			return r
		}(), func(r kmsg.Response) int16 { return r.(*kmsg.DeleteACLsResponse).Results[0].ErrorCode }},
		{"DescribeUserScramCredentials", kmsg.NewPtrDescribeUserSCRAMCredentialsRequest(),
			func(r kmsg.Response) int16 { return r.(*kmsg.DescribeUserSCRAMCredentialsResponse).ErrorCode }},
		{"AlterUserScramCredentials", func() kmsg.Request {
			r := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
			d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
			d.Name, d.Mechanism = "alice", 1
			r.Deletions = append(r.Deletions, d)
			return r
		}(), func(r kmsg.Response) int16 { return r.(*kmsg.AlterUserSCRAMCredentialsResponse).Results[0].ErrorCode }},
		{"WriteTxnMarkers", func() kmsg.Request {
			r := kmsg.NewPtrWriteTxnMarkersRequest()
			m := kmsg.NewWriteTxnMarkersRequestMarker()
			m.ProducerID, m.ProducerEpoch = 1, 0
			mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			mt.Topic, mt.Partitions = "t", []int32{0}
			m.Topics = append(m.Topics, mt)
			r.Markers = append(r.Markers, m)
			return r
		}(), func(r kmsg.Response) int16 {
			return r.(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[0].ErrorCode
		}},
		{"ReadShareGroupState", func() kmsg.Request {
			r := kmsg.NewPtrReadShareGroupStateRequest()
			r.GroupID = "g"
			r.Topics = []kmsg.ReadShareGroupStateRequestTopic{{Partitions: []kmsg.ReadShareGroupStateRequestTopicPartition{{Partition: 0}}}}
			return r
		}(), func(r kmsg.Response) int16 {
			return r.(*kmsg.ReadShareGroupStateResponse).Topics[0].Partitions[0].ErrorCode
		}},
		{"WriteShareGroupState", func() kmsg.Request {
			r := kmsg.NewPtrWriteShareGroupStateRequest()
			r.GroupID = "g"
			r.Topics = []kmsg.WriteShareGroupStateRequestTopic{{Partitions: []kmsg.WriteShareGroupStateRequestTopicPartition{{Partition: 0}}}}
			return r
		}(), func(r kmsg.Response) int16 {
			return r.(*kmsg.WriteShareGroupStateResponse).Topics[0].Partitions[0].ErrorCode
		}},
		{"DeleteShareGroupState", func() kmsg.Request {
			r := kmsg.NewPtrDeleteShareGroupStateRequest()
			r.GroupID = "g"
			r.Topics = []kmsg.DeleteShareGroupStateRequestTopic{{Partitions: []kmsg.DeleteShareGroupStateRequestTopicPartition{{Partition: 0}}}}
			return r
		}(), func(r kmsg.Response) int16 {
			return r.(*kmsg.DeleteShareGroupStateResponse).Topics[0].Partitions[0].ErrorCode
		}},
		{"FindCoordinator share key", func() kmsg.Request {
			r := findCoordinatorReq(2, "g:AAAAAAAAAAAAAAAAAAAAAQ:0")()
			r.SetVersion(6)
			return r
		}(), func(r kmsg.Response) int16 { return r.(*kmsg.FindCoordinatorResponse).Coordinators[0].ErrorCode }},
		{"InitializeShareGroupState", func() kmsg.Request {
			r := kmsg.NewPtrInitializeShareGroupStateRequest()
			r.GroupID = "g"
			r.Topics = []kmsg.InitializeShareGroupStateRequestTopic{{Partitions: []kmsg.InitializeShareGroupStateRequestTopicPartition{{Partition: 0}}}}
			return r
		}(), func(r kmsg.Response) int16 {
			return r.(*kmsg.InitializeShareGroupStateResponse).Topics[0].Partitions[0].ErrorCode
		}},
		{"ReadShareGroupStateSummary", func() kmsg.Request {
			r := kmsg.NewPtrReadShareGroupStateSummaryRequest()
			r.GroupID = "g"
			r.Topics = []kmsg.ReadShareGroupStateSummaryRequestTopic{{Partitions: []kmsg.ReadShareGroupStateSummaryRequestTopicPartition{{Partition: 0}}}}
			return r
		}(), func(r kmsg.Response) int16 {
			return r.(*kmsg.ReadShareGroupStateSummaryResponse).Topics[0].Partitions[0].ErrorCode
		}},
		{"AddPartitionsToTxn v4 (broker to broker)", func() kmsg.Request {
			r := kmsg.NewPtrAddPartitionsToTxnRequest()
			r.SetVersion(4)
			tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
			tx.TransactionalID, tx.ProducerID, tx.VerifyOnly = "tx", 1, true
			r.Transactions = append(r.Transactions, tx)
			return r
		}(), func(r kmsg.Response) int16 { return r.(*kmsg.AddPartitionsToTxnResponse).ErrorCode }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.code(e.send(t, tc.req)); got != kerr.ClusterAuthorizationFailed.Code {
				t.Fatalf("got %v, want CLUSTER_AUTHORIZATION_FAILED", kerr.ErrorForCode(got))
			}
		})
	}
	// With ALTER on the cluster (which implies DESCRIBE) the user manages ACLs itself.
	e.grant(t, literal().Clusters(), kadm.OpAlter)
	for _, tc := range cases {
		switch tc.name {
		case "CreateAcls", "DescribeAcls", "DeleteAcls":
			if got := tc.code(e.send(t, tc.req)); got != 0 {
				t.Errorf("%s with ALTER on the cluster: %v", tc.name, kerr.ErrorForCode(got))
			}
		}
	}
}

// TestAuthzMetadata: topics the user may not describe are never revealed, prefixed ALLOW and
// literal DENY rules combine as Kafka's, auto-creation needs CREATE, and the authorized
// operations are the user's.
func TestAuthzMetadata(t *testing.T) {
	e := startAuthz(t, "auto.create.topics.enable=true")
	for _, n := range []string{"vis-a", "vis-b", "vis-secret", "hidden"} {
		e.topic(t, n)
	}
	e.grant(t, prefixed().Topics("vis-"), kadm.OpRead)
	e.create(t, literal().Topics("vis-secret").Deny(anonymous).DenyHosts(userHost).Operations(kadm.OpDescribe))
	e.grant(t, literal().Topics("vis-b"), kadm.OpAlterConfigs)

	all := kmsg.NewPtrMetadataRequest()
	all.SetVersion(12)
	all.IncludeTopicAuthorizedOperations = true
	resp := e.send(t, all).(*kmsg.MetadataResponse)
	var names []string
	ops := map[string]int32{}
	for _, mt := range resp.Topics {
		names = append(names, *mt.Topic)
		ops[*mt.Topic] = mt.AuthorizedOperations
	}
	slices.Sort(names)
	if want := []string{"vis-a", "vis-b"}; !slices.Equal(names, want) {
		t.Fatalf("all topics: %v, want %v", names, want)
	}
	// READ implies DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS.
	bits := func(ops ...kmsg.ACLOperation) int32 {
		var b int32
		for _, op := range ops {
			b |= 1 << op
		}
		return b
	}
	if want := bits(kmsg.ACLOperationRead, kmsg.ACLOperationDescribe); ops["vis-a"] != want {
		t.Errorf("vis-a authorized operations %b, want %b", ops["vis-a"], want)
	}
	if want := bits(kmsg.ACLOperationRead, kmsg.ACLOperationDescribe, kmsg.ACLOperationAlterConfigs, kmsg.ACLOperationDescribeConfigs); ops["vis-b"] != want {
		t.Errorf("vis-b authorized operations %b, want %b", ops["vis-b"], want)
	}

	named := kmsg.NewPtrMetadataRequest()
	named.SetVersion(12)
	named.AllowAutoTopicCreation = true
	for _, n := range []string{"vis-a", "vis-secret", "hidden", "no-such-topic", "vis-new"} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(n)
		named.Topics = append(named.Topics, rt)
	}
	resp = e.send(t, named).(*kmsg.MetadataResponse)
	got := map[string]int16{}
	for _, mt := range resp.Topics {
		got[*mt.Topic] = mt.ErrorCode
		if mt.ErrorCode == kerr.TopicAuthorizationFailed.Code && (len(mt.Partitions) > 0 || mt.TopicID != [16]byte{}) {
			t.Errorf("%s: denied but described: %+v", *mt.Topic, mt)
		}
		if !named.IncludeTopicAuthorizedOperations && mt.AuthorizedOperations != -2147483648 {
			t.Errorf("%s: authorized operations %d without asking", *mt.Topic, mt.AuthorizedOperations)
		}
	}
	want := map[string]int16{
		"vis-a":         0,
		"vis-secret":    kerr.TopicAuthorizationFailed.Code, // the DENY beats the prefixed ALLOW
		"hidden":        kerr.TopicAuthorizationFailed.Code, // exists, but not for this user
		"no-such-topic": kerr.TopicAuthorizationFailed.Code, // the same answer: existence is not revealed
		"vis-new":       kerr.TopicAuthorizationFailed.Code, // may describe, may not create
	}
	for n, c := range want {
		if got[n] != c {
			t.Errorf("%s: %v, want %v", n, kerr.ErrorForCode(got[n]), kerr.ErrorForCode(c))
		}
	}
	if e.topicExists(t, "vis-new") {
		t.Fatal("vis-new auto-created without CREATE")
	}
	// With CREATE on the prefix, the same request creates it.
	e.grant(t, prefixed().Topics("vis-"), kadm.OpCreate)
	resp = e.send(t, named).(*kmsg.MetadataResponse)
	for _, mt := range resp.Topics {
		if *mt.Topic == "vis-new" && mt.ErrorCode == kerr.TopicAuthorizationFailed.Code {
			t.Fatal("vis-new: still TOPIC_AUTHORIZATION_FAILED with CREATE")
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for !e.topicExists(t, "vis-new") {
		if time.Now().After(deadline) {
			t.Fatal("vis-new not auto-created with CREATE on its prefix")
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Cluster authorized operations (v8-v10) and DescribeCluster's: 0 without DESCRIBE on
	// the cluster, the user's operations with it.
	clusterOps := func() (int32, int32) {
		m := kmsg.NewPtrMetadataRequest()
		m.SetVersion(10)
		m.Topics = []kmsg.MetadataRequestTopic{}
		m.IncludeClusterAuthorizedOperations = true
		dc := kmsg.NewPtrDescribeClusterRequest()
		dc.IncludeClusterAuthorizedOperations = true
		dr := e.send(t, dc).(*kmsg.DescribeClusterResponse)
		if dr.ErrorCode != 0 {
			t.Fatalf("DescribeCluster: %v", kerr.ErrorForCode(dr.ErrorCode))
		}
		return e.send(t, m).(*kmsg.MetadataResponse).AuthorizedOperations, dr.ClusterAuthorizedOperations
	}
	if m, d := clusterOps(); m != 0 || d != 0 {
		t.Errorf("cluster operations without DESCRIBE: metadata %b, describe cluster %b; want 0", m, d)
	}
	e.grant(t, literal().Clusters(), kadm.OpDescribe, kadm.OpIdempotentWrite)
	wantOps := bits(kmsg.ACLOperationDescribe, kmsg.ACLOperationIdempotentWrite)
	if m, d := clusterOps(); m != wantOps || d != wantOps {
		t.Errorf("cluster operations: metadata %b, describe cluster %b; want %b", m, d, wantOps)
	}

	// DescribeGroups' authorized operations are the user's on the group.
	e.grant(t, literal().Groups("g"), kadm.OpRead)
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.SetVersion(5)
	dg.Groups, dg.IncludeAuthorizedOperations = []string{"g"}, true
	if got, want := e.send(t, dg).(*kmsg.DescribeGroupsResponse).Groups[0].AuthorizedOperations, bits(kmsg.ACLOperationRead, kmsg.ACLOperationDescribe); got != want {
		t.Errorf("group authorized operations %b, want %b", got, want)
	}
}

func (e *authzEnv) topicExists(t *testing.T, name string) bool {
	t.Helper()
	td, err := e.admin.ListTopics(ctxT(t), name)
	if err != nil {
		t.Fatal(err)
	}
	return td.Has(name) && td[name].Err == nil
}

// TestAuthzListings: ListGroups, OffsetFetch of every offset and ListTransactions leave out
// what the user may not describe, without an error.
func TestAuthzListings(t *testing.T) {
	e := startAuthz(t)
	e.topic(t, "seen")
	e.topic(t, "unseen")
	for _, g := range []string{"g-seen", "g-unseen"} {
		os := kadm.Offsets{}
		os.Add(kadm.Offset{Topic: "seen", Partition: 0, At: 1})
		os.Add(kadm.Offset{Topic: "unseen", Partition: 0, At: 1})
		if r, err := e.admin.CommitOffsets(ctxT(t), g, os); err != nil || r.Error() != nil {
			t.Fatalf("commit %s: %v %v", g, err, r.Error())
		}
	}
	lg := kmsg.NewPtrListGroupsRequest()
	if got := e.send(t, lg).(*kmsg.ListGroupsResponse); got.ErrorCode != 0 || len(got.Groups) != 0 {
		t.Fatalf("ListGroups without ACLs: %v %v", kerr.ErrorForCode(got.ErrorCode), got.Groups)
	}
	e.grant(t, literal().Groups("g-seen"), kadm.OpDescribe)
	got := e.send(t, lg).(*kmsg.ListGroupsResponse)
	if len(got.Groups) != 1 || got.Groups[0].Group != "g-seen" {
		t.Fatalf("ListGroups with DESCRIBE on g-seen: %+v", got.Groups)
	}

	of := kmsg.NewPtrOffsetFetchRequest()
	of.SetVersion(8)
	og := kmsg.NewOffsetFetchRequestGroup()
	og.Group = "g-seen" // Topics nil: every committed offset
	of.Groups = append(of.Groups, og)
	e.grant(t, literal().Topics("seen"), kadm.OpDescribe)
	fr := e.send(t, of).(*kmsg.OffsetFetchResponse).Groups[0]
	if fr.ErrorCode != 0 || len(fr.Topics) != 1 || fr.Topics[0].Topic != "seen" {
		t.Fatalf("OffsetFetch of every offset: %v %+v", kerr.ErrorForCode(fr.ErrorCode), fr.Topics)
	}
	// An open transaction of the operator's: listed and described only for a user that may
	// describe its transactional id, and then only with the partitions of topics it may
	// describe.
	txp := e.operator(t, kgo.TransactionalID("tx-listed"))
	if err := txp.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceSync(t, txp, &kgo.Record{Topic: "seen", Value: []byte("1")}, &kgo.Record{Topic: "unseen", Value: []byte("2")})
	lt := kmsg.NewPtrListTransactionsRequest()
	if got := e.send(t, lt).(*kmsg.ListTransactionsResponse); got.ErrorCode != 0 || len(got.TransactionStates) != 0 {
		t.Fatalf("ListTransactions without ACLs: %v %+v", kerr.ErrorForCode(got.ErrorCode), got.TransactionStates)
	}
	e.grant(t, literal().TransactionalIDs("tx-listed"), kadm.OpDescribe)
	if got := e.send(t, lt).(*kmsg.ListTransactionsResponse); len(got.TransactionStates) != 1 || got.TransactionStates[0].TransactionalID != "tx-listed" {
		t.Fatalf("ListTransactions with DESCRIBE on tx-listed: %+v", got.TransactionStates)
	}
	dt := kmsg.NewPtrDescribeTransactionsRequest()
	dt.TransactionalIDs = []string{"tx-listed"}
	ts := e.send(t, dt).(*kmsg.DescribeTransactionsResponse).TransactionStates[0]
	if ts.ErrorCode != 0 || len(ts.Topics) != 1 || ts.Topics[0].Topic != "seen" {
		t.Fatalf("DescribeTransactions: %v %+v", kerr.ErrorForCode(ts.ErrorCode), ts.Topics)
	}
	if err := txp.EndTransaction(ctxT(t), kgo.TryAbort); err != nil {
		t.Fatal(err)
	}

	// With DESCRIBE on the cluster, every group is listed.
	e.grant(t, literal().Clusters(), kadm.OpDescribe)
	if got := e.send(t, lg).(*kmsg.ListGroupsResponse); len(got.Groups) != 2 {
		t.Fatalf("ListGroups with DESCRIBE on the cluster: %+v", got.Groups)
	}
}

// TestAuthzAllowEveryoneIfNoACLFound: with no ACL on a resource, allow.everyone.if.no.acl.found
// decides; a DENY ACL then closes it.
func TestAuthzAllowEveryoneIfNoACLFound(t *testing.T) {
	t.Run("false", func(t *testing.T) {
		b := testutil.StartBroker(t, "authorizer.class.name="+config.StandardAuthorizer)
		cl := newClient(t, b.Addr())
		ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
		defer cancel()
		resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "nope")
		if err == nil {
			err = resp.Err
		}
		if !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("create topic with no ACLs: %v, want TOPIC_AUTHORIZATION_FAILED", err)
		}
	})
	t.Run("true", func(t *testing.T) {
		b := testutil.StartBroker(t, "authorizer.class.name="+config.StandardAuthorizer, "allow.everyone.if.no.acl.found=true")
		createTopic(t, b.Addr(), "open", 1, nil)
		cl := newClient(t, b.Addr(), kgo.DefaultProduceTopic("open"))
		produceSync(t, cl, &kgo.Record{Value: []byte("v")})
		if rs := consumeN(t, b.Addr(), "open", 1); string(rs[0].Value) != "v" {
			t.Fatalf("consumed %q", rs[0].Value)
		}
		// A DENY on the topic: the topic now has an ACL, and it denies.
		adm := kadm.NewClient(cl)
		if _, err := adm.CreateACLs(ctxT(t), kadm.NewACLs().Topics("open").Deny(anonymous).DenyHosts("*").Operations(kadm.OpWrite)); err != nil {
			t.Fatal(err)
		}
		r := cl.ProduceSync(ctxT(t), &kgo.Record{Value: []byte("w")})
		if err := r.FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("produce after DENY WRITE: %v, want TOPIC_AUTHORIZATION_FAILED", err)
		}
	})
}

// TestAuthzClients: a producer and a consumer group, with the ACLs a Kafka operator would
// give them, work end to end through franz-go, and fail as Kafka's do without them.
func TestAuthzClients(t *testing.T) {
	e := startAuthz(t)
	e.topic(t, "orders")
	addr := e.b.Addr()
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	denied := newClient(t, addr, kgo.DefaultProduceTopic("orders"), kgo.RecordRetries(1))
	if err := denied.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.ClusterAuthorizationFailed) && !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("idempotent produce without ACLs: %v", err)
	}
	// WRITE on the topic is enough for an idempotent producer (KIP-679).
	e.grant(t, literal().Topics("orders"), kadm.OpWrite)
	prod := newClient(t, addr, kgo.DefaultProduceTopic("orders"))
	produceSync(t, prod, &kgo.Record{Value: []byte("a")}, &kgo.Record{Value: []byte("b")})

	e.grant(t, literal().Topics("orders"), kadm.OpRead)
	e.grant(t, prefixed().Groups("app-"), kadm.OpRead)
	rs := consumeN(t, addr, "orders", 2, kgo.ConsumerGroup("app-1"))
	if len(rs) != 2 {
		t.Fatalf("consumed %d records", len(rs))
	}
	// A transactional producer needs WRITE on its transactional id: without it
	// InitProducerId fails TRANSACTIONAL_ID_AUTHORIZATION_FAILED, with it the transaction
	// commits.
	ctx3, cancel3 := context.WithTimeout(ctxT(t), 10*time.Second)
	defer cancel3()
	txDenied := newClient(t, addr, kgo.DefaultProduceTopic("orders"), kgo.TransactionalID("orders-tx-2"))
	// franz-go reports it as its fatal producer id error, by name, at the first call that
	// needs the producer id.
	err := txDenied.BeginTransaction()
	if err == nil {
		err = txDenied.ProduceSync(ctx3, &kgo.Record{Value: []byte("x")}).FirstErr()
	}
	if err == nil || !strings.Contains(err.Error(), kerr.TransactionalIDAuthorizationFailed.Message) {
		t.Fatalf("transactional produce without WRITE on the transactional id: %v", err)
	}
	e.grant(t, prefixed().TransactionalIDs("orders-tx"), kadm.OpWrite)
	tx := newClient(t, addr, kgo.DefaultProduceTopic("orders"), kgo.TransactionalID("orders-tx-1"))
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceSync(t, tx, &kgo.Record{Value: []byte("c")})
	if err := tx.EndTransaction(ctxT(t), kgo.TryCommit); err != nil {
		t.Fatalf("commit: %v", err)
	}

	// A group outside the prefix is refused.
	cl := newClient(t, addr, kgo.ConsumeTopics("orders"), kgo.ConsumerGroup("other"))
	ctx2, cancel2 := context.WithTimeout(ctxT(t), 10*time.Second)
	defer cancel2()
	for {
		fs := cl.PollFetches(ctx2)
		if ctx2.Err() != nil {
			t.Fatal("no GROUP_AUTHORIZATION_FAILED for a group outside the prefix")
		}
		if slices.ContainsFunc(fs.Errors(), func(fe kgo.FetchError) bool { return errors.Is(fe.Err, kerr.GroupAuthorizationFailed) }) {
			break
		}
	}
}

func describeConfigsReq(typ kmsg.ConfigResourceType, name string) func() kmsg.Request {
	return func() kmsg.Request {
		r := kmsg.NewPtrDescribeConfigsRequest()
		r.SetVersion(4)
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = typ, name
		r.Resources = append(r.Resources, rr)
		return r
	}
}

func findCoordinatorReq(typ int8, key string) func() kmsg.Request {
	return func() kmsg.Request {
		r := kmsg.NewPtrFindCoordinatorRequest()
		r.SetVersion(4)
		r.CoordinatorType, r.CoordinatorKeys = typ, []string{key}
		return r
	}
}

func offsetCommitReq(group, topic string) func() kmsg.Request {
	return func() kmsg.Request {
		r := kmsg.NewPtrOffsetCommitRequest()
		r.SetVersion(8)
		r.Group, r.Generation = group, -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Offset = 0
		rt.Partitions = append(rt.Partitions, rp)
		r.Topics = append(r.Topics, rt)
		return r
	}
}

func offsetCommitCode(r kmsg.Response) int16 {
	return r.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
}

func offsetFetchReq(group, topic string) func() kmsg.Request {
	return func() kmsg.Request {
		r := kmsg.NewPtrOffsetFetchRequest()
		r.SetVersion(8)
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group = group
		gt := kmsg.NewOffsetFetchRequestGroupTopic()
		gt.Topic, gt.Partitions = topic, []int32{0}
		g.Topics = append(g.Topics, gt)
		r.Groups = append(r.Groups, g)
		return r
	}
}
