package api_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
)

// KIP-848 consumer groups with franz-go's next-generation consumer (kgo.ServerSideBalancer):
// the broker assigns partitions with its uniform or range assignor and members reconcile
// through ConsumerGroupHeartbeat.

// kip848Broker shortens the consumer protocol's timings so tests run in seconds.
var kip848Broker = append(slices.Clone(groupBroker),
	"group.consumer.session.timeout.ms=3000", "group.consumer.min.session.timeout.ms=3000",
	"group.consumer.heartbeat.interval.ms=100", "group.consumer.min.heartbeat.interval.ms=100",
)

// start848Member starts a franz-go consumer speaking the consumer protocol (uniform
// assignor unless opts choose kgo.RangeBalancer).
func start848Member(t *testing.T, addr, group, topic, name string, own *groupOwnership, opts ...kgo.Opt) *groupMember {
	t.Helper()
	return startGroupMember(t, addr, group, topic, name, own, append([]kgo.Opt{kgo.ServerSideBalancer()}, opts...)...)
}

// describe848 describes a consumer group with ConsumerGroupDescribe.
func describe848(t *testing.T, addr, group string) kmsg.ConsumerGroupDescribeResponseGroup {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp := request[*kmsg.ConsumerGroupDescribeResponse](t, newClient(t, addr), req)
	return resp.Groups[0]
}

// Two, then three consumer-protocol members share six partitions with no overlap; the
// group is a consumer group (ListGroups type "consumer", ConsumerGroupDescribe).
func TestKIP848MembersShareSixPartitions(t *testing.T) {
	b := testutil.StartBroker(t, kip848Broker...)
	createTopic(t, b.Addr(), "six", 6, nil)
	own := newGroupOwnership()
	m1 := start848Member(t, b.Addr(), "share848", "six", "m1", own)
	m2 := start848Member(t, b.Addr(), "share848", "six", "m2", own)
	groupBalanced(t, 6, m1, m2)
	m3 := start848Member(t, b.Addr(), "share848", "six", "m3", own)
	groupBalanced(t, 6, m1, m2, m3)
	own.check(t)

	d := describe848(t, b.Addr(), "share848")
	if d.ErrorCode != 0 || d.State != "Stable" || len(d.Members) != 3 || d.AssignorName != "uniform" || d.Epoch != d.AssignmentEpoch {
		t.Fatalf("ConsumerGroupDescribe: %+v", d)
	}
	for _, m := range d.Members {
		if m.MemberType != 1 || len(m.Assignment.TopicPartitions) != 1 || m.Assignment.TopicPartitions[0].Topic != "six" {
			t.Fatalf("member %+v", m)
		}
	}
	adm := kadm.NewClient(newClient(t, b.Addr()))
	listed, err := adm.ListGroups(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if g, ok := listed["share848"]; !ok || g.State != "Stable" || g.ProtocolType != "consumer" {
		t.Fatalf("ListGroups: %+v", listed)
	}
	req := kmsg.NewPtrListGroupsRequest()
	req.TypesFilter = []string{"classic"}
	if lr := request[*kmsg.ListGroupsResponse](t, newClient(t, b.Addr()), req); len(lr.Groups) != 0 {
		t.Fatalf("classic filter listed %+v", lr.Groups)
	}
	req.TypesFilter = []string{"consumer"}
	if lr := request[*kmsg.ListGroupsResponse](t, newClient(t, b.Addr()), req); len(lr.Groups) != 1 || lr.Groups[0].GroupType != "consumer" {
		t.Fatalf("consumer filter listed %+v", lr.Groups)
	}
	dg, err := adm.DescribeGroups(ctxT(t), "share848")
	if err != nil || dg["share848"].State != "Stable" || len(dg["share848"].Members) != 3 {
		t.Fatalf("DescribeGroups: %v %+v", err, dg["share848"])
	}
}

// sampler records each member's partitions every few milliseconds.
type sampler struct {
	ms   []*groupMember
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	seen []map[string][]int32 // member name -> partitions, per sample
}

func sample(ms ...*groupMember) *sampler {
	s := &sampler{ms: ms, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			snap := map[string][]int32{}
			for _, m := range s.ms {
				snap[m.name] = m.partitions()
			}
			s.mu.Lock()
			s.seen = append(s.seen, snap)
			s.mu.Unlock()
			select {
			case <-s.stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	return s
}

func (s *sampler) finish() []map[string][]int32 {
	close(s.stop)
	<-s.done
	return s.seen
}

func owners(ms ...*groupMember) map[int32]string {
	o := map[int32]string{}
	for _, m := range ms {
		for _, p := range m.partitions() {
			o[p] = m.name
		}
	}
	return o
}

// checkNoGaps fails if a partition owned by the same member before and after a rebalance
// was missing from that member in any sample taken during it; it returns how many
// partitions moved.
func checkNoGaps(t *testing.T, what string, before, after map[int32]string, samples []map[string][]int32) int {
	t.Helper()
	moved := 0
	for p, m := range after {
		if before[p] != m {
			moved++
			continue
		}
		for i, snap := range samples {
			if !slices.Contains(snap[m], p) {
				t.Fatalf("%s: partition %d stayed with %s but was not assigned to it in sample %d of %d (%v)", what, p, m, i, len(samples), snap)
			}
		}
	}
	return moved
}

// A member joining, then leaving, moves only the partitions that must move: the others stay
// assigned to their owners in every sample taken throughout.
func TestKIP848JoinLeaveKeepsUnaffectedPartitions(t *testing.T) {
	b := testutil.StartBroker(t, kip848Broker...)
	createTopic(t, b.Addr(), "six", 6, nil)
	own := newGroupOwnership()
	m1 := start848Member(t, b.Addr(), "sticky848", "six", "m1", own)
	m2 := start848Member(t, b.Addr(), "sticky848", "six", "m2", own)
	groupBalanced(t, 6, m1, m2)

	before := owners(m1, m2)
	s := sample(m1, m2)
	m3 := start848Member(t, b.Addr(), "sticky848", "six", "m3", own)
	groupBalanced(t, 6, m1, m2, m3)
	after := owners(m1, m2, m3)
	if moved := checkNoGaps(t, "join", before, after, s.finish()); moved != 2 {
		t.Fatalf("a third member moved %d partitions, want 2: %v -> %v", moved, before, after)
	}

	before = after
	s = sample(m1, m2)
	m3.close()
	groupBalanced(t, 6, m1, m2)
	after = owners(m1, m2)
	if moved := checkNoGaps(t, "leave", before, after, s.finish()); moved != 2 {
		t.Fatalf("the leave moved %d partitions, want 2: %v -> %v", moved, before, after)
	}
	own.check(t)
}

// A member killed without a word keeps its partitions until the group's session timeout
// (group.consumer.session.timeout.ms = 3 s) expires; then they move.
func TestKIP848KilledMemberPartitionsMoveAfterSessionTimeout(t *testing.T) {
	b := testutil.StartBroker(t, kip848Broker...)
	createTopic(t, b.Addr(), "six", 6, nil)
	own := newGroupOwnership()
	m1 := start848Member(t, b.Addr(), "kill848", "six", "m1", own)
	m2 := start848Member(t, b.Addr(), "kill848", "six", "m2", own)
	m3 := start848Member(t, b.Addr(), "kill848", "six", "m3", own)
	groupBalanced(t, 6, m1, m2, m3)
	killed := time.Now()
	m3.kill()
	groupBalanced(t, 6, m1, m2)
	moved := time.Since(killed)
	t.Logf("partitions moved %v after the kill (session timeout 3s)", moved)
	if moved < 2*time.Second {
		t.Fatalf("partitions moved %v after the kill: before the session timeout could expire", moved)
	}
	own.check(t)
}

// Both server assignors produce valid assignments for two, then three members.
func TestKIP848Assignors(t *testing.T) {
	b := testutil.StartBroker(t, kip848Broker...)
	createTopic(t, b.Addr(), "six", 6, nil)
	for name, bal := range map[string]kgo.GroupBalancer{"uniform": kgo.CooperativeStickyBalancer(), "range": kgo.RangeBalancer()} {
		group := "assignor-" + name
		own := newGroupOwnership()
		opt := kgo.Balancers(bal)
		m1 := start848Member(t, b.Addr(), group, "six", name+"1", own, opt)
		m2 := start848Member(t, b.Addr(), group, "six", name+"2", own, opt)
		groupBalanced(t, 6, m1, m2)
		m3 := start848Member(t, b.Addr(), group, "six", name+"3", own, opt)
		groupBalanced(t, 6, m1, m2, m3)
		own.check(t)
		if d := describe848(t, b.Addr(), group); d.AssignorName != name {
			t.Fatalf("%s group uses assignor %q", name, d.AssignorName)
		}
		if name == "range" {
			// Range hands out contiguous ranges.
			for _, m := range []*groupMember{m1, m2, m3} {
				ps := m.partitions()
				if len(ps) != 2 || ps[1] != ps[0]+1 {
					t.Fatalf("range gave %s %v", m.name, ps)
				}
			}
		}
		m1.close()
		m2.close()
		m3.close()
	}
}

// A consumer-protocol member commits, everyone stops, the broker restarts (replaying the
// consumer group's records), and a new member resumes exactly after the commit.
func TestKIP848ResumesAfterBrokerRestart(t *testing.T) {
	b := testutil.StartBroker(t, kip848Broker...)
	createTopic(t, b.Addr(), "resume", 3, nil)
	cl := newClient(t, b.Addr(), kgo.DefaultProduceTopic("resume"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	const n = 90
	for i := 0; i < n; i += 10 {
		var rs []*kgo.Record
		for j := i; j < i+10; j++ {
			rs = append(rs, &kgo.Record{Partition: int32(i / 10 % 3), Value: []byte(fmt.Sprint(j))})
		}
		produceSync(t, cl, rs...)
	}
	type pos struct {
		p int32
		o int64
	}
	read := map[pos]int{}
	first := newClient(t, b.Addr(), kgo.ConsumerGroup("resume848"), kgo.ConsumeTopics("resume"), kgo.ServerSideBalancer(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.FetchMaxPartitionBytes(1), kgo.FetchMaxBytes(1))
	var processed []*kgo.Record
	ctx := ctxT(t)
	for len(processed) < 40 {
		fs := first.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("first member read %d records", len(processed))
		}
		processed = append(processed, fs.Records()...)
	}
	if err := first.CommitRecords(ctx, processed...); err != nil {
		t.Fatal(err)
	}
	for _, r := range processed {
		read[pos{r.Partition, r.Offset}]++
	}
	if d := describe848(t, b.Addr(), "resume848"); d.ErrorCode != 0 || len(d.Members) != 1 {
		t.Fatalf("not a consumer group before the restart: %+v", d)
	}
	first.Close()

	b = b.Restart()
	if d := describe848(t, b.Addr(), "resume848"); d.ErrorCode != 0 || d.State != "Empty" || d.Epoch == 0 {
		t.Fatalf("consumer group after the restart: %+v", d)
	}
	second := newClient(t, b.Addr(), kgo.ConsumerGroup("resume848"), kgo.ConsumeTopics("resume"), kgo.ServerSideBalancer(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	ctx = ctxT(t)
	for len(read) < n {
		fs := second.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records in all", len(read), n)
		}
		for _, r := range fs.Records() {
			k := pos{r.Partition, r.Offset}
			read[k]++
			if read[k] > 1 {
				t.Fatalf("record at partition %d offset %d read again after the restart", r.Partition, r.Offset)
			}
		}
	}
}

// A classic consumer (JoinGroup/SyncGroup) joining a consumer group gets its partitions
// from the server assignor, shares them with the consumer-protocol member without overlap,
// and when that member leaves the group goes on as a classic group.
func TestKIP848ClassicMemberJoinsConsumerGroup(t *testing.T) {
	b := testutil.StartBroker(t, kip848Broker...)
	createTopic(t, b.Addr(), "six", 6, nil)
	own := newGroupOwnership()
	m1 := start848Member(t, b.Addr(), "mixed", "six", "new", own)
	groupBalanced(t, 6, m1)
	m2 := startGroupMember(t, b.Addr(), "mixed", "six", "classic", own) // cooperative-sticky, JoinGroup
	groupBalanced(t, 6, m1, m2)
	own.check(t)
	d := describe848(t, b.Addr(), "mixed")
	types := map[int8]int{}
	for _, m := range d.Members {
		types[m.MemberType]++
	}
	if d.State != "Stable" || types[0] != 1 || types[1] != 1 {
		t.Fatalf("mixed group: %+v", d)
	}
	m1.close()
	groupBalanced(t, 6, m2)
	if d := describe848(t, b.Addr(), "mixed"); d.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("group still a consumer group after the last consumer-protocol member left: %+v", d)
	}
	own.check(t)
}

// Raw ConsumerGroupHeartbeats: joining, fencing (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID),
// static members (UNRELEASED_INSTANCE_ID), group size, assignor and request validation, and
// offset commits and fetches checked against the member epoch.
func TestKIP848FencingWithRawRequests(t *testing.T) {
	b := testutil.StartBroker(t, append(slices.Clone(kip848Broker), "group.consumer.max.size=3")...)
	createTopic(t, b.Addr(), "raw", 4, nil)
	c := dialGroupConn(t, b.Addr())
	topicID := func() [16]byte {
		md := kmsg.NewPtrMetadataRequest()
		md.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("raw")}}
		return c.do(md, 12).(*kmsg.MetadataResponse).Topics[0].TopicID
	}()
	hb := func(member string, epoch int32, mod func(*kmsg.ConsumerGroupHeartbeatRequest)) *kmsg.ConsumerGroupHeartbeatResponse {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Group, req.MemberID, req.MemberEpoch = "raw848", member, epoch
		if epoch == 0 {
			req.RebalanceTimeoutMillis = 5000
			req.SubscribedTopicNames = []string{"raw"}
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		}
		if mod != nil {
			mod(req)
		}
		return c.do(req, 1).(*kmsg.ConsumerGroupHeartbeatResponse)
	}
	code := func(what string, got int16, want *kerr.Error) {
		t.Helper()
		if want == nil && got != 0 || want != nil && got != want.Code {
			t.Fatalf("%s: %v, want %v", what, kerr.ErrorForCode(got), want)
		}
	}

	r := hb("a", 0, nil)
	code("join", r.ErrorCode, nil)
	if r.MemberEpoch != 1 || r.HeartbeatIntervalMillis != 100 || r.Assignment == nil || len(r.Assignment.Topics) != 1 ||
		r.Assignment.Topics[0].TopicID != topicID || len(r.Assignment.Topics[0].Partitions) != 4 {
		t.Fatalf("join answer: %+v", r)
	}
	epoch := r.MemberEpoch
	code("epoch ahead", hb("a", epoch+1, nil).ErrorCode, kerr.FencedMemberEpoch)
	code("unknown member", hb("zz", epoch, nil).ErrorCode, kerr.UnknownMemberID)
	code("malformed join", hb("b", 0, func(q *kmsg.ConsumerGroupHeartbeatRequest) { q.Topics = nil }).ErrorCode, kerr.InvalidRequest)
	code("join without member id", hb("", 0, nil).ErrorCode, kerr.InvalidRequest)
	code("unknown assignor", hb("b", 0, func(q *kmsg.ConsumerGroupHeartbeatRequest) { q.ServerAssignor = kmsg.StringPtr("cooperative") }).ErrorCode, kerr.UnsupportedAssignor)

	inst := kmsg.StringPtr("instance-1")
	code("static join", hb("s1", 0, func(q *kmsg.ConsumerGroupHeartbeatRequest) { q.InstanceID = inst }).ErrorCode, nil)
	code("instance taken", hb("s2", 0, func(q *kmsg.ConsumerGroupHeartbeatRequest) { q.InstanceID = inst }).ErrorCode, kerr.UnreleasedInstanceID)
	code("third member", hb("c", 0, nil).ErrorCode, nil)
	code("group full", hb("d", 0, nil).ErrorCode, kerr.GroupMaxSizeReached)

	// Offsets: the member's current epoch commits; an older one is stale.
	commit := func(member string, epoch int32) int16 { return rawCommit(c, 9, "raw848", member, epoch, "raw", 11) }
	code("commit at the member epoch", commit("a", epoch), nil)
	code("commit at an old epoch", commit("a", epoch-1), kerr.StaleMemberEpoch)
	code("commit from an unknown member", commit("zz", epoch), kerr.UnknownMemberID)
	fetch := func(member string, epoch int32) int16 {
		req := kmsg.NewPtrOffsetFetchRequest()
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group, g.MemberID, g.MemberEpoch = "raw848", &member, epoch
		req.Groups = []kmsg.OffsetFetchRequestGroup{g}
		return c.do(req, 9).(*kmsg.OffsetFetchResponse).Groups[0].ErrorCode
	}
	code("fetch at the member epoch", fetch("a", epoch), nil)
	code("fetch at a wrong epoch", fetch("a", epoch+3), kerr.StaleMemberEpoch)

	// Leaving: -1 for a dynamic member, -2 for a static one leaving for now.
	code("leave", hb("a", -1, nil).ErrorCode, nil)
	code("leave again", hb("a", -1, nil).ErrorCode, kerr.UnknownMemberID)
	code("static leave", hb("s1", -2, func(q *kmsg.ConsumerGroupHeartbeatRequest) { q.InstanceID = inst }).ErrorCode, nil)
	code("instance released", hb("s2", 0, func(q *kmsg.ConsumerGroupHeartbeatRequest) { q.InstanceID = inst }).ErrorCode, nil)

	if got := strings.Join(describe848Members(t, b.Addr(), "raw848"), ","); got != "c,s2" {
		t.Fatalf("members after the leaves: %s", got)
	}
}

func describe848Members(t *testing.T, addr, group string) []string {
	var ids []string
	for _, m := range describe848(t, addr, group).Members {
		ids = append(ids, m.MemberID)
	}
	return ids
}

// Members keep their partitions across a broker restart: the coordinator replays the
// group's records (members, epochs, assignments) and the members' heartbeats carry on at
// their epochs, with no rebalance.
func TestKIP848MembersSurviveBrokerRestart(t *testing.T) {
	port := testutil.FreePort(t)
	b := testutil.StartBroker(t, append(slices.Clone(kip848Broker), fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d", port))...)
	createTopic(t, b.Addr(), "six", 6, nil)
	own := newGroupOwnership()
	m1 := start848Member(t, b.Addr(), "restart848", "six", "m1", own)
	m2 := start848Member(t, b.Addr(), "restart848", "six", "m2", own)
	groupBalanced(t, 6, m1, m2)
	before := describe848(t, b.Addr(), "restart848")
	owned := owners(m1, m2)

	b = b.Restart()
	// Past the session timeout (3 s) the members are still there: they heartbeat again.
	restarted := time.Now()
	groupWait(t, 20*time.Second, "members heartbeating past a session timeout after the restart", func() (bool, string) {
		d := describe848(t, b.Addr(), "restart848")
		ok := d.ErrorCode == 0 && d.State == "Stable" && len(d.Members) == 2
		if !ok {
			t.Fatalf("group after the restart: %+v", d)
		}
		return time.Since(restarted) > 3500*time.Millisecond, ""
	})
	after := describe848(t, b.Addr(), "restart848")
	if after.Epoch != before.Epoch || describe848Members(t, b.Addr(), "restart848")[0] != before.Members[0].MemberID {
		t.Fatalf("the group rebalanced across the restart: epoch %d -> %d", before.Epoch, after.Epoch)
	}
	if o := owners(m1, m2); fmt.Sprint(o) != fmt.Sprint(owned) {
		t.Fatalf("partitions moved across the restart: %v -> %v", owned, o)
	}
	own.check(t)
}

// A running classic group of consumers upgrades online when a consumer-protocol member
// joins (group.consumer.migration.policy=bidirectional): the classic member keeps
// consuming, gives up half its partitions when told to rejoin, and no partition is ever
// owned twice.
func TestKIP848UpgradesRunningClassicGroup(t *testing.T) {
	b := testutil.StartBroker(t, kip848Broker...)
	createTopic(t, b.Addr(), "six", 6, nil)
	own := newGroupOwnership()
	m1 := startGroupMember(t, b.Addr(), "upgrade", "six", "classic", own) // cooperative-sticky
	groupBalanced(t, 6, m1)
	if d := describe848(t, b.Addr(), "upgrade"); d.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("a classic group answered ConsumerGroupDescribe: %+v", d)
	}
	m2 := start848Member(t, b.Addr(), "upgrade", "six", "new", own)
	groupBalanced(t, 6, m1, m2)
	own.check(t)
	d := describe848(t, b.Addr(), "upgrade")
	if d.ErrorCode != 0 || len(d.Members) != 2 || d.State != "Stable" {
		t.Fatalf("after the upgrade: %+v", d)
	}
}

// A regular expression subscription (SubscribedTopicRegex, RE2 matched against whole
// topic names) is resolved by the coordinator: the member gets the matching topics'
// partitions, and a matching topic created later joins the assignment.
func TestKIP848RegexSubscription(t *testing.T) {
	b := testutil.StartBroker(t, kip848Broker...)
	for _, topic := range []string{"rx-a", "rx-b", "other"} {
		createTopic(t, b.Addr(), topic, 3, nil)
	}
	var mu sync.Mutex
	assigned := map[string][]int32{}
	newClient(t, b.Addr(), kgo.ConsumerGroup("regex848"), kgo.ConsumeRegex(), kgo.ConsumeTopics("rx-.*"), kgo.ServerSideBalancer(),
		kgo.MetadataMinAge(100*time.Millisecond), kgo.MetadataMaxAge(500*time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			mu.Lock()
			defer mu.Unlock()
			for topic, ps := range a {
				assigned[topic] = append(assigned[topic], ps...)
			}
		}))
	wait := func(want string) {
		t.Helper()
		groupWait(t, 20*time.Second, "regex assignment", func() (bool, string) {
			d := describe848(t, b.Addr(), "regex848")
			var got []string
			for _, m := range d.Members {
				for _, tp := range m.Assignment.TopicPartitions {
					got = append(got, fmt.Sprintf("%s:%d", tp.Topic, len(tp.Partitions)))
				}
			}
			slices.Sort(got)
			return strings.Join(got, " ") == want && d.State == "Stable", strings.Join(got, " ")
		})
	}
	wait("rx-a:3 rx-b:3")
	createTopic(t, b.Addr(), "rx-c", 2, nil)
	wait("rx-a:3 rx-b:3 rx-c:2")
	groupWait(t, 20*time.Second, "the client consuming rx-c", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(assigned["rx-c"]) == 2 && len(assigned["other"]) == 0, fmt.Sprint(assigned)
	})
}
