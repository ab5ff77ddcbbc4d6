package group

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// replayed builds a new shard from h's records, as a restarted coordinator does.
func (h *harness) replayed() *harness {
	h.t.Helper()
	n := &harness{t: h.t, now: h.now, replies: map[Waiter]any{}}
	ids := 1000
	cfg := h.s.cfg
	cfg.NewID = func() string { ids++; return "r" + string(rune('0'+ids%10)) }
	n.s = NewShard(cfg)
	for _, e := range h.entries {
		if e.marker != nil {
			n.s.ReplayMarker(e.txn.ID, *e.marker)
			continue
		}
		for _, r := range e.recs {
			var err error
			if e.txn != nil {
				err = n.s.ReplayTransactional(e.txn.ID, r.Key, r.Value)
			} else {
				err = n.s.Replay(r.Key, r.Value)
			}
			if err != nil {
				h.t.Fatalf("replay: %v", err)
			}
		}
	}
	n.log = append(n.log, h.log...)
	n.entries = append(n.entries, h.entries...)
	n.run(n.s.LoadComplete(n.now))
	return n
}

// Replaying the records rebuilds groups (generation, protocol, leader, members with their
// assignments), committed offsets with metadata and leader epoch, and drops what was
// deleted; loaded members must heartbeat within their session timeout.
func TestReplayRebuildsState(t *testing.T) {
	h := newHarness(t, testConfig())
	ids := h.stableGroup("g", "a", "b")
	h.commit("g", []int64{10, 20}, commitAs(ids[0], 1))
	h.commit("g", []int64{11, 21}, commitAs(ids[1], 1))
	h.commit("simple", []int64{7}, commitVersion(2), commitRetention(99000))
	simpleAt := h.now
	h.commit("gone", []int64{1})
	w := h.waiter("del")
	h.run(h.s.DeleteGroups(h.now, w, []string{"gone"}))
	h.stableGroup("empty", "x")
	xid := h.group("empty").order[0].ID
	h.leave("empty", 3, kmsg.LeaveGroupRequestMember{MemberID: xid})
	h.commit("empty", []int64{3})

	r := h.replayed()
	g := r.group("g")
	if g.state != Stable || g.generation != 1 || g.leader != ids[0] || g.protocolName != "range" || g.protocolType != "consumer" || len(g.order) != 2 {
		t.Fatalf("replayed g: %v gen %d leader %s protocol %s", g.state, g.generation, g.leader, g.protocolName)
	}
	if string(g.members[ids[1]].Assignment) != "a-"+ids[1] || g.members[ids[1]].ClientID != "b" || g.members[ids[1]].SessionTimeoutMs != 10000 {
		t.Fatalf("replayed member: %+v", g.members[ids[1]])
	}
	if o := g.offsets[TopicPartition{"t", 1}]; o.Offset != 21 || o.LeaderEpoch != 7 || o.Metadata != "md" || o.ExpireTimestamp != -1 {
		t.Fatalf("replayed offset: %+v", o)
	}
	if o := r.group("simple").offsets[TopicPartition{"t", 0}]; o.Offset != 7 || o.ExpireTimestamp != simpleAt+99000 {
		t.Fatalf("replayed v1 offset: %+v", o)
	}
	if r.s.groups["gone"] != nil {
		t.Fatal("deleted group came back")
	}
	if e := r.group("empty"); e.state != Empty || e.generation != 2 || len(e.members) != 0 || e.offsets[TopicPartition{"t", 0}].Offset != 3 {
		t.Fatalf("replayed empty group: %v gen %d", e.state, e.generation)
	}

	// The loaded members carry on; b, silent, expires after its session timeout.
	for i := 0; i < 2; i++ {
		r.advance(4000)
		wantCode(t, "heartbeat after load", r.heartbeat("g", ids[0], 1, nil), nil)
	}
	r.advance(2000) // b's session, restarted by the load, ends
	r.wantState("g", PreparingRebalance)
	if r.group("g").members[ids[1]] != nil {
		t.Fatal("silent member survived its session timeout after the load")
	}
	if sr := r.syncResp(r.sync("g", ids[0], 1, nil)); sr.ErrorCode != kerr.RebalanceInProgress.Code {
		t.Fatalf("sync: %+v", sr)
	}
}

// Every record the core writes decodes with kmsg's __consumer_offsets types, as Kafka's
// tools would read them.
func TestRecordsUseKafkaFormat(t *testing.T) {
	h := newHarness(t, testConfig())
	ids := h.stableGroup("g", "a")
	h.commit("g", []int64{5}, commitAs(ids[0], 1))
	for _, rec := range h.log {
		switch v := int16(rec.Key[0])<<8 | int16(rec.Key[1]); v {
		case 1:
			var k kmsg.OffsetCommitKey
			var val kmsg.OffsetCommitValue
			if k.ReadFrom(rec.Key) != nil || val.ReadFrom(rec.Value) != nil || k.Group != "g" || val.Offset != 5 || val.Version != 3 {
				t.Fatalf("offset record %+v %+v", k, val)
			}
		case 2:
			var k kmsg.GroupMetadataKey
			var val kmsg.GroupMetadataValue
			if k.ReadFrom(rec.Key) != nil || val.ReadFrom(rec.Value) != nil || k.Group != "g" || val.Version != 3 || *val.Leader != ids[0] {
				t.Fatalf("group record %+v %+v", k, val)
			}
		default:
			t.Fatalf("key version %d", v)
		}
	}
	if err := h.s.Replay([]byte{0, 11, 0, 0}, nil); !errors.Is(err, ErrUnknownRecord) {
		t.Fatalf("unknown record type: %v", err)
	}
	if err := h.s.Replay([]byte{0, 1, 0}, []byte{1}); !errors.Is(err, ErrCorruptRecord) {
		t.Fatalf("corrupt record: %v", err)
	}
}
