package storage

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Config holds a partition log's settings, named after Kafka's topic configs.
type Config struct {
	SegmentBytes          int64 // segment.bytes: roll when the active segment would grow past it; also the largest batch
	SegmentMs             int64 // segment.ms: roll when the active segment's first batch is older than this
	RetentionMs           int64 // retention.ms: delete segments whose largest timestamp is older; -1 keeps forever
	RetentionBytes        int64 // retention.bytes: delete the oldest segments while the log is larger; -1 no limit
	IndexIntervalBytes    int32 // index.interval.bytes: log bytes between offset/time index entries
	SegmentIndexBytes     int32 // segment.index.bytes: the largest index file; the segment rolls when one is full
	FlushIntervalMessages int64 // flush.messages: fsync once this many messages are unflushed
	FlushIntervalMs       int64 // flush.ms: Manager.FlushDue fsyncs a log not flushed for this long
	FileDeleteDelayMs     int64 // file.delete.delay.ms: how long deleted segment files linger as *.deleted

	Compact    bool             // cleanup.policy includes compact: the log cleaner cleans the log
	Compaction CompactionConfig // how the cleaner treats it (used only with Compact)
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:          1 << 30,
		SegmentMs:             7 * 24 * 60 * 60 * 1000,
		RetentionMs:           7 * 24 * 60 * 60 * 1000,
		RetentionBytes:        -1,
		IndexIntervalBytes:    4096,
		SegmentIndexBytes:     10 << 20,
		FlushIntervalMessages: math.MaxInt64,
		FlushIntervalMs:       math.MaxInt64,
		FileDeleteDelayMs:     60000,
	}
}

// normalized replaces values that cannot work: a zero or negative SegmentBytes, SegmentMs,
// SegmentIndexBytes or FlushIntervalMessages takes the default, SegmentBytes is capped at
// what an int32 position can address, a negative IndexIntervalBytes is 0.
func (c Config) normalized() Config {
	d := DefaultConfig()
	if c.SegmentBytes <= 0 {
		c.SegmentBytes = d.SegmentBytes
	}
	c.SegmentBytes = min(c.SegmentBytes, math.MaxInt32)
	if c.SegmentMs <= 0 {
		c.SegmentMs = d.SegmentMs
	}
	if c.SegmentIndexBytes <= 0 {
		c.SegmentIndexBytes = d.SegmentIndexBytes
	}
	if c.FlushIntervalMessages <= 0 {
		c.FlushIntervalMessages = d.FlushIntervalMessages
	}
	c.IndexIntervalBytes = max(c.IndexIntervalBytes, 0)
	return c
}

// OpenOptions says how Open finds the log.
type OpenOptions struct {
	RecoveryPoint  int64            // from recovery-point-offset-checkpoint: offsets below it were fsynced
	LogStartOffset int64            // from log-start-offset-checkpoint
	Clean          bool             // the clean-shutdown marker was present: skip recovery
	Now            func() time.Time // clock; time.Now when nil
	Logger         *slog.Logger     // slog.Default() when nil
	Files          *FileCache       // opens the segments' .log files; an unbounded one of the log's own when nil
	// OnOffline, if set, is called once when an I/O error takes the log offline, with that
	// error, holding the log's locks (it must not call the log): Manager.OnLogOffline.
	OnOffline func(err error)
	// OnFlush, if set, is told how long each Flush that synced something took.
	OnFlush func(time.Duration)
}

type logState int8

const (
	stateOpen logState = iota
	stateOffline
	stateClosed
)

// Log is one partition's log: the directory <log.dir>/<topic>-<partition> holding its
// segments, oldest first, the last one active (appended to).
//
// Invariants, while open:
//   - segments is never empty; base offsets strictly increase; every segment but the last is
//     sealed;
//   - firstSegment.baseOffset <= logStartOffset <= logEndOffset == active.nextOffset;
//   - recoveryPoint <= logEndOffset, and every byte below the recovery point is fsynced;
//   - readers see only committed bytes (segment.size), which are whole batches; bytes past it
//     are an append in progress or a failed write;
//   - once offline (a write, fsync or truncate failed) every method fails with ErrLogOffline.
//
// Locking. Lock order: cleanMu, then flushMu, then writeMu, then mu.
//   - cleanMu serializes Clean (cleaner.go), which holds it for a whole pass.
//   - writeMu serializes every change: Append, roll, truncation, retention, the bookkeeping of
//     Flush, Reconfigure, Close. The .log write itself happens holding only writeMu, past the
//     committed end, so readers are not blocked by it.
//   - mu guards the fields inside it and the segments' shared fields and indexes: changed
//     holding writeMu and mu (write), read holding either writeMu or mu (read). Read, the
//     timestamp lookups and the accessors take only mu.RLock.
//   - flushMu serializes Flush, whose fsyncs run with neither writeMu nor mu held.
//   - wr is guarded by writeMu alone.
//   - pub mirrors mu's log start and end offsets and whether the log is open, for readers
//     that take no lock (LogStartOffset, LogEndOffset, Offline and Read's fast path at the
//     end of the log, which a consumer caught up on many partitions hits on every fetch).
//     publishLocked stores it holding mu (write) after every change to those fields; a
//     lock-free reader sees each field as of some recent change.
type Log struct {
	fs        FS
	files     *FileCache
	dir       string
	logger    *slog.Logger
	now       func() time.Time
	onOffline func(err error)     // OpenOptions.OnOffline
	onFlush   func(time.Duration) // OpenOptions.OnFlush

	cleanMu sync.Mutex
	flushMu sync.Mutex
	writeMu sync.Mutex

	mu struct {
		sync.RWMutex
		cfg            Config
		segments       []*segment
		logStartOffset int64
		logEndOffset   int64
		recoveryPoint  int64
		highWatermark  int64 // retention and SetLogStartOffset never pass it; -1: the log end offset
		truncations    uint64
		state          logState
		offlineErr     error
	}

	// lastStable is the partition's last stable offset as the replica layer last published it
	// (SetLastStableOffset), -1 until it does. Atomic: set on every move of the high
	// watermark or of the producer state, without the log's locks.
	lastStable atomic.Int64

	pub struct {
		logStartOffset atomic.Int64
		logEndOffset   atomic.Int64
		open           atomic.Bool
	}

	wr struct {
		dirDirty       bool // a segment file was created, renamed or removed since the last directory fsync
		lastFlushMs    int64
		pendingDeletes []pendingDelete
	}
}

// pendingDelete is a set of *.deleted files to remove once file.delete.delay.ms has passed.
type pendingDelete struct {
	paths []string
	dueMs int64
}

// Open opens (or creates) the log in dir, recovering it when opt.Clean is false.
func Open(fs FS, dir string, cfg Config, opt OpenOptions) (*Log, error) {
	l := &Log{fs: fs, files: opt.Files, dir: dir, logger: opt.Logger, now: opt.Now, onOffline: opt.OnOffline, onFlush: opt.OnFlush}
	if l.files == nil {
		l.files = NewFileCache(0)
	}
	if l.logger == nil {
		l.logger = slog.Default()
	}
	l.logger = l.logger.With("log", dir)
	if l.now == nil {
		l.now = time.Now
	}
	l.mu.cfg = cfg.normalized()
	l.mu.highWatermark = -1
	l.lastStable.Store(-1)
	l.wr.lastFlushMs = l.nowMs()
	if err := l.load(opt); err != nil {
		for _, s := range l.mu.segments {
			s.decRef()
		}
		return nil, err
	}
	l.publishLocked() // load published already; the Log is not shared yet either way
	return l, nil
}

func (l *Log) nowMs() int64 { return l.now().UnixMilli() }

// usableLocked returns why the log cannot be used, or nil. Holding writeMu or mu.
func (l *Log) usableLocked() error {
	switch l.mu.state {
	case stateClosed:
		return ErrLogClosed
	case stateOffline:
		return fmt.Errorf("%w: %w", ErrLogOffline, l.mu.offlineErr)
	}
	return nil
}

// publishLocked stores the fields pub mirrors. Holding mu (write), after changing any of them.
func (l *Log) publishLocked() {
	l.pub.logStartOffset.Store(l.mu.logStartOffset)
	l.pub.logEndOffset.Store(l.mu.logEndOffset)
	l.pub.open.Store(l.mu.state == stateOpen)
}

// failLocked takes the log offline because of err and returns the error to report. Holding
// writeMu and mu.
func (l *Log) failLocked(err error) error {
	if l.mu.state == stateOpen {
		l.logger.Error("log is offline after an I/O error", "err", err)
		l.mu.state = stateOffline
		l.mu.offlineErr = err
		l.publishLocked()
		if l.onOffline != nil {
			l.onOffline(err)
		}
	}
	return fmt.Errorf("%w: %w", ErrLogOffline, err)
}

// fail is failLocked for a caller holding only writeMu.
func (l *Log) fail(err error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failLocked(err)
}

// Dir is the partition directory.
func (l *Log) Dir() string { return l.dir }

// LogStartOffset is the first offset a consumer may read. It takes no lock.
func (l *Log) LogStartOffset() int64 { return l.pub.logStartOffset.Load() }

// LogEndOffset is the offset the next appended record gets. It takes no lock.
func (l *Log) LogEndOffset() int64 { return l.pub.logEndOffset.Load() }

// RecoveryPoint is the offset below which everything is fsynced.
func (l *Log) RecoveryPoint() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.recoveryPoint
}

// Size is the bytes of all segments' .log files (committed bytes).
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.sizeLocked()
}

func (l *Log) sizeLocked() int64 {
	var n int64
	for _, s := range l.mu.segments {
		n += s.size
	}
	return n
}

// NumSegments is the number of segments.
func (l *Log) NumSegments() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.mu.segments)
}

// Config returns the log's current configuration.
func (l *Log) Config() Config {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.cfg
}

// Reconfigure changes the configuration; segment and index sizes apply from the next roll.
func (l *Log) Reconfigure(cfg Config) {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.cfg = cfg.normalized()
}

// SetHighWatermark tells the log the partition's high watermark: retention never deletes a
// segment holding offsets at or above it, and SetLogStartOffset never passes it. A negative
// value (the initial one) means the log end offset.
func (l *Log) SetHighWatermark(hw int64) {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.highWatermark = hw
}

// SetLastStableOffset tells the log the partition's last stable offset (the first offset of
// its earliest ongoing transaction, or the high watermark): the cleaner never cleans at or
// past it (cleaner.go). Until it is first called the cleaner stops at the high watermark, as
// for a log with no transactions above it.
func (l *Log) SetLastStableOffset(lso int64) { l.lastStable.Store(lso) }

// cleanableEndLocked is the offset cleaning never reaches: the last stable offset when
// published, the high watermark (or the log end offset) in any case. Holding mu.
func (l *Log) cleanableEndLocked() int64 {
	end := l.highWatermarkLocked()
	if lso := l.lastStable.Load(); lso >= 0 {
		end = min(end, lso)
	}
	return end
}

// highWatermarkLocked is the high watermark or, when unset, the log end offset.
func (l *Log) highWatermarkLocked() int64 {
	if l.mu.highWatermark < 0 {
		return l.mu.logEndOffset
	}
	return min(l.mu.highWatermark, l.mu.logEndOffset)
}

// activeLocked is the last segment. Holding writeMu or mu.
func (l *Log) activeLocked() *segment { return l.mu.segments[len(l.mu.segments)-1] }

// floorSegmentLocked returns the index of the last segment whose base offset is <= offset,
// or 0 when offset is below them all.
func (l *Log) floorSegmentLocked(offset int64) int {
	segs := l.mu.segments
	lo, hi := 0, len(segs)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if segs[m].baseOffset <= offset {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return max(lo-1, 0)
}

// Close flushes the log, writes out and trims the indexes and closes the files. Slices not
// yet released keep their segment's .log open until they are. Closing twice is a no-op.
func (l *Log) Close() error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if l.mu.state == stateClosed {
		return nil
	}
	var err error
	if l.mu.state == stateOpen {
		err = l.closeFlushLocked()
	}
	l.mu.Lock()
	segs := l.mu.segments
	l.mu.segments = nil
	l.mu.state = stateClosed
	l.publishLocked()
	l.mu.Unlock()
	for _, s := range segs {
		s.decRef()
	}
	for _, pd := range l.wr.pendingDeletes {
		for _, p := range pd.paths {
			// Gone already: a later segment with the same base offset (the log cleaner's
			// output replaced again) was renamed over it and removed first.
			if rerr := l.fs.Remove(p); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
				err = errors.Join(err, rerr)
			}
		}
	}
	l.wr.pendingDeletes = nil
	return err
}

// closeFlushLocked seals the active segment and fsyncs everything. Holding flushMu and writeMu.
func (l *Log) closeFlushLocked() error {
	l.mu.Lock()
	err := l.activeLocked().seal()
	l.mu.Unlock()
	if err != nil {
		return l.fail(fmt.Errorf("close: %w", err))
	}
	for _, s := range l.mu.segments {
		if err := s.syncFiles(s.logDirty, s.index.dirty, s.timeIndex.dirty); err != nil {
			return l.fail(fmt.Errorf("close: %w", err))
		}
		s.logDirty, s.index.dirty, s.timeIndex.dirty = false, false, false
	}
	if l.wr.dirDirty {
		if err := l.fs.SyncDir(l.dir); err != nil {
			return l.fail(fmt.Errorf("close: %w", err))
		}
		l.wr.dirDirty = false
	}
	l.mu.Lock()
	l.mu.recoveryPoint = l.mu.logEndOffset
	l.mu.Unlock()
	return nil
}

// Delete closes the log and removes its directory.
func (l *Log) Delete() error {
	err := l.Close()
	return errors.Join(err, l.fs.RemoveAll(l.dir))
}
