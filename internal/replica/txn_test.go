package replica

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/storage"
)

// Tests of transactions on partitions over real logs: the last stable offset on a sole
// partition, a leader and its follower; markers, their fencing and the transaction index on
// both; the snapshot and the rebuild keeping it all across a restart; truncation; the
// verification guard.

// txnBatch builds a transactional batch of producer pid.
func txnBatch(t testing.TB, pid int64, epoch int16, seq int32, values ...string) []byte {
	t.Helper()
	recs := make([]batch.Record, len(values))
	for i, v := range values {
		recs[i] = batch.Record{OffsetDelta: int32(i), Value: []byte(v)}
	}
	h := batch.Header{PartitionLeaderEpoch: -1, Attributes: batch.AttrTransactional, LastOffsetDelta: int32(len(values) - 1), BaseTimestamp: 1000, MaxTimestamp: 1000, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq}
	b, err := batch.Build(h, recs, batch.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func appendRaw(p *Partition, b []byte, guard VerificationGuard) (AppendResult, error) {
	h, err := batch.ParseHeader(b)
	if err != nil {
		return AppendResult{}, err
	}
	return p.AppendVerified(b, []batch.Header{h}, 1000, -1, false, 60_000, guard)
}

func mustAppendRaw(t *testing.T, p *Partition, b []byte) AppendResult {
	t.Helper()
	res, err := appendRaw(p, b, 0)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func mustMarker(t *testing.T, p *Partition, m TxnMarker) AppendResult {
	t.Helper()
	res, err := p.WriteTxnMarker(m, 2000, 60_000)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func aborted(t *testing.T, p *Partition) []storage.AbortedTxn {
	t.Helper()
	got, err := p.Log().AbortedTxns(0, 1<<40)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func wantLSO(t *testing.T, what string, p *Partition, want int64) {
	t.Helper()
	if got := p.LastStableOffset(); got != want {
		t.Fatalf("%s: last stable offset %d (hw %d), want %d", what, got, p.HighWatermark(), want)
	}
}

// On a sole partition: the LSO is held at the first offset of the earliest open transaction
// and moves at its marker; an abort goes to the transaction index; markers are fenced by
// producer and coordinator epoch; a restart keeps it all, from the snapshot or, without one,
// by replaying the log (which also re-adds a lost index).
func TestTxnSolePartitionLSOMarkersAndRestart(t *testing.T) {
	dir := t.TempDir()
	m := roleManager(t, dir, 1, nil)
	p := openRolePartition(t, m, 1)
	appendValues(t, p, false, "plain")
	wantLSO(t, "no transaction", p, 1)
	mustAppendRaw(t, p, txnBatch(t, 7, 0, 0, "a1", "a2")) // 1..2
	wantLSO(t, "producer 7's transaction open at 1", p, 1)
	mustAppendRaw(t, p, txnBatch(t, 8, 0, 0, "b1")) // 3
	if _, err := appendRaw(p, buildBatchFor(t, 7, 0, 2, "oops"), 0); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("a non-transactional batch inside producer 7's transaction: %v", err)
	}
	if p.HighWatermark() != 4 {
		t.Fatalf("hw %d", p.HighWatermark())
	}
	wantLSO(t, "two open", p, 1)

	res := mustMarker(t, p, TxnMarker{ProducerID: 7, ProducerEpoch: 0, Commit: false, CoordinatorEpoch: 3}) // 4
	if res.BaseOffset != 4 || res.Wait != nil {
		t.Fatalf("marker at %d, wait %v", res.BaseOffset, res.Wait)
	}
	wantLSO(t, "producer 7 aborted", p, 3)
	want := []storage.AbortedTxn{{ProducerID: 7, FirstOffset: 1, LastOffset: 4, LastStableOffset: 3}}
	if got := aborted(t, p); !reflect.DeepEqual(got, want) {
		t.Fatalf("aborted transactions %v, want %v", got, want)
	}
	// The marker is a control batch in the log, Kafka's format.
	raw := logBytes(t, p.Log(), p.Log().LogEndOffset())
	var ctrl batch.Header
	for b := raw; len(b) > 0; b = b[ctrl.Size():] {
		if ctrl, _ = batch.ParseHeader(b); ctrl.BaseOffset == 4 {
			if _, err := batch.Validate(b[:ctrl.Size()]); err != nil {
				t.Fatalf("marker batch: %v", err)
			}
			commit, ce, ok, err := parseMarker(b[:ctrl.Size()])
			if !ctrl.IsControl() || !ctrl.IsTransactional() || ctrl.BaseSequence != -1 || ctrl.ProducerID != 7 || commit || ce != 3 || !ok || err != nil {
				t.Fatalf("marker batch %+v: commit %v, coordinator epoch %d, %v %v", ctrl, commit, ce, ok, err)
			}
			break
		}
	}
	// Fencing.
	if _, err := p.WriteTxnMarker(TxnMarker{ProducerID: 7, ProducerEpoch: -1, CoordinatorEpoch: 3}, 0, 0); !errors.Is(err, ErrInvalidEpoch) {
		t.Fatalf("marker of an older producer epoch: %v", err)
	}
	if _, err := p.WriteTxnMarker(TxnMarker{ProducerID: 7, ProducerEpoch: 0, CoordinatorEpoch: 2}, 0, 0); !errors.Is(err, ErrTransactionCoordinatorFenced) {
		t.Fatalf("marker of an older coordinator epoch: %v", err)
	}
	if p.Log().LogEndOffset() != 5 {
		t.Fatalf("a fenced marker was written: log end %d", p.Log().LogEndOffset())
	}
	// A client's control batch is refused.
	forged := txnBatch(t, 8, 0, 1, "x")
	fh, _ := batch.ParseHeader(forged)
	fh.Attributes |= batch.AttrControl
	if _, err := p.AppendWait(forged, []batch.Header{fh}, 0, -1, false, 0); !errors.Is(err, batch.ErrInvalidRecord) {
		t.Fatalf("a producer's control batch: %v", err)
	}

	// Restart with the snapshot: producer 8's transaction still holds the LSO.
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m = roleManager(t, dir, 1, nil)
	p = openRolePartition(t, m, 1)
	wantLSO(t, "after a restart from the snapshot", p, 3)
	if ps := p.ActiveProducers(); len(ps) != 2 || ps[0].ProducerID != 7 || ps[0].CoordinatorEpoch != 3 || ps[0].TxnStartOffset != -1 || ps[1].ProducerID != 8 || ps[1].TxnStartOffset != 3 {
		t.Fatalf("producers after the restart: %+v", ps)
	}
	if _, err := p.WriteTxnMarker(TxnMarker{ProducerID: 7, ProducerEpoch: 0, CoordinatorEpoch: 2}, 0, 0); !errors.Is(err, ErrTransactionCoordinatorFenced) {
		t.Fatalf("the coordinator epoch did not survive the restart: %v", err)
	}
	mustMarker(t, p, TxnMarker{ProducerID: 8, ProducerEpoch: 0, Commit: true, CoordinatorEpoch: 3}) // 5
	wantLSO(t, "producer 8 committed", p, 6)
	mustAppendRaw(t, p, txnBatch(t, 9, 0, 0, "c1"))                                   // 6, left open
	mustAppendRaw(t, p, txnBatch(t, 7, 0, 2, "d1"))                                   // 7
	mustMarker(t, p, TxnMarker{ProducerID: 7, ProducerEpoch: 0, CoordinatorEpoch: 3}) // 8
	want = append(want, storage.AbortedTxn{ProducerID: 7, FirstOffset: 7, LastOffset: 8, LastStableOffset: 6})
	if got := aborted(t, p); !reflect.DeepEqual(got, want) {
		t.Fatalf("aborted transactions %v, want %v", got, want)
	}
	wantLSO(t, "producer 9 open at 6", p, 6)

	// Restart without any snapshot and without the transaction index: the replay of the log
	// derives the open transaction and the aborted ones again.
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	removeFiles(t, p.Log().Dir(), ".snapshot", ".txnindex")
	m = roleManager(t, dir, 1, nil)
	defer m.Close()
	p = openRolePartition(t, m, 1)
	wantLSO(t, "after a replay of the whole log", p, 6)
	if got := aborted(t, p); !reflect.DeepEqual(got, want) {
		t.Fatalf("aborted transactions rebuilt %v, want %v", got, want)
	}
	// DeleteRecords past the open transaction's start: the LSO is never below the log start.
	if _, _, err := p.DeleteRecords(7, 0, 0); err != nil {
		t.Fatal(err)
	}
	wantLSO(t, "after DeleteRecords to 7", p, 7)
}

// buildBatchFor is an idempotent, non-transactional batch of producer pid.
func buildBatchFor(t testing.TB, pid int64, epoch int16, seq int32, values ...string) []byte {
	t.Helper()
	b := txnBatch(t, pid, epoch, seq, values...)
	h, _ := batch.ParseHeader(b)
	recs, err := batch.Records(b)
	if err != nil {
		t.Fatal(err)
	}
	h.Attributes = 0
	out, err := batch.Build(h, recs, batch.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func removeFiles(t *testing.T, dir string, suffixes ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		for _, s := range suffixes {
			if strings.HasSuffix(e.Name(), s) {
				if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
					t.Fatal(err)
				}
				n++
			}
		}
	}
	if n == 0 {
		t.Fatalf("no %v files in %s", suffixes, dir)
	}
}

// A leader with a follower: the marker waits for the follower like acks=all; the leader's LSO
// stays at the transaction's start until the high watermark passes the marker; the follower
// replays the marker into its own LSO and transaction index; a follower truncating the marker
// away loses the index entry and sees the transaction open again.
func TestTxnLeaderAndFollower(t *testing.T) {
	lm := roleManager(t, t.TempDir(), 1, &ReplicationOptions{})
	defer lm.Close()
	lp := openRolePartition(t, lm, 2)
	reg := LeaderAndISR{Leader: 1, LeaderEpoch: 4, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}
	if err := lp.MakeLeader(reg, 0); err != nil {
		t.Fatal(err)
	}
	fm := roleManager(t, t.TempDir(), 2, &ReplicationOptions{})
	defer fm.Close()
	fp := openRolePartition(t, fm, 2)
	if err := fp.MakeFollower(LeaderAndISR{Leader: 1, LeaderEpoch: 4, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}); err != nil {
		t.Fatal(err)
	}
	// replicate copies the leader's log past the follower's end and reports the follower's
	// position back, as one fetch round trip.
	replicate := func() {
		t.Helper()
		from := fp.Log().LogEndOffset()
		act := NoAction()
		if leo := lp.Log().LogEndOffset(); leo > from {
			b := logBytes(t, lp.Log(), leo)
			for off := int64(0); off < from; {
				h, _ := batch.ParseHeader(b)
				off = h.LastOffset() + 1
				b = b[h.Size():]
			}
			act.Append = b
		}
		act.HighWatermark = lp.HighWatermark()
		if _, err := fp.ApplyFollower(4, act); err != nil {
			t.Fatal(err)
		}
		if _, err := lp.FollowerFetch(2, 4, fp.Log().LogEndOffset(), 0, 4, 0); err != nil {
			t.Fatal(err)
		}
		act = NoAction()
		act.HighWatermark = lp.HighWatermark()
		if _, err := fp.ApplyFollower(4, act); err != nil {
			t.Fatal(err)
		}
	}

	appendValues(t, lp, false, "x", "y")                   // 0..1
	mustAppendRaw(t, lp, txnBatch(t, 5, 0, 0, "t1", "t2")) // 2..3
	replicate()
	wantLSO(t, "leader, transaction open at 2", lp, 2)
	wantLSO(t, "follower, transaction open at 2", fp, 2)
	if lp.HighWatermark() != 4 {
		t.Fatalf("hw %d", lp.HighWatermark())
	}

	res := mustMarker(t, lp, TxnMarker{ProducerID: 5, ProducerEpoch: 0, Commit: false, CoordinatorEpoch: 1}) // 4
	if res.Wait == nil || !pending(res.Wait) {
		t.Fatal("the marker did not wait for the follower")
	}
	wantLSO(t, "leader, abort not yet replicated", lp, 2)
	want := []storage.AbortedTxn{{ProducerID: 5, FirstOffset: 2, LastOffset: 4, LastStableOffset: 5}}
	if got := aborted(t, lp); !reflect.DeepEqual(got, want) {
		t.Fatalf("leader's aborted transactions %v, want %v", got, want)
	}
	replicate()
	if err := <-res.Wait; err != nil {
		t.Fatalf("marker wait: %v", err)
	}
	wantLSO(t, "leader, abort replicated", lp, 5)
	wantLSO(t, "follower, abort replicated", fp, 5)
	if got := aborted(t, fp); !reflect.DeepEqual(got, want) {
		t.Fatalf("follower's aborted transactions %v, want %v", got, want)
	}

	// The follower diverges at the marker (say a new leader never had it): the entry goes,
	// the transaction is open again there.
	trunc := NoAction()
	trunc.TruncateTo = 4
	if _, err := fp.ApplyFollower(4, trunc); err != nil {
		t.Fatal(err)
	}
	if got := aborted(t, fp); len(got) != 0 {
		t.Fatalf("follower's aborted transactions after truncating the marker: %v", got)
	}
	if ps := fp.ActiveProducers(); len(ps) != 1 || ps[0].TxnStartOffset != 2 {
		t.Fatalf("follower's producers after the truncation: %+v", ps)
	}
	wantLSO(t, "follower after truncating the marker", fp, 2)

	// Markers are the leader's to write.
	if _, err := fp.WriteTxnMarker(TxnMarker{ProducerID: 5, CoordinatorEpoch: 1}, 0, 0); !errors.Is(err, ErrNotLeaderOrFollower) {
		t.Fatalf("marker on a follower: %v", err)
	}
}

// KIP-890 part 1 on a partition with transaction.partition.verification.enable: a
// transaction starts only with the guard StartVerification gave, and a write verified before
// the marker but arriving after it is refused, leaving no hanging transaction.
func TestTxnVerificationGuard(t *testing.T) {
	m := roleManager(t, t.TempDir(), 1, nil)
	defer m.Close()
	s := roleSettings(1)
	s.TxnVerification = true
	p, err := m.Open("t", 0, s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := appendRaw(p, txnBatch(t, 3, 0, 0, "a"), 0); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("unverified start of a transaction: %v", err)
	}
	g, needed := p.StartVerification(3, 0)
	if !needed {
		t.Fatal("no verification needed for a new transaction")
	}
	if _, err := appendRaw(p, txnBatch(t, 3, 0, 0, "a"), g); err != nil {
		t.Fatalf("verified start: %v", err)
	}
	if _, needed := p.StartVerification(3, 0); needed {
		t.Fatal("verification needed inside the ongoing transaction")
	}
	if _, err := appendRaw(p, txnBatch(t, 3, 0, 1, "b"), 0); err != nil {
		t.Fatalf("a batch continuing the transaction: %v", err)
	}
	mustMarker(t, p, TxnMarker{ProducerID: 3, ProducerEpoch: 0, Commit: true})
	wantLSO(t, "committed", p, 3)

	// The late write: verified for the next transaction, which the coordinator then aborts
	// (say it timed out) before the write arrives.
	g, _ = p.StartVerification(3, 0)
	mustMarker(t, p, TxnMarker{ProducerID: 3, ProducerEpoch: 0, Commit: false})
	leo := p.Log().LogEndOffset()
	if _, err := appendRaw(p, txnBatch(t, 3, 0, 2, "late"), g); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("the late write: %v", err)
	}
	if p.Log().LogEndOffset() != leo || p.ActiveProducers()[0].TxnStartOffset != -1 {
		t.Fatal("the late write opened a transaction")
	}
	wantLSO(t, "nothing hanging", p, leo)
	// Without the setting (an internal topic) no guard is asked for.
	s.TxnVerification = false
	p.Reconfigure(s)
	if _, err := appendRaw(p, txnBatch(t, 3, 0, 2, "free"), 0); err != nil {
		t.Fatalf("without verification: %v", err)
	}
}

// KIP-890 part 2: a transaction of version 2 ends with its marker in the epoch the
// coordinator bumped at EndTxn, the epoch of the producer's next transaction, whose first
// produce may be verified while the marker is still on its way. Its guard survives the
// marker; a late write of the ended transaction (the old epoch) still cannot start one, and
// a version 1 marker (the same epoch as its transaction) clears every guard.
func TestTxnVersion2MarkerKeepsNextTransactionsGuard(t *testing.T) {
	m := roleManager(t, t.TempDir(), 1, nil)
	defer m.Close()
	s := roleSettings(1)
	s.TxnVerification = true
	p, err := m.Open("t", 0, s)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := p.StartVerification(7, 0)
	if _, err := appendRaw(p, txnBatch(t, 7, 0, 0, "a"), g); err != nil {
		t.Fatal(err)
	}
	// The next transaction's produce (epoch 1) is verified before the marker lands.
	next, needed := p.StartVerification(7, 1)
	if !needed {
		t.Fatal("no verification for the next transaction")
	}
	mustMarker(t, p, TxnMarker{ProducerID: 7, ProducerEpoch: 1, Commit: true, TransactionVersion: 2})
	if _, err := appendRaw(p, txnBatch(t, 7, 1, 0, "b"), next); err != nil {
		t.Fatalf("the next transaction's first write, verified before the version 2 marker: %v", err)
	}
	mustMarker(t, p, TxnMarker{ProducerID: 7, ProducerEpoch: 2, Commit: true, TransactionVersion: 2})

	// A late write of the transaction just ended (epoch 1, verified before its marker at 2).
	late, _ := p.StartVerification(7, 1)
	mustMarker(t, p, TxnMarker{ProducerID: 7, ProducerEpoch: 2, Commit: false, TransactionVersion: 2})
	leo := p.Log().LogEndOffset()
	if _, err := appendRaw(p, txnBatch(t, 7, 1, 1, "late"), late); err == nil {
		t.Fatal("a late write of the ended transaction was appended")
	}
	if p.Log().LogEndOffset() != leo {
		t.Fatal("the late write opened a transaction")
	}

	// Version 1: the marker is in the transaction's own epoch, and takes every guard.
	g, _ = p.StartVerification(8, 0)
	mustMarker(t, p, TxnMarker{ProducerID: 8, ProducerEpoch: 0, Commit: false})
	if _, err := appendRaw(p, txnBatch(t, 8, 0, 0, "late"), g); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("a write verified before a version 1 marker: %v", err)
	}
}
