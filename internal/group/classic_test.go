package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// stableGroup forms group g with the given clients (joined together, leader first) and
// returns their member ids; the group is Stable at generation 1 with assignment "a-<id>".
func (h *harness) stableGroup(g string, clients ...string) []string {
	h.t.Helper()
	var ws []Waiter
	var ids []string
	for _, c := range clients {
		w, id := h.joinNew(g, c)
		ws, ids = append(ws, w), append(ids, id)
	}
	h.advanceUntil(ws[0])
	leader := h.joinResp(ws[0])
	if leader.ErrorCode != 0 || leader.LeaderID != ids[0] || len(leader.Members) != len(ids) {
		h.t.Fatalf("leader join: %+v", leader)
	}
	assign := map[string]string{}
	var syncs []Waiter
	for _, id := range ids {
		assign[id] = "a-" + id
	}
	for i := len(ids) - 1; i >= 0; i-- { // followers first: they park until the leader syncs
		var a map[string]string
		if i == 0 {
			a = assign
		}
		syncs = append(syncs, h.sync(g, ids[i], leader.Generation, a))
	}
	for i, w := range syncs {
		id := ids[len(ids)-1-i]
		if r := h.syncResp(w); r.ErrorCode != 0 || string(r.MemberAssignment) != "a-"+id {
			h.t.Fatalf("sync of %s: %+v", id, r)
		}
	}
	h.wantState(g, Stable)
	return ids
}

// A new dynamic member is first answered MEMBER_ID_REQUIRED (v4+), then its join waits out
// group.initial.rebalance.delay.ms, becomes leader of generation 1, and the leader's
// SyncGroup makes the group Stable after the group record is written.
func TestFirstJoinWaitsInitialDelay(t *testing.T) {
	h := newHarness(t, testConfig())
	w := h.join("g", "", "c1")
	r := h.joinResp(w)
	wantCode(t, "first join", r.ErrorCode, kerr.MemberIDRequired)
	if r.MemberID != "c1-1" {
		t.Fatalf("member id %q", r.MemberID)
	}
	w = h.join("g", r.MemberID, "c1")
	h.wantState("g", PreparingRebalance)
	h.advance(2999)
	if h.reply(w) != nil {
		t.Fatal("join answered before the initial delay passed")
	}
	h.advance(1)
	r = h.joinResp(w)
	if r.ErrorCode != 0 || r.Generation != 1 || r.LeaderID != "c1-1" || *r.Protocol != "range" || *r.ProtocolType != "consumer" || len(r.Members) != 1 {
		t.Fatalf("join: %+v", r)
	}
	h.wantState("g", CompletingRebalance)
	if len(h.log) != 0 {
		t.Fatalf("%d records before the leader synced", len(h.log))
	}
	s := h.sync("g", "c1-1", 1, map[string]string{"c1-1": "mine"})
	if sr := h.syncResp(s); sr.ErrorCode != 0 || string(sr.MemberAssignment) != "mine" {
		t.Fatalf("sync: %+v", sr)
	}
	h.wantState("g", Stable)
	if len(h.log) != 1 {
		t.Fatalf("%d records after sync, want the group record", len(h.log))
	}
	var v kmsg.GroupMetadataValue
	if err := v.ReadFrom(h.log[0].Value); err != nil || v.Generation != 1 || len(v.Members) != 1 || string(v.Members[0].Assignment) != "mine" {
		t.Fatalf("group record: %+v %v", v, err)
	}
}

// Members joining during the initial delay extend it by another delay each time, up to
// the rebalance timeout; all of them are in generation 1.
func TestInitialDelayExtendsForNewMembers(t *testing.T) {
	cfg := testConfig()
	h := newHarness(t, cfg)
	a, _ := h.joinNew("g", "a", withTimeouts(10000, 10000))
	h.advance(2000)
	b, _ := h.joinNew("g", "b", withTimeouts(10000, 10000))
	h.advance(1000) // t=3000: first delay over, a member was added: wait 3000 more
	if h.reply(a) != nil || h.reply(b) != nil {
		t.Fatal("joins answered at the end of the first delay although a member arrived")
	}
	h.advance(3000) // t=6000: no new member: complete
	ra, rb := h.joinResp(a), h.joinResp(b)
	if ra.Generation != 1 || rb.Generation != 1 || len(ra.Members) != 2 || rb.Members != nil {
		t.Fatalf("a %+v b %+v", ra, rb)
	}
}

// Versions before 4 join at once without MEMBER_ID_REQUIRED; v0 uses the session timeout
// as the rebalance timeout.
func TestOldJoinVersions(t *testing.T) {
	h := newHarness(t, testConfig())
	w := h.join("g", "", "old", withVersion(0))
	h.advance(3000)
	r := h.joinResp(w)
	if r.ErrorCode != 0 || r.MemberID != "old-1" {
		t.Fatalf("v0 join: %+v", r)
	}
	if m := h.group("g").members["old-1"]; m.RebalanceTimeoutMs != m.SessionTimeoutMs {
		t.Fatalf("v0 rebalance timeout %d, session %d", m.RebalanceTimeoutMs, m.SessionTimeoutMs)
	}
}

// A member joining a Stable group starts a rebalance: the others learn it from their
// heartbeat (REBALANCE_IN_PROGRESS) and rejoin; once all have, generation 2 forms at once.
func TestJoinRebalancesStableGroup(t *testing.T) {
	h := newHarness(t, testConfig())
	ids := h.stableGroup("g", "a", "b")
	c, cid := h.joinNew("g", "c")
	h.wantState("g", PreparingRebalance)
	wantCode(t, "heartbeat a", h.heartbeat("g", ids[0], 1, nil), kerr.RebalanceInProgress)
	wa := h.join("g", ids[0], "a")
	if h.reply(c) != nil {
		t.Fatal("join phase ended before b rejoined")
	}
	wb := h.join("g", ids[1], "b")
	ra, rb, rc := h.joinResp(wa), h.joinResp(wb), h.joinResp(c)
	for _, r := range []*kmsg.JoinGroupResponse{ra, rb, rc} {
		if r.ErrorCode != 0 || r.Generation != 2 || r.LeaderID != ids[0] {
			t.Fatalf("join: %+v", r)
		}
	}
	if len(ra.Members) != 3 || rb.Members != nil || rc.Members != nil {
		t.Fatal("only the leader gets the member list")
	}
	// Syncs of the old generation are fenced; the new one completes.
	wantCode(t, "sync old generation", h.syncResp(h.sync("g", ids[1], 1, nil)).ErrorCode, kerr.IllegalGeneration)
	sc := h.sync("g", cid, 2, nil)
	sa := h.sync("g", ids[0], 2, map[string]string{ids[0]: "x", cid: "z"})
	if string(h.syncResp(sc).MemberAssignment) != "z" || string(h.syncResp(sa).MemberAssignment) != "x" {
		t.Fatal("wrong assignments")
	}
	h.wantState("g", Stable)
	// b was left out by the leader: it gets an empty assignment.
	if r := h.syncResp(h.sync("g", ids[1], 2, nil)); r.ErrorCode != 0 || len(r.MemberAssignment) != 0 {
		t.Fatalf("b sync: %+v", r)
	}
}

// Members that do not rejoin within the rebalance timeout are removed from the generation.
func TestRebalanceTimeoutRemovesMembersThatDidNotRejoin(t *testing.T) {
	h := newHarness(t, testConfig())
	ids := h.stableGroup("g", "a", "b")
	c, cid := h.joinNew("g", "c")
	wa := h.join("g", ids[0], "a")
	for i := 0; i < 3; i++ { // b keeps heartbeating but never rejoins
		h.advance(9000)
		wantCode(t, "heartbeat b during the join phase", h.heartbeat("g", ids[1], 1, nil), kerr.RebalanceInProgress)
	}
	h.advance(2999)
	if h.reply(wa) != nil {
		t.Fatal("answered before the rebalance timeout")
	}
	h.advance(1)
	ra, rc := h.joinResp(wa), h.joinResp(c)
	if ra.Generation != 2 || len(ra.Members) != 2 || rc.ErrorCode != 0 {
		t.Fatalf("a %+v c %+v", ra, rc)
	}
	if h.group("g").members[ids[1]] != nil {
		t.Fatal("b still a member")
	}
	wantCode(t, "heartbeat of removed b", h.heartbeat("g", ids[1], 2, nil), kerr.UnknownMemberID)
	_ = cid
}

// A member that stops heartbeating is removed after its session timeout and the group
// rebalances; one that keeps heartbeating stays.
func TestSessionTimeoutExpiresSilentMember(t *testing.T) {
	h := newHarness(t, testConfig())
	ids := h.stableGroup("g", "a", "b")
	for i := 0; i < 3; i++ {
		h.advance(3000)
		wantCode(t, "heartbeat a", h.heartbeat("g", ids[0], 1, nil), nil)
	}
	h.advance(999)
	h.wantState("g", Stable)
	h.advance(1) // 10 s since the syncs: b's session expires
	h.wantState("g", PreparingRebalance)
	wantCode(t, "heartbeat a", h.heartbeat("g", ids[0], 1, nil), kerr.RebalanceInProgress)
	if h.group("g").members[ids[1]] != nil {
		t.Fatal("b not removed")
	}
	w := h.join("g", ids[0], "a")
	if r := h.joinResp(w); r.Generation != 2 || len(r.Members) != 1 {
		t.Fatalf("rejoin: %+v", r)
	}
}

// Members parked in JoinGroup are not expired by their session timeout (the rebalance
// timeout bounds them); a new member's first join is bounded by NewMemberJoinTimeoutMs.
func TestParkedMembersAndNewMemberJoinTimeout(t *testing.T) {
	h := newHarness(t, testConfig())
	ids := h.stableGroup("g", "a", "b")
	h.s.cfg.NewMemberJoinTimeoutMs = 5000
	wa := h.join("g", ids[0], "a", withTimeouts(2000, 60000))
	nw, _ := h.joinNew("g", "n", withTimeouts(10000, 60000))
	h.advance(5000)
	if r := h.joinResp(nw); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("new member after NewMemberJoinTimeoutMs: %+v", r)
	}
	if h.reply(wa) != nil || h.group("g").members[ids[0]] == nil {
		t.Fatal("a, parked in JoinGroup past its 2 s session timeout, was expired")
	}
}

func TestHeartbeatErrors(t *testing.T) {
	h := newHarness(t, testConfig())
	ids := h.stableGroup("g", "a")
	wantCode(t, "ok", h.heartbeat("g", ids[0], 1, nil), nil)
	wantCode(t, "unknown member", h.heartbeat("g", "nobody", 1, nil), kerr.UnknownMemberID)
	wantCode(t, "old generation", h.heartbeat("g", ids[0], 0, nil), kerr.IllegalGeneration)
	wantCode(t, "unknown group", h.heartbeat("nope", ids[0], 1, nil), kerr.UnknownMemberID)
	wantCode(t, "empty group id", h.heartbeat("", ids[0], 1, nil), kerr.InvalidGroupID)
	inst := "i"
	wantCode(t, "unknown instance", h.heartbeat("g", ids[0], 1, &inst), kerr.UnknownMemberID)
}

func TestJoinValidation(t *testing.T) {
	cfg := testConfig()
	cfg.MaxSize = 2
	h := newHarness(t, cfg)
	wantCode(t, "session below min", h.joinResp(h.join("g", "", "a", withTimeouts(999, 1000))).ErrorCode, kerr.InvalidSessionTimeout)
	wantCode(t, "session above max", h.joinResp(h.join("g", "", "a", withTimeouts(60001, 1000))).ErrorCode, kerr.InvalidSessionTimeout)
	wantCode(t, "empty group id", h.joinResp(h.join("", "", "a")).ErrorCode, kerr.InvalidGroupID)
	wantCode(t, "unknown member id", h.joinResp(h.join("g", "ghost", "a")).ErrorCode, kerr.UnknownMemberID)
	wantCode(t, "no protocol type", h.joinResp(h.join("g", "", "a", withProtocolType(""))).ErrorCode, kerr.InconsistentGroupProtocol)
	ids := h.stableGroup("g", "a", "b")
	wantCode(t, "third member over group.max.size", h.joinResp(h.join("g", "", "c")).ErrorCode, kerr.GroupMaxSizeReached)
	wantCode(t, "other protocol type", h.joinResp(h.join("g", ids[0], "a", withProtocolType("connect"))).ErrorCode, kerr.InconsistentGroupProtocol)
	wantCode(t, "unsupported protocol", h.joinResp(h.join("g", ids[0], "a", withProtocols("sticky"))).ErrorCode, kerr.InconsistentGroupProtocol)
	h.wantState("g", Stable)
}

// The protocol is the one every member supports that most members prefer.
func TestProtocolSelectionByVote(t *testing.T) {
	h := newHarness(t, testConfig())
	a, _ := h.joinNew("g", "a", withProtocols("roundrobin", "range"))
	b, _ := h.joinNew("g", "b", withProtocols("roundrobin", "range"))
	c, _ := h.joinNew("g", "c", withProtocols("range", "roundrobin"))
	h.advanceUntil(a)
	for _, w := range []Waiter{a, b, c} {
		if p := *h.joinResp(w).Protocol; p != "roundrobin" {
			t.Fatalf("protocol %s, want roundrobin (2 votes to 1)", p)
		}
	}
	h2 := newHarness(t, testConfig())
	a, _ = h2.joinNew("g", "a", withProtocols("roundrobin", "range"))
	b, _ = h2.joinNew("g", "b", withProtocols("cooperative-sticky", "range"))
	h2.advanceUntil(a)
	if p := *h2.joinResp(a).Protocol; p != "range" {
		t.Fatalf("protocol %s, want range (the only one both support)", p)
	}
	_ = b
}

// A follower's SyncGroup waits for the leader's; a rebalance meanwhile fails it with
// REBALANCE_IN_PROGRESS; a SyncGroup during the join phase is refused the same way.
func TestSyncGroupWaitsForLeader(t *testing.T) {
	h := newHarness(t, testConfig())
	a, aid := h.joinNew("g", "a")
	b, bid := h.joinNew("g", "b")
	h.advanceUntil(a)
	gen := h.joinResp(a).Generation
	_ = h.joinResp(b)
	sb := h.sync("g", bid, gen, nil)
	if h.reply(sb) != nil {
		t.Fatal("follower sync answered before the leader's")
	}
	wantCode(t, "heartbeat while completing", h.heartbeat("g", bid, gen, nil), nil)
	// A third member joins before the leader syncs: the parked sync is failed.
	c, _ := h.joinNew("g", "c")
	wantCode(t, "parked sync after a join", h.syncResp(sb).ErrorCode, kerr.RebalanceInProgress)
	wantCode(t, "sync while preparing", h.syncResp(h.sync("g", aid, gen, nil)).ErrorCode, kerr.RebalanceInProgress)
	wantCode(t, "sync of unknown member", h.syncResp(h.sync("g", "ghost", gen, nil)).ErrorCode, kerr.UnknownMemberID)
	_ = c
}

// A member rejoining with unchanged metadata in CompletingRebalance (its JoinGroup answer
// was lost) gets the same answer again; a follower rejoining a Stable group unchanged gets
// the current generation without a rebalance; the leader rejoining forces one.
func TestRejoinWithoutChange(t *testing.T) {
	h := newHarness(t, testConfig())
	a, aid := h.joinNew("g", "a")
	b, bid := h.joinNew("g", "b")
	h.advanceUntil(a)
	ra := h.joinResp(a)
	_ = h.joinResp(b)
	again := h.joinResp(h.join("g", aid, "a"))
	if again.Generation != ra.Generation || len(again.Members) != 2 || again.LeaderID != aid {
		t.Fatalf("repeated join: %+v", again)
	}
	h.wantState("g", CompletingRebalance)
	sb := h.sync("g", bid, ra.Generation, nil)
	h.sync("g", aid, ra.Generation, map[string]string{aid: "1", bid: "2"})
	_ = h.syncResp(sb)
	h.wantState("g", Stable)
	if r := h.joinResp(h.join("g", bid, "b")); r.ErrorCode != 0 || r.Generation != ra.Generation {
		t.Fatalf("follower rejoin: %+v", r)
	}
	h.wantState("g", Stable)
	w := h.join("g", aid, "a")
	h.wantState("g", PreparingRebalance)
	if h.reply(w) != nil {
		t.Fatal("leader rejoin answered before b rejoined")
	}
}

// LeaveGroup v3+ removes a batch of members at once (unknown ones get UNKNOWN_MEMBER_ID);
// v0-v2 report the single member's error at the top level. The last member leaving makes
// the group Empty at a new generation, which is persisted.
func TestLeaveGroup(t *testing.T) {
	h := newHarness(t, testConfig())
	ids := h.stableGroup("g", "a", "b", "c")
	r := h.leave("g", 5,
		kmsg.LeaveGroupRequestMember{MemberID: ids[1]},
		kmsg.LeaveGroupRequestMember{MemberID: "ghost"},
		kmsg.LeaveGroupRequestMember{MemberID: ids[2]})
	if r.ErrorCode != 0 || len(r.Members) != 3 || r.Members[0].ErrorCode != 0 || r.Members[1].ErrorCode != kerr.UnknownMemberID.Code || r.Members[2].ErrorCode != 0 {
		t.Fatalf("batched leave: %+v", r)
	}
	h.wantState("g", PreparingRebalance)
	wantCode(t, "v0 leave of unknown", h.leave("g", 0, kmsg.LeaveGroupRequestMember{MemberID: "ghost"}).ErrorCode, kerr.UnknownMemberID)
	before := len(h.log)
	wantCode(t, "v0 leave", h.leave("g", 0, kmsg.LeaveGroupRequestMember{MemberID: ids[0]}).ErrorCode, nil)
	h.wantState("g", Empty)
	g := h.group("g")
	if g.generation != 2 || g.leader != "" || len(h.log) != before+1 {
		t.Fatalf("generation %d leader %q records %d", g.generation, g.leader, len(h.log)-before)
	}
	var v kmsg.GroupMetadataValue
	if err := v.ReadFrom(h.log[len(h.log)-1].Value); err != nil || len(v.Members) != 0 || v.Generation != 2 || v.Protocol != nil {
		t.Fatalf("empty group record: %+v %v", v, err)
	}
	wantCode(t, "leave of unknown group", h.leave("nope", 3, kmsg.LeaveGroupRequestMember{MemberID: "x"}).Members[0].ErrorCode, kerr.UnknownMemberID)
}

// A pending member id (MEMBER_ID_REQUIRED) holds up the join phase until it joins or its
// session timeout passes; leaving with it releases it at once.
func TestPendingMemberIDs(t *testing.T) {
	h := newHarness(t, testConfig())
	ids := h.stableGroup("g", "a")
	w := h.join("g", "", "late")
	pending := h.joinResp(w).MemberID
	wa := h.join("g", ids[0], "a") // leader rejoins: rebalance, but a pending id is outstanding
	if h.reply(wa) != nil {
		t.Fatal("join phase ended with a pending member outstanding")
	}
	h.advance(10000) // the pending id's session timeout
	if r := h.joinResp(wa); r.Generation != 2 || len(r.Members) != 1 {
		t.Fatalf("after pending expiry: %+v", r)
	}
	// Leaving by a pending id is accepted.
	w = h.join("g", "", "late2")
	p2 := h.joinResp(w).MemberID
	if r := h.leave("g", 3, kmsg.LeaveGroupRequestMember{MemberID: p2}); r.Members[0].ErrorCode != 0 {
		t.Fatalf("leave of pending id: %+v", r)
	}
	_ = pending
}

// A member of a new generation that never sends SyncGroup is removed after the rebalance
// timeout, and the group rebalances.
func TestPendingSyncExpiry(t *testing.T) {
	h := newHarness(t, testConfig())
	a, aid := h.joinNew("g", "a")
	b, bid := h.joinNew("g", "b")
	h.advanceUntil(a)
	gen := h.joinResp(a).Generation
	_ = h.joinResp(b)
	h.sync("g", aid, gen, map[string]string{aid: "x", bid: "y"})
	h.wantState("g", Stable)
	for i := 0; i < 3; i++ {
		h.advance(9000)
		wantCode(t, "heartbeat a", h.heartbeat("g", aid, gen, nil), nil)
		wantCode(t, "heartbeat b (never synced)", h.heartbeat("g", bid, gen, nil), nil)
	}
	h.advance(2999)
	h.wantState("g", Stable)
	h.advance(1) // rebalance timeout (30 s) since the join completed
	h.wantState("g", PreparingRebalance)
	if h.group("g").members[bid] != nil {
		t.Fatal("b, which never synced, is still a member")
	}
}

// A static member rejoining with an unknown member id takes over its instance's member id:
// the old id is fenced, a Stable group does not rebalance (the new id is persisted), and
// pre-v9 clients are told the old leader id so they do not assign.
func TestStaticMemberReplacement(t *testing.T) {
	h := newHarness(t, testConfig())
	w := h.join("g", "", "a", withInstance("inst-a")) // static: no MEMBER_ID_REQUIRED
	h.advance(3000)
	r := h.joinResp(w)
	old := r.MemberID
	if r.ErrorCode != 0 || old != "inst-a-1" {
		t.Fatalf("static join: %+v", r)
	}
	h.sync("g", old, 1, map[string]string{old: "p0"})
	h.wantState("g", Stable)
	records := len(h.log)

	w = h.join("g", "", "a", withInstance("inst-a"), withVersion(8))
	r = h.joinResp(w)
	if r.ErrorCode != 0 || r.MemberID == old || r.Generation != 1 || r.LeaderID != old || r.Members != nil {
		t.Fatalf("static rejoin (v8): %+v", r)
	}
	h.wantState("g", Stable)
	if len(h.log) != records+1 {
		t.Fatal("the new member id was not persisted")
	}
	inst := "inst-a"
	wantCode(t, "old id fenced", h.heartbeat("g", old, 1, &inst), kerr.FencedInstanceID)
	wantCode(t, "new id", h.heartbeat("g", r.MemberID, 1, &inst), nil)
	if sr := h.syncResp(h.sync("g", r.MemberID, 1, nil)); string(sr.MemberAssignment) != "p0" {
		t.Fatalf("the instance kept its assignment? %+v", sr)
	}

	// v9: the leader is told it leads but must skip assignment.
	w = h.join("g", "", "a", withInstance("inst-a"))
	r = h.joinResp(w)
	if r.ErrorCode != 0 || !r.SkipAssignment || r.LeaderID != r.MemberID || len(r.Members) != 1 {
		t.Fatalf("static rejoin (v9): %+v", r)
	}

	// A write failure undoes the replacement.
	cur := r.MemberID
	h.failing = kerr.NotLeaderForPartition
	r = h.joinResp(h.join("g", "", "a", withInstance("inst-a")))
	h.failing = nil
	wantCode(t, "failed static rejoin", r.ErrorCode, kerr.NotCoordinator)
	wantCode(t, "replaced id restored", h.heartbeat("g", cur, 1, &inst), nil)
}

// Static members that do not rejoin are kept through the rebalance (their session timeout
// decides), unlike dynamic ones; LeaveGroup by instance id alone removes one.
func TestStaticMembersSurviveRebalance(t *testing.T) {
	h := newHarness(t, testConfig())
	ws := h.join("g", "", "s", withInstance("i-s"), withTimeouts(50000, 30000))
	wd, did := h.joinNew("g", "d")
	h.advanceUntil(ws)
	sid := h.joinResp(ws).MemberID
	_ = h.joinResp(wd)
	h.sync("g", sid, 1, map[string]string{sid: "1", did: "2"})
	h.sync("g", did, 1, nil)
	h.wantState("g", Stable)
	wd = h.join("g", did, "d", withProtocols("range", "roundrobin")) // new metadata: rebalance
	h.advance(30000)                                                 // s never rejoins
	r := h.joinResp(wd)
	if r.Generation != 2 || h.group("g").members[sid] == nil {
		t.Fatalf("static member dropped by the rebalance timeout: %+v", r)
	}
	inst := "i-s"
	lr := h.leave("g", 3, kmsg.LeaveGroupRequestMember{InstanceID: &inst})
	if lr.Members[0].ErrorCode != 0 || h.group("g").members[sid] != nil {
		t.Fatalf("leave by instance id: %+v", lr)
	}
}

// Unloading answers parked requests with NOT_COORDINATOR.
func TestUnloadAnswersParkedRequests(t *testing.T) {
	h := newHarness(t, testConfig())
	w, _ := h.joinNew("g", "a")
	h.run(h.s.Unload(h.now))
	wantCode(t, "parked join", h.joinResp(w).ErrorCode, kerr.NotCoordinator)
	if h.s.NumGroups() != 0 {
		t.Fatal("groups left after unload")
	}
}

// A failed group write during the leader's sync fails every parked sync and rebalances.
func TestSyncWriteFailure(t *testing.T) {
	h := newHarness(t, testConfig())
	a, aid := h.joinNew("g", "a")
	b, bid := h.joinNew("g", "b")
	h.advanceUntil(a)
	_, _ = h.joinResp(a), h.joinResp(b)
	sb := h.sync("g", bid, 1, nil)
	h.failing = kerr.KafkaStorageError
	sa := h.sync("g", aid, 1, map[string]string{aid: "1", bid: "2"})
	h.failing = nil
	wantCode(t, "leader sync", h.syncResp(sa).ErrorCode, kerr.NotCoordinator)
	wantCode(t, "follower sync", h.syncResp(sb).ErrorCode, kerr.NotCoordinator)
	h.wantState("g", PreparingRebalance)
}
