package storage

import (
	"math"
)

// Which log to clean, after Kafka's LogCleanerManager (cleanableOffsets,
// calculateCleanableBytes, maxCompactionDelay, grabFilthiestCompactedLog). Deterministic:
// the caller gives the clock and the checkpointed offsets; nothing here runs a goroutine.
//
//   - The first dirty offset is the checkpointed one; none, one below the log start offset or
//     one past the log end offset is reset to the log start offset (ForceUpdateCheckpoint).
//   - The first uncleanable offset is the lowest of the last stable offset, the active
//     segment's base offset and, with min.compaction.lag.ms > 0, the base offset of the first
//     dirty sealed segment whose largest timestamp is less than the lag before now. Cleaning
//     stops at the start of the segment holding it.
//   - Clean bytes are the segments below the first dirty offset; cleanable bytes those from
//     the one holding it up to that segment; the dirty ratio is cleanable / (clean +
//     cleanable).
//   - max.compaction.lag.ms: the delay is how long ago the earliest first-batch timestamp of
//     the dirty sealed segments passed now - the lag; a log with a positive delay must be
//     cleaned now, whatever its ratio, if it has cleanable bytes.
//   - Among the logs that must be cleaned now or whose ratio passes min.cleanable.dirty.ratio,
//     the dirtiest (highest ratio) is cleaned first.

// CompactionConfig is a log's compaction settings (topic configs; broker defaults
// log.cleaner.*).
type CompactionConfig struct {
	MinCleanableRatio  float64 // min.cleanable.dirty.ratio
	MinCompactionLagMs int64   // min.compaction.lag.ms
	MaxCompactionLagMs int64   // max.compaction.lag.ms
	DeleteRetentionMs  int64   // delete.retention.ms: how long a tombstone stays once a pass kept it
}

// LogToClean is a compacted log's cleanable state (Kafka's LogToClean).
type LogToClean struct {
	FirstDirtyOffset       int64
	FirstUncleanableOffset int64 // segment-aligned: cleaning stops there
	ForceUpdateCheckpoint  bool  // the checkpointed offset was reset: write FirstDirtyOffset back
	CleanBytes             int64
	CleanableBytes         int64
	MaxCompactionDelayMs   int64 // > 0: max.compaction.lag.ms has passed for a dirty record
	MinCleanableRatio      float64
}

// CleanableRatio is the share of the log's cleaned-and-cleanable bytes that is dirty.
func (c LogToClean) CleanableRatio() float64 {
	if total := c.CleanBytes + c.CleanableBytes; total > 0 {
		return float64(c.CleanableBytes) / float64(total)
	}
	return 0
}

// NeedsCompactionNow reports that max.compaction.lag.ms has passed for some dirty record.
func (c LogToClean) NeedsCompactionNow() bool { return c.MaxCompactionDelayMs > 0 }

// Cleanable reports whether the log should be cleaned at all.
func (c LogToClean) Cleanable() bool {
	return (c.NeedsCompactionNow() && c.CleanableBytes > 0) || c.CleanableRatio() > c.MinCleanableRatio
}

// CleanableState computes the log's cleanable state at nowMs. lastCleanOffset is the
// cleaner-offset-checkpoint entry (< 0: none), lastStableOffset a bound of the caller's (< 0:
// none); the last stable offset published to the log (SetLastStableOffset) and its high
// watermark bound it anyway.
func (l *Log) CleanableState(cc CompactionConfig, lastCleanOffset, lastStableOffset, nowMs int64) (LogToClean, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.usableLocked(); err != nil {
		return LogToClean{}, err
	}
	lc := LogToClean{MinCleanableRatio: cc.MinCleanableRatio}
	lso, leo := l.mu.logStartOffset, l.mu.logEndOffset
	lc.FirstDirtyOffset = lastCleanOffset
	if lastCleanOffset < lso || lastCleanOffset > leo {
		lc.FirstDirtyOffset, lc.ForceUpdateCheckpoint = lso, true
	}
	segs := l.mu.segments
	active := segs[len(segs)-1]
	uncleanable := min(l.cleanableEndLocked(), active.baseOffset)
	if lastStableOffset >= 0 {
		uncleanable = min(uncleanable, lastStableOffset)
	}
	first := l.floorSegmentLocked(lc.FirstDirtyOffset)
	buf := headerPool.Get().(*headerBuf)
	defer headerPool.Put(buf)
	earliest := int64(math.MaxInt64)
	for _, s := range segs[first : len(segs)-1] {
		if cc.MinCompactionLagMs > 0 && s.baseOffset < uncleanable {
			ts, err := s.largestTimestamp()
			if err != nil {
				return LogToClean{}, err
			}
			if ts > nowMs-cc.MinCompactionLagMs {
				uncleanable = min(uncleanable, s.baseOffset)
			}
		}
		if s.size > 0 {
			h, err := s.readHeader(0, buf)
			if err != nil {
				return LogToClean{}, err
			}
			if h.MaxTimestamp > 0 {
				earliest = min(earliest, h.MaxTimestamp)
			}
		}
	}
	// Cleaning stops at the start of the segment holding the first uncleanable offset.
	u := l.floorSegmentLocked(uncleanable)
	lc.FirstUncleanableOffset = max(segs[u].baseOffset, lc.FirstDirtyOffset)
	// As Kafka counts them: a segment holding the first dirty offset in its middle is both
	// clean and cleanable.
	for i, s := range segs[:u] {
		if s.baseOffset < lc.FirstDirtyOffset {
			lc.CleanBytes += s.size
		}
		if segs[i+1].baseOffset > lc.FirstDirtyOffset && s.baseOffset < lc.FirstUncleanableOffset {
			lc.CleanableBytes += s.size
		}
	}
	if lag := max(cc.MaxCompactionLagMs, 0); earliest != math.MaxInt64 && lag <= nowMs {
		if until := nowMs - lag; earliest < until {
			lc.MaxCompactionDelayMs = until - earliest
		}
	}
	return lc, nil
}

// Filthiest returns the index of the log to clean first among logs, or -1 when none is
// cleanable: the highest dirty ratio among those that must be cleaned now or pass their
// ratio, the first of equals.
func Filthiest(logs []LogToClean) int {
	best := -1
	for i, c := range logs {
		if !c.Cleanable() {
			continue
		}
		if best < 0 || c.CleanableRatio() > logs[best].CleanableRatio() {
			best = i
		}
	}
	return best
}
