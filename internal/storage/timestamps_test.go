package storage

import (
	"testing"

	"github.com/gregor-project/gregor/internal/batch"
)

func TestOffsetForTimestamp(t *testing.T) {
	cfg := testCfg()
	cfg.SegmentBytes = 2000
	cfg.IndexIntervalBytes = 100
	e := newEnv(t, cfg)
	l := e.open(true, 0, 0)
	// Batch k (k = 0..29) holds 4 records with timestamps 1000+100k + {0, 30, 10, 60}: the
	// timestamps inside a batch are not sorted. Every third batch is compressed.
	type rec struct{ off, ts int64 }
	var recs []rec
	for k := range 30 {
		codec := batch.CodecNone
		if k%3 == 1 {
			codec = batch.CodecGzip
		} else if k%3 == 2 {
			codec = batch.CodecZstd
		}
		base := int64(1000 + 100*k)
		deltas := []int64{0, 30, 10, 60}
		info := mustAppend(t, l, makeBatch(t, base, deltas, 40, codec))
		for i, d := range deltas {
			recs = append(recs, rec{info.FirstOffset + int64(i), base + d})
		}
	}
	if l.NumSegments() < 3 {
		t.Fatalf("want several segments, have %d", l.NumSegments())
	}
	want := func(target, lso int64) (int64, int64, bool) {
		for _, r := range recs {
			if r.ts >= target && r.off >= lso {
				return r.off, r.ts, true
			}
		}
		return -1, -1, false
	}
	check := func(l *Log, lso int64) {
		t.Helper()
		for target := int64(900); target <= 4100; target += 7 {
			wo, wt, wok := want(target, lso)
			off, ts, ok, err := l.OffsetForTimestamp(target)
			if err != nil {
				t.Fatal(err)
			}
			if ok != wok || off != wo || ts != wt {
				t.Fatalf("ts %d: got (%d, %d, %v) want (%d, %d, %v)", target, off, ts, ok, wo, wt, wok)
			}
		}
	}
	check(l, 0)
	// Exact record inside a compressed batch: batch 4 (zstd? k=4 -> gzip) at 1400: records
	// 1400, 1430, 1410, 1460. A target of 1405 must be the record at 1430 (offset 17).
	if off, ts, ok, _ := l.OffsetForTimestamp(1405); !ok || off != 17 || ts != 1430 {
		t.Fatalf("inside compressed batch: %d %d %v", off, ts, ok)
	}
	// KIP-734: the largest timestamp is 1000+100*29+60, in the last batch's 4th record.
	if ts, off := l.MaxTimestamp(); ts != 3960 || off != 119 {
		t.Fatalf("max timestamp %d at %d", ts, off)
	}
	// After a clean reopen the time indexes are read back.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = e.open(true, 0, 0)
	check(l, 0)
	// The log start offset hides earlier records.
	if err := l.SetLogStartOffset(41); err != nil {
		t.Fatal(err)
	}
	check(l, 41)
	if ts, off := l.MaxTimestamp(); ts != 3960 || off != 119 {
		t.Fatalf("max timestamp after reopen %d at %d", ts, off)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// And after an unclean reopen that rebuilds every index.
	l = e.open(false, 0, 41)
	defer l.Close()
	check(l, 41)
}

func TestMaxTimestampLogAppendTime(t *testing.T) {
	e := newEnv(t, testCfg())
	l := e.open(true, 0, 0)
	defer l.Close()
	mustAppend(t, l, makeBatch(t, 100, []int64{0, 5, 1}, 10, batch.CodecNone))
	if _, err := l.Append(makeBatch(t, 50, []int64{0, 1}, 10, batch.CodecNone), AppendOptions{AssignOffsets: true, LogAppendTimeMs: 500}); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, makeBatch(t, 200, []int64{0}, 10, batch.CodecNone))
	if ts, off := l.MaxTimestamp(); ts != 500 || off != 3 {
		t.Fatalf("max ts %d at %d", ts, off)
	}
	// Every record of a LogAppendTime batch carries the append time.
	if off, ts, ok, _ := l.OffsetForTimestamp(300); !ok || off != 3 || ts != 500 {
		t.Fatalf("%d %d %v", off, ts, ok)
	}
	if off, ts, ok, _ := l.OffsetForTimestamp(104); !ok || off != 1 || ts != 105 {
		t.Fatalf("%d %d %v", off, ts, ok)
	}
	if _, _, ok, _ := l.OffsetForTimestamp(501); ok {
		t.Fatal("found a record after the largest timestamp")
	}
}
