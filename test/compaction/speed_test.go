package compaction

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/internal/storage"
	"github.com/gregor-project/gregor/internal/testutil"
)

// TestProducerWhileCleaning measures a producer's throughput on a broker whose cleaner works
// on a large dirty compacted topic, with log.cleaner.io.max.bytes.per.second unlimited and
// throttled, against the same producer on the same data with the cleaner off (before and
// after the other two). The dirty topic is written once (cleaner off) and copied for each
// broker, so that each cleans the same log. The producer writes a second topic
// (cleanup.policy=delete) for a window of the same length on each broker; the cleaner's
// whole pass is then waited for, and its time (from the broker's start) logged. The
// throttled broker's limit is half the I/O rate the unlimited cleaner reached in the same
// run (what the disk gave it: its two reads of the log and its writes): cleaning throttled
// to half the disk.
//
// A pass is over when the cleaner-offset-checkpoint has reached the active segment (nothing
// writes the dirty topic: its active segment stays the one the fill left). It checks that
// the producer's records were acknowledged, that every cleaner finished its pass and left
// at most a tenth of the sealed segments' bytes, and logs the figures (go test -v) that
// docs/benchmarks.md quotes. No timing is asserted.
//
// By default the dirty topic is 8 MiB and the windows 1 s (a few seconds in all);
// GREGOR_BENCH_SCALE=1 makes them 256 MiB and 10 s, the figures docs/benchmarks.md quotes.
func TestProducerWhileCleaning(t *testing.T) {
	dirtyBytes, window := int64(8<<20), time.Second
	if os.Getenv("GREGOR_BENCH_SCALE") != "" {
		dirtyBytes, window = 256<<20, 10*time.Second
	}
	const dirty, load = "dirty", "load"
	sets := []string{"log.cleaner.backoff.ms=20", "log.cleaner.dedupe.buffer.size=16777216"}

	// The dirty topic: 1,000 keys of 16 bytes, 100-byte values, 1 MiB segments.
	src := t.TempDir()
	{
		b := testutil.StartBrokerIn(t, src, nil, append(sets, "log.cleaner.enable=false")...)
		createCompacted(t, b.Addr(), dirty, map[string]string{
			"cleanup.policy": "compact", "segment.bytes": "1048576", "min.cleanable.dirty.ratio": "0.01",
		})
		createTopic(t, b.Addr(), load)
		cl := client(t, b.Addr(), kgo.ProducerBatchMaxBytes(1<<20))
		value := []byte(strings.Repeat("v", 100))
		var n int64
		var wg sync.WaitGroup
		var failed atomic.Value
		fillCtx := ctxT(t, 5*time.Minute)
		for i := 0; n < dirtyBytes; i++ {
			r := &kgo.Record{Topic: dirty, Key: fmt.Appendf(nil, "key-%012d", i%1000), Value: value}
			n += int64(len(r.Key) + len(r.Value) + 8)
			wg.Add(1)
			cl.Produce(fillCtx, r, func(_ *kgo.Record, err error) {
				if err != nil {
					failed.CompareAndSwap(nil, err)
				}
				wg.Done()
			})
		}
		wg.Wait()
		if err, _ := failed.Load().(error); err != nil {
			t.Fatalf("filling %s: %v", dirty, err)
		}
		cl.Close()
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
	initial := logBytes(t, filepath.Join(src, dirty+"-0"))
	activeBase, sealed := sealedSegments(t, filepath.Join(src, dirty+"-0"))
	t.Logf("dirty topic: %.1f MiB on disk, %.1f MiB of it sealed (below offset %d)", float64(initial)/(1<<20), float64(sealed)/(1<<20), activeBase)

	// run starts a broker on a copy of the data, produces to the load topic for the window
	// and returns the producer's MB/s in it, when (since the broker's start) the cleaner had
	// finished its pass (after the window if need be: it waits for it; 0 with the cleaner
	// off) and the bytes of the dirty topic left at the window's end.
	run := func(name string, extra ...string) (mbps float64, cleanedIn time.Duration, left int64) {
		dir := filepath.Join(t.TempDir(), name)
		if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
			t.Fatal(err)
		}
		pdir := filepath.Join(dir, dirty+"-0")
		passDone := func() (bool, string) {
			ck, err := storage.ReadCheckpoint(storage.OS, filepath.Join(dir, storage.CleanerOffsetCheckpointFile))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			o, ok := ck[storage.TopicPartition{Topic: dirty}]
			return ok && o >= activeBase, fmt.Sprintf("cleaner checkpoint %d (present: %v) of %d; files %s", o, ok, activeBase, segmentFiles(pdir))
		}
		started := time.Now()
		b := testutil.StartBrokerIn(t, dir, nil, append(append([]string{}, sets...), extra...)...)
		defer func() {
			if err := b.Close(); err != nil {
				t.Errorf("%s: close: %v", name, err)
			}
			if err := os.RemoveAll(dir); err != nil { // its dirty pages go too, not into the next run
				t.Error(err)
			}
		}()
		cl := client(t, b.Addr())
		ctx, cancel := context.WithCancel(ctxT(t, 5*time.Minute))
		defer cancel()
		var acked atomic.Int64
		var failed atomic.Value
		done := make(chan struct{})
		go func() { // a producer as fast as it goes, 1 KiB values
			defer close(done)
			value := []byte(strings.Repeat("p", 1024))
			for ctx.Err() == nil {
				cl.Produce(ctx, &kgo.Record{Topic: load, Value: value}, func(r *kgo.Record, err error) {
					if err == nil {
						acked.Add(int64(len(r.Value)))
					} else if ctx.Err() == nil {
						failed.CompareAndSwap(nil, err)
					}
				})
			}
		}()
		// The window starts once the producer runs and lasts the same for every broker; the
		// cleaner's progress is sampled through it.
		cleaning := !strings.HasPrefix(strings.Join(extra, ","), "log.cleaner.enable=false")
		waitFor(t, 30*time.Second, name+": producer started", func() (bool, string) { return acked.Load() > 0, "nothing acked" })
		start, from := time.Now(), acked.Load()
		for time.Since(start) < window {
			if ok, _ := passDone(); cleaning && cleanedIn == 0 && ok {
				cleanedIn = time.Since(started)
			}
			time.Sleep(20 * time.Millisecond) // sampling the cleaner's progress, not waiting for it
		}
		left = logBytes(t, pdir)
		// The window is over: the producer stops before the wait for the cleaner, or it
		// would write (and fill the disk) for as long as the pass takes.
		bytes := acked.Load() - from
		cancel()
		<-done
		if cleaning {
			if cleanedIn == 0 {
				// The cleaner must finish the pass (after the window: no more figures of the producer).
				waitFor(t, 2*time.Minute, name+": the cleaner's pass over the dirty topic", passDone)
				cleanedIn = time.Since(started)
			}
			if _, n := sealedSegments(t, pdir); n > sealed/10 {
				t.Errorf("%s: the pass left %d of the sealed segments' %d bytes, want at most a tenth; files %s", name, n, sealed, segmentFiles(pdir))
			}
		}
		if err := cl.Flush(context.Background()); err != nil && ctx.Err() == nil {
			t.Fatalf("%s: flush: %v", name, err)
		}
		if err, _ := failed.Load().(error); err != nil {
			t.Fatalf("%s: produce: %v", name, err)
		}
		if bytes <= 0 {
			t.Fatalf("%s: nothing acknowledged in %v", name, window)
		}
		return float64(bytes) / (1 << 20) / window.Seconds(), cleanedIn, left
	}

	// The producer alone runs first and last (the disk still writes back what came before):
	// alone is the mean of the two.
	base1, _, _ := run("baseline", "log.cleaner.enable=false")
	free, freeIn, freeLeft := run("unlimited")
	cleaned := func(in time.Duration, left int64) string {
		return fmt.Sprintf("pass done %v after the broker's start (%.1f MB/s of log), %.0f%% of the log gone at the window's end",
			in.Round(10*time.Millisecond), float64(initial)/(1<<20)/in.Seconds(), 100*float64(initial-left)/float64(initial))
	}
	// The unlimited cleaner read the log twice and wrote the little that survives: its I/O
	// rate is what the disk gave it.
	disk := float64(2*initial) / freeIn.Seconds()
	half := disk / 2
	throttled, thrIn, thrLeft := run("throttled", fmt.Sprintf("log.cleaner.io.max.bytes.per.second=%.0f", half))
	base2, _, _ := run("baseline-again", "log.cleaner.enable=false")
	base := (base1 + base2) / 2
	t.Logf("%v windows; producer alone: %.1f MB/s (%.1f first, %.1f last)", window, base, base1, base2)
	t.Logf("cleaner unlimited: %s; producer %.1f MB/s (%.0f%% of alone)", cleaned(freeIn, freeLeft), free, 100*free/base)
	t.Logf("cleaner throttled to %.1f MB/s of I/O (half the unlimited cleaner's %.1f): %s; producer %.1f MB/s (%.0f%% of alone)",
		half/(1<<20), disk/(1<<20), cleaned(thrIn, thrLeft), throttled, 100*throttled/base)
}

// sealedSegments returns the base offset of the active (last) segment of the partition
// directory dir and the bytes of the .log files below it.
func sealedSegments(t *testing.T, dir string) (activeBase, sealed int64) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	sizes := map[int64]int64{}
	activeBase = -1
	for _, e := range ents {
		stem, ok := strings.CutSuffix(e.Name(), ".log")
		if !ok {
			continue
		}
		base, err := strconv.ParseInt(stem, 10, 64)
		if err != nil {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err) // the pass is over or not begun: nothing renames segments
		}
		sizes[base] = fi.Size()
		activeBase = max(activeBase, base)
	}
	for base, n := range sizes {
		if base != activeBase {
			sealed += n
		}
	}
	return activeBase, sealed
}

// createTopic creates a one-partition topic with the default (delete) policy.
func createTopic(t *testing.T, addr, topic string) {
	createCompacted(t, addr, topic, map[string]string{"cleanup.policy": "delete"})
}

// logBytes is the size of the .log files of a partition directory (not .deleted ones).
func logBytes(t *testing.T, dir string) int64 { return partitionLogBytes(t, dir) }
