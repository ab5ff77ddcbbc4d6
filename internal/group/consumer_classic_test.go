package group

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// classicSub is a consumer protocol v1 subscription to topic t owning partitions of t.
func classicSub(owned ...int32) []byte {
	s := kmsg.ConsumerMemberMetadata{Version: 1, Topics: []string{"t"}}
	if len(owned) > 0 {
		s.OwnedPartitions = []kmsg.ConsumerMemberMetadataOwnedPartition{{Topic: "t", Partitions: owned}}
	}
	return s.AppendTo(nil)
}

func withSub(b []byte) joinOpt {
	return func(r *kmsg.JoinGroupRequest) {
		r.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "cooperative-sticky", Metadata: b}}
	}
}

// syncedParts decodes a SyncGroup answer's consumer protocol assignment of topic t.
func syncedParts(t *testing.T, r *kmsg.SyncGroupResponse) []int32 {
	t.Helper()
	if r.ErrorCode != 0 {
		t.Fatalf("sync: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(r.MemberAssignment); err != nil {
		t.Fatalf("assignment: %v", err)
	}
	var ps []int32
	for _, tp := range a.Topics {
		if tp.Topic == "t" {
			ps = append(ps, tp.Partitions...)
		}
	}
	slices.Sort(ps)
	return ps
}

// A classic member (JoinGroup/SyncGroup/Heartbeat) in a consumer group: its partitions come
// from the server assignor, it is told to rejoin to pick them up, and it leaves with
// LeaveGroup. When the last consumer-protocol member leaves, the group becomes classic.
func TestClassicMemberInConsumerGroup(t *testing.T) {
	h := newCGHarness(t, testConfig(), six())
	a := h.member("g", "a", "t")
	a.join()

	w := h.join("g", "", "classic", withSub(classicSub()))
	r := h.joinResp(w)
	wantErr(t, "first join", r.ErrorCode, kerr.MemberIDRequired)
	id := r.MemberID
	r = h.joinResp(h.join("g", id, "classic", withSub(classicSub())))
	if r.ErrorCode != 0 || r.MemberID != id || r.Protocol == nil || *r.Protocol != "cooperative-sticky" || r.LeaderID == id {
		t.Fatalf("join into consumer group: %+v", r)
	}
	gen := r.Generation
	if got := syncedParts(t, h.syncResp(h.sync("g", id, gen, nil))); len(got) != 0 {
		t.Fatalf("classic member got %v before a revoked", got)
	}
	a.beat() // revoke
	a.beat() // revoked
	wantErr(t, "heartbeat: partitions free now", h.heartbeat("g", id, gen, nil), kerr.RebalanceInProgress)
	r = h.joinResp(h.join("g", id, "classic", withSub(classicSub())))
	mine := syncedParts(t, h.syncResp(h.sync("g", id, r.Generation, nil)))
	if len(mine) != 3 || len(intersect(mine, a.parts("t"))) != 0 {
		t.Fatalf("classic %v, consumer %v", mine, a.parts("t"))
	}
	wantErr(t, "heartbeat when settled", h.heartbeat("g", id, r.Generation, nil), nil)
	wantErr(t, "wrong generation", h.heartbeat("g", id, r.Generation+5, nil), kerr.IllegalGeneration)
	wantErr(t, "unknown member", h.heartbeat("g", "nobody", r.Generation, nil), kerr.UnknownMemberID)
	if st := h.group("g").ConsumerState(); st != ConsumerStable {
		t.Fatalf("state %v: %s", st, h.describe("g"))
	}
	// A classic member commits with its generation.
	c := h.commit("g", []int64{1}, func(q *kmsg.OffsetCommitRequest) { q.Version, q.MemberID, q.Generation = 7, id, r.Generation })
	wantErr(t, "classic commit", c.Topics[0].Partitions[0].ErrorCode, nil)

	// The consumer-protocol member leaves: the group becomes a classic group and rebalances.
	wantErr(t, "a leaves", a.leave(), nil)
	g := h.group("g")
	if g.cons != nil || g.protocol != ProtocolClassic || g.state != PreparingRebalance || g.members[id] == nil {
		t.Fatalf("after the downgrade: protocol %v state %v members %v", g.protocol, g.state, g.members)
	}
	wantErr(t, "heartbeat after downgrade", h.heartbeat("g", id, g.generation, nil), kerr.RebalanceInProgress)
	rj := h.joinResp(h.join("g", id, "classic", withSub(classicSub(mine...))))
	if rj.ErrorCode != 0 || rj.LeaderID != id {
		t.Fatalf("rejoin as classic: %+v", rj)
	}
}

func TestClassicLeaveFromConsumerGroup(t *testing.T) {
	h := newCGHarness(t, testConfig(), six())
	a, b := h.member("g", "a", "t"), h.member("g", "b", "t")
	a.join()
	b.join()
	r := h.joinResp(h.join("g", "c1", "classic", withSub(classicSub()), withVersion(3)))
	if r.ErrorCode != 0 {
		t.Fatalf("v3 join: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	lr := h.leave("g", 3, kmsg.LeaveGroupRequestMember{MemberID: r.MemberID}, kmsg.LeaveGroupRequestMember{MemberID: "a"})
	if lr.Members[0].ErrorCode != 0 || lr.Members[1].ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("leave: %+v", lr.Members)
	}
	if h.group("g").cons.members[r.MemberID] != nil {
		t.Fatal("classic member still in the group")
	}
	h.settle("g", a, b)
}

// A classic group of consumers upgrades when a consumer-protocol member joins: its members
// keep their partitions until told to rejoin; offsets stay.
func TestUpgradeClassicGroup(t *testing.T) {
	h := newCGHarness(t, testConfig(), six())
	w, id := h.joinNew("g", "old", withSub(classicSub()))
	h.advance(3000) // initial rebalance delay
	jr := h.joinResp(w)
	all := kmsg.ConsumerMemberAssignment{Topics: []kmsg.ConsumerMemberAssignmentTopic{{Topic: "t", Partitions: []int32{0, 1, 2, 3, 4, 5}}}}
	h.syncResp(h.sync("g", id, jr.Generation, map[string]string{id: string(all.AppendTo(nil))}))
	h.wantState("g", Stable)
	h.commit("g", []int64{3}, commitAs(id, jr.Generation))

	b := h.member("g", "new", "t")
	b.join()
	g := h.group("g")
	if g.cons == nil || g.cons.members[id] == nil || g.offsets[TopicPartition{"t", 0}] == nil {
		t.Fatalf("not upgraded: %+v", g)
	}
	if old := g.cons.members[id]; old.Assigned.count() != 6 || !old.usesClassic() {
		t.Fatalf("classic member after upgrade: %+v", old)
	}
	wantErr(t, "classic heartbeat after upgrade", h.heartbeat("g", id, jr.Generation, nil), kerr.RebalanceInProgress)
	r := h.joinResp(h.join("g", id, "old", withSub(classicSub(0, 1, 2, 3, 4, 5))))
	kept := syncedParts(t, h.syncResp(h.sync("g", id, r.Generation, nil)))
	if len(kept) != 3 {
		t.Fatalf("classic member kept %v", kept)
	}
	// It revokes (rejoins reporting what it kept); then b gets the rest.
	r = h.joinResp(h.join("g", id, "old", withSub(classicSub(kept...))))
	b.beat()
	if got := union(kept, b.parts("t")); len(got) != 6 || len(intersect(kept, b.parts("t"))) != 0 {
		t.Fatalf("classic %v consumer %v", kept, b.parts("t"))
	}
}

func TestMigrationPolicyAndEmptyGroups(t *testing.T) {
	cfg := testConfig()
	cfg.ConsumerMigrationPolicy = "disabled"
	h := newCGHarness(t, cfg, six())
	w, _ := h.joinNew("classic", "old", withSub(classicSub()))
	h.advance(3000)
	h.joinResp(w)
	b := h.member("classic", "new", "t")
	wantErr(t, "upgrade disabled", b.send(b.request(0)), kerr.GroupIDNotFound)

	// An empty classic group holding offsets becomes a consumer group, offsets kept.
	h.commit("simple", []int64{4}, commitAs("", -1))
	c := h.member("simple", "c", "t")
	c.join()
	if g := h.group("simple"); g.cons == nil || g.offsets[TopicPartition{"t", 0}].Offset != 4 {
		t.Fatalf("simple group not converted: %+v", g)
	}
	// An empty consumer group becomes a classic one for a JoinGroup.
	wantErr(t, "leave", c.leave(), nil)
	w, _ = h.joinNew("simple", "classic")
	if g := h.group("simple"); g.cons != nil || g.offsets[TopicPartition{"t", 0}] == nil {
		t.Fatalf("empty consumer group not replaced: %+v", g)
	}
	h.advance(3000)
	if r := h.joinResp(w); r.ErrorCode != 0 {
		t.Fatalf("classic join: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}
