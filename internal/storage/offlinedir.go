package storage

import (
	"errors"
	"fmt"
	"slices"
)

// A failed log dir (Kafka's LogDirFailureChannel and LogManager.handleLogDirFailure, KIP-858).
//
// An I/O error in one log (a write, fsync, truncation or segment deletion) takes that log
// offline and is reported through OnLogOffline; the caller then fails the whole dir with
// FailDir, as Kafka does, since the disk under it is suspect. From then on:
//   - every log of the dir is offline (ErrLogOffline) and no longer among the open logs, so
//     flushes, retention and checkpoints leave it alone;
//   - GetOrCreate of a partition in the dir answers ErrLogOffline: the partition is never
//     re-created in another dir (its data is on the failed disk; the controller moves its
//     leadership to another broker);
//   - new partitions and future replicas go to the other dirs only, and a move into the dir
//     in progress is dropped;
//   - Usage reports the dir as offline (DescribeLogDirs' KAFKA_STORAGE_ERROR);
//   - Close writes neither checkpoints nor the clean-shutdown marker there, so the next start
//     recovers the dir's logs.
//
// A dir stays offline until the process restarts. The dir's offline flag and error are in
// logDir, guarded by the Manager's mu.

// ErrLogDirOffline: the partition's log dir has failed (a wrapped ErrLogOffline).
var ErrLogDirOffline = fmt.Errorf("%w: its log dir has failed", ErrLogOffline)

// FailedDir is what FailDir did.
type FailedDir struct {
	ID         DirID            // the failed dir's directory.id
	Partitions []TopicPartition // the partitions the dir held, sorted
	// First is false when the dir had already failed (nothing was done).
	First bool
	// AllFailed reports that every log dir has now failed.
	AllFailed bool
}

// FailDir takes the log dir path (as Dirs names it) offline because of cause: every log in
// it goes offline and leaves the open logs, and the dir takes no new partition. It is
// idempotent. It must not be called holding a log's locks (OnLogOffline is: call FailDir
// from another goroutine).
func (m *Manager) FailDir(path string, cause error) (FailedDir, error) {
	d := m.logDirOf(path)
	if d == nil {
		return FailedDir{}, fmt.Errorf("%w: %s", ErrLogDirNotFound, path)
	}
	m.mu.Lock()
	out := FailedDir{ID: d.meta.dirID}
	var logs []*Log
	if !d.offline {
		out.First = true
		d.offline, d.offlineErr = true, cause
		for tp, w := range m.mu.where {
			if w != d {
				continue
			}
			out.Partitions = append(out.Partitions, tp)
			if l := m.mu.logs[tp]; l != nil {
				logs = append(logs, l)
				delete(m.mu.logs, tp)
			}
		}
		for tp, f := range m.mu.future {
			if f.dir == d || m.mu.where[tp] == d {
				if f.log != nil {
					logs = append(logs, f.log)
				}
				delete(m.mu.future, tp)
			}
		}
		for tp, p := range m.mu.preferred {
			if p == d {
				delete(m.mu.preferred, tp)
			}
		}
		slices.SortFunc(out.Partitions, compareTP)
	}
	out.AllFailed = !slices.ContainsFunc(m.dirs, func(d *logDir) bool { return !d.offline })
	m.mu.Unlock()
	if out.First {
		m.logger.Error("log dir failed: its partitions are offline", "log_dir", d.path, "partitions", len(out.Partitions), "err", cause)
	}
	for _, l := range logs {
		l.takeOffline(cause)
	}
	return out, nil
}

// DirOffline reports whether the log dir path has failed.
func (m *Manager) DirOffline(path string) bool {
	d := m.logDirOf(path)
	if d == nil {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return d.offline
}

// OfflineDirIDs are the directory ids of the failed log dirs, in log.dirs order.
func (m *Manager) OfflineDirIDs() []DirID {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []DirID
	for _, d := range m.dirs {
		if d.offline {
			out = append(out, d.meta.dirID)
		}
	}
	return out
}

// offlineErrLocked is the error for a partition in the failed dir d.
func offlineErrLocked(d *logDir, tp TopicPartition) error {
	return fmt.Errorf("%w: %s in %s: %w", ErrLogDirOffline, tp, d.path, d.offlineErr)
}

// takeOffline takes the log offline because its log dir failed, without reporting it
// through OnOffline (the dir is failed already). It takes writeMu and mu.
func (l *Log) takeOffline(cause error) {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.state != stateOpen {
		return
	}
	if cause == nil {
		cause = errors.New("log dir failed")
	}
	l.logger.Error("log is offline: its log dir failed", "err", cause)
	l.mu.state = stateOffline
	l.mu.offlineErr = cause
	l.publishLocked()
}
