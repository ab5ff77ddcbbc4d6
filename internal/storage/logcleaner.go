package storage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/gregor-project/gregor/internal/quota"
)

// The log cleaner of one log dir (Kafka's LogCleaner with its LogCleanerManager): cleaner
// threads that pick the filthiest compacted log, clean it (Log.Clean), and keep each log's
// first dirty offset in <dir>/cleaner-offset-checkpoint.
//
// Which logs: every open log of the Manager whose Config has Compact (cleanup.policy compact
// or compact,delete), the leader's and a follower's alike, each replica cleaning its own log
// as Kafka does. A round (CleanOnce) computes each one's CleanableState from the checkpoint
// and cleans the one Filthiest returns; a log no other thread is cleaning. When none is
// cleanable, a log whose kept tombstones' delete horizon (CleanResult.DeleteHorizonMs of its
// last pass) has passed is cleaned instead, so tombstones go even when nothing new is
// written. The horizons are remembered in memory only: after a restart a log's tombstones
// go at its next pass.
//
// Time and size retention of compact,delete logs is not the cleaner's: Manager.RunRetention
// applies it to every log whose Config has retention (cleanup.policy compact alone has none).
//
// Memory: each thread owns one OffsetMap of log.cleaner.dedupe.buffer.size divided by the
// threads (at most 2 GiB, as Kafka caps it), made at its first pass; its I/O buffers are
// log.cleaner.io.buffer.size divided by the threads, half for reading and half for writing.
//
// Throttle: all threads share one token bucket of log.cleaner.io.max.bytes.per.second
// (quota.Bucket, holding at most 300 ms of bytes, Kafka's throttle check interval): every
// read and write of a pass takes its bytes from it, waiting when it is empty.
//
// Shutdown: the threads stop when the context given to Start is cancelled; a pass in
// progress is abandoned at its next read or write (the group it was writing is removed; the
// swap is crash-safe, so what was swapped stays and nothing else changes).
//
// Reconfiguration (Kafka's LogCleaner.reconfigure, for the dynamic broker configs
// log.cleaner.threads, .dedupe.buffer.size, .io.buffer.size, .io.buffer.load.factor,
// .io.max.bytes.per.second and .backoff.ms): Reconfigure changes the throttle's rate at
// once, passes in progress included; any other change restarts the threads, as Kafka does:
// they stop as at shutdown (abandoning their passes) and new ones start with the new
// settings (new maps, buffers, backoff), the checkpoint and delete horizons kept.
//
// Locking: mu guards inProgress, checkpoint and horizons, and is held while the checkpoint
// file is written (so two threads never write it at once). Log.Clean runs without it. tmu
// guards cfg and bucket; a thread takes its settings once, when it starts.

// CleanerConfig is the broker's log.cleaner.* settings.
type CleanerConfig struct {
	Threads             int     // log.cleaner.threads
	DedupeBufferSize    int64   // log.cleaner.dedupe.buffer.size, over all threads
	DedupeLoadFactor    float64 // log.cleaner.io.buffer.load.factor
	IOBufferSize        int     // log.cleaner.io.buffer.size, over all threads
	MaxIOBytesPerSecond float64 // log.cleaner.io.max.bytes.per.second, over all threads
	BackoffMs           int64   // log.cleaner.backoff.ms: the wait after a round with nothing to clean
}

// LogCleaner cleans the compacted logs of one Manager.
type LogCleaner struct {
	m       *Manager
	logger  *slog.Logger
	done    chan struct{} // closed once the threads have stopped for good (Start)
	restart chan struct{} // Reconfigure asks the supervisor to restart the threads

	tmu    sync.Mutex
	cfg    CleanerConfig
	bucket *quota.Bucket // nil: no throttle

	// ActiveProducers, when set, gives each partition's idempotent producers and the last
	// offset of each one's last batch (CleanOptions.ActiveProducers), or nil when the
	// partition is not open yet (its log is then not cleaned: its last stable offset is not
	// known). Set before Start.
	ActiveProducers func(TopicPartition) map[int64]int64
	// Now is the clock; time.Now when nil. Set before Start.
	Now func() time.Time

	mu struct {
		sync.Mutex
		inProgress map[TopicPartition]bool
		checkpoint map[TopicPartition]int64 // first dirty offset of each log cleaned
		horizons   map[TopicPartition]int64 // latest delete horizon of the tombstones a log's last pass kept
	}
}

// NewLogCleaner returns the cleaner of m's log dirs, reading each dir's
// cleaner-offset-checkpoint (an unreadable one is logged and ignored: the logs are then
// cleaned from their start).
func NewLogCleaner(m *Manager, cfg CleanerConfig, logger *slog.Logger) *LogCleaner {
	if logger == nil {
		logger = slog.Default()
	}
	c := &LogCleaner{m: m, cfg: cfg, logger: logger, done: make(chan struct{}), restart: make(chan struct{}, 1)}
	if rate, ok := throttleRate(cfg.MaxIOBytesPerSecond); ok {
		c.bucket = &quota.Bucket{Rate: rate, Burst: throttleBurst(rate)}
	}
	ck, err := m.ReadCheckpoints(CleanerOffsetCheckpointFile)
	if err != nil {
		c.logger.Warn("unreadable cleaner offset checkpoint: compacted logs are cleaned from their start", "err", err)
	}
	c.mu.inProgress = map[TopicPartition]bool{}
	c.mu.checkpoint = ck
	c.mu.horizons = map[TopicPartition]int64{}
	return c
}

func (c *LogCleaner) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// throttleRate is the bucket rate of log.cleaner.io.max.bytes.per.second; false: no limit
// (the default, Double.MAX_VALUE, or not positive).
func throttleRate(perSecond float64) (int64, bool) {
	if perSecond > 0 && perSecond < math.MaxInt64/2 {
		return max(int64(perSecond), 1), true
	}
	return 0, false
}

// throttleBurst is the most bytes the bucket holds: 300 ms of them.
func throttleBurst(rate int64) int64 { return max(rate*3/10, 1) }

// Start runs the cleaner threads until ctx is cancelled (a supervisor goroutine restarts
// them when Reconfigure asks); Wait waits for them. Start is called once.
func (c *LogCleaner) Start(ctx context.Context) {
	go c.supervise(ctx)
}

// Wait returns once every thread has stopped for good: after the context given to Start
// was cancelled.
func (c *LogCleaner) Wait() { <-c.done }

// supervise runs one generation of threads after another, each with the settings of its
// start, until ctx is cancelled.
func (c *LogCleaner) supervise(ctx context.Context) {
	defer close(c.done)
	for gen := 0; ; gen++ {
		cfg := c.config()
		gctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for i := range cfg.Threads {
			wg.Go(func() { c.thread(gctx, i, cfg) })
		}
		if gen > 0 {
			c.logger.Info("log cleaner threads restarted with new settings", "threads", cfg.Threads,
				"dedupe_buffer_size", cfg.DedupeBufferSize, "io_buffer_size", cfg.IOBufferSize,
				"load_factor", cfg.DedupeLoadFactor, "backoff_ms", cfg.BackoffMs)
		}
		select {
		case <-ctx.Done():
		case <-c.restart:
		}
		cancel()
		wg.Wait()
		if ctx.Err() != nil {
			return
		}
	}
}

// config is the current settings.
func (c *LogCleaner) config() CleanerConfig {
	c.tmu.Lock()
	defer c.tmu.Unlock()
	return c.cfg
}

// Reconfigure applies new settings (see the top of this file): the throttle's rate at once,
// and when anything else changed a restart of the threads, which Reconfigure asks for and
// does not wait for.
func (c *LogCleaner) Reconfigure(cfg CleanerConfig) {
	c.tmu.Lock()
	old := c.cfg
	c.cfg = cfg
	if cfg.MaxIOBytesPerSecond != old.MaxIOBytesPerSecond {
		if rate, ok := throttleRate(cfg.MaxIOBytesPerSecond); !ok {
			c.bucket = nil
		} else if c.bucket == nil {
			c.bucket = &quota.Bucket{Rate: rate, Burst: throttleBurst(rate)}
		} else {
			c.bucket.SetRate(c.now(), rate, throttleBurst(rate))
		}
		c.logger.Info("log cleaner throttle changed", "log.cleaner.io.max.bytes.per.second", cfg.MaxIOBytesPerSecond)
	}
	c.tmu.Unlock()
	old.MaxIOBytesPerSecond = cfg.MaxIOBytesPerSecond
	if old != cfg {
		select {
		case c.restart <- struct{}{}:
		default: // a restart is pending already: it will take these settings
		}
	}
}

// memoryPerThread is each thread's OffsetMap size.
func memoryPerThread(cfg CleanerConfig) int {
	return int(min(cfg.DedupeBufferSize/int64(max(cfg.Threads, 1)), math.MaxInt32))
}

func (c *LogCleaner) thread(ctx context.Context, id int, cfg CleanerConfig) {
	var om *OffsetMap
	backoff := time.Duration(cfg.BackoffMs) * time.Millisecond
	for ctx.Err() == nil {
		cleaned, err := c.cleanOnce(ctx, cfg, func() (*OffsetMap, error) {
			if om == nil {
				m, err := NewOffsetMap(memoryPerThread(cfg), cfg.DedupeLoadFactor)
				if err != nil {
					return nil, err
				}
				om = m
			}
			return om, nil
		})
		if err != nil && ctx.Err() == nil {
			c.logger.Error("log cleaner pass failed", "thread", id, "err", err)
		}
		if cleaned && err == nil {
			continue
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// CleanOnce is one round of a cleaner thread: it picks a log (see the top of this file),
// cleans it with the map getMap returns, and writes the checkpoint. cleaned is false when no
// log was cleanable or the pass replaced no segment (the thread then backs off). A pass given up because the log changed (ErrCleaningAborted) or was
// closed is not an error.
func (c *LogCleaner) CleanOnce(ctx context.Context, getMap func() (*OffsetMap, error)) (cleaned bool, err error) {
	return c.cleanOnce(ctx, c.config(), getMap)
}

func (c *LogCleaner) cleanOnce(ctx context.Context, cfg CleanerConfig, getMap func() (*OffsetMap, error)) (cleaned bool, err error) {
	nowMs := c.now().UnixMilli()
	tp, l, ltc, ok, err := c.grab(nowMs)
	if err != nil || !ok {
		return false, err
	}
	defer func() {
		c.mu.Lock()
		delete(c.mu.inProgress, tp)
		c.mu.Unlock()
	}()
	om, err := getMap()
	if err != nil {
		return false, err
	}
	cc := l.Config().Compaction
	opt := CleanOptions{
		FirstDirtyOffset:       ltc.FirstDirtyOffset,
		FirstUncleanableOffset: ltc.FirstUncleanableOffset,
		NowMs:                  nowMs,
		DeleteRetentionMs:      cc.DeleteRetentionMs,
		IOBufferSize:           max(cfg.IOBufferSize/max(cfg.Threads, 1)/2, 1),
		Throttle:               func(n int) error { return c.throttle(ctx, n) },
	}
	if c.ActiveProducers != nil {
		// nil: the partition is not open above the log yet (a log is listed from its
		// opening, before the replica layer has replayed its producer state and published
		// its last stable offset): cleaning now could clean an open transaction.
		if opt.ActiveProducers = c.ActiveProducers(tp); opt.ActiveProducers == nil {
			return false, nil
		}
	}
	start := time.Now()
	res, err := l.Clean(om, opt)
	switch {
	case err == nil:
	case errors.Is(err, ErrCleaningAborted), skippable(err):
		c.logger.Info("log cleaning given up: the log changed meanwhile", "partition", tp.String(), "err", err)
		err = nil
	case ctx.Err() != nil:
		return true, ctx.Err()
	default:
		err = fmt.Errorf("cleaning %s: %w", tp, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if res.DeleteHorizonMs > 0 || (err == nil && !res.MapFull) {
		c.mu.horizons[tp] = res.DeleteHorizonMs
	}
	if res.EndOffset != c.mu.checkpoint[tp] || ltc.ForceUpdateCheckpoint {
		c.mu.checkpoint[tp] = res.EndOffset
		if werr := c.writeCheckpointLocked(); werr != nil {
			err = errors.Join(err, werr)
		}
	}
	if res.SegmentsCleaned > 0 {
		secs := time.Since(start).Seconds()
		c.logger.Info("cleaned log", "partition", tp.String(), "first_dirty", res.FirstDirtyOffset, "end", res.EndOffset,
			"map_full", res.MapFull, "segments_cleaned", res.SegmentsCleaned, "segments_written", res.SegmentsWritten,
			"bytes_read", res.BytesRead, "bytes_written", res.BytesWritten, "records_read", res.RecordsRead,
			"records_retained", res.RecordsRetained, "tombstones_purged", res.TombstonesPurged,
			"mb_per_s", float64(res.BytesRead)/(1<<20)/max(secs, 1e-9))
	}
	return res.SegmentsCleaned > 0, err
}

// grab picks the log to clean and marks it in progress.
func (c *LogCleaner) grab(nowMs int64) (TopicPartition, *Log, LogToClean, bool, error) {
	type cand struct {
		tp  TopicPartition
		l   *Log
		ltc LogToClean
	}
	var cands []cand
	var states []LogToClean
	var errs []error
	c.mu.Lock()
	busy := make(map[TopicPartition]bool, len(c.mu.inProgress))
	for tp := range c.mu.inProgress {
		busy[tp] = true
	}
	ck := make(map[TopicPartition]int64, len(c.mu.checkpoint))
	for tp, o := range c.mu.checkpoint {
		ck[tp] = o
	}
	c.mu.Unlock()
	for tp, l := range c.m.Logs() {
		cfg := l.Config()
		if !cfg.Compact || busy[tp] || l.Offline() {
			continue
		}
		last, ok := ck[tp]
		if !ok {
			last = -1
		}
		ltc, err := l.CleanableState(cfg.Compaction, last, -1, nowMs)
		if err != nil {
			if !skippable(err) {
				errs = append(errs, fmt.Errorf("%s: %w", tp, err))
			}
			continue
		}
		cands = append(cands, cand{tp, l, ltc})
		states = append(states, ltc)
	}
	i := Filthiest(states)
	c.mu.Lock()
	defer c.mu.Unlock()
	if i < 0 {
		for j, cd := range cands {
			if h := c.mu.horizons[cd.tp]; h > 0 && h <= nowMs && cd.ltc.FirstUncleanableOffset > 0 {
				i = j
				break
			}
		}
	}
	if i < 0 || c.mu.inProgress[cands[i].tp] {
		return TopicPartition{}, nil, LogToClean{}, false, errors.Join(errs...)
	}
	if cands[i].ltc.FirstUncleanableOffset <= 0 {
		return TopicPartition{}, nil, LogToClean{}, false, errors.Join(errs...)
	}
	c.mu.inProgress[cands[i].tp] = true
	return cands[i].tp, cands[i].l, cands[i].ltc, true, errors.Join(errs...)
}

// writeCheckpointLocked writes each dir's cleaner-offset-checkpoint with the partitions still
// in it (a deleted one's entry is dropped).
func (c *LogCleaner) writeCheckpointLocked() error {
	out := make(map[TopicPartition]int64, len(c.mu.checkpoint))
	for _, tp := range c.m.Existing() {
		if o, ok := c.mu.checkpoint[tp]; ok {
			out[tp] = o
		}
	}
	c.mu.checkpoint = out
	return c.m.WriteCheckpoints(CleanerOffsetCheckpointFile, out)
}

// throttleWaitMax bounds one wait of the throttle, so that a cancelled context and a new
// rate are seen soon.
const throttleWaitMax = 100 * time.Millisecond

// throttle takes n bytes from the shared bucket, waiting while it is empty; it fails once ctx
// is cancelled.
func (c *LogCleaner) throttle(ctx context.Context, n int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for {
		c.tmu.Lock()
		if c.bucket == nil { // unlimited, or made so while this waited
			c.tmu.Unlock()
			return nil
		}
		got := c.bucket.Take(c.now(), n)
		rate := c.bucket.Rate
		c.tmu.Unlock()
		n -= got
		if n <= 0 {
			return nil
		}
		d := min(time.Duration(float64(n)/float64(rate)*float64(time.Second)), throttleWaitMax)
		t := time.NewTimer(max(d, time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}
