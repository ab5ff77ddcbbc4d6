package storage

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gregor-project/gregor/internal/batch"
)

// Moving a partition to another log dir (AlterReplicaLogDirs), as Kafka moves it: a future
// log is created in the destination as <topic>-<partition>.<id>-future, the replica layer
// copies the current log into it (CopyBatches) while the partition serves, and once it has
// caught up swaps it in holding the partition's lock (SwapFuture): the future directory is
// renamed to <topic>-<partition>, and the old one is renamed to -delete and removed.
//
// A crash between the two renames leaves the partition in both dirs, which the next start
// refuses (ErrDuplicateLog), as Kafka does: the operator removes one. A future directory left
// by a stop before the swap is found at open (pending: log nil) and the move resumes when the
// replica layer opens the partition (PendingFuture, then CreateFuture opens it, recovering it
// as after an unclean stop).

// ErrLogDirNotFound: a directory that is not one of log.dirs. LOG_DIR_NOT_FOUND.
var ErrLogDirNotFound = errors.New("storage: not a log dir of this broker")

// ErrNoPartition: the partition has no log on this broker. NOT_LEADER_OR_FOLLOWER (or
// UNKNOWN_TOPIC_OR_PARTITION, decided by the caller from the metadata).
var ErrNoPartition = errors.New("storage: partition not on this broker")

const futureSuffix = "-future"

// futureLog is a partition's copy in progress in another dir, at path; log is nil while it is
// pending (found at open, not opened yet). Guarded by Manager.mu.
type futureLog struct {
	dir  *logDir
	path string
	log  *Log
}

// FutureDirName is the form of a future log's directory name,
// <topic>-<partition>.<32 hex digits>-future (the digits random, here zeros).
func FutureDirName(topic string, partition int32) string {
	return TopicPartition{topic, partition}.String() + "." + strings.Repeat("0", 32) + futureSuffix
}

// parseFutureDir parses a future log's directory name, <topic>-<partition>.<id>-future.
func parseFutureDir(name string) (TopicPartition, bool) {
	base, ok := strings.CutSuffix(name, futureSuffix)
	i := strings.LastIndexByte(base, '.')
	if !ok || i <= 0 {
		return TopicPartition{}, false
	}
	return ParsePartitionDir(base[:i])
}

// PendingFuture is the dir of the partition's move that a stop interrupted (found at open,
// not resumed yet), "" when there is none. The replica layer resumes it with CreateFuture.
func (m *Manager) PendingFuture(topic string, partition int32) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if f := m.mu.future[TopicPartition{topic, partition}]; f != nil && f.log == nil {
		return f.dir.path
	}
	return ""
}

// logDirOf finds the log dir named path (relative to the working directory), or nil.
func (m *Manager) logDirOf(path string) *logDir {
	path, err := filepath.Abs(path)
	if err != nil {
		return nil
	}
	for _, d := range m.dirs {
		if d.path == path {
			return d
		}
	}
	return nil
}

// HasDir reports whether path names one of the log dirs.
func (m *Manager) HasDir(path string) bool { return m.logDirOf(path) != nil }

// CreateFuture makes the partition's future log in the log dir dest, starting at the current
// log's start offset, and returns it; an existing future log in dest is returned as it is
// (created false). A future log in another dir is removed first. dest being the dir the
// partition is in already removes any future log and returns nil: there is nothing to move.
func (m *Manager) CreateFuture(topic string, partition int32, dest string) (l *Log, created bool, err error) {
	tp := TopicPartition{topic, partition}
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.logDirOf(dest)
	if d == nil {
		return nil, false, fmt.Errorf("%w: %s", ErrLogDirNotFound, dest)
	}
	cur := m.mu.logs[tp]
	if cur == nil || m.mu.closed {
		return nil, false, fmt.Errorf("%w: %s", ErrNoPartition, tp)
	}
	if cur.Offline() {
		return nil, false, fmt.Errorf("%w: %s", ErrLogOffline, tp)
	}
	if f := m.mu.future[tp]; f != nil {
		if f.dir == d && f.log != nil {
			return f.log, false, nil
		}
		if f.dir == d { // pending since the open: recover it and resume
			opt := OpenOptions{Now: m.Now, Logger: m.logger, Files: m.files}
			if on := m.OnLogOffline; on != nil {
				opt.OnOffline = func(err error) { on(f.path, err) }
			}
			fl, err := Open(m.fs, f.path, cur.Config(), opt)
			if err != nil {
				return nil, false, errors.Join(err, m.dropFutureLocked(tp))
			}
			f.log = fl
			m.logger.Info("resuming the move of a partition to another log dir", "partition", tp.String(), "to", d.path, "from_offset", fl.LogEndOffset())
			return fl, true, nil
		}
		if err := m.dropFutureLocked(tp); err != nil {
			return nil, false, err
		}
	}
	if m.mu.where[tp] == d {
		return nil, false, nil
	}
	var suffix [16]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return nil, false, err
	}
	path := filepath.Join(d.path, tp.String()+"."+hex.EncodeToString(suffix[:])+futureSuffix) // FutureDirName's form
	opt := OpenOptions{Clean: true, Now: m.Now, Logger: m.logger, Files: m.files}
	if on := m.OnLogOffline; on != nil {
		opt.OnOffline = func(err error) { on(path, err) }
	}
	fl, err := Open(m.fs, path, cur.Config(), opt)
	if err != nil {
		return nil, false, err
	}
	if err := errors.Join(fl.TruncateFullyAndStartAt(cur.LogStartOffset()), m.fs.SyncDir(d.path)); err != nil {
		return nil, false, errors.Join(err, fl.Close(), m.fs.RemoveAll(path))
	}
	m.mu.future[tp] = &futureLog{dir: d, path: path, log: fl}
	m.logger.Info("moving partition to another log dir", "partition", tp.String(), "from", m.mu.where[tp].path, "to", d.path)
	return fl, true, nil
}

// SetPreferredDir makes the log dir dest the one a partition not on disk yet is created in
// (Kafka's preferred log dir: AlterReplicaLogDirs for a replica not created yet). It is
// forgotten once the partition is created.
func (m *Manager) SetPreferredDir(topic string, partition int32, dest string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.logDirOf(dest)
	if d == nil {
		return fmt.Errorf("%w: %s", ErrLogDirNotFound, dest)
	}
	tp := TopicPartition{topic, partition}
	if m.mu.where[tp] == nil {
		m.mu.preferred[tp] = d
	}
	return nil
}

// Future returns the partition's future log and its dir, or nil and "".
func (m *Manager) Future(topic string, partition int32) (*Log, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if f := m.mu.future[TopicPartition{topic, partition}]; f != nil && f.log != nil {
		return f.log, f.dir.path
	}
	return nil, ""
}

// DropFuture closes and removes the partition's future log (a move given up), if any.
func (m *Manager) DropFuture(topic string, partition int32) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dropFutureLocked(TopicPartition{topic, partition})
}

func (m *Manager) dropFutureLocked(tp TopicPartition) error {
	f := m.mu.future[tp]
	if f == nil {
		return nil
	}
	delete(m.mu.future, tp)
	var err error
	if f.log != nil {
		err = f.log.Close()
	}
	return errors.Join(err, m.fs.RemoveAll(f.path))
}

// SwapFuture makes the partition's future log its log: the future log is closed, its
// directory renamed to <topic>-<partition> in its dir and opened there again; the current log
// is closed and its directory removed (renamed -delete first). extra names files of the
// current log's directory that the layer above keeps there (the leader epoch checkpoint,
// producer snapshots): they are copied into the new directory before it is renamed. It
// returns the new log, which the caller publishes in place of the old one.
//
// The caller holds whatever stops writes to the partition (the replica's lock) and has copied
// everything: the future log end offset must equal the current one.
func (m *Manager) SwapFuture(topic string, partition int32, extra []string) (*Log, error) {
	tp := TopicPartition{topic, partition}
	m.mu.Lock()
	defer m.mu.Unlock()
	f, cur := m.mu.future[tp], m.mu.logs[tp]
	if f == nil || f.log == nil || cur == nil {
		return nil, fmt.Errorf("%w: %s has no move in progress", ErrNoPartition, tp)
	}
	if f.log.LogEndOffset() != cur.LogEndOffset() {
		return nil, fmt.Errorf("storage: %s: future log ends at %d, current at %d", tp, f.log.LogEndOffset(), cur.LogEndOffset())
	}
	if cur.LogStartOffset() > f.log.LogStartOffset() {
		f.log.SetHighWatermark(f.log.LogEndOffset())
		if err := f.log.SetLogStartOffset(cur.LogStartOffset()); err != nil {
			return nil, err
		}
	}
	for _, name := range extra {
		if err := copyFile(m.fs, filepath.Join(cur.Dir(), name), f.log.Dir()); err != nil {
			return nil, err
		}
	}
	cfg := cur.Config()           // a Reconfigure during the move reached only the current log
	lso := f.log.LogStartOffset() // kept across the reopen, which would otherwise start at the first segment
	futurePath := f.log.Dir()
	if err := f.log.Close(); err != nil {
		return nil, err
	}
	delete(m.mu.future, tp)
	final := f.dir.partitionDir(tp)
	if err := m.fs.Rename(futurePath, final); err != nil {
		return nil, errors.Join(err, m.fs.RemoveAll(futurePath))
	}
	if err := m.fs.SyncDir(f.dir.path); err != nil {
		return nil, err
	}
	old := m.mu.where[tp]
	opt := OpenOptions{Clean: true, LogStartOffset: lso, Now: m.Now, Logger: m.logger, Files: m.files}
	if on := m.OnLogOffline; on != nil {
		opt.OnOffline = func(err error) { on(final, err) }
	}
	nl, err := Open(m.fs, final, cfg, opt)
	if err != nil {
		return nil, err
	}
	m.mu.logs[tp] = nl
	m.mu.where[tp] = f.dir
	f.dir.recoveryPoints[tp] = nl.RecoveryPoint()
	f.dir.startOffsets[tp] = nl.LogStartOffset()
	delete(old.recoveryPoints, tp)
	delete(old.startOffsets, tp)
	// The old copy goes as a deleted partition does; its readers hold their files open.
	cerr := cur.Close()
	if err := m.removePartitionDirLocked(old, tp); err != nil {
		m.logger.Error("the moved partition's old directory was not removed", "partition", tp.String(), "log_dir", old.path, "err", err)
	}
	if cerr != nil && !errors.Is(cerr, ErrLogOffline) {
		m.logger.Warn("closing the moved partition's old log", "partition", tp.String(), "err", cerr)
	}
	m.logger.Info("moved partition to another log dir", "partition", tp.String(), "from", old.path, "to", f.dir.path)
	return nl, nil
}

// removePartitionDirLocked renames the partition's directory in d to
// <topic>-<partition>.<random>-delete (finished by the next open after a crash) and removes it.
func (m *Manager) removePartitionDirLocked(d *logDir, tp TopicPartition) error {
	dir := d.partitionDir(tp)
	if _, err := m.fs.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	var suffix [8]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return err
	}
	doomed := fmt.Sprintf("%s.%s-delete", dir, hex.EncodeToString(suffix[:]))
	if err := m.fs.Rename(dir, doomed); err != nil {
		return err
	}
	if err := m.fs.SyncDir(d.path); err != nil {
		return err
	}
	return m.fs.RemoveAll(doomed)
}

// copyFile copies the file src, if it exists, into the directory dir (durably).
func copyFile(fs FS, src, dir string) error {
	f, err := fs.OpenFile(src, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	data, err := readAll(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return WriteFileAtomic(fs, dir, filepath.Base(src), data)
}

// CopyBatches copies into dst the batches of src from dst's log end offset on, up to about
// maxBytes (at least one batch), with their offsets, and the transaction index entries of the
// aborted transactions whose markers it copied. It returns the bytes copied (0: dst has caught
// up with src). A dst behind src's log start offset starts again at it. since is src's
// truncation count when the copy began (Truncations): a src truncated since may have replaced
// records dst holds, so dst is emptied and the copy starts over; the caller then passes the
// new count.
func CopyBatches(dst, src *Log, maxBytes int32, since uint64) (int, error) {
	if src.Truncations() != since {
		return 0, errSrcTruncated
	}
	from := dst.LogEndOffset()
	if from > src.LogEndOffset() {
		return 0, errSrcTruncated
	}
	if lso := src.LogStartOffset(); from < lso { // retention passed what dst holds
		if err := dst.TruncateFullyAndStartAt(lso); err != nil {
			return 0, err
		}
		from = lso
	}
	end := src.LogEndOffset()
	s, err := src.Read(from, maxBytes, end, true)
	if err != nil {
		return 0, err
	}
	if s.Size == 0 {
		s.Release()
		return 0, nil
	}
	buf := make([]byte, s.Size)
	_, err = s.File.ReadAt(buf, s.Pos)
	s.Release()
	if err != nil {
		return 0, err
	}
	if h, err := batch.ParseHeader(buf); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrCorruptLog, err)
	} else if h.BaseOffset < from {
		// The log start offset is inside the first batch (DeleteRecords, or a follower that
		// started there): an empty dst starts at the batch, as Kafka's future replica does,
		// and SwapFuture moves its start to the current one.
		if dst.LogEndOffset() != dst.LogStartOffset() {
			return 0, errSrcTruncated
		}
		if err := dst.TruncateFullyAndStartAt(h.BaseOffset); err != nil {
			return 0, err
		}
	}
	info, err := dst.Append(buf, AppendOptions{})
	if err != nil {
		return 0, err
	}
	next := info.LastOffset + 1
	txns, err := src.AbortedTxns(from, next)
	if err != nil {
		return 0, err
	}
	for _, t := range txns {
		if t.LastOffset >= from && t.LastOffset < next {
			if err := dst.AppendAbortedTxn(t); err != nil {
				return 0, err
			}
		}
	}
	return len(buf), nil
}

// errSrcTruncated: CopyBatches found the source truncated (or moved past dst) since the copy
// began; the caller restarts the copy (RestartCopy).
var errSrcTruncated = errors.New("storage: source log truncated during a copy")

// IsCopyRestart reports the CopyBatches error that asks for RestartCopy.
func IsCopyRestart(err error) bool { return errors.Is(err, errSrcTruncated) }

// RestartCopy empties dst to start at src's log start offset and returns src's truncation
// count to pass to CopyBatches from then on.
func RestartCopy(dst, src *Log) (uint64, error) {
	since := src.Truncations()
	return since, dst.TruncateFullyAndStartAt(src.LogStartOffset())
}

// Truncations counts the truncations of the log since it was opened (TruncateTo below the end,
// TruncateFullyAndStartAt).
func (l *Log) Truncations() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.truncations
}
