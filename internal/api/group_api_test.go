package api_test

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
)

// groupConn is one raw connection sending requests at exact versions.
type groupConn struct {
	t    testing.TB
	nc   net.Conn
	br   *bufio.Reader
	f    *kmsg.RequestFormatter
	corr int32
}

func dialGroupConn(t testing.TB, addr string) *groupConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &groupConn{t: t, nc: nc, br: bufio.NewReader(nc), f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw"))}
}

// do sends req at version v and returns the decoded response; it fails the test on any
// error, so it is for the test's own goroutine (others use try).
func (c *groupConn) do(req kmsg.Request, v int16) kmsg.Response {
	c.t.Helper()
	resp, err := c.try(req, v)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp
}

// try sends req at version v and returns the decoded response.
func (c *groupConn) try(req kmsg.Request, v int16) (kmsg.Response, error) {
	req.SetVersion(v)
	c.corr++
	if _, err := c.nc.Write(c.f.AppendRequest(nil, req, c.corr)); err != nil {
		return nil, err
	}
	if err := c.nc.SetReadDeadline(time.Now().Add(60 * time.Second)); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(c.br, size[:]); err != nil {
		return nil, fmt.Errorf("%s v%d: %w", kmsg.NameForKey(req.Key()), v, err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c.br, body); err != nil {
		return nil, err
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != c.corr {
		return nil, fmt.Errorf("correlation id %d, want %d", got, c.corr)
	}
	body = body[4:]
	if req.IsFlexible() {
		body = body[1:] // no tagged fields in our response headers
	}
	resp := req.ResponseKind()
	resp.SetVersion(v)
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decode %s v%d: %w", kmsg.NameForKey(req.Key()), v, err)
	}
	return resp, nil
}

func rawJoin(c *groupConn, group, member string, topics ...string) *kmsg.JoinGroupResponse {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Group, req.MemberID = group, member
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 10000
	req.ProtocolType = "consumer"
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = topics
	req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: meta.AppendTo(nil)}}
	resp, err := c.try(req, 9)
	if err != nil {
		c.t.Error(err)
		return joinFailed()
	}
	return resp.(*kmsg.JoinGroupResponse)
}

// joinFailed stands in for a JoinGroup answer that never came (the test already failed).
func joinFailed() *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.ErrorCode = kerr.UnknownServerError.Code
	return r
}

// rawMember joins group through the MEMBER_ID_REQUIRED round trip; the join parks until
// the join phase ends, so it runs on its own connection.
func rawMember(t testing.TB, addr, group string, topics ...string) (*groupConn, chan *kmsg.JoinGroupResponse) {
	c := dialGroupConn(t, addr)
	r := rawJoin(c, group, "", topics...)
	if r.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatalf("first join: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		ch <- rawJoin(c, group, r.MemberID, topics...)
	}()
	// A test that fails before the join is answered must not leave it running past its
	// end (it would report to a finished test): the connection closes under it, and the
	// cleanup waits for it.
	t.Cleanup(func() {
		c.nc.Close()
		<-done
	})
	return c, ch
}

func rawSync(c *groupConn, group, member string, gen int32, assign map[string][]byte) *kmsg.SyncGroupResponse {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group, req.MemberID, req.Generation = group, member, gen
	for m, a := range assign {
		req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: m, MemberAssignment: a})
	}
	resp, err := c.try(req, 5)
	if err != nil {
		c.t.Error(err)
		r := kmsg.NewPtrSyncGroupResponse()
		r.ErrorCode = kerr.UnknownServerError.Code
		return r
	}
	return resp.(*kmsg.SyncGroupResponse)
}

func rawCommit(c *groupConn, v int16, group, member string, gen int32, topic string, offset int64) int16 {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.MemberID, req.Generation = group, member, gen
	p := kmsg.NewOffsetCommitRequestTopicPartition()
	p.Offset = offset
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: topic, Partitions: []kmsg.OffsetCommitRequestTopicPartition{p}}}
	return c.do(req, v).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
}

func rawFetchOffset(c *groupConn, v int16, group, topic string) int64 {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: topic, Partitions: []int32{0}}}
	resp := c.do(req, v).(*kmsg.OffsetFetchResponse)
	if resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		c.t.Fatalf("offset fetch v%d: %+v", v, resp)
	}
	return resp.Topics[0].Partitions[0].Offset
}

// FindCoordinator at every version: this node for groups (batched keys from v4), creating
// the internal __consumer_offsets topic, and for transactional ids, creating
// __transaction_state with Kafka's configs; INVALID_REQUEST for other key types.
func TestFindCoordinator(t *testing.T) {
	b := testutil.StartBroker(t, append(groupBroker, "offsets.topic.num.partitions=7", "transaction.state.log.num.partitions=5", "transaction.state.log.segment.bytes=1048576")...)
	c := dialGroupConn(t, b.Addr())
	addr := b.Broker.Addr().(*net.TCPAddr)
	host, port := addr.IP.String(), int32(addr.Port)
	for v := int16(0); v <= 6; v++ {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey, req.CoordinatorKeys = "g", []string{"g", "h"}
		resp := c.do(req, v).(*kmsg.FindCoordinatorResponse)
		if v < 4 {
			if resp.ErrorCode != 0 || resp.NodeID != 1 || resp.Host != host || resp.Port != port {
				t.Fatalf("v%d: %+v", v, resp)
			}
			continue
		}
		if len(resp.Coordinators) != 2 || resp.Coordinators[1].Key != "h" || resp.Coordinators[1].NodeID != 1 || resp.Coordinators[1].Port != port {
			t.Fatalf("v%d: %+v", v, resp)
		}
	}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey, req.CoordinatorType = "txn", 1
	if r := c.do(req, 3).(*kmsg.FindCoordinatorResponse); r.ErrorCode != 0 || r.NodeID != 1 || r.Port != port {
		t.Fatalf("transaction coordinator: %+v", r)
	}
	tmd := kmsg.NewPtrMetadataRequest()
	tmd.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("__transaction_state")}}
	if mr := c.do(tmd, 12).(*kmsg.MetadataResponse); len(mr.Topics) != 1 || !mr.Topics[0].IsInternal || len(mr.Topics[0].Partitions) != 5 {
		t.Fatalf("__transaction_state metadata: %+v", mr.Topics)
	}
	dc := kmsg.NewPtrDescribeConfigsRequest()
	dc.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "__transaction_state"}}
	want := map[string]string{"cleanup.policy": "compact", "compression.type": "uncompressed", "min.insync.replicas": "1", "segment.bytes": "1048576", "unclean.leader.election.enable": "false"}
	for _, cfg := range c.do(dc, 4).(*kmsg.DescribeConfigsResponse).Resources[0].Configs {
		if w, ok := want[cfg.Name]; ok {
			if cfg.Value == nil || *cfg.Value != w {
				t.Errorf("__transaction_state %s = %v, want %s", cfg.Name, cfg.Value, w)
			}
			delete(want, cfg.Name)
		}
	}
	if len(want) > 0 {
		t.Errorf("__transaction_state configs missing: %v", want)
	}
	req.CoordinatorKeys, req.CoordinatorType = []string{"a"}, 9
	if r := c.do(req, 4).(*kmsg.FindCoordinatorResponse); r.Coordinators[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("unknown key type: %+v", r)
	}

	md := kmsg.NewPtrMetadataRequest()
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("__consumer_offsets")}}
	mr := c.do(md, 12).(*kmsg.MetadataResponse)
	if len(mr.Topics) != 1 || !mr.Topics[0].IsInternal || len(mr.Topics[0].Partitions) != 7 {
		t.Fatalf("__consumer_offsets metadata: %+v", mr.Topics)
	}
}

// The group APIs over TCP at their newest versions: a group forms by JoinGroup/SyncGroup,
// commits are fenced by member and generation (refused commits change nothing),
// OffsetFetch serves several groups (v8) and old versions, DescribeGroups, ListGroups
// with filters, OffsetDelete and DeleteGroups refuse while the group is in use.
func TestGroupAPIs(t *testing.T) {
	b := testutil.StartBroker(t, groupBroker...)
	createTopic(t, b.Addr(), "t", 1, nil)
	createTopic(t, b.Addr(), "other", 1, nil)
	admin := dialGroupConn(t, b.Addr())

	a, aj := rawMember(t, b.Addr(), "g", "t")
	ra := <-aj
	if ra.ErrorCode != 0 || ra.Generation != 1 || ra.LeaderID != ra.MemberID {
		t.Fatalf("join a: %+v", ra)
	}
	if r := rawSync(a, "g", ra.MemberID, 1, map[string][]byte{ra.MemberID: []byte("a's")}); r.ErrorCode != 0 || string(r.MemberAssignment) != "a's" {
		t.Fatalf("sync a: %+v", r)
	}
	wantErr := func(what string, got int16, want *kerr.Error) {
		t.Helper()
		if w := int16(0); want != nil && got != want.Code || want == nil && got != w {
			t.Fatalf("%s: %v, want %v", what, kerr.ErrorForCode(got), want)
		}
	}
	wantErr("commit gen 1", rawCommit(admin, 9, "g", ra.MemberID, 1, "t", 10), nil)

	// b joins: generation 2. a learns of it through its heartbeat and rejoins.
	bc, bj := rawMember(t, b.Addr(), "g", "t")
	groupWait(t, 10*time.Second, "b's join starts a rebalance", func() (bool, string) {
		dg := kmsg.NewPtrDescribeGroupsRequest()
		dg.Groups = []string{"g"}
		st := admin.do(dg, 5).(*kmsg.DescribeGroupsResponse).Groups[0].State
		return st == "PreparingRebalance", st
	})
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = "g", ra.MemberID, 1
	wantErr("heartbeat during rebalance", a.do(hb, 4).(*kmsg.HeartbeatResponse).ErrorCode, kerr.RebalanceInProgress)
	ra2 := rawJoin(a, "g", ra.MemberID, "t")
	rb := <-bj
	if ra2.Generation != 2 || rb.Generation != 2 {
		t.Fatalf("generation 2: a %+v b %+v", ra2, rb)
	}
	// b's sync parks until the leader's arrives, so it runs on its own goroutine; the
	// test waits for its answer, or the cleanup could close bc under it.
	bs := make(chan *kmsg.SyncGroupResponse, 1)
	go func() { bs <- rawSync(bc, "g", rb.MemberID, 2, nil) }()
	rawSync(a, "g", ra.MemberID, 2, map[string][]byte{ra.MemberID: []byte("p0"), rb.MemberID: {}})
	if r := <-bs; r.ErrorCode != 0 {
		t.Fatalf("sync b: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	wantErr("commit from an unknown member", rawCommit(admin, 9, "g", "intruder", 2, "t", 99), kerr.UnknownMemberID)
	wantErr("commit from the old generation", rawCommit(admin, 9, "g", ra.MemberID, 1, "t", 99), kerr.IllegalGeneration)
	wantErr("commit from the old generation (v2)", rawCommit(admin, 2, "g", ra.MemberID, 1, "t", 99), kerr.IllegalGeneration)
	wantErr("simple commit to a group with members", rawCommit(admin, 0, "g", "", -1, "t", 99), kerr.UnknownMemberID)
	wantErr("commit to an unknown topic", rawCommit(admin, 9, "g", ra.MemberID, 2, "nope", 99), kerr.UnknownTopicOrPartition)
	for _, v := range []int16{1, 5, 7} {
		if off := rawFetchOffset(admin, v, "g", "t"); off != 10 {
			t.Fatalf("offset after refused commits (fetch v%d): %d, want 10", v, off)
		}
	}
	wantErr("commit gen 2", rawCommit(admin, 8, "g", rb.MemberID, 2, "t", 11), nil)
	wantErr("simple commit of another group", rawCommit(admin, 1, "simple", "", -1, "t", 5), nil)

	// OffsetFetch v8: several groups in one request.
	of := kmsg.NewPtrOffsetFetchRequest()
	of.RequireStable = true
	of.Groups = []kmsg.OffsetFetchRequestGroup{
		{Group: "g", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}}},
		{Group: "simple"}, // null topics: everything committed
		{Group: "unknown", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}}},
	}
	ofr := admin.do(of, 9).(*kmsg.OffsetFetchResponse)
	if len(ofr.Groups) != 3 || ofr.Groups[0].Topics[0].Partitions[0].Offset != 11 ||
		ofr.Groups[1].Topics[0].Partitions[0].Offset != 5 || ofr.Groups[2].Topics[0].Partitions[0].Offset != -1 {
		t.Fatalf("multi-group offset fetch: %+v", ofr.Groups)
	}

	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{"g", "missing"}
	dg.IncludeAuthorizedOperations = true
	var dr *kmsg.DescribeGroupsResponse
	// "missing" hashes to a __consumer_offsets partition that may still be loading
	// (COORDINATOR_LOAD_IN_PROGRESS, which clients retry).
	groupWait(t, 10*time.Second, "missing's partition loaded", func() (bool, string) {
		dr = admin.do(dg, 5).(*kmsg.DescribeGroupsResponse)
		return dr.Groups[1].ErrorCode != kerr.CoordinatorLoadInProgress.Code, fmt.Sprint("error code ", dr.Groups[1].ErrorCode)
	})
	if g := dr.Groups[0]; g.State != "Stable" || g.Protocol != "range" || len(g.Members) != 2 || g.Members[0].ClientID != "raw" || g.Members[0].ClientHost != "/127.0.0.1" {
		t.Fatalf("describe g: %+v", g)
	}
	if g := dr.Groups[1]; g.State != "Dead" || g.ErrorCode != 0 {
		t.Fatalf("describe missing: %+v", g)
	}

	lg := kmsg.NewPtrListGroupsRequest()
	if lr := admin.do(lg, 0).(*kmsg.ListGroupsResponse); len(lr.Groups) != 2 {
		t.Fatalf("list groups v0: %+v", lr.Groups)
	}
	lg.StatesFilter = []string{"Empty"}
	if lr := admin.do(lg, 4).(*kmsg.ListGroupsResponse); len(lr.Groups) != 1 || lr.Groups[0].Group != "simple" || lr.Groups[0].GroupState != "Empty" {
		t.Fatalf("list empty groups: %+v", lr.Groups)
	}
	lg.StatesFilter, lg.TypesFilter = []string{"Stable"}, []string{"classic"}
	if lr := admin.do(lg, 5).(*kmsg.ListGroupsResponse); len(lr.Groups) != 1 || lr.Groups[0].Group != "g" || lr.Groups[0].GroupType != "classic" || lr.Groups[0].ProtocolType != "consumer" {
		t.Fatalf("list stable classic groups: %+v", lr.Groups)
	}

	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = "g"
	od.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}, {Topic: "nope", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
	odr := admin.do(od, 0).(*kmsg.OffsetDeleteResponse)
	if odr.ErrorCode != 0 || odr.Topics[0].Partitions[0].ErrorCode != kerr.GroupSubscribedToTopic.Code || odr.Topics[1].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("offset delete of a subscribed topic: %+v", odr)
	}
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"g", "simple", "missing"}
	delr := admin.do(del, 2).(*kmsg.DeleteGroupsResponse)
	if delr.Groups[0].ErrorCode != kerr.NonEmptyGroup.Code || delr.Groups[1].ErrorCode != 0 || delr.Groups[2].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("delete groups: %+v", delr.Groups)
	}

	lv := kmsg.NewPtrLeaveGroupRequest()
	lv.Group = "g"
	lv.Members = []kmsg.LeaveGroupRequestMember{{MemberID: ra.MemberID}, {MemberID: rb.MemberID}}
	if lr := admin.do(lv, 5).(*kmsg.LeaveGroupResponse); lr.ErrorCode != 0 || lr.Members[0].ErrorCode != 0 || lr.Members[1].ErrorCode != 0 {
		t.Fatalf("batched leave: %+v", lr)
	}
	odr = admin.do(od, 0).(*kmsg.OffsetDeleteResponse)
	if odr.ErrorCode != 0 || odr.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("offset delete of the empty group: %+v", odr)
	}
	if off := rawFetchOffset(admin, 5, "g", "t"); off != -1 {
		t.Fatalf("offset after OffsetDelete: %d", off)
	}
	del.Groups = []string{"g"}
	if r := admin.do(del, 0).(*kmsg.DeleteGroupsResponse); r.Groups[0].ErrorCode != 0 {
		t.Fatalf("delete empty group: %+v", r)
	}
}

// The records in __consumer_offsets are Kafka's: a Kafka client reading the topic decodes
// them with the OffsetCommit and GroupMetadata key/value schemas.
func TestConsumerOffsetsRecordsAreKafkaFormat(t *testing.T) {
	b := testutil.StartBroker(t, groupBroker...)
	createTopic(t, b.Addr(), "t", 1, nil)
	c := dialGroupConn(t, b.Addr())
	_, j := rawMember(t, b.Addr(), "fmt", "t")
	r := <-j
	rawSync(c, "fmt", r.MemberID, 1, map[string][]byte{r.MemberID: []byte("x")})
	if code := rawCommit(c, 9, "fmt", r.MemberID, 1, "t", 77); code != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(code))
	}
	cl := newClient(t, b.Addr(), kgo.ConsumeTopics("__consumer_offsets"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var sawGroup, sawOffset bool
	ctx := ctxT(t)
	for !sawGroup || !sawOffset {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("group record %v, offset record %v", sawGroup, sawOffset)
		}
		fs.EachRecord(func(rec *kgo.Record) {
			switch binary.BigEndian.Uint16(rec.Key) {
			case 1:
				var k kmsg.OffsetCommitKey
				var v kmsg.OffsetCommitValue
				if k.ReadFrom(rec.Key) == nil && v.ReadFrom(rec.Value) == nil && k.Group == "fmt" && k.Topic == "t" && v.Offset == 77 {
					sawOffset = true
				}
			case 2:
				var k kmsg.GroupMetadataKey
				var v kmsg.GroupMetadataValue
				if k.ReadFrom(rec.Key) == nil && v.ReadFrom(rec.Value) == nil && k.Group == "fmt" && v.Generation == 1 &&
					len(v.Members) == 1 && string(v.Members[0].Assignment) == "x" && v.ProtocolType == "consumer" {
					sawGroup = true
				}
			}
		})
	}
}

// __consumer_offsets is the coordinator's topic however it comes to exist: auto-created by
// a Metadata request it gets the offsets.topic.* settings and is internal and compacted,
// and the coordinator then uses it. The first Metadata answers it UNKNOWN_TOPIC_OR_PARTITION
// while the controller creates it (as a KRaft broker does); the client asks again.
func TestConsumerOffsetsAutoCreatedAsInternal(t *testing.T) {
	b := testutil.StartBroker(t, append(groupBroker, "offsets.topic.num.partitions=4", "num.partitions=2")...)
	c := dialGroupConn(t, b.Addr())
	md := kmsg.NewPtrMetadataRequest()
	md.AllowAutoTopicCreation = true
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("__consumer_offsets")}}
	var mr *kmsg.MetadataResponse
	waitFor(t, 10*time.Second, "__consumer_offsets to be auto-created", func() bool {
		mr = c.do(md, 12).(*kmsg.MetadataResponse)
		return len(mr.Topics) == 1 && mr.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code
	})
	if len(mr.Topics) != 1 || !mr.Topics[0].IsInternal || len(mr.Topics[0].Partitions) != 4 {
		t.Fatalf("auto-created __consumer_offsets: %+v", mr.Topics)
	}
	dc := kmsg.NewPtrDescribeConfigsRequest()
	dc.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "__consumer_offsets", ConfigNames: []string{"cleanup.policy"}}}
	dr := c.do(dc, 4).(*kmsg.DescribeConfigsResponse)
	if cfg := dr.Resources[0].Configs; len(cfg) != 1 || *cfg[0].Value != "compact" {
		t.Fatalf("cleanup.policy: %+v", cfg)
	}
	createTopic(t, b.Addr(), "t", 1, nil)
	if code := rawCommit(c, 9, "simple", "", -1, "t", 3); code != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(code))
	}
	if off := rawFetchOffset(c, 7, "simple", "t"); off != 3 {
		t.Fatalf("offset %d", off)
	}
}
