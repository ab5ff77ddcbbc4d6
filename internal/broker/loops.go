package broker

import (
	"context"
	"time"

	"github.com/gregor-project/gregor/internal/config"
	"github.com/gregor-project/gregor/internal/storage"
)

// Background work, each on its own ticker: retention (log.retention.check.interval.ms, which
// also rolls idle segments by time), time-based flushing (log.flush.interval.ms, checked every
// second at most), recovery-point checkpoints (log.flush.offset.checkpoint.interval.ms), and
// the log cleaner's threads (log.cleaner.enable, log.cleaner.threads), and the expiry of idle
// producers' state (producer.id.expiration.ms, checked every
// producer.id.expiration.check.interval.ms).
func (b *Broker) startLoops(ctx context.Context) {
	b.startCleaner(ctx)
	b.every(ctx, time.Duration(b.cfg.LogRetentionCheckIntervalMs)*time.Millisecond, func(now time.Time) {
		n, err := b.logs.RunRetention(now.UnixMilli())
		if err != nil {
			b.log.Error("retention failed", "err", err)
		}
		if n > 0 || err != nil {
			b.trimEpochCaches()
		}
	})
	flushEvery := time.Second
	if ms := b.cfg.LogFlushIntervalMs; ms > 0 && ms < 1000 {
		flushEvery = time.Duration(ms) * time.Millisecond
	}
	b.every(ctx, flushEvery, func(now time.Time) {
		if err := b.logs.FlushDue(now.UnixMilli()); err != nil {
			b.log.Error("flush failed", "err", err)
		}
	})
	b.every(ctx, time.Duration(b.cfg.LogFlushOffsetCheckpointIntervalMs)*time.Millisecond, func(time.Time) {
		if err := b.logs.Checkpoint(); err != nil {
			b.log.Error("checkpoint failed", "err", err)
		}
	})
	b.every(ctx, time.Duration(b.cfg.ProducerIDExpirationCheckIntervalMs)*time.Millisecond, func(now time.Time) {
		if n := b.replicas.ExpireProducers(now.UnixMilli(), int64(b.cfg.Current().ProducerIDExpirationMs)); n > 0 {
			b.log.Info("expired idle producers", "producers", n)
		}
	})
}

func (b *Broker) every(ctx context.Context, d time.Duration, fn func(time.Time)) {
	if d <= 0 {
		return
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				fn(now)
			}
		}
	}()
}

// trimEpochCaches drops the leader epoch entries wholly below each log's start offset, which
// retention moved (Kafka's LeaderEpochFileCache.truncateFromStart after a log start change),
// so OffsetForLeaderEpoch never answers with an offset the log no longer has.
func (b *Broker) trimEpochCaches() {
	if b.replicas == nil {
		return
	}
	for _, p := range b.replicas.Partitions() {
		if p.Log().Offline() {
			continue
		}
		if e := p.Epochs(); e != nil {
			if err := e.TruncateFromStart(p.Log().LogStartOffset()); err != nil {
				b.log.Warn("trimming the leader epoch cache failed", "topic", p.Topic, "partition", p.Index, "err", err)
			}
		}
	}
}

// startCleaner starts the log cleaner (Kafka's LogCleaner) on the log dir, its threads
// stopping with ctx (before the logs close: Close waits for b.wg first).
func (b *Broker) startCleaner(ctx context.Context) {
	cfg := b.cfg.Current()
	if !cfg.LogCleanerEnable || cfg.LogCleanerThreads <= 0 {
		b.log.Info("log cleaner disabled: compacted topics keep every record", "log.cleaner.enable", cfg.LogCleanerEnable, "log.cleaner.threads", cfg.LogCleanerThreads)
		return
	}
	c := storage.NewLogCleaner(b.logs, cleanerConfig(cfg), b.log)
	if b.replicas != nil {
		c.ActiveProducers = func(tp storage.TopicPartition) map[int64]int64 {
			if p := b.replicas.Get(tp.Topic, tp.Partition); p != nil {
				return p.ProducerLastOffsets()
			}
			return nil
		}
	}
	c.Start(ctx)
	b.cleaner.Store(c)
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		c.Wait()
	}()
}

// cleanerConfig is the log cleaner's settings in cfg.
func cleanerConfig(cfg *config.Broker) storage.CleanerConfig {
	return storage.CleanerConfig{
		Threads:             int(cfg.LogCleanerThreads),
		DedupeBufferSize:    cfg.LogCleanerDedupeBufferSize,
		DedupeLoadFactor:    cfg.LogCleanerIOBufferLoadFactor,
		IOBufferSize:        int(cfg.LogCleanerIOBufferSize),
		MaxIOBytesPerSecond: cfg.LogCleanerIOMaxBytesPerSecond,
		BackoffMs:           cfg.LogCleanerBackoffMs,
	}
}

// reconfigureCleaner gives the running log cleaner (none when disabled at start:
// log.cleaner.enable is static) the settings of the live config, after a dynamic broker
// config changed (Kafka's LogCleaner.reconfigure: the throttle at once, the threads
// restarted when anything else changed).
func (b *Broker) reconfigureCleaner() {
	if c := b.cleaner.Load(); c != nil {
		c.Reconfigure(cleanerConfig(b.cfg.Current()))
	}
}
