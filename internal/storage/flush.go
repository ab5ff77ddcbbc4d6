package storage

import (
	"errors"
	"fmt"
	"time"
)

// Flush fsyncs everything appended so far and moves the recovery point to the log end offset
// it saw. Appends and reads go on while the fsyncs run: under writeMu Flush only notes which
// files are dirty (sealed segments' .index/.timeindex included; the active segment's indexes
// are rebuilt by recovery anyway and are not synced) and whether the directory changed. A
// failed fsync takes the log offline (the kernel may have dropped the dirty pages, so retrying
// would lie) and is returned. Index files (which hold no descriptor) are opened for their
// fsyncs under writeMu (see indexFile); failing to open one (say EMFILE) loses nothing, so it
// is returned with the log left online and the files still dirty for the next flush.
func (l *Log) Flush() error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()

	type job struct {
		s                   *segment
		log, index, timeIdx bool
		sync                pendingSync
	}
	l.writeMu.Lock()
	if err := l.usableLocked(); err != nil {
		l.writeMu.Unlock()
		return err
	}
	target, gen := l.mu.logEndOffset, l.mu.truncations
	var jobs []job
	for _, s := range l.mu.segments {
		j := job{s: s, log: s.logDirty}
		if s.sealed {
			j.index, j.timeIdx = s.index.dirty, s.timeIndex.dirty
		}
		if !j.log && !j.index && !j.timeIdx && !s.txn.isDirty() {
			continue
		}
		// Index files (which hold no descriptor) are opened here, under writeMu, which
		// keeps their paths from being renamed (see indexFile).
		var err error
		if j.sync, err = s.prepareSync(j.log, j.index, j.timeIdx); err != nil {
			for _, j := range jobs { // no dirty flag is cleared yet: the log stays online
				err = errors.Join(err, j.sync.run(false))
			}
			l.writeMu.Unlock()
			return fmt.Errorf("flush: %w", err)
		}
		jobs = append(jobs, j)
	}
	for _, j := range jobs {
		s := j.s
		s.logDirty = false
		if j.index {
			s.index.dirty = false
		}
		if j.timeIdx {
			s.timeIndex.dirty = false
		}
		s.incRef()
	}
	syncDir := l.wr.dirDirty
	l.wr.dirDirty = false
	l.writeMu.Unlock()

	var err error
	began := time.Now()
	for _, j := range jobs {
		err = errors.Join(err, j.sync.run(err == nil))
		j.s.decRef()
	}
	if err == nil && syncDir {
		err = l.fs.SyncDir(l.dir)
	}
	if l.onFlush != nil && err == nil && (len(jobs) > 0 || syncDir) {
		l.onFlush(time.Since(began))
	}

	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if err != nil {
		return l.fail(fmt.Errorf("flush: %w", err))
	}
	if err := l.usableLocked(); err != nil {
		return err
	}
	l.wr.lastFlushMs = l.nowMs()
	// A segment sealed while the fsyncs ran has index files this flush did not cover; the
	// recovery point stays at its base so a crash rebuilds them.
	for _, s := range l.mu.segments {
		if s.baseOffset >= target {
			break
		}
		if s.sealed && (s.index.dirty || s.timeIndex.dirty) {
			target = s.baseOffset
			break
		}
	}
	if gen == l.mu.truncations && target > l.mu.recoveryPoint {
		l.mu.Lock()
		l.mu.recoveryPoint = target
		l.mu.Unlock()
	}
	return nil
}

// flushDue reports whether flush.ms has passed since the last flush with something to flush.
func (l *Log) flushDue(nowMs int64) bool {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if l.usableLocked() != nil || l.mu.logEndOffset <= l.mu.recoveryPoint {
		return false
	}
	return nowMs-l.wr.lastFlushMs >= l.mu.cfg.FlushIntervalMs
}

// Offline reports whether an I/O error took the log offline.
func (l *Log) Offline() bool {
	if l.pub.open.Load() {
		return false // no lock on the common path: open logs are asked on every fetch
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.state == stateOffline
}
