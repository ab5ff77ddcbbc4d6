package group

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/replica"
)

type txnOpt func(*kmsg.TxnOffsetCommitRequest)

func txnAs(memberID string, gen int32) txnOpt {
	return func(r *kmsg.TxnOffsetCommitRequest) { r.MemberID, r.Generation = memberID, gen }
}
func txnInstance(id string) txnOpt {
	return func(r *kmsg.TxnOffsetCommitRequest) { r.InstanceID = &id }
}
func txnMetadata(md string) txnOpt {
	return func(r *kmsg.TxnOffsetCommitRequest) { r.Topics[0].Partitions[0].Metadata = &md }
}

// txnCommit commits offsets of topic t (partition i gets offsets[i], -1 leaves it out) in
// producer pid's transaction (epoch 3) with TxnOffsetCommit v4 and returns the answer, or nil
// while it waits for its write.
func (h *harness) txnCommit(group string, pid int64, offsets []int64, opts ...txnOpt) *kmsg.TxnOffsetCommitResponse {
	h.t.Helper()
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version = 4
	req.TransactionalID, req.Group = "tx", group
	req.ProducerID, req.ProducerEpoch = pid, 3
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = "t"
	for i, o := range offsets {
		if o < 0 {
			continue
		}
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = int32(i), o, 5
		md := "txn"
		rp.Metadata = &md
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	for _, o := range opts {
		o(req)
	}
	w := h.waiter("txn-commit")
	h.run(h.s.CommitTxnOffsets(h.now, w, req))
	r, _ := h.reply(w).(*kmsg.TxnOffsetCommitResponse)
	return r
}

func txnCodes(r *kmsg.TxnOffsetCommitResponse) []int16 {
	var cs []int16
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			cs = append(cs, p.ErrorCode)
		}
	}
	return cs
}

func wantTxnCommit(t *testing.T, what string, r *kmsg.TxnOffsetCommitResponse, want *kerr.Error) {
	t.Helper()
	if r == nil {
		t.Fatalf("%s: commit not answered", what)
	}
	for _, c := range txnCodes(r) {
		wantCode(t, what, c, want)
	}
}

// marker writes a COMMIT or ABORT marker of pid to the log and reports it, as the broker
// does once the transaction coordinator's marker is written.
func (h *harness) marker(pid int64, commit bool) {
	h.t.Helper()
	h.entries = append(h.entries, logEntry{txn: &Producer{ID: pid, Epoch: 3}, marker: &commit})
	h.run(h.s.CompleteTxn(h.now, pid, commit))
}

// wantStable checks the require_stable answer for t's partitions: unstable[i] says whether
// partition i answers UNSTABLE_OFFSET_COMMIT (with offset -1).
func (h *harness) wantStable(group string, unstable ...bool) {
	h.t.Helper()
	offs, codes := h.fetched(group, len(unstable), true)
	for i, u := range unstable {
		if u && (codes[i] != kerr.UnstableOffsetCommit.Code || offs[i] != -1) || !u && codes[i] != 0 {
			h.t.Fatalf("group %s require_stable: offsets %v codes %v, want unstable %v", group, offs, codes, unstable)
		}
	}
}

// A transaction's offsets are written at once, in a transactional batch of its producer, but
// count only from its COMMIT marker on: until then OffsetFetch answers the offsets committed
// before, and UNSTABLE_OFFSET_COMMIT with require_stable.
func TestTxnOffsetsPendingUntilCommit(t *testing.T) {
	h := newHarness(t, testConfig())
	wantCommit(t, "plain commit", h.commit("g", []int64{5}), nil)
	wantTxnCommit(t, "txn commit", h.txnCommit("g", 100, []int64{10, 20}), nil)

	last := h.entries[len(h.entries)-1]
	if last.txn == nil || last.txn.ID != 100 || last.txn.Epoch != 3 || len(last.recs) != 2 {
		t.Fatalf("txn commit wrote %+v, want a transactional batch of producer 100 epoch 3 with 2 records", last)
	}
	var v kmsg.OffsetCommitValue
	if err := v.ReadFrom(last.recs[1].Value); err != nil || v.Offset != 20 || v.LeaderEpoch != 5 || v.Metadata != "txn" {
		t.Fatalf("txn commit record: %+v %v", v, err)
	}
	h.wantOffsets("g", 5, -1, -1)
	h.wantStable("g", true, true, false)

	// Another producer's abort changes nothing.
	h.marker(200, false)
	h.wantStable("g", true, true, false)

	h.marker(100, true)
	h.wantOffsets("g", 10, 20, -1)
	h.wantStable("g", false, false, false)
	if o := h.group("g").offsets[TopicPartition{"t", 1}]; o.LeaderEpoch != 5 || o.Metadata != "txn" || o.CommitTimestamp != h.now {
		t.Fatalf("committed txn offset: %+v", o)
	}
	// A second COMMIT marker (the coordinator retrying) changes nothing.
	h.marker(100, true)
	h.wantOffsets("g", 10, 20, -1)
}

// An ABORT drops the transaction's offsets; a later commit of the same producer (its next
// transaction) counts on its own.
func TestTxnOffsetsAbortDropped(t *testing.T) {
	h := newHarness(t, testConfig())
	wantCommit(t, "plain commit", h.commit("g", []int64{5, 6}), nil)
	wantTxnCommit(t, "txn commit", h.txnCommit("g", 100, []int64{10, 20}), nil)
	wantTxnCommit(t, "txn commit again, same transaction", h.txnCommit("g", 100, []int64{11}), nil)
	h.marker(100, false)
	h.wantOffsets("g", 5, 6)
	h.wantStable("g", false, false)
	h.marker(100, true) // nothing pending any more
	h.wantOffsets("g", 5, 6)

	wantTxnCommit(t, "next transaction", h.txnCommit("g", 100, []int64{-1, 30}), nil)
	h.wantStable("g", false, true)
	h.marker(100, true)
	h.wantOffsets("g", 5, 30)
}

// Where a transactional commit and a plain one of the same partition meet, the one written
// later wins, whenever the transaction ends and whenever the plain one's write is decided.
func TestTxnOffsetsLaterRecordWins(t *testing.T) {
	h := newHarness(t, testConfig())
	wantTxnCommit(t, "txn commit", h.txnCommit("g", 100, []int64{10}), nil)
	wantCommit(t, "later plain commit", h.commit("g", []int64{7}), nil)
	h.marker(100, true)
	h.wantOffsets("g", 7)

	wantCommit(t, "plain commit", h.commit("g", []int64{8}), nil)
	wantTxnCommit(t, "later txn commit", h.txnCommit("g", 101, []int64{12}), nil)
	h.marker(101, true)
	h.wantOffsets("g", 12)

	// A plain commit still waiting for the ISR when a later transaction commits: when its
	// write is decided it does not overwrite the transaction's offset.
	h.holding = true
	w := h.waiter("commit")
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group = 9, "g"
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 13, LeaderEpoch: -1}}}}
	h.run(h.s.CommitOffsets(h.now, w, req))
	h.txnCommit("g", 102, []int64{14})
	h.marker(102, true)
	h.release()
	h.wantOffsets("g", 14)

	r := h.replayed()
	r.wantOffsets("g", 14)
}

// A marker written while the transaction's offset commit still waits for the ISR applies to
// it: the offsets are pending from the moment they are written. A commit whose write fails
// never counts.
func TestTxnOffsetsWriteInFlightAndFailed(t *testing.T) {
	h := newHarness(t, testConfig())
	h.holding = true
	if r := h.txnCommit("g", 100, []int64{10}); r != nil {
		t.Fatalf("answered before its write was decided: %+v", r)
	}
	h.wantStable("g", true)
	h.marker(100, true)
	h.release()
	h.wantOffsets("g", 10)

	h.holding = true
	h.txnCommit("g", 101, []int64{20})
	h.marker(101, false)
	h.release()
	h.wantOffsets("g", 10)
	h.wantStable("g", false)

	h.failing = kerr.NotEnoughReplicas
	wantTxnCommit(t, "failed write", h.txnCommit("g", 102, []int64{30}), kerr.CoordinatorNotAvailable)
	h.failing = nil
	h.wantStable("g", false)
	h.marker(102, true)
	h.wantOffsets("g", 10)

	h.failing = kerr.InvalidProducerEpoch // the partition fenced the producer
	wantTxnCommit(t, "fenced producer", h.txnCommit("g", 102, []int64{40}), kerr.InvalidProducerEpoch)
	h.failing = kerr.NotLeaderForPartition
	wantTxnCommit(t, "lost partition", h.txnCommit("g", 102, []int64{40}), kerr.NotCoordinator)
	h.failing = nil
	h.wantStable("g", false)
}

// KIP-447: from v3 a TxnOffsetCommit may name the member, its generation and instance id,
// which are checked as an OffsetCommit's are; one naming none is taken whatever the group
// (older clients send none), and the group's state is not checked.
func TestTxnOffsetCommitValidation(t *testing.T) {
	h := newHarness(t, testConfig())
	ids := h.stableGroup("g", "a", "b")

	wantTxnCommit(t, "member in its generation", h.txnCommit("g", 1, []int64{1}, txnAs(ids[0], 1)), nil)
	wantTxnCommit(t, "no member named", h.txnCommit("g", 2, []int64{2}), nil)
	wantCommit(t, "plain commit naming no member (for contrast)", h.commit("g", []int64{2}), kerr.UnknownMemberID)
	wantTxnCommit(t, "old generation", h.txnCommit("g", 3, []int64{3}, txnAs(ids[0], 0)), kerr.IllegalGeneration)
	wantTxnCommit(t, "unknown member", h.txnCommit("g", 3, []int64{3}, txnAs("nobody", 1)), kerr.UnknownMemberID)
	wantTxnCommit(t, "member id without generation", h.txnCommit("g", 3, []int64{3}, txnAs(ids[1], -1)), kerr.IllegalGeneration)
	wantTxnCommit(t, "unknown instance", h.txnCommit("g", 3, []int64{3}, txnAs(ids[0], 1), txnInstance("i")), kerr.UnknownMemberID)
	wantTxnCommit(t, "unknown group with a generation", h.txnCommit("new", 3, []int64{3}, txnAs("m", 1)), kerr.IllegalGeneration)
	if h.s.groups["new"] != nil {
		t.Fatal("a refused commit created its group")
	}
	wantTxnCommit(t, "no group id", h.txnCommit("", 3, []int64{3}), kerr.InvalidGroupID)

	// A rebalance under way: the member of the generation still commits.
	h.joinNew("g", "c")
	h.wantState("g", PreparingRebalance)
	wantTxnCommit(t, "during a rebalance", h.txnCommit("g", 4, []int64{4}, txnAs(ids[1], 1)), nil)

	r := h.txnCommit("simple", 5, []int64{5, 6}, txnMetadata(strings.Repeat("x", DefaultMaxMetadataBytes+1)))
	if c := txnCodes(r); c[0] != kerr.OffsetMetadataTooLarge.Code || c[1] != 0 {
		t.Fatalf("oversized metadata: codes %v", c)
	}
	h.marker(5, true)
	h.wantOffsets("simple", -1, 6)

	// Only the refused commits wrote nothing: 1, 2 and 4 are pending.
	for _, pid := range []int64{1, 2, 4} {
		if h.s.txns[pid]["g"] == nil {
			t.Fatalf("producer %d's commit is not pending", pid)
		}
	}
	if h.s.txns[3] != nil {
		t.Fatal("a refused commit is pending")
	}
}

// Loading replays transactional batches and markers: committed transactions' offsets are
// committed, aborted ones' dropped, and a transaction whose marker is not in the log stays
// pending until its marker comes.
func TestTxnOffsetsReplay(t *testing.T) {
	h := newHarness(t, testConfig())
	wantCommit(t, "plain", h.commit("g", []int64{1, 1, 1, 1}), nil)
	wantTxnCommit(t, "committed txn", h.txnCommit("g", 100, []int64{10}), nil)
	wantTxnCommit(t, "aborted txn", h.txnCommit("g", 200, []int64{-1, 20}), nil)
	wantTxnCommit(t, "open txn", h.txnCommit("g", 300, []int64{-1, -1, 30}), nil)
	wantTxnCommit(t, "txn overtaken by a plain commit", h.txnCommit("g", 400, []int64{-1, -1, -1, 40}), nil)
	wantCommit(t, "plain after it", h.commit("g", []int64{2, 2, 2, 2}), nil)
	wantTxnCommit(t, "committed txn of another group", h.txnCommit("other", 100, []int64{50}), nil)
	h.marker(100, true)
	h.marker(200, false)
	h.marker(400, true)
	h.wantOffsets("g", 2, 2, 2, 2)
	h.wantOffsets("other", 50)

	r := h.replayed()
	r.wantOffsets("g", 2, 2, 2, 2)
	r.wantOffsets("other", 50)
	r.wantStable("g", false, false, true, false)
	r.marker(300, true) // its commit of t-2 came before the plain one: that stays
	r.wantOffsets("g", 2, 2, 2, 2)
	r.wantStable("g", false, false, false, false)

	// Without the later plain commit, the replayed transactions show through.
	h2 := newHarness(t, testConfig())
	h2.txnCommit("g", 100, []int64{10})
	h2.txnCommit("g", 200, []int64{-1, 20})
	h2.txnCommit("g", 300, []int64{-1, -1, 30})
	h2.marker(100, true)
	h2.marker(200, false)
	r2 := h2.replayed()
	r2.wantOffsets("g", 10, -1, -1)
	r2.wantStable("g", false, false, true)
	r2.marker(300, false)
	r2.wantOffsets("g", 10, -1, -1)
	r2.wantStable("g", false, false, false)
}

// Deleting offsets or the group drops pending transactional offsets too, with a tombstone
// the replay drops them by; a COMMIT marker afterwards does not bring them back.
func TestTxnOffsetsDeleted(t *testing.T) {
	h := newHarness(t, testConfig())
	wantCommit(t, "plain", h.commit("g", []int64{1}), nil)
	wantTxnCommit(t, "txn", h.txnCommit("g", 100, []int64{10, 20}), nil)
	n := len(h.log)
	if r := h.deleteOffsets("g", 1); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("offset delete: %+v", r)
	}
	if len(h.log) != n+1 || h.log[n].Value != nil {
		t.Fatalf("offset delete of a partition with only a pending commit wrote %d records", len(h.log)-n)
	}
	h.wantStable("g", true, false)
	h.marker(100, true)
	h.wantOffsets("g", 10, -1)
	h.replayed().wantOffsets("g", 10, -1)

	// DeleteGroups: a tombstone for every partition, committed or only pending.
	wantTxnCommit(t, "txn of a simple group", h.txnCommit("s", 200, []int64{-1, 21}), nil)
	wantCommit(t, "plain", h.commit("s", []int64{3}), nil)
	wantTxnCommit(t, "txn over the plain", h.txnCommit("s", 200, []int64{22}), nil)
	n = len(h.log)
	w := h.waiter("delete")
	h.run(h.s.DeleteGroups(h.now, w, []string{"s"}))
	if r := h.reply(w).(*kmsg.DeleteGroupsResponse); r.Groups[0].ErrorCode != 0 {
		t.Fatalf("delete group: %+v", r)
	}
	var tombstones []string
	for _, rec := range h.log[n:] {
		if rec.Value == nil && len(rec.Key) > 1 && rec.Key[1] == offsetKeyVersion {
			var k kmsg.OffsetCommitKey
			if err := k.ReadFrom(rec.Key); err != nil {
				t.Fatal(err)
			}
			tombstones = append(tombstones, k.Topic+"-"+string(rune('0'+k.Partition)))
		}
	}
	if strings.Join(tombstones, ",") != "t-0,t-1" {
		t.Fatalf("offset tombstones of the deleted group: %v, want t-0,t-1", tombstones)
	}
	h.marker(200, true)
	if h.s.groups["s"] != nil {
		t.Fatal("the COMMIT marker brought a deleted group back")
	}
	r := h.replayed()
	if g := r.s.groups["s"]; g != nil {
		t.Fatalf("replay brought the deleted group back: %+v", g.offsets)
	}
	r.wantOffsets("g", 10, -1)
}

// Offsets expiry leaves a partition alone while a transaction's commit of it is pending, and
// an empty group holding only pending offsets is not deleted.
func TestTxnOffsetsExpiry(t *testing.T) {
	cfg := testConfig()
	cfg.OffsetsRetentionMs, cfg.OffsetsRetentionCheckMs = 10000, 1000
	h := newHarness(t, cfg)
	wantCommit(t, "plain", h.commit("g", []int64{1, 1}), nil)
	wantTxnCommit(t, "txn", h.txnCommit("g", 100, []int64{10}), nil)
	wantTxnCommit(t, "txn of a new group", h.txnCommit("only-txn", 200, []int64{5}), nil)
	h.advance(20000)
	h.wantOffsets("g", 1, -1) // t-1 expired, t-0 kept for the pending commit
	if h.s.groups["only-txn"] == nil {
		t.Fatal("the group of a pending transaction expired")
	}
	h.marker(100, true)
	h.marker(200, true)
	h.wantOffsets("g", 10, -1)
	h.wantOffsets("only-txn", 5)
	h.advance(20000)
	if h.s.groups["only-txn"] != nil || h.s.groups["g"] != nil {
		t.Fatal("offsets did not expire once the transactions ended")
	}
}

// A consumer group (KIP-848) takes a transaction's commit naming no member (TxnOffsetCommit
// before v3), else from a member in its current epoch: a stale epoch is ILLEGAL_GENERATION
// for a transactional commit (STALE_MEMBER_EPOCH for a plain one), and the member's protocol
// does not ask for a newer version.
func TestConsumerGroupTxnOffsetCommit(t *testing.T) {
	h := newCGHarness(t, testConfig(), six())
	a := h.member("g", "a", "t")
	a.join()
	code := func(r *kmsg.TxnOffsetCommitResponse) int16 { return r.Topics[0].Partitions[0].ErrorCode }
	wantErr(t, "current epoch", code(h.txnCommit("g", 1, []int64{1}, txnAs("a", a.epoch))), nil)
	wantErr(t, "stale epoch", code(h.txnCommit("g", 2, []int64{2}, txnAs("a", a.epoch-1))), kerr.IllegalGeneration)
	wantErr(t, "newer epoch", code(h.txnCommit("g", 2, []int64{2}, txnAs("a", a.epoch+1))), kerr.IllegalGeneration)
	wantErr(t, "unknown member", code(h.txnCommit("g", 2, []int64{2}, txnAs("zz", a.epoch))), kerr.UnknownMemberID)
	wantErr(t, "no member named", code(h.txnCommit("g", 3, []int64{3})), nil)
	h.marker(1, true)
	h.marker(3, true)
	h.wantOffsets("g", 3)
}

// txnCommitReq is a TxnOffsetCommit v4 of group's t-<part> at offset for producer pid.
func txnCommitReq(group string, pid int64, part int32, offset int64) *kmsg.TxnOffsetCommitRequest {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version, req.TransactionalID, req.Group = 4, "tx", group
	req.ProducerID, req.ProducerEpoch = pid, 0
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = part, offset
	req.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{rp}}}
	return req
}

// A marker reported while the partition loads is applied once it is loaded, whether or not
// the replay read it: one written past the end the replay read to would otherwise be lost
// until the next load.
func TestCompleteTxnWhileLoading(t *testing.T) {
	nd := openNode(t, t.TempDir(), 1)
	defer nd.close()
	c := nd.manualCoordinator(testConfig())
	defer c.Close()
	c.Elect(0, 1)
	waitGroupLoaded(t, c, "g")
	ctx := context.Background()
	for i, pid := range []int64{7, 8, 9} {
		r := c.CommitTxnOffsets(ctx, txnCommitReq("g", pid, int32(i), int64(10*(i+1))))
		wantCode(t, "txn commit", r.Topics[0].Partitions[0].ErrorCode, nil)
	}
	c.Resign(0, 2)

	// A new term whose shard is made but not loaded yet, as Elect leaves it until its
	// loading goroutine has replayed the partition.
	sh, ok := c.rt.Install(0, 3)
	if !ok {
		t.Fatal("the election of epoch 3 was ignored")
	}
	p := nd.replicas.Get(TopicName, 0)
	if _, err := p.WriteTxnMarker(replica.TxnMarker{ProducerID: 8, Commit: true}, time.Now().UnixMilli(), 5000); err != nil {
		t.Fatal(err)
	}
	c.CompleteTxn(0, 8, true) // in the log: the replay reads it too
	c.CompleteTxn(0, 7, true) // not in the log yet: as if written past the replay's end
	wantCode(t, "fetch while loading", c.FetchOffsets(&kmsg.OffsetFetchRequestGroup{Group: "g"}, false).ErrorCode, kerr.CoordinatorLoadInProgress)
	c.load(sh)

	if got := committed(t, c, "g"); len(got) != 2 || got[0] != 10 || got[1] != 20 {
		t.Fatalf("committed after the load: %v, want t-0 10 and t-1 20", got)
	}
	f := c.FetchOffsets(&kmsg.OffsetFetchRequestGroup{Group: "g", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{2}}}}, true)
	wantCode(t, "require_stable of the open transaction's partition", f.Topics[0].Partitions[0].ErrorCode, kerr.UnstableOffsetCommit)
}
