package replica

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"reflect"
	"testing"

	"github.com/gregor-project/gregor/internal/batch"
)

// Tests of the producer state's transaction rules, deterministic (no log, no clock): the
// ongoing set and the first unstable offset, markers and their fencing, coordinator batches,
// the verification guard and the snapshot of it all.

func txnHdr(pid int64, epoch int16, seq int32, n int32, base int64) batch.Header {
	h := hdr(pid, epoch, seq, n, base)
	h.Attributes = batch.AttrTransactional
	return h
}

func markerHdr(pid int64, epoch int16, at int64) batch.Header {
	return batch.Header{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: -1, BaseOffset: at, Attributes: batch.AttrControl | batch.AttrTransactional}
}

func TestProducerStateTransactions(t *testing.T) {
	s := NewProducerState()
	step := func(name string, h batch.Header, wantErr error) {
		t.Helper()
		if _, err := s.Check(&h); !errors.Is(err, wantErr) {
			t.Fatalf("%s: err %v, want %v", name, err, wantErr)
		}
		if wantErr == nil {
			s.Update(&h)
		}
	}
	unstable := func(name string, want int64) {
		t.Helper()
		if got := s.FirstUnstableOffset(); got != want {
			t.Fatalf("%s: first unstable offset %d, want %d", name, got, want)
		}
	}
	unstable("empty", math.MaxInt64)
	step("producer 1 starts a transaction at 0", txnHdr(1, 0, 0, 3, 0), nil)
	step("its next batch continues it", txnHdr(1, 0, 3, 1, 3), nil)
	unstable("one ongoing", 0)
	step("a non-transactional batch inside the transaction", hdr(1, 0, 4, 1, 99), ErrInvalidTxnState)
	step("producer 2 starts one at 4", txnHdr(2, 0, 0, 1, 4), nil)
	step("a coordinator's batch (sequence -1) of producer 3 starts one at 5", txnHdr(3, 0, -1, 1, 5), nil)
	step("and another: no sequence check", txnHdr(3, 0, -1, 2, 6), nil)
	step("but the epoch is checked", txnHdr(3, -1, -1, 1, 99), ErrInvalidEpoch)
	unstable("three ongoing", 0)

	// Markers: the epoch, then the coordinator epoch.
	if err := s.CheckMarker(1, -1, 0); !errors.Is(err, ErrInvalidEpoch) {
		t.Fatalf("marker of an older producer epoch: %v", err)
	}
	m := markerHdr(1, 0, 8)
	c := s.ApplyMarker(&m, false, 5)
	if want := (CompletedTxn{ProducerID: 1, FirstOffset: 0, LastOffset: 8, Aborted: true, LastStableOffset: 4}); c != want {
		t.Fatalf("abort of producer 1: %+v, want %+v", c, want)
	}
	if got := s.Ongoing(1); got != -1 {
		t.Fatalf("producer 1 still has a transaction at %d", got)
	}
	// The abort is not committed until the high watermark passes its marker.
	unstable("aborted, marker not replicated", 0)
	s.OnHighWatermark(8)
	unstable("high watermark at the marker", 0)
	s.OnHighWatermark(9)
	unstable("marker below the high watermark", 4)
	if err := s.CheckMarker(1, 0, 4); !errors.Is(err, ErrTransactionCoordinatorFenced) {
		t.Fatalf("marker of an older coordinator epoch: %v", err)
	}
	if err := s.CheckMarker(1, 0, 5); err != nil {
		t.Fatalf("marker of the same coordinator epoch: %v", err)
	}
	step("producer 1 may write outside a transaction again", hdr(1, 0, 4, 1, 9), nil)
	unstable("after a plain batch", 4)

	// A commit in a bumped epoch (KIP-890 part 2) moves the producer to it.
	m = markerHdr(2, 1, 10)
	c = s.ApplyMarker(&m, true, 5)
	if want := (CompletedTxn{ProducerID: 2, FirstOffset: 4, LastOffset: 10, Aborted: false, LastStableOffset: 5}); c != want {
		t.Fatalf("commit of producer 2: %+v, want %+v", c, want)
	}
	step("producer 2's old epoch is fenced", txnHdr(2, 0, 1, 1, 99), ErrInvalidEpoch)
	s.OnHighWatermark(11)
	unstable("producer 3 left", 5)
	// A marker for a producer with no transaction here ends an empty one at itself.
	m = markerHdr(9, 0, 11)
	if c := s.ApplyMarker(&m, false, 0); c.FirstOffset != 11 || c.LastOffset != 11 || c.LastStableOffset != 5 {
		t.Fatalf("marker without a transaction: %+v", c)
	}
	unstable("empty abort holds nothing", 5)

	// The snapshot keeps ongoing transactions and coordinator epochs.
	got, err := decodeSnapshot(s.encode())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Producers(), s.Producers()) {
		t.Fatalf("snapshot round trip:\n got %+v\nwant %+v", got.Producers(), s.Producers())
	}
	if got.FirstUnstableOffset() != 5 || got.Ongoing(3) != 5 {
		t.Fatalf("snapshot: first unstable %d, producer 3 at %d", got.FirstUnstableOffset(), got.Ongoing(3))
	}
	if err := got.CheckMarker(1, 0, 4); !errors.Is(err, ErrTransactionCoordinatorFenced) {
		t.Fatalf("coordinator epoch lost by the snapshot: %v", err)
	}
	want := []ProducerInfo{
		{ProducerID: 1, Epoch: 0, LastSequence: 4, CoordinatorEpoch: 5, TxnStartOffset: -1},
		{ProducerID: 2, Epoch: 1, LastSequence: -1, CoordinatorEpoch: 5, TxnStartOffset: -1},
		{ProducerID: 3, Epoch: 0, LastSequence: -1, CoordinatorEpoch: -1, TxnStartOffset: 5},
		{ProducerID: 9, Epoch: 0, LastSequence: -1, CoordinatorEpoch: 0, TxnStartOffset: -1},
	}
	if ps := s.Producers(); !reflect.DeepEqual(ps, want) {
		t.Fatalf("producers:\n got %+v\nwant %+v", ps, want)
	}
}

func TestProducerStateVerificationGuard(t *testing.T) {
	s := NewProducerState()
	start := txnHdr(4, 0, 0, 1, 0)
	if err := s.CheckVerification(&start, 0); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("unverified start of a transaction: %v", err)
	}
	g, needed := s.StartVerification(4, 0)
	if !needed || g == 0 {
		t.Fatalf("StartVerification: %d, %v", g, needed)
	}
	if g2, _ := s.StartVerification(4, 0); g2 != g {
		t.Fatalf("a second verification in flight got guard %d, not %d", g2, g)
	}
	if err := s.CheckVerification(&start, g+1); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("wrong guard: %v", err)
	}
	plain := hdr(4, 0, 0, 1, 0)
	if err := s.CheckVerification(&plain, 0); err != nil {
		t.Fatalf("a non-transactional batch needs no guard: %v", err)
	}
	if err := s.CheckVerification(&start, g); err != nil {
		t.Fatalf("verified: %v", err)
	}
	s.Update(&start)
	if _, needed := s.StartVerification(4, 0); needed {
		t.Fatal("verification needed with the transaction ongoing in the same epoch")
	}
	next := txnHdr(4, 0, 1, 1, 1)
	if err := s.CheckVerification(&next, 0); err != nil {
		t.Fatalf("a batch continuing the transaction: %v", err)
	}
	// The late write: verified, then the transaction ends before it is appended.
	m := markerHdr(4, 0, 2)
	s.ApplyMarker(&m, false, 0)
	g, _ = s.StartVerification(4, 0)
	m = markerHdr(4, 0, 3)
	s.ApplyMarker(&m, false, 0)
	late := txnHdr(4, 0, 2, 1, 4)
	if err := s.CheckVerification(&late, g); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("a write verified before the marker, appended after it: %v", err)
	}
}

// A snapshot of the format before transactions ("GPS1") is still read.
func TestProducerSnapshotReadsOldFormat(t *testing.T) {
	b := make([]byte, 12)
	copy(b, "GPS1")
	binary.BigEndian.PutUint32(b[8:], 1)
	b = binary.BigEndian.AppendUint64(b, 42)  // producer id
	b = binary.BigEndian.AppendUint16(b, 3)   // epoch
	b = binary.BigEndian.AppendUint64(b, 777) // last timestamp
	b = append(b, 1)
	b = binary.BigEndian.AppendUint32(b, 10)
	b = binary.BigEndian.AppendUint32(b, 12)
	b = binary.BigEndian.AppendUint64(b, 100)
	b = binary.BigEndian.AppendUint64(b, 102)
	binary.BigEndian.PutUint32(b[4:], crc32.Checksum(b[8:], crcTable))
	s, err := decodeSnapshot(b)
	if err != nil {
		t.Fatal(err)
	}
	want := []ProducerInfo{{ProducerID: 42, Epoch: 3, LastSequence: 12, LastTimestamp: 777, CoordinatorEpoch: -1, TxnStartOffset: -1}}
	if got := s.Producers(); !reflect.DeepEqual(got, want) || s.FirstUnstableOffset() != math.MaxInt64 {
		t.Fatalf("GPS1 snapshot: %+v", got)
	}
	retry := hdr(42, 3, 10, 3, 0)
	if dup, _ := s.Check(&retry); dup == nil || dup.FirstOffset != 100 {
		t.Fatalf("retry after a GPS1 load: %+v", dup)
	}
}
