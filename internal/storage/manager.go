package storage

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Manager owns one log.dir (Kafka's LogManager for a single directory):
//
//	<dir>/meta.properties                    cluster.id, node.id, version=1
//	<dir>/.kafka_cleanshutdown               present only while stopped after a clean Close
//	<dir>/recovery-point-offset-checkpoint   per partition: offsets below are fsynced
//	<dir>/log-start-offset-checkpoint        per partition: the log start offset
//	<dir>/<topic>-<partition>/               one Log each
//	<dir>/<topic>-<partition>.<id>-delete/   a partition being deleted (finished at open)
//
// OpenManager notes and removes the clean-shutdown marker, so a crash from then on is seen as
// unclean by the next start; logs are opened lazily by GetOrCreate, recovering unless the
// marker was there. Close writes the checkpoints and, if every log closed cleanly, the marker.
//
// Locking: mu guards the maps and flags inside it. It is held while a log is opened (so two
// GetOrCreate calls never open one directory twice); Log methods are called without it where
// they may take long (flush, retention).
type Manager struct {
	fs     FS
	dir    string
	logger *slog.Logger
	clean  bool // the clean-shutdown marker was present at OpenManager
	files  *FileCache

	mu struct {
		sync.Mutex
		logs           map[TopicPartition]*Log
		opening        map[TopicPartition]chan struct{} // logs being opened outside mu; closed when done
		onDisk         map[TopicPartition]bool          // partition directories found at open, not deleted since
		recoveryPoints map[TopicPartition]int64
		startOffsets   map[TopicPartition]int64
		meta           metaProperties
		formatted      bool
		closed         bool
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

// OpenManager opens (creating if needed) the log dir dir.
func OpenManager(fs FS, dir string, logger *slog.Logger) (*Manager, error) {
	if logger == nil {
		logger = slog.Default()
	}
	m := &Manager{fs: fs, dir: dir, logger: logger.With("log_dir", dir), files: NewFileCache(FileBudget())}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	mp, ok, err := readMetaProperties(fs, dir)
	if err != nil {
		return nil, err
	}
	m.mu.meta, m.mu.formatted = mp, ok
	if !ok {
		m.mu.meta = metaProperties{version: 1, nodeID: -1}
	}

	marker := filepath.Join(dir, CleanShutdownFile)
	if _, err := fs.Stat(marker); err == nil {
		m.clean = true
		if err := fs.Remove(marker); err != nil {
			return nil, err
		}
		if err := fs.SyncDir(dir); err != nil {
			return nil, err
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}

	m.mu.recoveryPoints, err = ReadCheckpoint(fs, filepath.Join(dir, RecoveryPointCheckpointFile))
	if err != nil {
		m.logger.Warn("unreadable recovery point checkpoint: recovering every log from offset 0", "err", err)
		m.mu.recoveryPoints = map[TopicPartition]int64{}
	}
	m.mu.startOffsets, err = ReadCheckpoint(fs, filepath.Join(dir, LogStartOffsetCheckpointFile))
	if err != nil {
		m.logger.Warn("unreadable log start offset checkpoint: starting each log at its first segment", "err", err)
		m.mu.startOffsets = map[TopicPartition]int64{}
	}

	ents, err := fs.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	m.mu.logs = make(map[TopicPartition]*Log)
	m.mu.opening = make(map[TopicPartition]chan struct{})
	m.mu.onDisk = make(map[TopicPartition]bool)
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		name := e.Name()
		if strings.HasSuffix(name, "-delete") {
			path := filepath.Join(dir, name)
			m.logger.Info("finishing deletion of partition directory", "path", path)
			if err := fs.RemoveAll(path); err != nil {
				return nil, err
			}
			continue
		}
		if tp, ok := ParsePartitionDir(name); ok && tp.Topic != MetadataLogTopic {
			m.mu.onDisk[tp] = true
		}
	}
	m.logger.Info("opened log dir", "clean_shutdown", m.clean, "partitions", len(m.mu.onDisk), "segment_file_budget", m.files.Budget())
	switch {
	case m.clean:
		m.logger.Info("clean shutdown marker found: skipping log recovery")
	case ok:
		m.logger.Warn("no clean shutdown marker: recovering every log past its recovery point")
	}
	return m, nil
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

// Files is the cache through which the logs of the dir open their segment files.
func (m *Manager) Files() *FileCache { return m.files }

// Dir is the log dir.
func (m *Manager) Dir() string { return m.dir }

// CleanShutdown reports whether the previous run ended with a clean Close.
func (m *Manager) CleanShutdown() bool { return m.clean }

// Format writes meta.properties for a new log dir. On a formatted dir it checks that the
// cluster and node match (ErrMetaMismatch) and changes nothing.
func (m *Manager) Format(clusterID string, nodeID int32) error {
	if clusterID == "" || nodeID < 0 {
		return fmt.Errorf("storage: format needs a cluster id and a node id >= 0, got %q, %d", clusterID, nodeID)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.formatted {
		if m.mu.meta.clusterID != clusterID || m.mu.meta.nodeID != nodeID {
			return fmt.Errorf("%w: %s has cluster.id %q node.id %d, expected %q %d", ErrMetaMismatch,
				m.dir, m.mu.meta.clusterID, m.mu.meta.nodeID, clusterID, nodeID)
		}
		return nil
	}
	mp := metaProperties{version: 1, clusterID: clusterID, nodeID: nodeID}
	if err := writeMetaProperties(m.fs, m.dir, mp); err != nil {
		return err
	}
	m.mu.meta, m.mu.formatted = mp, true
	return nil
}

// ClusterID is meta.properties' cluster.id, "" when unformatted.
func (m *Manager) ClusterID() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.meta.clusterID
}

// NodeID is meta.properties' node.id, -1 when unformatted.
func (m *Manager) NodeID() int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.meta.nodeID
}

func (m *Manager) partitionDir(tp TopicPartition) string { return filepath.Join(m.dir, tp.String()) }

// GetOrCreate returns the open log of the partition, opening (and recovering) or creating it
// with cfg. An already open log keeps its config: use Log.Reconfigure.
//
// The opening (file creation, recovery, the directory fsync) happens outside mu, so many
// partitions open at once; a second caller for the same partition waits for the first
// (opening[tp]), and Delete waits for an opening in progress before it removes the directory.
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
		existed := m.mu.onDisk[tp]
		opt := OpenOptions{
			RecoveryPoint:  m.mu.recoveryPoints[tp],
			LogStartOffset: m.mu.startOffsets[tp],
			Clean:          m.clean || !existed,
			Now:            m.Now,
			Logger:         m.logger,
			Files:          m.files,
			OnFlush:        m.OnFlush,
		}
		if on := m.OnLogOffline; on != nil {
			dir := m.partitionDir(tp)
			opt.OnOffline = func(err error) { on(dir, err) }
		}
		m.mu.Unlock()

		l, err := Open(m.fs, m.partitionDir(tp), cfg, opt)
		if err == nil && !existed {
			if err = m.fs.SyncDir(m.dir); err != nil {
				err = errors.Join(err, l.Close())
			}
		}

		m.mu.Lock()
		delete(m.mu.opening, tp)
		close(done)
		switch {
		case err != nil:
		case m.mu.closed:
			err = errors.Join(ErrLogClosed, l.Close())
		default:
			m.mu.logs[tp] = l
			m.mu.onDisk[tp] = true
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

// Existing lists the partitions with a directory in the log dir (found at open or created
// since, not deleted), sorted.
func (m *Manager) Existing() []TopicPartition {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]TopicPartition, 0, len(m.mu.onDisk))
	for tp := range m.mu.onDisk {
		out = append(out, tp)
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
	var err error
	if l := m.mu.logs[tp]; l != nil {
		err = l.Close()
		delete(m.mu.logs, tp)
	}
	delete(m.mu.onDisk, tp)
	delete(m.mu.recoveryPoints, tp)
	delete(m.mu.startOffsets, tp)
	dir := m.partitionDir(tp)
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
	if serr := m.fs.SyncDir(m.dir); serr != nil {
		return errors.Join(err, serr)
	}
	m.logger.Info("deleted partition", "partition", tp.String())
	return errors.Join(err, m.fs.RemoveAll(doomed))
}

// Checkpoint writes the recovery points and log start offsets of every partition (those not
// opened yet keep what was read at open).
func (m *Manager) Checkpoint() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.checkpointLocked()
}

func (m *Manager) checkpointLocked() error {
	for tp, l := range m.mu.logs {
		m.mu.recoveryPoints[tp] = l.RecoveryPoint()
		m.mu.startOffsets[tp] = l.LogStartOffset()
	}
	rp := make(map[TopicPartition]int64)
	so := make(map[TopicPartition]int64)
	for tp := range m.mu.onDisk {
		if v, ok := m.mu.recoveryPoints[tp]; ok {
			rp[tp] = v
		}
		if v, ok := m.mu.startOffsets[tp]; ok {
			so[tp] = v
		}
	}
	return errors.Join(
		WriteCheckpoint(m.fs, m.dir, RecoveryPointCheckpointFile, rp),
		WriteCheckpoint(m.fs, m.dir, LogStartOffsetCheckpointFile, so),
	)
}

// Close flushes and closes every log, writes the checkpoints and then, if all of that
// succeeded, no log was offline and (after an unclean stop) every partition on disk was opened
// and so recovered, the clean-shutdown marker.
func (m *Manager) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return nil
	}
	m.mu.closed = true
	errs := closeLogs(m.mu.logs)
	if err := m.checkpointLocked(); err != nil {
		errs = append(errs, err)
	}
	// After an unclean stop only the logs opened since were recovered: the marker would make
	// the next start trust the others' unrecovered tails.
	var unrecovered []string
	if !m.clean {
		for tp := range m.mu.onDisk {
			if m.mu.logs[tp] == nil {
				unrecovered = append(unrecovered, tp.String())
			}
		}
	}
	if len(unrecovered) > 0 {
		slices.Sort(unrecovered)
		m.logger.Warn("partitions never opened since an unclean shutdown: no clean-shutdown marker",
			"partitions", unrecovered)
	} else if len(errs) == 0 {
		errs = append(errs, WriteFileAtomic(m.fs, m.dir, CleanShutdownFile, nil))
	} else {
		m.logger.Error("log dir not closed cleanly: no clean-shutdown marker", "err", errors.Join(errs...))
	}
	m.mu.logs = nil
	return errors.Join(errs...)
}

// closeWorkers is how many logs Close closes at once: closing is mostly waiting for fsyncs,
// which a disk serves many of at a time, so 100,000 partitions do not take 100,000 fsync
// round trips one after another.
const closeWorkers = 16

// closeLogs closes every log on closeWorkers goroutines, returning the errors, a log found
// offline among them.
func closeLogs(logs map[TopicPartition]*Log) []error {
	var (
		mu   sync.Mutex
		errs []error
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
				mu.Lock()
				if offline {
					errs = append(errs, fmt.Errorf("%s: %w", tp, ErrLogOffline))
				}
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", tp, err))
				}
				mu.Unlock()
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

// Sizes returns the size in bytes of every partition in the log dir (DescribeLogDirs): open
// logs report their committed size, the others the size of their .log files.
func (m *Manager) Sizes() map[TopicPartition]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[TopicPartition]int64, len(m.mu.onDisk))
	for tp := range m.mu.onDisk {
		if l := m.mu.logs[tp]; l != nil {
			out[tp] = l.Size()
			continue
		}
		out[tp] = m.sizeOnDisk(m.partitionDir(tp))
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
