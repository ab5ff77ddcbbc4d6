package replica

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gregor-project/gregor/internal/storage"
)

// Retention deleting the segment where an open transaction started moves the log start
// past the transaction's first offset: the last stable offset follows it at once (Kafka's
// firstUnstableOffset is never below the log start), not only at the next append.
func TestTxnRetentionPastOpenTransactionMovesLSO(t *testing.T) {
	m := roleManager(t, t.TempDir(), 1, nil)
	defer m.Close()
	p := openRolePartition(t, m, 1)
	mustAppendRaw(t, p, txnBatch(t, 7, 0, 0, "open")) // 0, never ended
	wantLSO(t, "transaction open at 0", p, 0)
	big := strings.Repeat("x", 600)
	for i := 0; i < 8; i++ { // several 2 KB segments
		appendValues(t, p, false, big)
	}
	if n := p.Log().NumSegments(); n < 3 {
		t.Fatalf("%d segments, want several", n)
	}
	cfg := p.Log().Config()
	cfg.RetentionMs = 1
	p.Log().Reconfigure(cfg)
	if n, err := p.Log().DeleteExpired(1 << 40); err != nil || n == 0 {
		t.Fatalf("retention deleted %d segments: %v", n, err)
	}
	start := p.Log().LogStartOffset()
	if start == 0 {
		t.Fatal("retention left the log start at 0")
	}
	wantLSO(t, "after retention deleted the transaction's first segment", p, min(start, p.HighWatermark()))
}

// producer.id.expiration.ms: an idle producer (its last batch's timestamp that long ago) is
// forgotten, unless a transaction of its is ongoing; a verification guard never used is
// dropped too (a coordinator check that failed leaves one behind), as Kafka's
// removeExpiredProducers does. Without it the state grows with every producer id ever seen.
func TestProducerStateExpiresIdleProducersAndGuards(t *testing.T) {
	s := NewProducerState()
	idle := hdr(1, 0, 0, 1, 0)
	idle.MaxTimestamp = 1000
	s.Update(&idle)
	open := txnHdr(2, 0, 0, 1, 1)
	open.MaxTimestamp = 1000
	s.Update(&open)
	g, _ := s.StartVerification(3, 0) // its coordinator check failed: never used
	const expiry = 10_000
	if n := s.RemoveExpired(1000+expiry-1, expiry); n != 0 || s.Len() != 2 {
		t.Fatalf("before the expiration: removed %d, %d producers left", n, s.Len())
	}
	recent := hdr(4, 0, 0, 1, 2)
	recent.MaxTimestamp = 1000 + expiry
	s.Update(&recent)
	if n := s.RemoveExpired(1000+expiry, expiry); n != 1 {
		t.Fatalf("removed %d producers, want 1", n)
	}
	ids := []int64{}
	for _, pi := range s.Producers() {
		ids = append(ids, pi.ProducerID)
	}
	if len(ids) != 2 || ids[0] != 2 || ids[1] != 4 {
		t.Fatalf("producers left %v, want [2 4] (2's transaction is ongoing, 4 is recent)", ids)
	}
	if s.FirstUnstableOffset() != 1 {
		t.Fatalf("first unstable offset %d, want 1", s.FirstUnstableOffset())
	}
	// The guard is gone by the next sweep past the expiration time: a later verification
	// gets a new one, and the stale one no longer lets a transaction start.
	s.RemoveExpired(1000+2*expiry, expiry)
	start := txnHdr(3, 0, 0, 1, 3)
	if err := s.CheckVerification(&start, g); err == nil {
		t.Fatal("a guard left by a failed verification still starts a transaction after the expiration")
	}
	if g2, needed := s.StartVerification(3, 0); !needed || g2 == g {
		t.Fatalf("a fresh verification got guard %d (stale %d), needed %v", g2, g, needed)
	}
}

// The partitions' sweep (Manager.ExpireProducers) applies it to every partition.
func TestManagerExpireProducers(t *testing.T) {
	m := roleManager(t, t.TempDir(), 1, nil)
	defer m.Close()
	p := openRolePartition(t, m, 1)
	mustAppendRaw(t, p, buildBatchFor(t, 7, 0, 0, "a")) // timestamp 1000
	mustAppendRaw(t, p, txnBatch(t, 8, 0, 0, "b"))
	if n := m.ExpireProducers(1000+86_400_000, 86_400_000); n != 1 {
		t.Fatalf("expired %d producers, want 1", n)
	}
	if ps := p.ActiveProducers(); len(ps) != 1 || ps[0].ProducerID != 8 {
		t.Fatalf("producers left %+v, want only 8 (its transaction is open)", ps)
	}
}

// A restart after kill -9 (no new snapshot) once retention has moved the log start past the
// snapshot's offset: the snapshot says producer 5's transaction is open, but its COMMIT
// marker was in the deleted segments, so the replay from the log start never ends it. Kafka
// never loads a snapshot below the log start (truncateAndReload deletes them): the replay
// from the log start alone is the state. Otherwise the LSO stays pinned to the log start.
func TestTxnRestartFromSnapshotBelowLogStart(t *testing.T) {
	dir := t.TempDir()
	m := roleManager(t, dir, 1, nil)
	p := openRolePartition(t, m, 1)
	mustAppendRaw(t, p, txnBatch(t, 5, 0, 0, "t")) // 0
	if err := m.Close(); err != nil {              // the snapshot at 1: 5's transaction open
		t.Fatal(err)
	}
	m = roleManager(t, dir, 1, nil)
	defer m.Close()
	p = openRolePartition(t, m, 1)
	mustMarker(t, p, TxnMarker{ProducerID: 5, ProducerEpoch: 0, Commit: true, CoordinatorEpoch: 1}) // 1
	big := strings.Repeat("x", 600)
	for i := 0; i < 8; i++ {
		appendValues(t, p, false, big)
	}
	cfg := p.Log().Config()
	cfg.RetentionMs = 1
	p.Log().Reconfigure(cfg)
	if _, err := p.Log().DeleteExpired(1 << 40); err != nil {
		t.Fatal(err)
	}
	if p.Log().LogStartOffset() <= 1 {
		t.Fatalf("log start %d: retention kept the marker", p.Log().LogStartOffset())
	}
	appendValues(t, p, false, "after")
	wantLSO(t, "before the crash", p, p.HighWatermark())

	// kill -9: the files as they are, no snapshot at the end, no clean shutdown.
	crashed := filepath.Join(t.TempDir(), "crashed")
	if err := os.CopyFS(crashed, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	m2 := roleManager(t, crashed, 1, nil)
	defer m2.Close()
	p2 := openRolePartition(t, m2, 1)
	if ps := p2.ActiveProducers(); len(ps) > 0 && ps[0].TxnStartOffset >= 0 {
		t.Fatalf("after the restart producer 5's committed transaction is open again: %+v", ps)
	}
	wantLSO(t, "after the restart", p2, p2.HighWatermark())
}

// An ABORT whose transaction index entry could not be written (out of descriptors: the log
// stays online and the append stands) is re-added by the next rebuild, which replays the log
// from the newest snapshot. A clean shutdown must then not write a snapshot past the marker,
// or the next start replays nothing and the entry is lost for good: read_committed consumers
// would take the aborted records for committed ones.
func TestTxnIndexEntryLostOnAppendSurvivesCleanRestart(t *testing.T) {
	dir := t.TempDir()
	ffs := storage.NewFaultFS(storage.OS)
	open := func() (*Manager, *Partition) {
		logs, err := storage.OpenManager(ffs, dir, quiet)
		if err != nil {
			t.Fatal(err)
		}
		m := NewManager(ffs, logs, quiet)
		p, err := m.Open("t", 0, roleSettings(1))
		if err != nil {
			t.Fatal(err)
		}
		return m, p
	}
	m, p := open()
	mustAppendRaw(t, p, txnBatch(t, 5, 0, 0, "t1", "t2")) // 0..1
	ffs.Inject(storage.Fault{Op: storage.FaultOpen, Pattern: "*.txnindex", Err: storage.ErrTooManyOpenFiles, Times: -1})
	mustMarker(t, p, TxnMarker{ProducerID: 5, ProducerEpoch: 0, Commit: false, CoordinatorEpoch: 1}) // 2
	ffs.Clear()
	if got := aborted(t, p); len(got) != 0 {
		t.Fatalf("the fault did not take: %v", got)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m, p = open()
	defer m.Close()
	want := []storage.AbortedTxn{{ProducerID: 5, FirstOffset: 0, LastOffset: 2, LastStableOffset: 3}}
	if got := aborted(t, p); !reflect.DeepEqual(got, want) {
		t.Fatalf("aborted transactions after a clean restart %v, want %v", got, want)
	}
}
