package storage

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// DirID is a log dir's directory.id (KIP-858): a Kafka Uuid, 16 bytes, written in
// meta.properties as URL-safe base64 without padding. Ids whose first 8 bytes are zero and
// last 8 below 100 are reserved by Kafka (UNASSIGNED, LOST, MIGRATING); NewDirID never
// makes one.
type DirID [16]byte

// NewDirID returns a random directory id outside Kafka's reserved ones.
func NewDirID() (DirID, error) {
	for {
		var id DirID
		if _, err := rand.Read(id[:]); err != nil {
			return DirID{}, err
		}
		if !id.reserved() {
			return id, nil
		}
	}
}

// ParseDirID parses a directory id as meta.properties writes it.
func ParseDirID(s string) (DirID, error) {
	var id DirID
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != len(id) {
		return id, fmt.Errorf("storage: bad directory id %q", s)
	}
	copy(id[:], b)
	return id, nil
}

func (id DirID) String() string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// IsZero reports the zero id (Kafka's Uuid.ZERO: no id).
func (id DirID) IsZero() bool { return id == DirID{} }

func (id DirID) reserved() bool {
	for _, b := range id[:15] {
		if b != 0 {
			return false
		}
	}
	return id[15] < 100
}

// logDir is one directory of log.dirs:
//
//	<dir>/meta.properties                    cluster.id, node.id, directory.id, version=1
//	<dir>/.kafka_cleanshutdown               present only while stopped after a clean Close
//	<dir>/recovery-point-offset-checkpoint   the recovery points of this dir's partitions
//	<dir>/log-start-offset-checkpoint        the log start offsets of this dir's partitions
//	<dir>/<topic>-<partition>/               one Log each
//	<dir>/<topic>-<partition>.<id>-delete/   a partition being deleted (finished at open)
//	<dir>/<topic>-<partition>.<id>-future/   a partition being moved here (future.go)
//
// Every dir keeps its own checkpoints and clean-shutdown marker, as Kafka's LogManager does,
// so a dir holds all it needs to be read on its own.
//
// path and clean are fixed at open; the other fields are guarded by the Manager's mu.
type logDir struct {
	path  string
	clean bool // the clean-shutdown marker was present at open

	meta           metaProperties
	formatted      bool
	recoveryPoints map[TopicPartition]int64
	startOffsets   map[TopicPartition]int64
}

// openLogDir opens (creating if needed) one log dir: it reads meta.properties, notes and
// removes the clean-shutdown marker, reads the checkpoints, finishes interrupted deletions and
// returns the partitions found in it and the future logs (moves into it a stop interrupted)
// by partition and directory name.
func openLogDir(fs FS, path string, logger *slog.Logger) (*logDir, []TopicPartition, map[string]TopicPartition, error) {
	d := &logDir{path: path}
	if err := fs.MkdirAll(path, 0o755); err != nil {
		return nil, nil, nil, err
	}
	mp, ok, err := readMetaProperties(fs, path)
	if err != nil {
		return nil, nil, nil, err
	}
	d.meta, d.formatted = mp, ok
	if !ok {
		d.meta = metaProperties{version: 1, nodeID: -1}
	}

	marker := filepath.Join(path, CleanShutdownFile)
	if _, err := fs.Stat(marker); err == nil {
		d.clean = true
		if err := fs.Remove(marker); err != nil {
			return nil, nil, nil, err
		}
		if err := fs.SyncDir(path); err != nil {
			return nil, nil, nil, err
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil, err
	}

	d.recoveryPoints, err = ReadCheckpoint(fs, filepath.Join(path, RecoveryPointCheckpointFile))
	if err != nil {
		logger.Warn("unreadable recovery point checkpoint: recovering every log of the dir from offset 0", "err", err)
		d.recoveryPoints = map[TopicPartition]int64{}
	}
	d.startOffsets, err = ReadCheckpoint(fs, filepath.Join(path, LogStartOffsetCheckpointFile))
	if err != nil {
		logger.Warn("unreadable log start offset checkpoint: starting each log of the dir at its first segment", "err", err)
		d.startOffsets = map[TopicPartition]int64{}
	}

	ents, err := fs.ReadDir(path)
	if err != nil {
		return nil, nil, nil, err
	}
	var found []TopicPartition
	futures := map[string]TopicPartition{}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		name := e.Name()
		if tp, ok := parseFutureDir(name); ok {
			futures[name] = tp
			continue
		}
		if strings.HasSuffix(name, "-delete") {
			p := filepath.Join(path, name)
			logger.Info("finishing deletion of partition directory", "path", p)
			if err := fs.RemoveAll(p); err != nil {
				return nil, nil, nil, err
			}
			continue
		}
		if tp, ok := ParsePartitionDir(name); ok && tp.Topic != MetadataLogTopic {
			found = append(found, tp)
		}
	}
	logger.Info("opened log dir", "clean_shutdown", d.clean, "partitions", len(found))
	switch {
	case d.clean:
		logger.Info("clean shutdown marker found: skipping log recovery")
	case ok:
		logger.Warn("no clean shutdown marker: recovering every log past its recovery point")
	}
	return d, found, futures, nil
}

func (d *logDir) partitionDir(tp TopicPartition) string { return filepath.Join(d.path, tp.String()) }
