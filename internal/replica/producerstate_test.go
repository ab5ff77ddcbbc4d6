package replica

import (
	"math"
	"testing"

	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/storage"
)

func hdr(pid int64, epoch int16, seq int32, n int32, base int64) batch.Header {
	return batch.Header{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, LastOffsetDelta: n - 1, BaseOffset: base}
}

// The duplicate, gap and fencing rules, step by step.
func TestProducerStateRules(t *testing.T) {
	s := NewProducerState()
	steps := []struct {
		name    string
		h       batch.Header
		wantDup int64 // -1: not a duplicate
		wantErr error
		append  bool
	}{
		{"first batch of an unknown producer, any sequence", hdr(1, 0, 7, 3, 0), -1, nil, true},
		{"next in sequence", hdr(1, 0, 10, 2, 3), -1, nil, true},
		{"exact retry of the last batch", hdr(1, 0, 10, 2, 99), 3, nil, false},
		{"exact retry of an older batch", hdr(1, 0, 7, 3, 99), 0, nil, false},
		{"gap", hdr(1, 0, 13, 1, 99), -1, ErrOutOfOrderSequence, false},
		{"overlapping but not exact", hdr(1, 0, 11, 1, 99), -1, ErrOutOfOrderSequence, false},
		{"old epoch", hdr(1, -1, 12, 1, 99), -1, ErrInvalidEpoch, false},
		{"new epoch must start at 0", hdr(1, 1, 5, 1, 99), -1, ErrOutOfOrderSequence, false},
		{"new epoch from 0", hdr(1, 1, 0, 1, 5), -1, nil, true},
		{"the old epoch is now fenced", hdr(1, 0, 12, 1, 99), -1, ErrInvalidEpoch, false},
		{"non-idempotent batches are never checked", hdr(-1, -1, -1, 1, 6), -1, nil, true},
	}
	for _, st := range steps {
		dup, err := s.Check(&st.h)
		if err != st.wantErr {
			t.Fatalf("%s: err %v, want %v", st.name, err, st.wantErr)
		}
		if (dup != nil) != (st.wantDup >= 0) || (dup != nil && dup.FirstOffset != st.wantDup) {
			t.Fatalf("%s: dup %+v, want offset %d", st.name, dup, st.wantDup)
		}
		if st.append {
			s.Update(&st.h)
		}
	}
}

// Only the last five batches are remembered; sequences wrap at MaxInt32.
func TestProducerStateWindowAndWrap(t *testing.T) {
	s := NewProducerState()
	for i := int32(0); i < 7; i++ {
		h := hdr(9, 0, i, 1, int64(i))
		s.Update(&h)
	}
	old := hdr(9, 0, 1, 1, 0)
	if _, err := s.Check(&old); err != ErrOutOfOrderSequence {
		t.Fatalf("a batch older than the last five: %v", err)
	}
	recent := hdr(9, 0, 2, 1, 0)
	if dup, _ := s.Check(&recent); dup == nil || dup.FirstOffset != 2 {
		t.Fatalf("the fifth-newest batch is still deduplicated: %+v", dup)
	}
	w := NewProducerState()
	last := hdr(3, 0, math.MaxInt32, 1, 0)
	w.Update(&last)
	wrapped := hdr(3, 0, 0, 1, 1)
	if dup, err := w.Check(&wrapped); dup != nil || err != nil {
		t.Fatalf("sequence after MaxInt32 is 0: %v %v", dup, err)
	}
}

// Snapshots round-trip; a damaged newest snapshot falls back to an older one; snapshots past
// the log end are removed.
func TestProducerSnapshots(t *testing.T) {
	dir := t.TempDir()
	fs := storage.OS
	s := NewProducerState()
	for i := int32(0); i < 3; i++ {
		h := hdr(int64(i), int16(i), i*10, 2, int64(i)*2)
		s.Update(&h)
	}
	if err := writeSnapshot(fs, dir, 6, s); err != nil {
		t.Fatal(err)
	}
	got, off, err := loadSnapshot(fs, dir, 0, 100)
	if err != nil || off != 6 || got.Len() != 3 {
		t.Fatalf("load: %v offset %d len %d", err, off, got.Len())
	}
	retry := hdr(2, 2, 20, 2, 0)
	if dup, _ := got.Check(&retry); dup == nil || dup.FirstOffset != 4 {
		t.Fatalf("retry after reload not deduplicated: %+v", dup)
	}
	if err := writeSnapshot(fs, dir, 8, NewProducerState()); err != nil {
		t.Fatal(err)
	}
	f, err := fs.OpenFile(snapshotName(dir, 8), 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("XXXX"), 8); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, off, _ := loadSnapshot(fs, dir, 0, 100); off != 6 {
		t.Fatalf("damaged newest snapshot: loaded offset %d, want the older 6", off)
	}
	if _, off, _ := loadSnapshot(fs, dir, 0, 7); off != 6 {
		t.Fatalf("log end 7: loaded %d", off)
	}
	if offs, _ := listSnapshots(fs, dir); len(offs) != 1 {
		t.Fatalf("snapshot past the log end not removed: %v", offs)
	}
}
