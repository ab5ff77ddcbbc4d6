package storage

import (
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gregor-project/gregor/internal/batch"
)

// TestConcurrentAppendRead runs appends, reads, flushes and retention at once (under -race):
// every read returns whole, CRC-valid batches, contiguous, starting at or before the offset.
func TestConcurrentAppendRead(t *testing.T) {
	cfg := testCfg()
	cfg.SegmentBytes = 16 << 10
	cfg.IndexIntervalBytes = 512
	e := newEnv(t, cfg)
	l := e.open(true, 0, 0)
	defer l.Close()

	const appends = 1500
	var done atomic.Bool
	var wg sync.WaitGroup
	errc := make(chan error, 16)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer done.Store(true)
		for i := range appends {
			b := simpleBatch(t, 1+i%5, int64(i), 20+i%300)
			if _, err := l.Append(b, AppendOptions{AssignOffsets: true}); err != nil {
				errc <- err
				return
			}
		}
	}()
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 9))
			for !done.Load() {
				leo := l.LogEndOffset()
				lso := l.LogStartOffset()
				if leo <= lso {
					// Empty, or retention moved the start past the end read just before.
					continue
				}
				off := lso + rng.Int64N(leo-lso)
				maxOff := off + 1 + rng.Int64N(leo-off)
				s, err := l.Read(off, int32(rng.IntN(4000)), maxOff, true)
				if err != nil {
					// Retention may have moved the LSO since we looked.
					if l.LogStartOffset() > off {
						continue
					}
					errc <- err
					return
				}
				if s.Size == 0 {
					// Only right when the batch holding off ends at or past maxOff.
					s2, err := l.Read(off, 1, math.MaxInt64, true)
					if err != nil {
						continue // retention
					}
					hs := readBatches(t, s2)
					if len(hs) != 1 || hs[0].LastOffset() < maxOff {
						t.Errorf("read(%d, maxOff %d) below LEO %d (LSO %d) returned nothing", off, maxOff, leo, lso)
						return
					}
					continue
				}
				b := make([]byte, s.Size)
				if _, err := s.File.ReadAt(b, s.Pos); err != nil {
					errc <- err
					return
				}
				s.Release()
				next := int64(-1)
				for len(b) > 0 {
					h, err := batch.ParseHeader(b)
					if err == nil {
						_, err = batch.CheckCRC(b[:h.Size()])
					}
					if err != nil {
						errc <- err
						return
					}
					if (next >= 0 && h.BaseOffset != next) || (next < 0 && (h.BaseOffset > off || h.LastOffset() < off)) || h.LastOffset() >= maxOff {
						t.Errorf("read(%d, maxOff %d): batch %d..%d after %d", off, maxOff, h.BaseOffset, h.LastOffset(), next)
						return
					}
					next = h.LastOffset() + 1
					b = b[h.Size():]
				}
				_, _, _, _ = l.OffsetForTimestamp(rng.Int64N(appends))
			}
		}()
	}
	wg.Add(1)
	go func() { // flusher and retention
		defer wg.Done()
		for !done.Load() {
			if err := l.Flush(); err != nil {
				errc <- err
				return
			}
			if l.NumSegments() > 5 {
				if err := l.SetLogStartOffset(l.LogEndOffset() / 2); err != nil {
					errc <- err
					return
				}
			}
		}
	}()
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	var recs int64
	if err := l.ScanBatches(0, func(h batch.Header) error { recs += int64(h.RecordCount); return nil }); err != nil {
		t.Fatal(err)
	}
	if l.LogEndOffset() < 3*appends || recs == 0 {
		t.Fatalf("LEO %d", l.LogEndOffset())
	}
	if ts, _ := l.MaxTimestamp(); ts != appends-1 {
		t.Fatalf("max ts %d", ts)
	}
}
