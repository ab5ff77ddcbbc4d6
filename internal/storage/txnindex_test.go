package storage

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// abortTxn appends a batch standing for a transaction's data and one standing for its ABORT
// marker, and records the aborted transaction as the replica layer does.
func abortTxn(t testing.TB, l *Log, pid int64) AbortedTxn {
	t.Helper()
	data := mustAppend(t, l, simpleBatch(t, 3, 1, 100))
	marker := mustAppend(t, l, simpleBatch(t, 1, 1, 10))
	a := AbortedTxn{ProducerID: pid, FirstOffset: data.FirstOffset, LastOffset: marker.LastOffset, LastStableOffset: marker.LastOffset + 1}
	if err := l.AppendAbortedTxn(a); err != nil {
		t.Fatal(err)
	}
	return a
}

func txnFiles(t testing.TB, dir string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, n := range mustReadDir(t, dir) {
		if strings.Contains(n, txnIndexSuffix) {
			fi, err := os.Stat(filepath.Join(dir, n))
			if err != nil {
				t.Fatal(err)
			}
			out[n] = fi.Size()
		}
	}
	return out
}

func mustAborted(t testing.TB, l *Log, from, upper int64) []AbortedTxn {
	t.Helper()
	got, err := l.AbortedTxns(from, upper)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestTxnIndexAppendLookupAndFormat(t *testing.T) {
	e := newEnv(t, testCfg())
	l := e.open(true, 0, 0)
	var all []AbortedTxn
	for pid := int64(1); len(all) < 12; pid++ {
		all = append(all, abortTxn(t, l, pid))
		fill(t, l, 2, 1, 0, 200) // committed data between them
	}
	if l.NumSegments() < 3 {
		t.Fatalf("only %d segments", l.NumSegments())
	}
	// Re-adding is ignored (a replay after recovery does it).
	for _, a := range all {
		if err := l.AppendAbortedTxn(a); err != nil {
			t.Fatal(err)
		}
	}
	if got := mustAborted(t, l, 0, l.LogEndOffset()); !reflect.DeepEqual(got, all) {
		t.Fatalf("all entries:\n got %v\nwant %v", got, all)
	}
	// A range overlapping the third and fourth transactions only.
	from, upper := all[2].LastOffset, all[3].FirstOffset+1
	if got := mustAborted(t, l, from, upper); !reflect.DeepEqual(got, all[2:4]) {
		t.Fatalf("[%d,%d): got %v, want %v", from, upper, got, all[2:4])
	}
	// A range between transactions has none.
	if got := mustAborted(t, l, all[5].LastOffset+1, all[6].FirstOffset); len(got) != 0 {
		t.Fatalf("between transactions: %v", got)
	}
	// A marker past the log end is refused.
	if err := l.AppendAbortedTxn(AbortedTxn{ProducerID: 9, FirstOffset: 0, LastOffset: l.LogEndOffset()}); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("entry past the end: %v", err)
	}

	// Kafka's file format: 34-byte entries of version 0, in the segment of the marker.
	files := txnFiles(t, e.dir)
	total := int64(0)
	for _, n := range files {
		total += n
	}
	if total != int64(len(all))*txnIndexEntrySize {
		t.Fatalf("txnindex files %v hold %d bytes, want %d", files, total, len(all)*txnIndexEntrySize)
	}
	l.mu.RLock()
	seg := l.mu.segments[l.floorSegmentLocked(all[0].LastOffset)]
	l.mu.RUnlock()
	raw, err := os.ReadFile(seg.txnIndexPath())
	if err != nil {
		t.Fatal(err)
	}
	if v := binary.BigEndian.Uint16(raw); v != 0 {
		t.Fatalf("version %d", v)
	}
	if pid, first, last, lso := int64(binary.BigEndian.Uint64(raw[2:])), int64(binary.BigEndian.Uint64(raw[10:])), int64(binary.BigEndian.Uint64(raw[18:])), int64(binary.BigEndian.Uint64(raw[26:])); pid != all[0].ProducerID || first != all[0].FirstOffset || last != all[0].LastOffset || lso != all[0].LastStableOffset {
		t.Fatalf("first entry on disk: %d %d %d %d, want %v", pid, first, last, lso, all[0])
	}

	// Read back after a clean reopen, lazily: nothing is loaded until asked.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = e.open(true, 0, 0)
	defer l.Close()
	l.mu.RLock()
	for _, s := range l.mu.segments {
		if s.txn.loaded {
			t.Fatalf("segment %d loaded its transaction index at open", s.baseOffset)
		}
	}
	l.mu.RUnlock()
	if got := mustAborted(t, l, 0, l.LogEndOffset()); !reflect.DeepEqual(got, all) {
		t.Fatalf("after reopening:\n got %v\nwant %v", got, all)
	}
}

func TestTxnIndexTruncation(t *testing.T) {
	e := newEnv(t, testCfg())
	l := e.open(true, 0, 0)
	var all []AbortedTxn
	for pid := int64(1); pid <= 10; pid++ {
		all = append(all, abortTxn(t, l, pid))
		fill(t, l, 2, 1, 0, 200)
	}
	// Cut at the sixth marker: it and every later entry go, in its segment and the deleted ones.
	cut := all[5].LastOffset
	if err := l.TruncateTo(cut); err != nil {
		t.Fatal(err)
	}
	if got := mustAborted(t, l, 0, l.LogEndOffset()); !reflect.DeepEqual(got, all[:5]) {
		t.Fatalf("after truncating to %d:\n got %v\nwant %v", cut, got, all[:5])
	}
	files := txnFiles(t, e.dir)
	total := int64(0)
	for n, size := range files {
		if base, ok := parseSegmentName(n, txnIndexSuffix); !ok || base > cut {
			t.Fatalf("file %s left after truncating to %d", n, cut)
		}
		total += size
	}
	if total != 5*txnIndexEntrySize {
		t.Fatalf("txnindex files %v after truncation, want 5 entries", files)
	}
	// The log goes on; a new abort lands after the survivors, and all of it survives a reopen.
	all = append(all[:5], abortTxn(t, l, 99))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = e.open(true, 0, 0)
	if got := mustAborted(t, l, 0, l.LogEndOffset()); !reflect.DeepEqual(got, all) {
		t.Fatalf("after reopening:\n got %v\nwant %v", got, all)
	}
	// A full truncation removes them all.
	if err := l.TruncateFullyAndStartAt(1000); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got := mustAborted(t, l, 1000, 2000); len(got) != 0 {
		t.Fatalf("after a full truncation: %v", got)
	}
	if files := txnFiles(t, e.dir); len(files) != 0 {
		t.Fatalf("txnindex files after a full truncation: %v", files)
	}
}

func TestTxnIndexGoesWithItsSegment(t *testing.T) {
	e := newEnv(t, testCfg())
	l := e.open(true, 0, 0)
	defer l.Close()
	var all []AbortedTxn
	for pid := int64(1); pid <= 10; pid++ {
		all = append(all, abortTxn(t, l, pid))
		fill(t, l, 2, 1, 0, 200)
	}
	// DeleteRecords past the eighth marker: the segments wholly below go with their files.
	start := all[7].LastOffset + 1
	if err := l.SetLogStartOffset(start); err != nil {
		t.Fatal(err)
	}
	l.mu.RLock()
	first := l.mu.segments[0].baseOffset
	l.mu.RUnlock()
	if first == 0 {
		t.Fatal("no segment was deleted")
	}
	for n := range txnFiles(t, e.dir) {
		if base, _ := parseSegmentName(n, txnIndexSuffix); base < first {
			t.Fatalf("%s left after its segment was deleted (first segment %d)", n, first)
		}
	}
	var want []AbortedTxn
	for _, a := range all {
		if a.LastOffset >= start {
			want = append(want, a)
		}
	}
	if got := mustAborted(t, l, start, l.LogEndOffset()); !reflect.DeepEqual(got, want) {
		t.Fatalf("from the new log start %d:\n got %v\nwant %v", start, got, want)
	}
	// Retention by bytes takes all but the active segment's: the remaining files are theirs.
	cfg := l.Config()
	cfg.RetentionBytes = 1
	l.Reconfigure(cfg)
	if _, err := l.DeleteExpired(e.clock.NowMs()); err != nil {
		t.Fatal(err)
	}
	if l.NumSegments() != 1 {
		t.Fatalf("%d segments after retention", l.NumSegments())
	}
	l.mu.RLock()
	active := l.mu.segments[0].baseOffset
	l.mu.RUnlock()
	for n := range txnFiles(t, e.dir) {
		if base, _ := parseSegmentName(n, txnIndexSuffix); base != active {
			t.Fatalf("%s left after retention (active segment %d)", n, active)
		}
	}
	// Log.Delete removes the directory, the index with it.
	if err := l.Delete(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(e.dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("directory left: %v", err)
	}
}

// TestTxnIndexRecovery: an unclean open that cuts a torn tail also cuts the entries of the
// markers cut off; a flush makes the entries durable with the log.
func TestTxnIndexRecovery(t *testing.T) {
	e, ffs := faultEnv(t)
	l := e.open(true, 0, 0)
	var all []AbortedTxn
	for pid := int64(1); pid <= 4; pid++ {
		all = append(all, abortTxn(t, l, pid))
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	abortTxn(t, l, 5) // never flushed: a crash loses it, log and index alike
	l.mu.RLock()
	seg := l.mu.segments[len(l.mu.segments)-1]
	l.mu.RUnlock()
	// Tear the last marker's batch: the log loses it, and the index its entry.
	path := seg.logPath()
	crash(l)
	if err := ffs.DropUnsynced(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, fi.Size()-5); err != nil {
		t.Fatal(err)
	}
	l = e.open(false, 0, 0)
	defer l.Close()
	if l.LogEndOffset() != all[3].LastOffset {
		t.Fatalf("log end %d after recovery, want %d", l.LogEndOffset(), all[3].LastOffset)
	}
	if got := mustAborted(t, l, 0, 1<<40); !reflect.DeepEqual(got, all[:3]) {
		t.Fatalf("after recovery:\n got %v\nwant %v", got, all[:3])
	}
}

// TestTxnIndexCleanerKeepsEntries: the cleaner's new segment holds the entries of the ones it
// replaced whose ABORT markers it keeps (all of them at the first pass, which still reads
// the aborted batches it removes), after the swap, a reopen and a crash in the middle of the
// swap's final renames.
func TestTxnIndexCleanerKeepsEntries(t *testing.T) {
	for _, fault := range []string{"", "*.txnindex.swap", "*.log.swap"} {
		t.Run("fault="+fault, func(t *testing.T) {
			e, ffs := faultEnv(t)
			l := e.open(true, 0, 0)
			var all []AbortedTxn
			for i := range 6 {
				d := mustAppend(t, l, txnBatch(t, e.clock.NowMs(), int64(i+1), true, kv{"a", val("x")}))
				fillKeys(t, l, e.clock, 40, 5)
				m := mustAppend(t, l, markerBatch(t, e.clock.NowMs(), int64(i+1), false))
				a := AbortedTxn{ProducerID: int64(i + 1), FirstOffset: d.FirstOffset, LastOffset: m.LastOffset, LastStableOffset: m.LastOffset + 1}
				if err := l.AppendAbortedTxn(a); err != nil {
					t.Fatal(err)
				}
				all = append(all, a)
			}
			upper := activeBase(l)
			var want []AbortedTxn
			for _, a := range all {
				if a.LastOffset < upper {
					want = append(want, a)
				}
			}
			if len(want) < 2 {
				t.Fatalf("only %d entries below the active segment", len(want))
			}
			cfg := l.Config()
			cfg.SegmentBytes = 1 << 20 // one group: every sealed segment into one
			l.Reconfigure(cfg)
			if fault != "" {
				ffs.Inject(Fault{Op: FaultRename, Pattern: fault})
			}
			_, err := l.Clean(newMap(t, 100), cleanOpts(e, 0))
			if fault == "" && err != nil {
				t.Fatal(err)
			}
			if fault != "" {
				if !errors.Is(err, ErrInjected) {
					t.Fatalf("clean: %v", err)
				}
				ffs.Clear()
				crash(l)
				l = e.open(false, 0, 0)
			}
			defer func() { l.Close() }()
			if got := mustAborted(t, l, 0, 1<<40); !reflect.DeepEqual(got, all) {
				t.Fatalf("after cleaning:\n got %v\nwant %v", got, all)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = e.open(true, 0, 0)
			if got := mustAborted(t, l, 0, 1<<40); !reflect.DeepEqual(got, all) {
				t.Fatalf("after reopening:\n got %v\nwant %v", got, all)
			}
			for _, n := range mustReadDir(t, e.dir) {
				if strings.HasSuffix(n, cleanedSuffix) || strings.HasSuffix(n, swapSuffix) || strings.HasSuffix(n, deletedSuffix) {
					t.Fatalf("leftover %s", n)
				}
			}
		})
	}
}

// TestTxnIndexCleanerDropsEntries: once aborted transactions' batches and markers are gone,
// their entries are gone from the cleaned segment's index (now empty), also when the pass
// crashes after its commit point with the old index files not yet renamed away.
func TestTxnIndexCleanerDropsEntries(t *testing.T) {
	for _, fault := range []string{"", "*.log", "*.txnindex", "*.txnindex.swap", "*.log.swap"} {
		t.Run("fault="+fault, func(t *testing.T) {
			e, ffs := faultEnv(t)
			l := e.open(true, 0, 0)
			w := newTxnWriter(t, l, e.clock)
			w.plain("a", "p")
			w.write(1, "a", "x")
			w.end(1, false)
			w.write(2, "b", "y")
			w.end(2, false)
			fillerTo(t, w, 1)
			w.write(3, "c", "z")
			w.end(3, false) // in the next segment
			fillerTo(t, w, 2)
			cfg := l.Config()
			cfg.SegmentBytes = 1 << 20 // one group: every sealed segment into one
			l.Reconfigure(cfg)
			opt := CleanOptions{}
			cleanTxnPasses(t, e, l, 2, 1000, opt)
			e.clock.Advance(1000)
			if fault != "" {
				ffs.Inject(Fault{Op: FaultRename, Pattern: fault})
			}
			opt.FirstDirtyOffset, opt.NowMs, opt.DeleteRetentionMs = 0, e.clock.NowMs(), 1000
			_, err := l.Clean(newMap(t, 200), opt)
			if fault == "" && err != nil {
				t.Fatal(err)
			}
			if fault != "" {
				if !errors.Is(err, ErrInjected) {
					t.Fatalf("clean: %v", err)
				}
				ffs.Clear()
				crash(l)
				l = e.open(false, 0, 0)
				// A swap given up before its commit point leaves the old segments: clean again.
				if _, err := l.Clean(newMap(t, 200), opt); err != nil {
					t.Fatal(err)
				}
			}
			defer func() { l.Close() }()
			if got := mustAborted(t, l, 0, 1<<40); len(got) != 0 {
				t.Fatalf("after cleaning: %v, want none", got)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = e.open(true, 0, 0)
			if got := mustAborted(t, l, 0, 1<<40); len(got) != 0 {
				t.Fatalf("after reopening: %v, want none", got)
			}
			w.l = l
			w.checkTxnCleaned("reopened")
		})
	}
}
