package storage

import (
	"bytes"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
)

// readAllOffsets walks the log from its start and returns the base offsets of all batches.
func readAllOffsets(t *testing.T, l *Log) []int64 {
	t.Helper()
	var out []int64
	next := l.LogStartOffset()
	for next < l.LogEndOffset() {
		hs := mustRead(t, l, next, 1<<20, math.MaxInt64, true)
		if len(hs) == 0 {
			t.Fatalf("nothing at %d below LEO %d", next, l.LogEndOffset())
		}
		for _, h := range hs {
			out = append(out, h.BaseOffset)
			next = h.LastOffset() + 1
		}
	}
	return out
}

func TestRecoveryTruncatesTornTail(t *testing.T) {
	e := newEnv(t, testCfg())
	l := e.open(true, 0, 0)
	fill(t, l, 30, 1, 0, 100)
	leo := l.LogEndOffset()
	active := l.activeLocked().baseOffset
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// A torn write: the first 100 bytes of another batch at the end of the active segment.
	path := segPath(e.dir, active, logSuffix)
	size := fileSize(t, path)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	torn := simpleBatch(t, 1, 1, 100)
	if _, err := f.Write(torn[:100]); err != nil {
		t.Fatal(err)
	}
	f.Close()

	l = e.open(false, leo, 0) // unclean
	defer l.Close()
	if l.LogEndOffset() != leo {
		t.Fatalf("LEO %d want %d", l.LogEndOffset(), leo)
	}
	if got := fileSize(t, path); got != size {
		t.Fatalf("torn tail not truncated: %d bytes, want %d", got, size)
	}
	if !strings.Contains(e.logs.String(), "truncated corrupt or torn tail") {
		t.Fatalf("no log line for the repair:\n%s", e.logs.String())
	}
	if n := len(readAllOffsets(t, l)); n != 30 {
		t.Fatalf("%d batches", n)
	}
	if info := mustAppend(t, l, simpleBatch(t, 1, 1, 10)); info.FirstOffset != leo {
		t.Fatal("append after recovery")
	}
}

func TestRecoveryCorruptBatchInMiddle(t *testing.T) {
	e := newEnv(t, testCfg())
	l := e.open(true, 0, 0)
	fill(t, l, 60, 1, 0, 100)
	if l.NumSegments() < 3 {
		t.Fatal("want 3 segments")
	}
	seg := l.mu.segments[1]
	// The 5th batch of the second segment.
	var pos int64
	for range 4 {
		h, err := seg.readHeader(pos, new(headerBuf))
		if err != nil {
			t.Fatal(err)
		}
		pos += int64(h.Size())
	}
	h, _ := seg.readHeader(pos, new(headerBuf))
	badOffset, base1, base2 := h.BaseOffset, seg.baseOffset, l.mu.segments[2].baseOffset
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	path := segPath(e.dir, base1, logSuffix)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[pos+80] ^= 0x01 // a record byte: only the CRC notices
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}

	l = e.open(false, base1, 0) // recovery point in the second segment
	defer l.Close()
	if l.LogEndOffset() != badOffset {
		t.Fatalf("LEO %d, want %d (the corrupt batch's offset)", l.LogEndOffset(), badOffset)
	}
	if l.NumSegments() != 2 {
		t.Fatalf("%d segments: later ones should be deleted", l.NumSegments())
	}
	if _, err := os.Stat(segPath(e.dir, base2, logSuffix)); !os.IsNotExist(err) {
		t.Fatal("later segment still on disk")
	}
	if fileSize(t, path) != pos {
		t.Fatal("segment not truncated at the corrupt batch")
	}
	offs := readAllOffsets(t, l)
	if len(offs) != int(badOffset) {
		t.Fatalf("%d batches readable", len(offs))
	}
	if info := mustAppend(t, l, simpleBatch(t, 1, 1, 10)); info.FirstOffset != badOffset {
		t.Fatal("append after recovery")
	}
}

// TestCleanOpenSkipsRecovery: with the clean marker the recovery pass does not run (a corrupt
// CRC in the middle goes unnoticed, as in Kafka), without it it does.
func TestCleanOpenSkipsRecovery(t *testing.T) {
	e := newEnv(t, testCfg())
	l := e.open(true, 0, 0)
	fill(t, l, 10, 1, 0, 100)
	leo := l.LogEndOffset()
	l.Close()
	path := segPath(e.dir, 0, logSuffix)
	data, _ := os.ReadFile(path)
	data[len(data)-5] ^= 0xff
	os.WriteFile(path, data, 0o644)
	l = e.open(true, leo, 0)
	if l.LogEndOffset() != leo || strings.Contains(e.logs.String(), "recovering log") {
		t.Fatal("clean open recovered")
	}
	l.Close()
	l = e.open(false, leo, 0)
	defer l.Close()
	if l.LogEndOffset() != leo-1 {
		t.Fatalf("unclean open: LEO %d", l.LogEndOffset())
	}
}

func TestRebuildMissingIndex(t *testing.T) {
	cfg := testCfg()
	cfg.IndexIntervalBytes = 100
	e := newEnv(t, cfg)
	l := e.open(true, 0, 0)
	fill(t, l, 60, 1000, 10, 100)
	leo := l.LogEndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	ix := segPath(e.dir, 0, indexSuffix)
	tx := segPath(e.dir, 0, timeIndexSuffix)
	wantIx, _ := os.ReadFile(ix)
	wantTx, _ := os.ReadFile(tx)
	if len(wantIx) == 0 || len(wantTx) == 0 {
		t.Fatal("indexes empty")
	}
	os.Remove(ix)
	os.Remove(tx)
	l = e.open(true, leo, 0)
	if !strings.Contains(e.logs.String(), "rebuilding segment indexes") {
		t.Fatal("no log line for the rebuild")
	}
	if l.LogEndOffset() != leo || len(readAllOffsets(t, l)) != 60 {
		t.Fatal("log changed")
	}
	if off, _, ok, _ := l.OffsetForTimestamp(1055); !ok || off != 6 {
		t.Fatalf("time lookup after rebuild: %d", off)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	gotIx, _ := os.ReadFile(ix)
	gotTx, _ := os.ReadFile(tx)
	if !bytes.Equal(gotIx, wantIx) || !bytes.Equal(gotTx, wantTx) {
		t.Fatalf("rebuilt indexes differ: %d/%d bytes vs %d/%d", len(gotIx), len(gotTx), len(wantIx), len(wantTx))
	}
}

func TestRebuildGarbageIndex(t *testing.T) {
	cfg := testCfg()
	cfg.IndexIntervalBytes = 100
	e := newEnv(t, cfg)
	l := e.open(true, 0, 0)
	fill(t, l, 60, 1000, 10, 100)
	leo := l.LogEndOffset()
	l.Close()
	ix := segPath(e.dir, 0, indexSuffix)
	wantIx, _ := os.ReadFile(ix)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, garbage := range [][]byte{
		randBytes(rng, 101),            // not whole entries
		randBytes(rng, 96),             // whole entries, nonsense
		bytes.Repeat([]byte{0xff}, 16), // positions past the log
		append(append([]byte{}, wantIx...), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), // preallocated-style zeros: accepted as is
	} {
		os.WriteFile(ix, garbage, 0o644)
		l = e.open(true, leo, 0)
		if l.LogEndOffset() != leo || len(readAllOffsets(t, l)) != 60 {
			t.Fatal("log changed")
		}
		for off := int64(0); off < leo; off++ {
			if hs := mustRead(t, l, off, 1, math.MaxInt64, true); len(hs) != 1 || hs[0].BaseOffset != off {
				t.Fatalf("read(%d) after garbage index", off)
			}
		}
		l.Close()
		if got, _ := os.ReadFile(ix); !bytes.Equal(got, wantIx) {
			t.Fatalf("index not rebuilt from %d garbage bytes", len(garbage))
		}
	}
	// Garbage time index.
	tx := segPath(e.dir, 0, timeIndexSuffix)
	wantTx, _ := os.ReadFile(tx)
	os.WriteFile(tx, randBytes(rng, 120), 0o644)
	l = e.open(true, leo, 0)
	if off, _, ok, _ := l.OffsetForTimestamp(1055); !ok || off != 6 {
		t.Fatalf("time lookup after garbage: %d", off)
	}
	l.Close()
	if got, _ := os.ReadFile(tx); !bytes.Equal(got, wantTx) {
		t.Fatal("time index not rebuilt")
	}
}

func randBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// TestLostIndexTailIsExtended: an index that lost its last entries (a crash before writeback)
// is completed from the log on open.
func TestLostIndexTailIsExtended(t *testing.T) {
	cfg := testCfg()
	cfg.IndexIntervalBytes = 100
	e := newEnv(t, cfg)
	l := e.open(true, 0, 0)
	fill(t, l, 60, 1000, 10, 100)
	leo := l.LogEndOffset()
	l.Close()
	ix := segPath(e.dir, 0, indexSuffix)
	want, _ := os.ReadFile(ix)
	os.WriteFile(ix, want[:16], 0o644)
	l = e.open(true, leo, 0)
	l.Close()
	if got, _ := os.ReadFile(ix); !bytes.Equal(got, want) {
		t.Fatalf("index not extended: %d bytes, want %d", len(got), len(want))
	}
}
