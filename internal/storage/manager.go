package storage

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Manager owns the log dirs of log.dirs (Kafka's LogManager): each a logDir (logdir.go)
// with its own meta.properties, checkpoints and clean-shutdown marker, and every partition in
// exactly one of them.
//
// OpenDirs notes and removes each dir's clean-shutdown marker, so a crash from then on is seen
// as unclean by the next start; logs are opened lazily by GetOrCreate, recovering unless their
// dir had the marker. A partition found in two dirs stops the open (ErrDuplicateLog). A new
// partition goes to the dir with the fewest partitions (ties: the first in log.dirs), as Kafka
// places them. Close writes every dir's checkpoints and, where every log closed cleanly, its
// marker.
//
// Locking: mu guards the maps and flags inside it, and the logDirs' mutable fields. It is held
// while a log is opened (so two GetOrCreate calls never open one directory twice); Log methods
// are called without it where they may take long (flush, retention).
type Manager struct {
	fs     FS
	dirs   []*logDir // log.dirs in configured order; fixed at OpenDirs
	logger *slog.Logger
	files  *FileCache

	mu struct {
		sync.Mutex
		logs    map[TopicPartition]*Log
		opening map[TopicPartition]chan struct{} // logs being opened outside mu; closed when done
		// where is the dir of every partition with a directory: found at open, being created
		// or created since, not deleted.
		where     map[TopicPartition]*logDir
		creating  map[TopicPartition]bool       // in where while their creation is in progress
		future    map[TopicPartition]*futureLog // moves to another dir in progress (future.go)
		preferred map[TopicPartition]*logDir    // where partitions not created yet are to go (SetPreferredDir)
		closed    bool
	}

	// Now is the clock handed to the logs; time.Now when nil. Set it before opening logs.
	Now func() time.Time
	// OnLogOffline, if set, is called when an I/O error takes one of the logs offline: the
	// partition directory and the error. It is called holding that log's locks, so it must
	// not call the log (the broker halts the process in it). Set it before opening logs.
	OnLogOffline func(dir string, err error)
	// OnFlush, if set, is told how long each flush of a log that synced something took
	// (Kafka's LogFlushRateAndTimeMs). Set it before opening logs.
	OnFlush func(time.Duration)
}

// ErrDuplicateLog: a partition has a directory in two log dirs (a start-up error, as in
// Kafka: one of the two must be removed by hand).
var ErrDuplicateLog = errors.New("storage: partition found in two log dirs")

// OpenManager opens (creating if needed) the single log dir dir.
func OpenManager(fs FS, dir string, logger *slog.Logger) (*Manager, error) {
	return OpenDirs(fs, []string{dir}, logger)
}

// OpenDirs opens (creating if needed) the log dirs, in log.dirs order. The formatted ones must
// agree on cluster.id and node.id, and their directory.ids must differ (ErrMetaMismatch).
func OpenDirs(fs FS, paths []string, logger *slog.Logger) (*Manager, error) {
	if logger == nil {
		logger = slog.Default()
	}
	if len(paths) == 0 {
		return nil, errors.New("storage: no log dir")
	}
	m := &Manager{fs: fs, logger: logger, files: NewFileCache(FileBudget())}
	m.mu.logs = make(map[TopicPartition]*Log)
	m.mu.opening = make(map[TopicPartition]chan struct{})
	m.mu.where = make(map[TopicPartition]*logDir)
	m.mu.creating = make(map[TopicPartition]bool)
	m.mu.future = make(map[TopicPartition]*futureLog)
	m.mu.preferred = make(map[TopicPartition]*logDir)
	seen := map[string]bool{}
	var pending []*futureLog
	var pendingTPs []TopicPartition
	for _, p := range paths {
		p, err := filepath.Abs(p) // as Kafka names log dirs: DescribeLogDirs, AlterReplicaLogDirs
		if err != nil {
			return nil, err
		}
		if seen[p] {
			return nil, fmt.Errorf("storage: log dir %s listed twice", p)
		}
		seen[p] = true
		d, found, futures, err := openLogDir(fs, p, logger.With("log_dir", p))
		if err != nil {
			return nil, err
		}
		for name, tp := range futures {
			pending = append(pending, &futureLog{dir: d, path: filepath.Join(p, name)})
			pendingTPs = append(pendingTPs, tp)
		}
		for _, tp := range found {
			if other := m.mu.where[tp]; other != nil {
				return nil, fmt.Errorf("%w: %s is in both %s and %s; remove one of the two directories by hand",
					ErrDuplicateLog, tp, other.path, p)
			}
			m.mu.where[tp] = d
		}
		m.dirs = append(m.dirs, d)
	}
	if err := m.checkMetaLocked(); err != nil {
		return nil, err
	}
	// A future log is kept for its move to resume if its partition is in another dir;
	// otherwise (the partition gone, or a second copy) it is removed.
	for i, f := range pending {
		tp := pendingTPs[i]
		if cur := m.mu.where[tp]; cur == nil || cur == f.dir || m.mu.future[tp] != nil {
			m.logger.Warn("removing a future log without a move to resume", "path", f.path)
			if err := fs.RemoveAll(f.path); err != nil {
				return nil, err
			}
			continue
		}
		m.mu.future[tp] = f
	}
	m.logger.Info("opened log dirs", "dirs", len(m.dirs), "partitions", len(m.mu.where), "segment_file_budget", m.files.Budget())
	return m, nil
}

// checkMetaLocked checks that the formatted dirs belong to one cluster and node and have
// distinct directory ids.
func (m *Manager) checkMetaLocked() error {
	var first *logDir
	ids := map[DirID]string{}
	for _, d := range m.dirs {
		if !d.formatted {
			continue
		}
		if first == nil {
			first = d
		} else if d.meta.clusterID != first.meta.clusterID || d.meta.nodeID != first.meta.nodeID {
			return fmt.Errorf("%w: %s has cluster.id %q node.id %d but %s has %q %d", ErrMetaMismatch,
				d.path, d.meta.clusterID, d.meta.nodeID, first.path, first.meta.clusterID, first.meta.nodeID)
		}
		if id := d.meta.dirID; !id.IsZero() {
			if other, dup := ids[id]; dup {
				return fmt.Errorf("%w: %s and %s have the same directory.id %s", ErrMetaMismatch, other, d.path, id)
			}
			ids[id] = d.path
		}
	}
	return nil
}

// ParsePartitionDir parses a partition directory name, <topic>-<partition>. Directories being
// deleted (-delete), future replicas (-future), stray ones (-stray) and names with a dot
// after the partition number are not partitions.
func ParsePartitionDir(name string) (TopicPartition, bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 || i == len(name)-1 {
		return TopicPartition{}, false
	}
	p, err := strconv.ParseInt(name[i+1:], 10, 32)
	if err != nil || p < 0 || strings.HasPrefix(name[i+1:], "+") {
		return TopicPartition{}, false
	}
	return TopicPartition{Topic: name[:i], Partition: int32(p)}, true
}

// Files is the cache through which the logs of every dir open their segment files.
func (m *Manager) Files() *FileCache { return m.files }

// Dir is the first log dir.
func (m *Manager) Dir() string { return m.dirs[0].path }

// Dirs are the log dirs, in log.dirs order.
func (m *Manager) Dirs() []string {
	out := make([]string, len(m.dirs))
	for i, d := range m.dirs {
		out[i] = d.path
	}
	return out
}

// DirIDs are the log dirs' directory ids, in log.dirs order (zero before Format).
func (m *Manager) DirIDs() []DirID {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]DirID, len(m.dirs))
	for i, d := range m.dirs {
		out[i] = d.meta.dirID
	}
	return out
}

// DirOf is the log dir holding the partition's directory, "" when no dir does.
func (m *Manager) DirOf(topic string, partition int32) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d := m.mu.where[TopicPartition{topic, partition}]; d != nil {
		return d.path
	}
	return ""
}

// CleanShutdown reports whether the previous run ended with a clean Close of every dir.
func (m *Manager) CleanShutdown() bool {
	for _, d := range m.dirs {
		if !d.clean {
			return false
		}
	}
	return true
}

// Format writes meta.properties in every dir that has none, each with a new directory.id (as
// Kafka formats a log dir added to log.dirs), and adds a directory.id to a formatted dir that
// lacks one. A formatted dir must name the same cluster and node (ErrMetaMismatch); nothing is
// changed then.
func (m *Manager) Format(clusterID string, nodeID int32) error {
	if clusterID == "" || nodeID < 0 {
		return fmt.Errorf("storage: format needs a cluster id and a node id >= 0, got %q, %d", clusterID, nodeID)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, d := range m.dirs {
		if d.formatted && (d.meta.clusterID != clusterID || d.meta.nodeID != nodeID) {
			return fmt.Errorf("%w: %s has cluster.id %q node.id %d, expected %q %d", ErrMetaMismatch,
				d.path, d.meta.clusterID, d.meta.nodeID, clusterID, nodeID)
		}
	}
	for _, d := range m.dirs {
		if d.formatted && !d.meta.dirID.IsZero() {
			continue
		}
		id, err := NewDirID()
		if err != nil {
			return err
		}
		mp := metaProperties{version: 1, clusterID: clusterID, nodeID: nodeID, dirID: id}
		if err := writeMetaProperties(m.fs, d.path, mp); err != nil {
			return err
		}
		d.meta, d.formatted = mp, true
	}
	return nil
}

// firstFormattedLocked is the first dir with meta.properties, or nil.
func (m *Manager) firstFormattedLocked() *logDir {
	for _, d := range m.dirs {
		if d.formatted {
			return d
		}
	}
	return nil
}

// ClusterID is meta.properties' cluster.id (the same in every formatted dir), "" when no dir
// is formatted.
func (m *Manager) ClusterID() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d := m.firstFormattedLocked(); d != nil {
		return d.meta.clusterID
	}
	return ""
}

// NodeID is meta.properties' node.id, -1 when no dir is formatted.
func (m *Manager) NodeID() int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d := m.firstFormattedLocked(); d != nil {
		return d.meta.nodeID
	}
	return -1
}

// FormattedDir is a formatted dir (for messages), "" when none is.
func (m *Manager) FormattedDir() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d := m.firstFormattedLocked(); d != nil {
		return d.path
	}
	return m.dirs[0].path
}

// placeLocked picks the dir of a new partition: the one with the fewest partitions (those
// being created included), the first in log.dirs order among equals (Kafka's
// LogManager.nextLogDirs).
func (m *Manager) placeLocked() *logDir {
	counts := make(map[*logDir]int, len(m.dirs))
	for _, d := range m.mu.where {
		counts[d]++
	}
	best := m.dirs[0]
	for _, d := range m.dirs[1:] {
		if counts[d] < counts[best] {
			best = d
		}
	}
	return best
}

// GetOrCreate returns the open log of the partition, opening (and recovering) or creating it
// with cfg. An already open log keeps its config: use Log.Reconfigure. A partition not on disk
// is created in the dir placeLocked picks.
//
// The opening (file creation, recovery, the directory fsync) happens outside mu, so many
// partitions open at once; a second caller for the same partition waits for the first
// (opening[tp]), and Delete waits for an opening in progress before it removes the directory.
// A partition being created counts in where (so placement sees it) but not in Existing.
func (m *Manager) GetOrCreate(topic string, partition int32, cfg Config) (*Log, error) {
	tp := TopicPartition{topic, partition}
	if topic == "" || partition < 0 || strings.ContainsAny(topic, "/\\ \n") || topic == "." || topic == ".." {
		return nil, fmt.Errorf("storage: bad partition %q %d", topic, partition)
	}
	for {
		m.mu.Lock()
		if m.mu.closed {
			m.mu.Unlock()
			return nil, ErrLogClosed
		}
		if l := m.mu.logs[tp]; l != nil {
			m.mu.Unlock()
			return l, nil
		}
		if ch := m.mu.opening[tp]; ch != nil {
			m.mu.Unlock()
			<-ch
			continue
		}
		done := make(chan struct{})
		m.mu.opening[tp] = done
		d, existed := m.mu.where[tp], true
		if d == nil {
			d, existed = m.mu.preferred[tp], false
			if d == nil {
				d = m.placeLocked()
			}
			delete(m.mu.preferred, tp)
			m.mu.where[tp] = d
			m.mu.creating[tp] = true
		}
		opt := OpenOptions{
			RecoveryPoint:  d.recoveryPoints[tp],
			LogStartOffset: d.startOffsets[tp],
			Clean:          d.clean || !existed,
			Now:            m.Now,
			Logger:         m.logger,
			Files:          m.files,
			OnFlush:        m.OnFlush,
		}
		pdir := d.partitionDir(tp)
		if on := m.OnLogOffline; on != nil {
			opt.OnOffline = func(err error) { on(pdir, err) }
		}
		m.mu.Unlock()

		l, err := Open(m.fs, pdir, cfg, opt)
		if err == nil && !existed {
			if err = m.fs.SyncDir(d.path); err != nil {
				err = errors.Join(err, l.Close())
			}
		}

		m.mu.Lock()
		delete(m.mu.opening, tp)
		delete(m.mu.creating, tp)
		close(done)
		switch {
		case err != nil:
			if !existed {
				delete(m.mu.where, tp)
			}
		case m.mu.closed:
			err = errors.Join(ErrLogClosed, l.Close())
		default:
			m.mu.logs[tp] = l
		}
		m.mu.Unlock()
		if err != nil {
			return nil, err
		}
		return l, nil
	}
}

// Get returns the open log of the partition, or nil.
func (m *Manager) Get(topic string, partition int32) *Log {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.logs[TopicPartition{topic, partition}]
}

// Logs returns the open logs.
func (m *Manager) Logs() map[TopicPartition]*Log {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[TopicPartition]*Log, len(m.mu.logs))
	for tp, l := range m.mu.logs {
		out[tp] = l
	}
	return out
}

// MetadataLogTopic names the controller quorum's directory in the log dir
// (__cluster_metadata-0, as Kafka's KRaft names it). It is not a partition log: the quorum
// keeps its own files there, so the manager neither lists nor recovers it.
const MetadataLogTopic = "__cluster_metadata"

// existsLocked reports whether the partition has a directory: found at open or created since
// (not one being created now), not deleted.
func (m *Manager) existsLocked(tp TopicPartition) bool {
	return m.mu.where[tp] != nil && !m.mu.creating[tp]
}

// Existing lists the partitions with a directory in any log dir (found at open or created
// since, not deleted), sorted.
func (m *Manager) Existing() []TopicPartition {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]TopicPartition, 0, len(m.mu.where))
	for tp := range m.mu.where {
		if m.existsLocked(tp) {
			out = append(out, tp)
		}
	}
	slices.SortFunc(out, compareTP)
	return out
}

// Delete closes the partition's log (if open) and removes its directory: it is first renamed
// to <topic>-<partition>.<random>-delete, so a crash midway is finished by the next open.
func (m *Manager) Delete(topic string, partition int32) error {
	tp := TopicPartition{topic, partition}
	m.mu.Lock()
	for m.mu.opening[tp] != nil { // an opening in progress creates files in the directory
		ch := m.mu.opening[tp]
		m.mu.Unlock()
		<-ch
		m.mu.Lock()
	}
	defer m.mu.Unlock()
	err := m.dropFutureLocked(tp)
	if l := m.mu.logs[tp]; l != nil {
		err = errors.Join(err, l.Close())
		delete(m.mu.logs, tp)
	}
	d := m.mu.where[tp]
	if d == nil {
		return err
	}
	delete(m.mu.where, tp)
	delete(d.recoveryPoints, tp)
	delete(d.startOffsets, tp)
	dir := d.partitionDir(tp)
	if _, serr := m.fs.Stat(dir); errors.Is(serr, os.ErrNotExist) {
		return err
	}
	var suffix [8]byte
	if _, rerr := rand.Read(suffix[:]); rerr != nil {
		return errors.Join(err, rerr)
	}
	doomed := fmt.Sprintf("%s.%s-delete", dir, hex.EncodeToString(suffix[:]))
	if rerr := m.fs.Rename(dir, doomed); rerr != nil {
		return errors.Join(err, rerr)
	}
	if serr := m.fs.SyncDir(d.path); serr != nil {
		return errors.Join(err, serr)
	}
	m.logger.Info("deleted partition", "partition", tp.String(), "log_dir", d.path)
	return errors.Join(err, m.fs.RemoveAll(doomed))
}

// Checkpoint writes each dir's recovery points and log start offsets (partitions not opened
// yet keep what was read at open).
func (m *Manager) Checkpoint() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.checkpointLocked()
}

func (m *Manager) checkpointLocked() error {
	for tp, l := range m.mu.logs {
		d := m.mu.where[tp]
		d.recoveryPoints[tp] = l.RecoveryPoint()
		d.startOffsets[tp] = l.LogStartOffset()
	}
	var errs []error
	for _, d := range m.dirs {
		rp := make(map[TopicPartition]int64)
		so := make(map[TopicPartition]int64)
		for tp, w := range m.mu.where {
			if w != d {
				continue
			}
			if v, ok := d.recoveryPoints[tp]; ok {
				rp[tp] = v
			}
			if v, ok := d.startOffsets[tp]; ok {
				so[tp] = v
			}
		}
		errs = append(errs,
			WriteCheckpoint(m.fs, d.path, RecoveryPointCheckpointFile, rp),
			WriteCheckpoint(m.fs, d.path, LogStartOffsetCheckpointFile, so))
	}
	return errors.Join(errs...)
}

// ReadCheckpoints reads the offset checkpoint file name (one written by another layer, as the
// replication-offset-checkpoint) of every dir, keeping for each partition the entry of the
// dir that holds it. An unreadable file is returned as an error beside what the others held.
func (m *Manager) ReadCheckpoints(name string) (map[TopicPartition]int64, error) {
	out := map[TopicPartition]int64{}
	var errs []error
	for _, d := range m.dirs {
		ck, err := ReadCheckpoint(m.fs, filepath.Join(d.path, name))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		m.mu.Lock()
		for tp, o := range ck {
			if w := m.mu.where[tp]; w == d || w == nil {
				out[tp] = o
			}
		}
		m.mu.Unlock()
	}
	return out, errors.Join(errs...)
}

// WriteCheckpoints writes the offset checkpoint file name in every dir, each with the entries
// of the partitions it holds (the others' are dropped).
func (m *Manager) WriteCheckpoints(name string, entries map[TopicPartition]int64) error {
	per := make(map[*logDir]map[TopicPartition]int64, len(m.dirs))
	for _, d := range m.dirs {
		per[d] = map[TopicPartition]int64{}
	}
	m.mu.Lock()
	for tp, o := range entries {
		if d := m.mu.where[tp]; d != nil {
			per[d][tp] = o
		}
	}
	m.mu.Unlock()
	var errs []error
	for _, d := range m.dirs {
		errs = append(errs, WriteCheckpoint(m.fs, d.path, name, per[d]))
	}
	return errors.Join(errs...)
}

// Close flushes and closes every log, writes the checkpoints and then, in each dir where all
// of that succeeded, no log was offline and (after an unclean stop) every partition on disk
// was opened and so recovered, the clean-shutdown marker.
func (m *Manager) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return nil
	}
	m.mu.closed = true
	var errs []error
	for _, f := range m.mu.future {
		// A move not finished: it resumes after the next open.
		if f.log == nil {
			continue
		}
		if err := f.log.Close(); err != nil && !errors.Is(err, ErrLogOffline) {
			errs = append(errs, err)
		}
	}
	m.mu.future = nil
	failed := map[*logDir][]error{}
	for tp, err := range closeLogs(m.mu.logs) {
		d := m.mu.where[tp]
		failed[d] = append(failed[d], err)
	}
	if err := m.checkpointLocked(); err != nil {
		errs = append(errs, err)
	}
	for _, d := range m.dirs {
		// After an unclean stop only the logs opened since were recovered: the marker would
		// make the next start trust the others' unrecovered tails.
		var unrecovered []string
		if !d.clean {
			for tp, w := range m.mu.where {
				if w == d && m.mu.logs[tp] == nil {
					unrecovered = append(unrecovered, tp.String())
				}
			}
		}
		switch {
		case len(unrecovered) > 0:
			slices.Sort(unrecovered)
			m.logger.Warn("partitions never opened since an unclean shutdown: no clean-shutdown marker",
				"log_dir", d.path, "partitions", unrecovered)
		case len(failed[d]) > 0 || len(errs) > 0:
			m.logger.Error("log dir not closed cleanly: no clean-shutdown marker", "log_dir", d.path,
				"err", errors.Join(append(failed[d], errs...)...))
		default:
			if err := WriteFileAtomic(m.fs, d.path, CleanShutdownFile, nil); err != nil {
				errs = append(errs, err)
			}
		}
		errs = append(errs, failed[d]...)
	}
	m.mu.logs = nil
	return errors.Join(errs...)
}

// closeWorkers is how many logs Close closes at once: closing is mostly waiting for fsyncs,
// which a disk serves many of at a time, so 100,000 partitions do not take 100,000 fsync
// round trips one after another.
const closeWorkers = 16

// closeLogs closes every log on closeWorkers goroutines, returning the errors by partition, a
// log found offline among them.
func closeLogs(logs map[TopicPartition]*Log) map[TopicPartition]error {
	var (
		mu   sync.Mutex
		errs = map[TopicPartition]error{}
		wg   sync.WaitGroup
	)
	next := make(chan TopicPartition)
	for range min(closeWorkers, len(logs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for tp := range next {
				l := logs[tp]
				offline := l.Offline()
				err := l.Close()
				if offline {
					err = errors.Join(ErrLogOffline, err)
				}
				if err != nil {
					mu.Lock()
					errs[tp] = fmt.Errorf("%s: %w", tp, err)
					mu.Unlock()
				}
			}
		}()
	}
	for tp := range logs {
		next <- tp
	}
	close(next)
	wg.Wait()
	return errs
}

// openLogs snapshots the open logs, for the periodic tasks that run without m.mu.
func (m *Manager) openLogs() []*Log {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*Log, 0, len(m.mu.logs))
	for _, l := range m.mu.logs {
		out = append(out, l)
	}
	return out
}

// skippable reports errors of logs that are offline or closed meanwhile: a periodic task
// leaves those alone.
func skippable(err error) bool { return errors.Is(err, ErrLogOffline) || errors.Is(err, ErrLogClosed) }

// RunRetention rolls logs whose active segment is older than segment.ms and applies retention
// to every open log (see Log.DeleteExpired). It returns the segments deleted.
func (m *Manager) RunRetention(nowMs int64) (int, error) {
	total := 0
	var errs []error
	for _, l := range m.openLogs() {
		if err := l.MaybeRoll(nowMs); err != nil && !skippable(err) {
			errs = append(errs, fmt.Errorf("%s: %w", l.Dir(), err))
		}
		n, err := l.DeleteExpired(nowMs)
		total += n
		if err != nil && !skippable(err) {
			errs = append(errs, fmt.Errorf("%s: %w", l.Dir(), err))
		}
	}
	return total, errors.Join(errs...)
}

// FlushDue flushes every log that has unflushed messages and was last flushed flush.ms or
// more before nowMs.
func (m *Manager) FlushDue(nowMs int64) error {
	var errs []error
	for _, l := range m.openLogs() {
		if !l.flushDue(nowMs) {
			continue
		}
		if err := l.Flush(); err != nil && !errors.Is(err, ErrLogClosed) {
			errs = append(errs, fmt.Errorf("%s: %w", l.Dir(), err))
		}
	}
	return errors.Join(errs...)
}

// DirUsage is one log dir as DescribeLogDirs reports it.
type DirUsage struct {
	Path   string
	ID     DirID
	Sizes  map[TopicPartition]int64       // every partition in the dir, by its size in bytes
	Future map[TopicPartition]FutureUsage // the partitions being moved into the dir
}

// FutureUsage is a future log (a partition being moved into a dir): its size and how many
// offsets it is behind the current log.
type FutureUsage struct {
	Size int64
	Lag  int64
}

// Usage reports every log dir in log.dirs order with the size in bytes of each partition in
// it: open logs report their committed size, the others the size of their .log files.
func (m *Manager) Usage() []DirUsage {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]DirUsage, len(m.dirs))
	idx := make(map[*logDir]int, len(m.dirs))
	for i, d := range m.dirs {
		out[i] = DirUsage{Path: d.path, ID: d.meta.dirID, Sizes: map[TopicPartition]int64{}, Future: map[TopicPartition]FutureUsage{}}
		idx[d] = i
	}
	for tp, f := range m.mu.future {
		if f.log == nil {
			continue // pending: shown once resumed
		}
		lag := int64(0)
		if cur := m.mu.logs[tp]; cur != nil {
			lag = max(cur.LogEndOffset()-f.log.LogEndOffset(), 0)
		}
		out[idx[f.dir]].Future[tp] = FutureUsage{Size: f.log.Size(), Lag: lag}
	}
	for tp, d := range m.mu.where {
		if !m.existsLocked(tp) {
			continue
		}
		size := int64(0)
		if l := m.mu.logs[tp]; l != nil {
			size = l.Size()
		} else {
			size = m.sizeOnDisk(d.partitionDir(tp))
		}
		out[idx[d]].Sizes[tp] = size
	}
	return out
}

// Sizes returns the size in bytes of every partition in every log dir (see Usage).
func (m *Manager) Sizes() map[TopicPartition]int64 {
	out := map[TopicPartition]int64{}
	for _, u := range m.Usage() {
		maps.Copy(out, u.Sizes)
	}
	return out
}

// DirSize is the total of Sizes.
func (m *Manager) DirSize() int64 {
	var n int64
	for _, s := range m.Sizes() {
		n += s
	}
	return n
}

func (m *Manager) sizeOnDisk(dir string) int64 {
	ents, err := m.fs.ReadDir(dir)
	if err != nil {
		return 0
	}
	var n int64
	for _, e := range ents {
		if _, ok := parseSegmentName(e.Name(), logSuffix); !ok {
			continue
		}
		if fi, err := e.Info(); err == nil {
			n += fi.Size()
		}
	}
	return n
}
