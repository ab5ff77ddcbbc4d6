package group

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func six() map[string]int32 { return map[string]int32{"t": 6} }

// The first member gets everything; a second member gets half, but only once the first
// has revoked it: at no step does a partition have two owners, and the partitions the
// first member keeps never leave it.
func TestConsumerJoinReconcilesIncrementally(t *testing.T) {
	h := newCGHarness(t, testConfig(), six())
	a := h.member("g", "a", "t")
	a.join()
	if a.epoch != 1 || !slices.Equal(a.parts("t"), []int32{0, 1, 2, 3, 4, 5}) {
		t.Fatalf("first member: epoch %d parts %v", a.epoch, a.parts("t"))
	}
	g := h.group("g")
	if g.ConsumerState() != ConsumerStable || g.protocol != ProtocolConsumer {
		t.Fatalf("state %v protocol %v", g.ConsumerState(), g.protocol)
	}

	b := h.member("g", "b", "t")
	b.join()
	if b.epoch != 2 || len(b.parts("t")) != 0 {
		t.Fatalf("second member must wait for partitions a owns: epoch %d parts %v", b.epoch, b.parts("t"))
	}
	if st := g.ConsumerState(); st != ConsumerReconciling {
		t.Fatalf("state %v, want Reconciling", st)
	}
	before := slices.Clone(a.parts("t"))
	a.beat() // told to revoke three, stays at epoch 1
	if a.epoch != 1 || len(a.parts("t")) != 3 {
		t.Fatalf("a after revocation request: epoch %d parts %v", a.epoch, a.parts("t"))
	}
	kept := a.parts("t")
	if len(subtract(kept, before)) != 0 {
		t.Fatalf("a got new partitions %v while revoking", kept)
	}
	b.beat() // a still reported owning everything: b gets nothing yet
	if len(b.parts("t")) != 0 {
		t.Fatalf("b got %v before a revoked", b.parts("t"))
	}
	a.beat() // a reports only what it kept: moves to epoch 2
	if a.epoch != 2 || !slices.Equal(a.parts("t"), kept) {
		t.Fatalf("a: epoch %d parts %v, want 2 %v", a.epoch, a.parts("t"), kept)
	}
	b.beat()
	if got := union(a.parts("t"), b.parts("t")); !slices.Equal(got, []int32{0, 1, 2, 3, 4, 5}) || len(b.parts("t")) != 3 {
		t.Fatalf("a %v b %v", a.parts("t"), b.parts("t"))
	}
	if st := g.ConsumerState(); st != ConsumerStable {
		t.Fatalf("state %v: %s", st, h.describe("g"))
	}
}

// A third member takes two partitions; each earlier member gives up exactly one.
func TestConsumerUniformMovesOnlyWhatMustMove(t *testing.T) {
	h := newCGHarness(t, testConfig(), six())
	a, b := h.member("g", "a", "t"), h.member("g", "b", "t")
	a.join()
	b.join()
	h.settle("g", a, b)
	pa, pb := slices.Clone(a.parts("t")), slices.Clone(b.parts("t"))
	c := h.member("g", "c", "t")
	c.join()
	h.settle("g", a, b, c)
	if len(a.parts("t")) != 2 || len(b.parts("t")) != 2 || len(c.parts("t")) != 2 {
		t.Fatalf("a %v b %v c %v", a.parts("t"), b.parts("t"), c.parts("t"))
	}
	if len(subtract(a.parts("t"), pa)) != 0 || len(subtract(b.parts("t"), pb)) != 0 {
		t.Fatalf("partitions moved between a and b: a %v->%v b %v->%v", pa, a.parts("t"), pb, b.parts("t"))
	}
	// c leaves: its partitions go to a and b, who keep theirs.
	pa, pb = slices.Clone(a.parts("t")), slices.Clone(b.parts("t"))
	wantErr(t, "leave", c.leave(), nil)
	h.settle("g", a, b)
	if len(subtract(pa, a.parts("t"))) != 0 || len(subtract(pb, b.parts("t"))) != 0 || len(a.parts("t"))+len(b.parts("t")) != 6 {
		t.Fatalf("after c left: a %v->%v b %v->%v", pa, a.parts("t"), pb, b.parts("t"))
	}
}

func TestConsumerRangeAssignor(t *testing.T) {
	h := newCGHarness(t, testConfig(), map[string]int32{"t": 7, "u": 2})
	r := "range"
	a, b := h.member("g", "a", "t", "u"), h.member("g", "b", "t", "u")
	a.assignor, b.assignor = &r, &r
	a.join()
	b.join()
	h.settle("g", a, b)
	if !slices.Equal(a.parts("t"), []int32{0, 1, 2, 3}) || !slices.Equal(b.parts("t"), []int32{4, 5, 6}) ||
		!slices.Equal(a.parts("u"), []int32{0}) || !slices.Equal(b.parts("u"), []int32{1}) {
		t.Fatalf("range: a %v %v b %v %v", a.parts("t"), a.parts("u"), b.parts("t"), b.parts("u"))
	}
	if d := h.s.DescribeConsumerGroup("g", 1, h.view()); d.AssignorName != "range" || d.State != "Stable" || len(d.Members) != 2 {
		t.Fatalf("describe: %+v", d)
	}
}

func TestConsumerFencing(t *testing.T) {
	h := newCGHarness(t, testConfig(), six())
	a, b := h.member("g", "a", "t"), h.member("g", "b", "t")
	a.join()
	b.join()
	h.settle("g", a, b)
	c := h.member("g", "c", "t")
	c.join()
	h.settle("g", a, b, c)
	wantErr(t, "c leaves", c.leave(), nil)
	h.settle("g", a, b)
	if a.epoch < 4 {
		t.Fatalf("a at epoch %d", a.epoch)
	}

	wantErr(t, "epoch ahead", a.send(a.request(a.epoch+1)), kerr.FencedMemberEpoch)
	wantErr(t, "epoch behind", a.send(a.request(a.epoch-2)), kerr.FencedMemberEpoch)
	x := h.member("g", "x", "t")
	wantErr(t, "unknown member", x.send(x.request(3)), kerr.UnknownMemberID)
	y := h.member("nope", "y", "t")
	wantErr(t, "unknown group", y.send(y.request(3)), kerr.GroupIDNotFound)

	// The previous epoch is accepted while the member owns only what it still has (the
	// answer that moved it on may have been lost).
	m := h.group("g").cons.members[a.id]
	prev := m.PreviousMemberEpoch
	if prev == m.MemberEpoch {
		t.Skip("no epoch change to test with")
	}
	wantErr(t, "previous epoch", a.send(a.request(prev)), nil)
}

func TestConsumerInvalidRequests(t *testing.T) {
	h := newCGHarness(t, testConfig(), six())
	m := h.member("g", "a", "t")
	cases := []struct {
		name string
		mod  func(*kmsg.ConsumerGroupHeartbeatRequest)
		want *kerr.Error
	}{
		{"no group", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Group = " " }, kerr.InvalidRequest},
		{"v1 without member id", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberID = "" }, kerr.InvalidRequest},
		{"no rebalance timeout", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.RebalanceTimeoutMillis = -1 }, kerr.InvalidRequest},
		{"owned partitions on join", func(r *kmsg.ConsumerGroupHeartbeatRequest) {
			r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: topicID("t"), Partitions: []int32{0}}}
		}, kerr.InvalidRequest},
		{"null owned partitions on join", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Topics = nil }, kerr.InvalidRequest},
		{"no subscription", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicNames = nil }, kerr.InvalidRequest},
		{"empty instance id", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.InstanceID = strPtr("") }, kerr.InvalidRequest},
		{"empty rack", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.RackID = strPtr(" ") }, kerr.InvalidRequest},
		{"epoch -3", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = -3 }, kerr.InvalidRequest},
		{"static leave without instance", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = -2 }, kerr.InvalidRequest},
		{"unknown assignor", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.ServerAssignor = strPtr("sticky") }, kerr.UnsupportedAssignor},
		{"bad regex", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicRegex = strPtr("(") }, kerr.InvalidRegularExpression},
	}
	for _, c := range cases {
		req := m.request(0)
		c.mod(req)
		wantErr(t, c.name, h.cgh(req).ErrorCode, c.want)
	}
	if h.s.groups["g"] != nil {
		t.Fatal("a refused heartbeat created the group")
	}
	// v0: the coordinator names the member.
	req := m.request(0)
	req.Version, req.MemberID = 0, ""
	if r := h.cgh(req); r.ErrorCode != 0 || r.MemberID == nil || *r.MemberID == "" {
		t.Fatalf("v0 join: %+v", r)
	}
}

func TestConsumerSessionTimeout(t *testing.T) {
	cfg := testConfig()
	cfg.ConsumerSessionTimeoutMs = 10000
	h := newCGHarness(t, cfg, six())
	a, b := h.member("g", "a", "t"), h.member("g", "b", "t")
	a.join()
	b.join()
	h.settle("g", a, b)
	for i := 0; i < 4; i++ { // a keeps heartbeating, b went silent
		h.advance(3000)
		a.beat()
	}
	if h.group("g").cons.members["b"] != nil {
		t.Fatal("b not fenced after its session timeout")
	}
	h.settle("g", a)
	if !slices.Equal(a.parts("t"), []int32{0, 1, 2, 3, 4, 5}) {
		t.Fatalf("a has %v after b timed out", a.parts("t"))
	}
	wantErr(t, "fenced member", b.send(b.request(b.epoch)), kerr.UnknownMemberID)
	// A member that never revokes is fenced after its rebalance timeout.
	c := h.member("g", "c", "t")
	c.join()
	a.send(a.request(a.epoch)) // told to revoke; a keeps reporting everything
	req := a.request(a.epoch)
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: topicID("t"), Partitions: []int32{0, 1, 2, 3, 4, 5}}}
	for i := 0; i < 12; i++ {
		h.advance(3000)
		c.beat()
		if code := h.cgh(req).ErrorCode; code != 0 {
			wantErr(t, "a after its rebalance timeout", code, kerr.UnknownMemberID)
			return
		}
	}
	t.Fatalf("a kept its partitions past the rebalance timeout: %s", h.describe("g"))
}

func TestConsumerStaticMembership(t *testing.T) {
	h := newCGHarness(t, testConfig(), six())
	a, b := h.member("g", "a1", "t"), h.member("g", "b", "t")
	a.instance = strPtr("inst-a")
	a.join()
	b.join()
	h.settle("g", a, b)
	kept := slices.Clone(a.parts("t"))
	epoch := h.group("g").cons.epoch

	// Another process with the same instance id cannot take it while a holds it.
	a2 := h.member("g", "a2", "t")
	a2.instance = strPtr("inst-a")
	wantErr(t, "instance held", a2.send(a2.request(0)), kerr.UnreleasedInstanceID)

	// a leaves for now (-2): its partitions stay reserved; the group does not rebalance.
	wantErr(t, "static leave", a.leave(), nil)
	b.beat()
	if len(b.parts("t")) != 3 || h.group("g").cons.epoch != epoch {
		t.Fatalf("b took a's partitions: %v, epoch %d->%d", b.parts("t"), epoch, h.group("g").cons.epoch)
	}
	// It comes back with a new member id and gets the same partitions at once.
	a2.join()
	if !slices.Equal(a2.parts("t"), kept) || h.group("g").cons.members["a1"] != nil {
		t.Fatalf("rejoined static member got %v, want %v: %s", a2.parts("t"), kept, h.describe("g"))
	}
	wantErr(t, "old incarnation", a.send(a.request(a.epoch)), kerr.FencedInstanceID)
	h.settle("g", a2, b)
}

func TestConsumerMaxSize(t *testing.T) {
	cfg := testConfig()
	cfg.ConsumerMaxSize = 1
	h := newCGHarness(t, cfg, six())
	h.member("g", "a", "t").join()
	b := h.member("g", "b", "t")
	wantErr(t, "second member", b.send(b.request(0)), kerr.GroupMaxSizeReached)
}

// Subscription changes, regular expressions and partition count changes bump the epoch.
func TestConsumerSubscriptionChanges(t *testing.T) {
	h := newCGHarness(t, testConfig(), map[string]int32{"t": 2, "u": 2, "other": 1})
	a := h.member("g", "a", "t")
	a.join()
	e := h.group("g").cons.epoch
	a.topics = []string{"t", "u"}
	a.beat()
	h.settle("g", a)
	if h.group("g").cons.epoch != e+1 || len(a.parts("u")) != 2 {
		t.Fatalf("after subscribing to u: epoch %d parts %v", h.group("g").cons.epoch, a.owned)
	}
	// A regex matching whole names: "t|u" matches t and u, not "other".
	b := h.member("g", "b")
	b.topics = nil
	b.regex = strPtr("t|u")
	b.join()
	h.settle("g", a, b)
	if got := len(a.parts("t")) + len(b.parts("t")) + len(a.parts("u")) + len(b.parts("u")); got != 4 || len(b.owned) == 0 {
		t.Fatalf("regex member: a %v b %v", a.owned, b.owned)
	}
	// Partitions added to t: the next heartbeat bumps the epoch and assigns them.
	e = h.group("g").cons.epoch
	h.setTopics(map[string]int32{"t": 4, "u": 2, "other": 1})
	h.settle("g", a, b)
	if h.group("g").cons.epoch != e+1 || len(a.parts("t"))+len(b.parts("t")) != 4 {
		t.Fatalf("after t grew: epoch %d a %v b %v", h.group("g").cons.epoch, a.owned, b.owned)
	}
	// A new topic matching the regex is picked up.
	h.setTopics(map[string]int32{"t": 4, "u": 2, "other": 1, "uu": 3})
	b.regex = strPtr("t|u|uu")
	h.settle("g", a, b)
	if len(b.parts("uu")) != 3 {
		t.Fatalf("regex did not pick up uu: %v", b.owned)
	}
	// Unsubscribing revokes at once.
	a.topics = []string{"t"}
	a.beat()
	if len(a.parts("u")) != 0 {
		t.Fatalf("a still has u: %v", a.owned)
	}
}

// The log replays into an equal group: epochs, members, targets and assignments.
func TestConsumerRecordsReplay(t *testing.T) {
	h := newCGHarness(t, testConfig(), six())
	a, b := h.member("g", "a", "t"), h.member("g", "b", "t")
	a.instance = strPtr("i")
	a.join()
	b.join()
	a.beat() // mid-reconciliation: a revoking
	h.commit("g", []int64{7}, func(r *kmsg.OffsetCommitRequest) {
		r.Version, r.MemberID, r.Generation = 9, "b", b.epoch
	})
	s := NewShard(testConfig())
	for _, rec := range h.log {
		if err := s.Replay(rec.Key, rec.Value); err != nil {
			t.Fatalf("replay: %v", err)
		}
	}
	s.LoadComplete(h.now)
	got, want := s.groups["g"], h.group("g")
	if got == nil || got.cons == nil {
		t.Fatal("group not replayed")
	}
	if err := got.cons.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	if got.cons.epoch != want.cons.epoch || got.cons.assignmentEpoch != want.cons.assignmentEpoch ||
		!sameSubMeta(got.cons.subMeta, want.cons.subMeta) || len(got.cons.members) != 2 || got.offsets[TopicPartition{"t", 0}] == nil {
		t.Fatalf("replayed %+v, want %+v", got.cons, want.cons)
	}
	for id, m := range want.cons.members {
		r := got.cons.members[id]
		if r == nil || !r.sameMetadata(m) || !r.sameAssignmentState(m) || !got.cons.target[id].equal(want.cons.target[id]) {
			t.Fatalf("member %s replayed as %+v, want %+v", id, r, m)
		}
	}
	// Deleting the group (once empty) replays to nothing but its offsets.
	wantErr(t, "a leaves", h.cgh(a.request(leaveEpoch)).ErrorCode, nil)
	wantErr(t, "b leaves", b.leave(), nil)
	w := h.waiter("delete")
	h.run(h.s.DeleteGroups(h.now, w, []string{"g"}))
	s = NewShard(testConfig())
	for _, rec := range h.log {
		if err := s.Replay(rec.Key, rec.Value); err != nil {
			t.Fatalf("replay: %v", err)
		}
	}
	if g := s.groups["g"]; g != nil {
		t.Fatalf("deleted group replayed: %+v", g)
	}
}

func TestConsumerOffsetCommitFencing(t *testing.T) {
	h := newCGHarness(t, testConfig(), six())
	a := h.member("g", "a", "t")
	a.join()
	commit := func(v int16, member string, epoch int32) int16 {
		r := h.commit("g", []int64{1}, func(r *kmsg.OffsetCommitRequest) { r.Version, r.MemberID, r.Generation = v, member, epoch })
		return r.Topics[0].Partitions[0].ErrorCode
	}
	wantErr(t, "current epoch", commit(9, "a", a.epoch), nil)
	wantErr(t, "stale epoch", commit(9, "a", a.epoch-1), kerr.StaleMemberEpoch)
	wantErr(t, "unknown member", commit(9, "zz", a.epoch), kerr.UnknownMemberID)
	wantErr(t, "old version", commit(8, "a", a.epoch), kerr.UnsupportedVersion)
	wantErr(t, "no member while members exist", commit(9, "", -1), kerr.UnknownMemberID)

	fetch := func(member string, epoch int32) int16 {
		req := kmsg.NewOffsetFetchRequestGroup()
		req.Group, req.MemberID, req.MemberEpoch = "g", &member, epoch
		return h.s.FetchOffsets(&req, false).ErrorCode
	}
	wantErr(t, "fetch current", fetch("a", a.epoch), nil)
	wantErr(t, "fetch stale", fetch("a", a.epoch+1), kerr.StaleMemberEpoch)
	wantErr(t, "fetch unknown", fetch("zz", a.epoch), kerr.UnknownMemberID)

	wantErr(t, "leave", a.leave(), nil)
	wantErr(t, "admin commit to the empty group", commit(9, "", -1), nil)
	if l := h.s.ListGroups(nil, []string{"consumer"}); len(l) != 1 || l[0].GroupState != "Empty" || l[0].GroupType != "consumer" {
		t.Fatalf("list: %+v", l)
	}
	if l := h.s.ListGroups(nil, []string{"classic"}); len(l) != 0 {
		t.Fatalf("classic filter: %+v", l)
	}
}
