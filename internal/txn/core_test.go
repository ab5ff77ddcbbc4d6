package txn

import (
	"errors"
	"regexp"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A transactional id keeps its producer id across InitProducerId calls (a restarted
// producer), each bumping the epoch, and its state is in the log as Kafka writes it.
func TestInitProducerIDBumpsEpoch(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.initOK("a")
	if pid != 1001 || epoch != 0 {
		t.Fatalf("first init: %d/%d, want 1001/0", pid, epoch)
	}
	pid2, epoch2 := h.initOK("a")
	if pid2 != pid || epoch2 != 1 {
		t.Fatalf("second init: %d/%d, want %d/1", pid2, epoch2, pid)
	}
	v := h.lastValue("a")
	// Version 1 (flexible), as Kafka writes with transaction.version finalized at 1 or more;
	// a client of the older protocol is transaction version 0 in it.
	if v.Version != 1 || v.ClientTransactionVersion != 0 || v.ProducerID != pid || v.ProducerEpoch != 1 || v.State != kmsg.TransactionState(Empty) || v.TimeoutMillis != 10_000 || len(v.Topics) != 0 || v.StartTimestamp != -1 {
		t.Fatalf("record: %+v", v)
	}
	if h.state("a") != Empty {
		t.Fatal("not Empty")
	}
}

func TestInitProducerIDValidation(t *testing.T) {
	h := newHarness(t)
	wantCode(t, "timeout above max", h.initReq(initReq("a", 60_001, 4)).ErrorCode, kerr.InvalidTransactionTimeout)
	wantCode(t, "zero timeout", h.initReq(initReq("a", 0, 4)).ErrorCode, kerr.InvalidTransactionTimeout)
	wantCode(t, "empty id", h.initReq(initReq("", 1000, 4)).ErrorCode, kerr.InvalidRequest)
	r := initReq("a", 1000, 3)
	r.ProducerID = 5 // epoch -1
	wantCode(t, "half a producer id", h.initReq(r).ErrorCode, kerr.InvalidRequest)
	if h.s.NumTxns() != 0 || len(h.log) != 0 {
		t.Fatal("an invalid request left state")
	}
}

// KIP-360: a producer recovering names its producer id and epoch: its own bumps the epoch, a
// retry of a bump whose answer was lost gets the same epoch, any other is fenced.
func TestInitProducerIDExpectedEpoch(t *testing.T) {
	h := newHarness(t)
	pid, _ := h.initOK("a")
	_, e1 := h.initOK("a") // epoch 1
	r := initReq("a", 10_000, 4)
	r.ProducerID, r.ProducerEpoch = pid, e1
	got := h.initReq(r)
	if got.ErrorCode != 0 || got.ProducerID != pid || got.ProducerEpoch != 2 {
		t.Fatalf("recovery: %+v", got)
	}
	got = h.initReq(r) // the same request again: a retry (its last epoch is 1)
	if got.ErrorCode != 0 || got.ProducerEpoch != 2 {
		t.Fatalf("retry: %+v", got)
	}
	r.ProducerEpoch = 0
	wantCode(t, "stale epoch", h.initReq(r).ErrorCode, kerr.ProducerFenced)
	r.ProducerID, r.ProducerEpoch = pid+55, 2
	wantCode(t, "other producer id", h.initReq(r).ErrorCode, kerr.ProducerFenced)
	r.Version = 3 // before KIP-588: the old code
	wantCode(t, "v3 fenced", h.initReq(r).ErrorCode, kerr.InvalidProducerEpoch)
}

// An exhausted epoch gets a new producer id at epoch 0.
func TestInitProducerIDEpochExhaustion(t *testing.T) {
	h := newHarness(t)
	pid, _ := h.initOK("a")
	h.s.Txn("a").Epoch = maxEpoch - 1
	npid, epoch := h.initOK("a")
	if npid == pid || epoch != 0 {
		t.Fatalf("after exhaustion: %d/%d, want a new producer id at 0", npid, epoch)
	}
	if tx := h.s.Txn("a"); tx.PrevProducerID != pid {
		t.Fatalf("previous producer id %d, want %d", tx.PrevProducerID, pid)
	}
}

// The whole commit: partitions added (Ongoing), EndTxn answered once PrepareCommit is
// written, markers to every partition with the producer's epoch and the coordinator epoch,
// CONCURRENT_TRANSACTIONS for the producer's next moves meanwhile, CompleteCommit after the
// markers; a retried EndTxn then answers as Kafka's.
func TestCommitLifecycle(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.initOK("a")
	wantErr(t, "add", h.add("a", pid, epoch, tp("t", 0), tp("t", 1)), nil)
	start := h.now
	h.advance(10)
	wantErr(t, "add again", h.add("a", pid, epoch, tp("u", 0), tp("t", 0)), nil)
	if h.state("a") != Ongoing || len(h.s.Txn("a").Partitions) != 3 || h.s.Txn("a").StartMs != start {
		t.Fatalf("after adds: %+v", h.s.Txn("a"))
	}
	before := len(h.log)
	wantErr(t, "add known", h.add("a", pid, epoch, tp("t", 1)), nil)
	if len(h.log) != before {
		t.Fatal("adding a partition already in the transaction wrote a record")
	}
	wantCode(t, "end", h.end("a", pid, epoch, true, 3).ErrorCode, nil)
	if h.state("a") != PrepareCommit || h.lastValue("a").State != kmsg.TransactionState(PrepareCommit) {
		t.Fatal("not PrepareCommit")
	}
	if len(h.jobs) != 1 {
		t.Fatalf("%d marker attempts, want 1", len(h.jobs))
	}
	m := h.jobs[0].Markers
	if m.ProducerID != pid || m.ProducerEpoch != epoch || !m.Commit || m.CoordinatorEpoch != 7 || m.TransactionalID != "a" ||
		!slices.Equal(m.Partitions, []TopicPartition{tp("t", 0), tp("t", 1), tp("u", 0)}) {
		t.Fatalf("markers: %+v", m)
	}
	wantErr(t, "add while committing", h.add("a", pid, epoch, tp("t", 0)), kerr.ConcurrentTransactions)
	wantCode(t, "init while committing", h.init("a").ErrorCode, kerr.ConcurrentTransactions)
	wantCode(t, "commit again", h.end("a", pid, epoch, true, 3).ErrorCode, kerr.ConcurrentTransactions)
	wantCode(t, "abort while committing", h.end("a", pid, epoch, false, 3).ErrorCode, kerr.InvalidTxnState)
	h.answerMarkers(nil)
	if h.state("a") != CompleteCommit {
		t.Fatalf("state %v after the markers", h.state("a"))
	}
	v := h.lastValue("a")
	if v.State != kmsg.TransactionState(CompleteCommit) || len(v.Topics) != 0 || v.ProducerEpoch != epoch {
		t.Fatalf("complete record: %+v", v)
	}
	wantCode(t, "commit retried", h.end("a", pid, epoch, true, 3).ErrorCode, nil)
	wantCode(t, "abort after commit", h.end("a", pid, epoch, false, 3).ErrorCode, kerr.InvalidTxnState)
	wantCode(t, "end of nothing", h.end("a", pid, epoch+1, true, 3).ErrorCode, kerr.ProducerFenced)
	wantCode(t, "end of nothing, v1", h.end("a", pid, epoch+1, true, 1).ErrorCode, kerr.InvalidProducerEpoch)
	// A new transaction of the same producer.
	wantErr(t, "next add", h.add("a", pid, epoch, tp("t", 0)), nil)
	if h.state("a") != Ongoing || h.s.Txn("a").StartMs != h.now {
		t.Fatal("the next transaction did not start")
	}
}

func TestRequestErrors(t *testing.T) {
	h := newHarness(t)
	wantErr(t, "add unknown id", h.add("x", 1, 0, tp("t", 0)), kerr.InvalidProducerIDMapping)
	wantCode(t, "end unknown id", h.end("x", 1, 0, true, 3).ErrorCode, kerr.InvalidProducerIDMapping)
	pid, epoch := h.initOK("a")
	wantErr(t, "add other pid", h.add("a", pid+1, epoch, tp("t", 0)), kerr.InvalidProducerIDMapping)
	wantErr(t, "add other epoch", h.add("a", pid, epoch+1, tp("t", 0)), kerr.ProducerFenced)
	wantCode(t, "end of Empty", h.end("a", pid, epoch, true, 3).ErrorCode, kerr.InvalidTxnState)
	wantCode(t, "abort of Empty", h.end("a", pid, epoch, false, 3).ErrorCode, kerr.InvalidTxnState)
	wantCode(t, "end other pid", h.end("a", pid+1, epoch, true, 3).ErrorCode, kerr.InvalidProducerIDMapping)
}

// An append that fails leaves the state as it was, answers with Kafka's mapping, and the
// next attempt succeeds.
func TestWriteFailure(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.initOK("a")
	h.failing = kerr.NotEnoughReplicas
	wantErr(t, "add", h.add("a", pid, epoch, tp("t", 0)), kerr.CoordinatorNotAvailable)
	if h.state("a") != Empty {
		t.Fatal("a failed add changed the state")
	}
	h.failing = kerr.NotLeaderForPartition
	wantCode(t, "init", h.init("a").ErrorCode, kerr.NotCoordinator)
	if h.s.Txn("a").Epoch != epoch {
		t.Fatal("a failed init bumped the epoch")
	}
	h.failing = nil
	wantErr(t, "add", h.add("a", pid, epoch, tp("t", 0)), nil)
}

// A write in flight makes the id's other requests CONCURRENT_TRANSACTIONS.
func TestPendingWriteIsConcurrent(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.initOK("a")
	w := h.waiter("add")
	r := h.s.AddPartitions(h.now, w, "a", pid, epoch, []TopicPartition{tp("t", 0)}, false)
	if len(r.Writes) != 1 || len(r.Replies) != 0 {
		t.Fatalf("add: %+v", r)
	}
	wantErr(t, "second add", h.add("a", pid, epoch, tp("t", 1)), kerr.ConcurrentTransactions)
	wantCode(t, "end", h.end("a", pid, epoch, true, 3).ErrorCode, kerr.ConcurrentTransactions)
	h.run(r)
	wantErr(t, "first add", h.replies[w].(*kerr.Error), nil)
}

// Markers not written are retried with backoff, only for the partitions still missing them
// (which DescribeTransactions shows); the Complete record waits for all.
func TestMarkerRetry(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.initOK("a")
	h.add("a", pid, epoch, tp("t", 0), tp("t", 1))
	h.end("a", pid, epoch, false, 3)
	h.answerMarkers(map[TopicPartition]error{tp("t", 1): kerr.NotLeaderForPartition})
	if h.state("a") != PrepareAbort || len(h.warns) == 0 {
		t.Fatal("completed with a marker missing")
	}
	d := h.s.Describe("a")
	if d.State != "PrepareAbort" || len(d.Topics) != 1 || !slices.Equal(d.Topics[0].Partitions, []int32{1}) {
		t.Fatalf("describe: %+v", d)
	}
	h.advance(markerBackoffMinMs - 1)
	if len(h.jobs) != 0 {
		t.Fatal("retried before the backoff")
	}
	h.advance(1)
	if len(h.jobs) != 1 || !slices.Equal(h.jobs[0].Partitions, []TopicPartition{tp("t", 1)}) || h.jobs[0].Commit {
		t.Fatalf("retry: %+v", h.jobs)
	}
	h.answerMarkers(map[TopicPartition]error{tp("t", 1): kerr.RequestTimedOut})
	h.advance(markerBackoffMinMs) // the backoff doubled
	if len(h.jobs) != 0 {
		t.Fatal("the backoff did not grow")
	}
	h.advance(markerBackoffMinMs)
	h.answerMarkers(nil)
	if h.state("a") != CompleteAbort {
		t.Fatalf("state %v", h.state("a"))
	}
}

// A partition fencing the markers (a newer coordinator's) ends the attempts.
func TestMarkersFenced(t *testing.T) {
	h := newHarness(t)
	pid, epoch := h.initOK("a")
	h.add("a", pid, epoch, tp("t", 0))
	h.end("a", pid, epoch, true, 3)
	h.answerMarkers(map[TopicPartition]error{tp("t", 0): errors.Join(errors.New("leader says"), kerr.TransactionCoordinatorFenced)})
	h.advance(10 * markerBackoffMaxMs)
	if len(h.jobs) != 0 || h.state("a") != PrepareCommit {
		t.Fatalf("after a fence: %d attempts, state %v", len(h.jobs), h.state("a"))
	}
}

// A second producer with the same transactional id fences the first: its InitProducerId
// aborts the first's transaction with a bumped epoch (answering CONCURRENT_TRANSACTIONS until
// the abort is complete), the first's requests are fenced, and the second gets the epoch
// after that.
func TestFencingAbortsOngoing(t *testing.T) {
	h := newHarness(t)
	pid, e0 := h.initOK("a")
	h.add("a", pid, e0, tp("t", 0))
	wantCode(t, "second producer", h.init("a").ErrorCode, kerr.ConcurrentTransactions)
	tx := h.s.Txn("a")
	if tx.State != PrepareAbort || tx.Epoch != e0+1 || h.lastValue("a").ProducerEpoch != e0+1 {
		t.Fatalf("after the fence: %v epoch %d", tx.State, tx.Epoch)
	}
	if len(h.jobs) != 1 || h.jobs[0].Commit || h.jobs[0].ProducerEpoch != e0+1 {
		t.Fatalf("abort markers: %+v", h.jobs)
	}
	wantErr(t, "zombie add", h.add("a", pid, e0, tp("t", 1)), kerr.ProducerFenced)
	wantCode(t, "zombie commit", h.end("a", pid, e0, true, 3).ErrorCode, kerr.ProducerFenced)
	wantCode(t, "zombie commit v1", h.end("a", pid, e0, true, 1).ErrorCode, kerr.InvalidProducerEpoch)
	wantCode(t, "retry during the abort", h.init("a").ErrorCode, kerr.ConcurrentTransactions)
	h.answerMarkers(nil)
	npid, e := h.initOK("a")
	if npid != pid || e != e0+2 {
		t.Fatalf("second producer got %d/%d, want %d/%d", npid, e, pid, e0+2)
	}
}

// A fence whose write fails does not bump the epoch again at the next attempt.
func TestFailedFenceBumpsOnce(t *testing.T) {
	h := newHarness(t)
	pid, e0 := h.initOK("a")
	h.add("a", pid, e0, tp("t", 0))
	h.failing = kerr.NotEnoughReplicas
	wantCode(t, "fence", h.init("a").ErrorCode, kerr.CoordinatorNotAvailable)
	h.failing = nil
	wantCode(t, "fence again", h.init("a").ErrorCode, kerr.ConcurrentTransactions)
	if e := h.s.Txn("a").Epoch; e != e0+1 {
		t.Fatalf("epoch %d after two fences, want %d", e, e0+1)
	}
}

// A transaction open past its timeout is aborted at the next check, with an epoch bump that
// fences its producer.
func TestTimeoutAborts(t *testing.T) {
	h := newHarness(t)
	r := h.initReq(initReq("a", 5000, 4))
	pid, e0 := r.ProducerID, r.ProducerEpoch
	h.add("a", pid, e0, tp("t", 0))
	h.advance(5000) // not yet past: start+timeout >= now
	if h.state("a") != Ongoing {
		t.Fatalf("aborted at its timeout: %v", h.state("a"))
	}
	h.advance(1000)
	if h.state("a") != PrepareAbort || h.s.Txn("a").Epoch != e0+1 {
		t.Fatalf("after the timeout: %v epoch %d", h.state("a"), h.s.Txn("a").Epoch)
	}
	h.answerMarkers(nil)
	if h.state("a") != CompleteAbort {
		t.Fatal("abort not completed")
	}
	wantCode(t, "zombie commit", h.end("a", pid, e0, true, 3).ErrorCode, kerr.ProducerFenced)
	wantErr(t, "zombie add", h.add("a", pid, e0, tp("t", 0)), kerr.ProducerFenced)
}

// An id idle for transactional.id.expiration.ms is removed with a tombstone; one in a
// transaction is not.
func TestIDExpiry(t *testing.T) {
	h := newHarness(t)
	h.initOK("idle")
	pid, e := h.initOK("busy")
	h.add("busy", pid, e, tp("t", 0))
	tx := h.s.Txn("busy")
	tx.TimeoutMs = 1 << 30 // never times out here
	for i := 0; i < 12; i++ {
		h.advance(10_000)
	}
	if h.s.Txn("idle") != nil || h.lastValue("idle") != nil {
		t.Fatal("idle id not expired with a tombstone")
	}
	if h.s.Txn("busy") == nil {
		t.Fatal("an id in a transaction expired")
	}
	h.reload(8)
	if h.s.Txn("idle") != nil || h.s.Txn("busy") == nil {
		t.Fatal("replay did not see the tombstone")
	}
	pid2, e2 := h.initOK("idle")
	if pid2 == pid || e2 != 0 {
		t.Fatalf("an expired id came back as %d/%d", pid2, e2)
	}
}

// Replaying the log rebuilds every id; a transaction found in PrepareCommit gets its markers
// again (with the new coordinator epoch) and completes; one found Ongoing stays so until its
// timeout.
func TestReloadResumesMarkers(t *testing.T) {
	h := newHarness(t)
	pa, ea := h.initOK("a")
	h.add("a", pa, ea, tp("t", 0), tp("u", 2))
	h.end("a", pa, ea, true, 3)
	pb, eb := h.initOK("b")
	h.add("b", pb, eb, tp("t", 1))
	pc, ec := h.initOK("c")
	h.add("c", pc, ec, tp("t", 3))
	h.end("c", pc, ec, false, 3)
	h.answerMarkers(nil) // a's and c's markers written, but a's Complete record lost below
	h.log = h.log[:len(h.log)-2]
	h.advance(1)
	h.reload(9)
	if h.state("a") != PrepareCommit || h.state("b") != Ongoing || h.state("c") != PrepareAbort {
		t.Fatalf("reloaded states: a %v b %v c %v", h.state("a"), h.state("b"), h.state("c"))
	}
	if tx := h.s.Txn("b"); tx.ProducerID != pb || tx.Epoch != eb || tx.TimeoutMs != 10_000 || len(tx.Partitions) != 1 {
		t.Fatalf("b reloaded as %+v", tx)
	}
	if len(h.jobs) != 2 {
		t.Fatalf("%d marker attempts after the load, want 2", len(h.jobs))
	}
	for _, j := range h.jobs {
		if j.CoordinatorEpoch != 9 {
			t.Fatalf("markers in coordinator epoch %d, want 9", j.CoordinatorEpoch)
		}
	}
	wantCode(t, "a's producer retries", h.end("a", pa, ea, true, 3).ErrorCode, kerr.ConcurrentTransactions)
	h.answerMarkers(nil)
	if h.state("a") != CompleteCommit || h.state("c") != CompleteAbort {
		t.Fatal("reloaded transactions not completed")
	}
	wantCode(t, "a's producer retries", h.end("a", pa, ea, true, 3).ErrorCode, nil)
	h.advance(10_000)
	if h.state("b") != PrepareAbort {
		t.Fatalf("b after its timeout: %v", h.state("b"))
	}
}

// KIP-890 part 2: EndTxn v5 bumps the epoch at every end and answers the next one; a retry
// is recognised by the bumped epoch; an abort with nothing ongoing is allowed (it bumps).
func TestEndTxnV5(t *testing.T) {
	h := newHarness(t)
	pid, e := h.initOK("a")
	wantErr(t, "add", h.add("a", pid, e, tp("t", 0)), nil)
	r := h.end("a", pid, e, true, 5)
	if r.ErrorCode != 0 || r.ProducerID != pid || r.ProducerEpoch != e+1 {
		t.Fatalf("end v5: %+v", r)
	}
	if h.jobs[0].ProducerEpoch != e+1 {
		t.Fatalf("markers in epoch %d, want %d", h.jobs[0].ProducerEpoch, e+1)
	}
	if v := h.lastValue("a"); v.Version != 1 || v.ClientTransactionVersion != 2 || v.ProducerEpoch != e+1 {
		t.Fatalf("record: %+v", v)
	}
	wantCode(t, "retry while committing", h.end("a", pid, e, true, 5).ErrorCode, kerr.ConcurrentTransactions)
	wantCode(t, "current epoch while committing", h.end("a", pid, e+1, true, 5).ErrorCode, kerr.ProducerFenced)
	h.answerMarkers(nil)
	r = h.end("a", pid, e, true, 5)
	if r.ErrorCode != 0 || r.ProducerEpoch != e+1 {
		t.Fatalf("retried commit: %+v", r)
	}
	wantCode(t, "retried as abort", h.end("a", pid, e, false, 5).ErrorCode, kerr.InvalidTxnState)
	wantCode(t, "commit of nothing", h.end("a", pid, e+1, true, 5).ErrorCode, kerr.InvalidTxnState)
	r = h.end("a", pid, e+1, false, 5) // abort with nothing ongoing
	if r.ErrorCode != 0 || r.ProducerEpoch != e+2 || h.state("a") != CompleteAbort {
		t.Fatalf("empty abort: %+v, state %v", r, h.state("a"))
	}
	wantCode(t, "stale epoch", h.end("a", pid, e, false, 5).ErrorCode, kerr.ProducerFenced)
}

// With transaction version 2 an end at the last epochs moves the producer to a new producer
// id: the markers still carry the old one, the answer and the Complete record the new one at
// epoch 0, which survives a reload.
func TestEndTxnV5Overflow(t *testing.T) {
	h := newHarness(t)
	pid, _ := h.initOK("a")
	h.s.Txn("a").Epoch = maxEpoch - 1
	wantErr(t, "add", h.add("a", pid, maxEpoch-1, tp("t", 0)), nil)
	r := h.end("a", pid, maxEpoch-1, true, 5)
	if r.ErrorCode != 0 || r.ProducerID == pid || r.ProducerEpoch != 0 {
		t.Fatalf("end at the last epoch: %+v", r)
	}
	npid := r.ProducerID
	if m := h.jobs[0]; m.ProducerID != pid || m.ProducerEpoch != maxEpoch {
		t.Fatalf("markers: %+v", m.Markers)
	}
	h.reload(8) // the next producer id is in the PrepareCommit record
	h.answerMarkers(nil)
	tx := h.s.Txn("a")
	if tx.State != CompleteCommit || tx.ProducerID != npid || tx.Epoch != 0 {
		t.Fatalf("after completion: %+v", tx)
	}
	r = h.end("a", pid, maxEpoch-1, true, 5) // retried across the overflow
	if r.ErrorCode != 0 || r.ProducerID != npid || r.ProducerEpoch != 0 {
		t.Fatalf("retry: %+v", r)
	}
	wantErr(t, "add with the new id", h.add("a", npid, 0, tp("t", 0)), nil)
}

// KIP-890 part 1: a partition leader's check answers whether each partition is in the
// producer's ongoing transaction.
func TestVerifyPartitions(t *testing.T) {
	h := newHarness(t)
	pid, e := h.initOK("a")
	got := h.s.VerifyPartitions("a", pid, e, []TopicPartition{tp("t", 0)})
	wantErr(t, "before any add", got[tp("t", 0)], kerr.InvalidTxnState)
	h.add("a", pid, e, tp("t", 0))
	got = h.s.VerifyPartitions("a", pid, e, []TopicPartition{tp("t", 0), tp("t", 1)})
	wantErr(t, "added", got[tp("t", 0)], nil)
	wantErr(t, "not added", got[tp("t", 1)], kerr.InvalidTxnState)
	wantErr(t, "other epoch", h.s.VerifyPartitions("a", pid, e+1, []TopicPartition{tp("t", 0)})[tp("t", 0)], kerr.ProducerFenced)
	wantErr(t, "other pid", h.s.VerifyPartitions("a", pid+1, e, []TopicPartition{tp("t", 0)})[tp("t", 0)], kerr.InvalidProducerIDMapping)
	wantErr(t, "unknown id", h.s.VerifyPartitions("x", pid, e, []TopicPartition{tp("t", 0)})[tp("t", 0)], kerr.InvalidProducerIDMapping)
	h.end("a", pid, e, true, 3)
	wantErr(t, "committing", h.s.VerifyPartitions("a", pid, e, []TopicPartition{tp("t", 0)})[tp("t", 0)], kerr.ConcurrentTransactions)
	h.answerMarkers(nil)
	wantErr(t, "committed", h.s.VerifyPartitions("a", pid, e, []TopicPartition{tp("t", 0)})[tp("t", 0)], kerr.InvalidTxnState)
}

func TestListFilters(t *testing.T) {
	h := newHarness(t)
	h.initOK("e1")
	pid, e := h.initOK("o1")
	h.add("o1", pid, e, tp("t", 0))
	h.advance(5000)
	pid2, e2 := h.initOK("o2")
	h.add("o2", pid2, e2, tp("t", 0))
	ids := func(f ListFilter) []string {
		var out []string
		for _, l := range h.s.List(h.now, f) {
			out = append(out, l.TransactionalID+"/"+l.TransactionState)
		}
		return out
	}
	all := ListFilter{DurationMs: -1}
	if got := ids(all); !slices.Equal(got, []string{"e1/Empty", "o1/Ongoing", "o2/Ongoing"}) {
		t.Fatalf("all: %v", got)
	}
	if got := ids(ListFilter{DurationMs: -1, States: map[State]bool{Ongoing: true}}); len(got) != 2 {
		t.Fatalf("ongoing: %v", got)
	}
	if got := ids(ListFilter{DurationMs: -1, ProducerIDs: map[int64]bool{pid2: true}}); !slices.Equal(got, []string{"o2/Ongoing"}) {
		t.Fatalf("producer id: %v", got)
	}
	if got := ids(ListFilter{DurationMs: 4000, States: map[State]bool{Ongoing: true}}); !slices.Equal(got, []string{"o1/Ongoing"}) {
		t.Fatalf("duration: %v", got)
	}
	if got := ids(ListFilter{DurationMs: -1, Pattern: regexp.MustCompile("^(?:o)$")}); len(got) != 0 {
		t.Fatalf("pattern is not a whole match: %v", got)
	}
	d := h.s.Describe("o1")
	if d.ErrorCode != 0 || d.State != "Ongoing" || d.ProducerID != pid || d.TimeoutMillis != 10_000 || d.StartTimestamp != h.now-5000 {
		t.Fatalf("describe: %+v", d)
	}
	wantCode(t, "describe unknown", h.s.Describe("zz").ErrorCode, kerr.TransactionalIDNotFound)
}

// Unloading fails the writes in flight NOT_COORDINATOR.
func TestUnloadFailsPending(t *testing.T) {
	h := newHarness(t)
	pid, e := h.initOK("a")
	w := h.waiter("add")
	r := h.s.AddPartitions(h.now, w, "a", pid, e, []TopicPartition{tp("t", 0)}, false)
	if len(r.Writes) != 1 {
		t.Fatal("no write")
	}
	u := h.s.Unload(h.now)
	if len(u.Replies) != 1 || u.Replies[0].Msg.(*kerr.Error) != kerr.NotCoordinator {
		t.Fatalf("unload: %+v", u)
	}
	if h.s.NumTxns() != 0 {
		t.Fatal("state kept")
	}
}

func TestRecordRoundTrip(t *testing.T) {
	n := transit{ProducerID: 5, PrevProducerID: 4, NextProducerID: 9, Epoch: 3, LastEpoch: 2, TimeoutMs: 1000, State: PrepareCommit,
		Partitions: []TopicPartition{tp("a", 0), tp("a", 2), tp("b", 1)}, StartMs: 10, UpdateMs: 20, ClientVersion: 2}
	recs := records("x", n)
	id, err := decodeKey(recs[0].Key)
	if err != nil || id != "x" {
		t.Fatalf("key: %q %v", id, err)
	}
	tx, err := decodeValue(id, recs[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	if tx.ProducerID != 5 || tx.PrevProducerID != 4 || tx.NextProducerID != 9 || tx.Epoch != 3 || tx.LastEpoch != -1 || tx.TimeoutMs != 1000 ||
		tx.State != PrepareCommit || len(tx.Partitions) != 3 || tx.StartMs != 10 || tx.UpdateMs != 20 || tx.ClientVersion != 2 {
		t.Fatalf("decoded %+v", tx)
	}
	// A transaction of the older protocol is written in version 1 too, as transaction
	// version 0.
	n.ClientVersion = 0
	var v kmsg.TxnMetadataValue
	if err := v.ReadFrom(records("x", n)[0].Value); err != nil || v.Version != 1 || v.ClientTransactionVersion != 0 || len(v.Topics) != 2 {
		t.Fatalf("transaction version 0: %+v %v", v, err)
	}
	// A version 0 value (written before transaction.version 1) is still read.
	old := kmsg.NewTxnMetadataValue()
	old.Version, old.ProducerID, old.ProducerEpoch, old.TimeoutMillis = 0, 7, 2, 500
	old.State, old.LastUpdateTimestamp, old.StartTimestamp = kmsg.TransactionState(CompleteCommit), 30, 25
	old.Topics = []kmsg.TxnMetadataValueTopic{}
	tx, err = decodeValue("y", old.AppendTo(nil))
	if err != nil || tx.ProducerID != 7 || tx.Epoch != 2 || tx.State != CompleteCommit || tx.ClientVersion != 0 || tx.PrevProducerID != -1 || tx.NextProducerID != -1 {
		t.Fatalf("version 0 value: %+v %v", tx, err)
	}
	s := NewShard(testConfig(), 0)
	if err := s.Replay([]byte{0, 1, 0, 0}, nil); !errors.Is(err, ErrUnknownRecord) {
		t.Fatalf("key version 1: %v", err)
	}
	if err := s.Replay(keyRecord("x"), []byte{0, 0, 1}); !errors.Is(err, ErrCorruptRecord) {
		t.Fatalf("short value: %v", err)
	}
}

// A transaction of transaction version 2 aborted by the coordinator (its timeout) gets the
// fence's bump and the version-2 bump, so its producer's EndTxn v5 with its old epoch is not
// taken for a retry of an end: it is fenced.
func TestTimeoutFencesV2Producer(t *testing.T) {
	h := newHarness(t)
	pid, e := h.initOK("a")
	h.add("a", pid, e, tp("t", 0))
	r := h.end("a", pid, e, true, 5)
	e = r.ProducerEpoch
	h.answerMarkers(nil)
	h.add("a", pid, e, tp("t", 0))
	h.advance(11_000)
	if h.state("a") != PrepareAbort || h.s.Txn("a").Epoch != e+2 {
		t.Fatalf("after the timeout: %v epoch %d, want PrepareAbort at %d", h.state("a"), h.s.Txn("a").Epoch, e+2)
	}
	h.answerMarkers(nil)
	wantCode(t, "zombie end v5", h.end("a", pid, e, true, 5).ErrorCode, kerr.ProducerFenced)
	wantCode(t, "zombie abort v5", h.end("a", pid, e, false, 5).ErrorCode, kerr.ProducerFenced)
}

// A client of transaction version 2 end to end in the core: the partition leader adds the
// partitions (AddPartitionsToTxn v5, tv2), which marks the transaction version 2 in its
// record; EndTxn v5 answers the bumped epoch and its markers carry it with transaction
// version 2 (WriteTxnMarkers v2); the next transaction is added in the bumped epoch and the
// old one is fenced. A client of the older protocol gets markers of transaction version 0
// in its own epoch.
func TestTransactionVersion2Sequence(t *testing.T) {
	h := newHarness(t)
	pid, e := h.initOK("a")
	w := h.waiter("leader add")
	h.run(h.s.AddPartitions(h.now, w, "a", pid, e, []TopicPartition{tp("t", 0), tp(groupTopic, 3)}, true))
	wantErr(t, "leader add", h.replies[w].(*kerr.Error), nil)
	if v := h.lastValue("a"); v.Version != 1 || v.ClientTransactionVersion != 2 || v.State != kmsg.TransactionState(Ongoing) {
		t.Fatalf("Ongoing record: %+v", v)
	}
	r := h.end("a", pid, e, true, 5)
	if r.ErrorCode != 0 || r.ProducerID != pid || r.ProducerEpoch != e+1 {
		t.Fatalf("EndTxn v5: %+v", r)
	}
	jobs := h.answerMarkers(nil)
	if len(jobs) != 1 || jobs[0].TransactionVersion != 2 || jobs[0].ProducerEpoch != e+1 || len(jobs[0].Partitions) != 2 {
		t.Fatalf("markers: %+v", jobs)
	}
	if h.state("a") != CompleteCommit {
		t.Fatalf("after the markers: %v", h.state("a"))
	}
	w = h.waiter("stale add")
	h.run(h.s.AddPartitions(h.now, w, "a", pid, e, []TopicPartition{tp("t", 0)}, true))
	wantErr(t, "add in the epoch before the end", h.replies[w].(*kerr.Error), kerr.ProducerFenced)
	w = h.waiter("next add")
	h.run(h.s.AddPartitions(h.now, w, "a", pid, e+1, []TopicPartition{tp("t", 0)}, true))
	wantErr(t, "add in the bumped epoch", h.replies[w].(*kerr.Error), nil)

	pb, eb := h.initOK("b")
	wantErr(t, "add b", h.add("b", pb, eb, tp("t", 1)), nil)
	if r := h.end("b", pb, eb, false, 4); r.ErrorCode != 0 {
		t.Fatalf("EndTxn v4: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	jobs = h.answerMarkers(nil)
	if len(jobs) != 1 || jobs[0].TransactionVersion != 0 || jobs[0].ProducerEpoch != eb {
		t.Fatalf("markers of transaction version 0: %+v", jobs)
	}
}
