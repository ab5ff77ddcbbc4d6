package storage

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gregor-project/gregor/internal/batch"
)

// memKey is key i of TestCleanManyKeysBoundedMemory: fixed width, so every record is the
// same size.
func memKey(i int) []byte { return fmt.Appendf(nil, "key-%09d", i) }

// memValue is version v of key i's value.
func memValue(i, v int) []byte { return fmt.Appendf(nil, "v%d-%09d", v, i) }

// appendMemBatch appends keys[from:to] of version v as one batch.
func appendMemBatch(t testing.TB, l *Log, ts int64, keys []int, v int) {
	t.Helper()
	rs := make([]batch.Record, len(keys))
	for j, k := range keys {
		rs[j] = batch.Record{OffsetDelta: int32(j), Key: memKey(k), Value: memValue(k, v)}
	}
	h := batch.Header{PartitionLeaderEpoch: -1, LastOffsetDelta: int32(len(rs) - 1), BaseTimestamp: ts,
		MaxTimestamp: ts, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	b, err := batch.Build(h, rs, batch.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, b)
}

// eachRecord calls fn with every record of the log in offset order, reading one slice at a
// time so that a log of millions of records is checked without holding it.
func eachRecord(t testing.TB, l *Log, fn func(off int64, key, value []byte)) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		s, err := l.Read(off, int32(len(buf)), math.MaxInt64, true)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		if s.Size == 0 {
			t.Fatalf("Read(%d) is empty below the log end offset %d", off, l.LogEndOffset())
		}
		b := buf[:s.Size]
		if int(s.Size) > len(buf) {
			b = make([]byte, s.Size)
		}
		if _, err := s.File.ReadAt(b, s.Pos); err != nil {
			t.Fatal(err)
		}
		s.Release()
		for len(b) > 0 {
			h, err := batch.ParseHeader(b)
			if err != nil {
				t.Fatal(err)
			}
			one := b[:h.Size()]
			if _, err := batch.CheckCRC(one); err != nil {
				t.Fatal(err)
			}
			recs, err := batch.Records(one)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				fn(h.BaseOffset+int64(r.OffsetDelta), r.Key, r.Value)
			}
			off = h.LastOffset() + 1
			b = b[h.Size():]
		}
	}
}

// inuseSampler keeps the largest HeapInuse (what the process holds of the heap, garbage
// included) seen every 10 ms while it runs.
type inuseSampler struct {
	stop chan struct{}
	done sync.WaitGroup
	peak uint64
}

func sampleInuse() *inuseSampler {
	hs := &inuseSampler{stop: make(chan struct{})}
	hs.done.Add(1)
	go func() {
		defer hs.done.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			hs.peak = max(hs.peak, ms.HeapInuse)
			select {
			case <-hs.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return hs
}

// Stop ends the sampling and returns the peak.
func (hs *inuseSampler) Stop() uint64 {
	close(hs.stop)
	hs.done.Wait()
	return hs.peak
}

// liveHeap is HeapAlloc after a GC.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestCleanManyKeysBoundedMemory cleans a log with ten times more distinct keys than its
// offset map holds: the cleaner makes several passes, never holds more memory than the map,
// its I/O buffers and one batch (the live heap measured during every pass), and leaves
// exactly each key's last value at its offset. Every key is written once (version 0), then every fourth key
// again (version 1), so the survivors are known without a model held in memory: offset i
// for a key i not a multiple of 4, offset keys+i/4 for the others.
//
// CI runs 200,000 keys and a map of 20,000; GREGOR_CLEAN_KEYS=10000000 runs the issue's
// scale, with the map limited to 16 MiB (log.cleaner.dedupe.buffer.size's Kafka default
// is 128 MiB shared by the cleaner threads).
func TestCleanManyKeysBoundedMemory(t *testing.T) {
	keys, mapBytes, segBytes := 200_000, (20_000+1)*offsetSlotSize, int64(1<<20)
	if s := os.Getenv("GREGOR_CLEAN_KEYS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1000 {
			t.Fatalf("GREGOR_CLEAN_KEYS=%q: want a number of keys, at least 1000", s)
		}
		keys, mapBytes, segBytes = n, 16<<20, 64<<20
	}
	cfg := testCfg()
	cfg.SegmentBytes = segBytes
	cfg.IndexIntervalBytes = 4096
	cfg.SegmentMs = 3_600_000
	e := newEnv(t, cfg)
	l := e.open(true, 0, 0)
	defer l.Close()

	const perBatch = 1000
	start := time.Now()
	idx := make([]int, 0, perBatch)
	flush := func(v int) {
		if len(idx) > 0 {
			appendMemBatch(t, l, e.clock.NowMs(), idx, v)
			idx = idx[:0]
		}
	}
	for i := range keys {
		if idx = append(idx, i); len(idx) == perBatch {
			flush(0)
		}
	}
	flush(0)
	for i := 0; i < keys; i += 4 {
		if idx = append(idx, i); len(idx) == perBatch {
			flush(1)
		}
	}
	flush(1)
	written := l.LogEndOffset()
	// One more record, after segment.ms: it rolls, so every record written above is sealed
	// (cleanable), and it survives in the active segment.
	e.clock.Advance(2 * cfg.SegmentMs)
	appendMemBatch(t, l, e.clock.NowMs(), []int{keys}, 0)
	if got := activeBase(l); got != written {
		t.Fatalf("active segment at %d after the roll, want %d", got, written)
	}
	logBytes := l.Size()
	t.Logf("wrote %d records (%d keys), %d bytes in %v", written, keys, logBytes, time.Since(start))

	m, err := NewOffsetMap(mapBytes, 0.9)
	if err != nil {
		t.Fatal(err)
	}
	if m.Capacity()*5 > keys {
		t.Fatalf("the map holds %d keys: the test wants several passes over %d", m.Capacity(), keys)
	}
	base := liveHeap()
	// What cleaning may hold besides the map (allocated before base): its read and write
	// buffers, the records of a batch, the indexes of the segments it writes. A map growing
	// with the keys would take 24 bytes or more per key on top: 4.8 MB for 200,000.
	allowed := uint64(2*defaultCleanerIOBuffer) + 1<<20
	start = time.Now()
	passes, firstDirty, peak, peakInuse := 0, int64(0), uint64(0), uint64(0)
	// The live heap is measured from the cleaner's own goroutine, at one in every of its
	// reads and writes (each told to the throttle, one per 256 KiB buffer): nothing else
	// allocates then, so a GC there counts exactly what the pass holds, its buffers full and
	// a batch's records decoded.
	calls, every, samples := 0, max(32, keys/25_000), 0
	throttle := func(int) error {
		if calls++; calls%every == 0 {
			samples++
			peak = max(peak, liveHeap())
		}
		return nil
	}
	var read, wrote int64
	for firstDirty < written {
		e.clock.Advance(1)
		hs := sampleInuse()
		res, err := l.Clean(m, CleanOptions{FirstDirtyOffset: firstDirty, NowMs: e.clock.NowMs(), DeleteRetentionMs: 86_400_000, Throttle: throttle})
		peakInuse = max(peakInuse, hs.Stop())
		if err != nil {
			t.Fatalf("pass %d from %d: %v (files %v)", passes+1, firstDirty, err, mustReadDir(t, e.dir))
		}
		passes++
		read, wrote = read+res.BytesRead, wrote+res.BytesWritten
		if res.EndOffset <= firstDirty {
			t.Fatalf("pass %d made no progress from %d", passes, firstDirty)
		}
		if res.EndOffset < written && !res.MapFull {
			t.Fatalf("pass %d stopped at %d of %d without a full map", passes, res.EndOffset, written)
		}
		firstDirty = res.EndOffset
		if passes > 10*keys/m.Capacity() {
			t.Fatalf("no end of passes: %d", passes)
		}
	}
	elapsed := time.Since(start)
	t.Logf("%d passes with a map of %d bytes (%d keys) in %v: read %d bytes, wrote %d; live heap %d KiB before (the map's %d KiB in it), peak of %d samples %d KiB (+%d KiB, allowed +%d KiB); HeapInuse peak %d KiB",
		passes, mapBytes, m.Capacity(), elapsed, read, wrote, base>>10, mapBytes>>10, samples, peak>>10, (int64(peak)-int64(base))>>10, allowed>>10, peakInuse>>10)
	if minPasses := keys / m.Capacity(); passes < minPasses {
		t.Errorf("%d passes for %d keys in a map of %d", passes, keys, m.Capacity())
	}
	// The map was allocated before base: cleaning itself adds only buffers.
	if peak > base+allowed {
		t.Errorf("the live heap peaked at %d bytes during cleaning, %d over the %d before: more than %d", peak, peak-base, base, allowed)
	}

	// Exactly the last value of every key, at its offset, and nothing else.
	next := 0                                   // the index of the next expected survivor
	expected := func(n int) (int64, int, int) { // offset, key, version of survivor n
		notFour := keys - (keys+3)/4
		if n < notFour {
			k := n/3*4 + n%3 + 1
			return int64(k), k, 0
		}
		if k := (n - notFour) * 4; k < keys {
			return int64(keys + k/4), k, 1
		}
		return written, keys, 0 // the record of the active segment
	}
	total := keys + 1
	eachRecord(t, l, func(off int64, key, value []byte) {
		if next >= total {
			t.Fatalf("record at %d (%s) after the last survivor", off, key)
		}
		wo, wk, wv := expected(next)
		if off != wo || string(key) != string(memKey(wk)) || string(value) != string(memValue(wk, wv)) {
			t.Fatalf("survivor %d: offset %d %s=%s, want offset %d %s=%s", next, off, key, value, wo, memKey(wk), memValue(wk, wv))
		}
		next++
	})
	if next != total {
		t.Fatalf("%d records survived, want %d (one per key)", next, total)
	}
	if after := l.Size(); after >= logBytes {
		t.Fatalf("log of %d bytes after cleaning, %d before", after, logBytes)
	}
}
