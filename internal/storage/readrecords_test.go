package storage

import (
	"testing"

	"github.com/gregor-project/gregor/internal/batch"
)

// ReadRecords steps over batches compaction emptied when they come first, within a segment
// and across segments, and answers empty when only emptied batches are left below maxOffset;
// Read (for followers) returns them.
func TestReadRecordsSkipsEmptiedBatches(t *testing.T) {
	cfg := testCfg()
	e := newEnv(t, cfg)
	l := e.open(true, 0, 0)
	defer l.Close()
	emptied := func(last int32) []byte {
		h := batch.Header{PartitionLeaderEpoch: -1, LastOffsetDelta: last, BaseTimestamp: 1000,
			MaxTimestamp: 1000, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
		b, err := batch.Build(h, nil, batch.CodecNone)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	mustAppend(t, l, emptied(4))                  // offsets 0..4, no records
	mustAppend(t, l, emptied(2))                  // 5..7
	mustAppend(t, l, simpleBatch(t, 1, 1000, 10)) // 8
	l.writeMu.Lock()                              // the next segment starts with an emptied batch
	err := l.rollLocked(l.LogEndOffset())
	l.writeMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, emptied(1))                  // 9..10
	mustAppend(t, l, simpleBatch(t, 1, 1000, 10)) // 11
	mustAppend(t, l, emptied(0))                  // 12

	first := func(s Slice, err error) int64 {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if s.Size == 0 {
			return -1
		}
		hs := readBatches(t, s) // releases s
		return hs[0].BaseOffset
	}
	for _, c := range []struct{ from, want int64 }{{0, 8}, {3, 8}, {6, 8}, {8, 8}, {9, 11}, {10, 11}, {12, -1}} {
		if got := first(l.ReadRecords(c.from, 1<<20, 1<<62, true)); got != c.want {
			t.Errorf("ReadRecords(%d) starts at %d, want %d", c.from, got, c.want)
		}
	}
	if got := first(l.ReadRecords(0, 1<<20, 8, true)); got != -1 {
		t.Errorf("ReadRecords(0) below 8: starts at %d, want nothing", got)
	}
	if got := first(l.Read(0, 1<<20, 1<<62, true)); got != 0 {
		t.Errorf("Read(0) starts at %d, want the emptied batch at 0", got)
	}
}
