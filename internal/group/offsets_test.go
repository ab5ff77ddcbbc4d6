package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type commitOpt func(*kmsg.OffsetCommitRequest)

func commitAs(memberID string, gen int32) commitOpt {
	return func(r *kmsg.OffsetCommitRequest) { r.MemberID, r.Generation = memberID, gen }
}
func commitVersion(v int16) commitOpt { return func(r *kmsg.OffsetCommitRequest) { r.Version = v } }
func commitRetention(ms int64) commitOpt {
	return func(r *kmsg.OffsetCommitRequest) { r.RetentionTimeMillis = ms }
}

// commit commits offsets of topic t (partition i gets offsets[i]) and returns the answer,
// or nil if it is parked.
func (h *harness) commit(group string, offsets []int64, opts ...commitOpt) *kmsg.OffsetCommitResponse {
	h.t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 9
	req.Group = group
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "t"
	for i, o := range offsets {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = int32(i), o, 7
		md := "md"
		rp.Metadata = &md
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	for _, o := range opts {
		o(req)
	}
	w := h.waiter("commit")
	h.run(h.s.CommitOffsets(h.now, w, req))
	r, _ := h.reply(w).(*kmsg.OffsetCommitResponse)
	return r
}

func commitCodes(r *kmsg.OffsetCommitResponse) []int16 {
	var cs []int16
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			cs = append(cs, p.ErrorCode)
		}
	}
	return cs
}

func wantCommit(t *testing.T, what string, r *kmsg.OffsetCommitResponse, want *kerr.Error) {
	t.Helper()
	if r == nil {
		t.Fatalf("%s: commit not answered", what)
	}
	for _, c := range commitCodes(r) {
		wantCode(t, what, c, want)
	}
}

// fetched returns the committed offsets of t's partitions 0..n-1 (-1: none).
func (h *harness) fetched(group string, n int, requireStable bool) ([]int64, []int16) {
	h.t.Helper()
	req := kmsg.NewOffsetFetchRequestGroup()
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestGroupTopic()
	rt.Topic = "t"
	for i := 0; i < n; i++ {
		rt.Partitions = append(rt.Partitions, int32(i))
	}
	req.Topics = append(req.Topics, rt)
	r := h.s.FetchOffsets(&req, requireStable)
	var offs []int64
	var codes []int16
	for _, p := range r.Topics[0].Partitions {
		offs = append(offs, p.Offset)
		codes = append(codes, p.ErrorCode)
	}
	return offs, codes
}

func (h *harness) wantOffsets(group string, want ...int64) {
	h.t.Helper()
	got, _ := h.fetched(group, len(want), false)
	for i := range want {
		if got[i] != want[i] {
			h.t.Fatalf("group %s offsets %v, want %v", group, got, want)
		}
	}
}

// Members commit with their generation; commits from an unknown member, an old
// generation, or a member id with no generation are refused and change nothing.
func TestCommitFencing(t *testing.T) {
	h := newHarness(t, testConfig())
	ids := h.stableGroup("g", "a", "b")
	wantCommit(t, "member commit", h.commit("g", []int64{10, 20}, commitAs(ids[0], 1)), nil)
	h.wantOffsets("g", 10, 20)
	records := len(h.log)

	wantCommit(t, "unknown member", h.commit("g", []int64{99, 99}, commitAs("ghost", 1)), kerr.UnknownMemberID)
	wantCommit(t, "old generation", h.commit("g", []int64{99, 99}, commitAs(ids[1], 0)), kerr.IllegalGeneration)
	wantCommit(t, "simple commit to a group with members", h.commit("g", []int64{99, 99}, commitAs("", -1)), kerr.UnknownMemberID)
	inst := "i"
	wantCommit(t, "unknown instance", h.commit("g", []int64{99, 99}, commitAs(ids[0], 1), func(r *kmsg.OffsetCommitRequest) { r.InstanceID = &inst }), kerr.UnknownMemberID)
	h.wantOffsets("g", 10, 20)
	if len(h.log) != records {
		t.Fatal("a refused commit wrote records")
	}

	// During a rebalance: PreparingRebalance still accepts the current generation;
	// CompletingRebalance asks the member to finish syncing first.
	h.join("g", ids[0], "a")
	h.wantState("g", PreparingRebalance)
	wantCommit(t, "commit while preparing", h.commit("g", []int64{11, 21}, commitAs(ids[1], 1)), nil)
	h.join("g", ids[1], "b")
	h.wantState("g", CompletingRebalance)
	wantCommit(t, "commit while completing", h.commit("g", []int64{12, 22}, commitAs(ids[1], 2)), kerr.RebalanceInProgress)
	h.wantOffsets("g", 11, 21)
}

// Commits with generation -1 create a simple group (offsets only), accepted while the
// group has no members; a commit naming a generation to an unknown group is refused
// (ILLEGAL_GENERATION before v9, GROUP_ID_NOT_FOUND from v9).
func TestSimpleCommits(t *testing.T) {
	h := newHarness(t, testConfig())
	wantCommit(t, "simple commit v0", h.commit("simple", []int64{5}, commitVersion(0)), nil)
	h.wantOffsets("simple", 5)
	if g := h.group("simple"); g.state != Empty || g.protocolType != "" {
		t.Fatalf("simple group %v %q", g.state, g.protocolType)
	}
	wantCommit(t, "v8 with a generation", h.commit("nope", []int64{1}, commitAs("m", 3), commitVersion(8)), kerr.IllegalGeneration)
	wantCommit(t, "v9 with a generation", h.commit("nope", []int64{1}, commitAs("m", 3)), kerr.GroupIDNotFound)
	if h.s.groups["nope"] != nil {
		t.Fatal("a refused commit created a group")
	}
	// An empty consumer group (all members left) accepts simple commits too.
	ids := h.stableGroup("g", "a")
	h.leave("g", 3, kmsg.LeaveGroupRequestMember{MemberID: ids[0]})
	h.wantState("g", Empty)
	wantCommit(t, "simple commit to an empty group", h.commit("g", []int64{42}), nil)
	h.wantOffsets("g", 42)
}

// Metadata larger than offset.metadata.max.bytes is refused for that partition only.
func TestCommitMetadataTooLarge(t *testing.T) {
	cfg := testConfig()
	cfg.MaxMetadataBytes = 4
	h := newHarness(t, cfg)
	r := h.commit("s", []int64{1, 2}, func(r *kmsg.OffsetCommitRequest) {
		big := "too long"
		r.Topics[0].Partitions[1].Metadata = &big
	})
	if c := commitCodes(r); c[0] != 0 || c[1] != kerr.OffsetMetadataTooLarge.Code {
		t.Fatalf("codes %v", c)
	}
	h.wantOffsets("s", 1, -1)
}

// A commit is acknowledged only once its records are appended: a failed append answers
// the mapped error and applies nothing; while the append is in flight, a require_stable
// fetch answers UNSTABLE_OFFSET_COMMIT.
func TestCommitWaitsForAppend(t *testing.T) {
	h := newHarness(t, testConfig())
	h.failing = kerr.NotLeaderForPartition
	wantCommit(t, "failed append", h.commit("s", []int64{1}), kerr.NotCoordinator)
	h.failing = kerr.MessageTooLarge
	wantCommit(t, "too large", h.commit("s", []int64{1}), kerr.InvalidCommitOffsetSize)
	h.failing = nil
	h.wantOffsets("s", -1)

	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 9
	req.Group = "s"
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 8, LeaderEpoch: -1, Timestamp: -1}}}}
	rd := h.s.CommitOffsets(h.now, "parked-commit", req) // not run: the write stays in flight
	if len(rd.Replies) != 0 || len(rd.Writes) != 1 {
		t.Fatalf("commit answered before its write: %+v", rd)
	}
	if _, codes := h.fetched("s", 1, true); codes[0] != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("require_stable fetch during the write: %v", codes)
	}
	if offs, codes := h.fetched("s", 1, false); offs[0] != -1 || codes[0] != 0 {
		t.Fatalf("fetch during the write: %v %v", offs, codes)
	}
	h.run(rd)
	if r := h.reply("parked-commit").(*kmsg.OffsetCommitResponse); commitCodes(r)[0] != 0 {
		t.Fatalf("commit: %+v", r)
	}
	h.wantOffsets("s", 8)
}

// Fetching every offset (null topics) lists committed partitions in order, with leader
// epoch and metadata; an unknown group has none.
func TestFetchAllOffsets(t *testing.T) {
	h := newHarness(t, testConfig())
	h.commit("s", []int64{3, 4})
	r := h.s.FetchOffsets(&kmsg.OffsetFetchRequestGroup{Group: "s"}, false)
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 2 {
		t.Fatalf("fetch all: %+v", r)
	}
	p := r.Topics[0].Partitions[1]
	if p.Offset != 4 || p.LeaderEpoch != 7 || *p.Metadata != "md" {
		t.Fatalf("partition 1: %+v", p)
	}
	if r := h.s.FetchOffsets(&kmsg.OffsetFetchRequestGroup{Group: "unknown"}, false); len(r.Topics) != 0 || r.ErrorCode != 0 {
		t.Fatalf("unknown group: %+v", r)
	}
}

func (h *harness) deleteOffsets(group string, parts ...int32) *kmsg.OffsetDeleteResponse {
	h.t.Helper()
	req := kmsg.NewPtrOffsetDeleteRequest()
	req.Group = group
	rt := kmsg.OffsetDeleteRequestTopic{Topic: "t"}
	for _, p := range parts {
		rt.Partitions = append(rt.Partitions, kmsg.OffsetDeleteRequestTopicPartition{Partition: p})
	}
	req.Topics = append(req.Topics, rt)
	w := h.waiter("offset-delete")
	h.run(h.s.DeleteOffsets(h.now, w, req))
	return h.reply(w).(*kmsg.OffsetDeleteResponse)
}

// OffsetDelete: refused for topics the group's consumers subscribe to, allowed otherwise
// and for empty groups, GROUP_ID_NOT_FOUND for unknown groups; tombstones are written.
func TestOffsetDelete(t *testing.T) {
	h := newHarness(t, testConfig())
	ids := h.stableGroup("g", "a") // subscribes to topic "t"
	h.commit("g", []int64{1, 2}, commitAs(ids[0], 1))
	r := h.deleteOffsets("g", 0)
	wantCode(t, "subscribed topic", r.Topics[0].Partitions[0].ErrorCode, kerr.GroupSubscribedToTopic)
	h.wantOffsets("g", 1, 2)
	wantCode(t, "unknown group", h.deleteOffsets("nope", 0).ErrorCode, kerr.GroupIDNotFound)

	h.leave("g", 3, kmsg.LeaveGroupRequestMember{MemberID: ids[0]})
	n := len(h.log)
	r = h.deleteOffsets("g", 0)
	if r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("delete from empty group: %+v", r)
	}
	h.wantOffsets("g", -1, 2)
	if len(h.log) != n+1 || h.log[n].Value != nil {
		t.Fatal("no tombstone written")
	}
}

// DeleteGroups deletes empty groups with their offsets (tombstones for each), refuses
// groups with members, and reports unknown ones.
func TestDeleteGroups(t *testing.T) {
	h := newHarness(t, testConfig())
	h.commit("s", []int64{1, 2})
	h.stableGroup("busy", "a")
	w := h.waiter("delete")
	h.run(h.s.DeleteGroups(h.now, w, []string{"s", "busy", "nope"}))
	r := h.reply(w).(*kmsg.DeleteGroupsResponse)
	if r.Groups[0].ErrorCode != 0 || r.Groups[1].ErrorCode != kerr.NonEmptyGroup.Code || r.Groups[2].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("delete groups: %+v", r)
	}
	if h.s.groups["s"] != nil {
		t.Fatal("deleted group still there")
	}
	tail := h.log[len(h.log)-3:]
	for _, rec := range tail {
		if rec.Value != nil {
			t.Fatal("expected three tombstones (two offsets, the group)")
		}
	}
	h.wantOffsets("s", -1, -1)
}

// offsets.retention.minutes: an empty group's offsets expire once the retention has passed
// since it became empty, then the group itself is deleted; a simple group's offsets
// expire by commit time; a Stable group keeps the offsets of topics it subscribes to.
func TestOffsetExpiry(t *testing.T) {
	cfg := testConfig()
	cfg.OffsetsRetentionMs = 60000
	cfg.OffsetsRetentionCheckMs = 10000
	h := newHarness(t, cfg)
	h.commit("simple", []int64{1})
	ids := h.stableGroup("g", "a")
	h.commit("g", []int64{5}, commitAs(ids[0], 1))
	// A commit to another topic, which the group does not subscribe to.
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.MemberID, req.Generation = 9, "g", ids[0], 1
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "other", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Offset: 9, LeaderEpoch: -1, Timestamp: -1}}}}
	h.run(h.s.CommitOffsets(h.now, "c-other", req))
	for i := 0; i < 14; i++ { // 70 s, heartbeating
		h.advance(5000)
		wantCode(t, "heartbeat", h.heartbeat("g", ids[0], 1, nil), nil)
	}
	if h.s.groups["simple"] != nil {
		t.Fatal("simple group not expired with its offsets")
	}
	h.wantOffsets("g", 5)
	all := h.s.FetchOffsets(&kmsg.OffsetFetchRequestGroup{Group: "g"}, false)
	if len(all.Topics) != 1 || all.Topics[0].Topic != "t" {
		t.Fatalf("the offset of the unsubscribed topic did not expire: %+v", all.Topics)
	}
	if r := h.leave("g", 3, kmsg.LeaveGroupRequestMember{MemberID: ids[0]}); r.Members[0].ErrorCode != 0 {
		t.Fatalf("leave: %+v", r)
	}
	h.advance(50000)
	h.wantOffsets("g", 5) // empty for 50 s: kept
	h.advance(20000)
	if h.s.groups["g"] != nil {
		t.Fatal("empty group not deleted after its offsets expired")
	}
	// v2-v4's retention time gives the offset its own expiry.
	h.commit("r", []int64{1}, commitVersion(2), commitRetention(15000))
	h.advance(10000)
	h.wantOffsets("r", 1)
	h.advance(10000)
	h.wantOffsets("r", -1)
}

func TestDescribeAndListGroups(t *testing.T) {
	h := newHarness(t, testConfig())
	ids := h.stableGroup("g", "a", "b")
	h.commit("simple", []int64{1})
	d := h.s.DescribeGroup("g")
	if d.State != "Stable" || d.Protocol != "range" || d.ProtocolType != "consumer" || len(d.Members) != 2 ||
		d.Members[0].MemberID != ids[0] || string(d.Members[1].MemberAssignment) != "a-"+ids[1] || d.Members[0].ClientHost != "/127.0.0.1" {
		t.Fatalf("describe: %+v", d)
	}
	if d := h.s.DescribeGroup("nope"); d.State != "Dead" || d.ErrorCode != 0 {
		t.Fatalf("describe unknown: %+v", d)
	}
	h.join("g", ids[0], "a")
	if d := h.s.DescribeGroup("g"); d.State != "PreparingRebalance" || d.Protocol != "" || len(d.Members[0].MemberAssignment) != 0 {
		t.Fatalf("describe while rebalancing: %+v", d)
	}
	all := h.s.ListGroups(nil, nil)
	if len(all) != 2 || all[0].Group != "g" || all[1].Group != "simple" || all[1].GroupState != "Empty" || all[0].GroupType != "classic" {
		t.Fatalf("list: %+v", all)
	}
	if l := h.s.ListGroups([]string{"empty"}, nil); len(l) != 1 || l[0].Group != "simple" {
		t.Fatalf("list empty: %+v", l)
	}
	if l := h.s.ListGroups(nil, []string{"consumer"}); len(l) != 0 {
		t.Fatalf("list consumer-protocol groups: %+v", l)
	}
}
