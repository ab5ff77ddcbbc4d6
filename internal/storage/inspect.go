package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Offline inspection of a log dir's files, for tools (gregor dump-log, gregor storage): the
// same parsers and checks the Log uses when it loads, over files that no Log has open. Nothing
// here writes. The file formats are documented where the Log uses them: offsetindex.go,
// timeindex.go, index.go (trailing zero entries), txnindex.go, leaderepoch.go, metaprops.go.

// File suffixes of a partition directory's segment files, for tools that tell them apart.
const (
	LogFileSuffix       = logSuffix
	IndexFileSuffix     = indexSuffix
	TimeIndexFileSuffix = timeIndexSuffix
	TxnIndexFileSuffix  = txnIndexSuffix
)

// ParseSegmentFileName returns the base offset of a segment file named <20 digits><suffix>.
func ParseSegmentFileName(name, suffix string) (int64, bool) { return parseSegmentName(name, suffix) }

// IndexEntry is one .index entry: the batch at Position in the .log ends at Offset.
type IndexEntry struct {
	Offset   int64
	Position int64
}

// TimeIndexEntry is one .timeindex entry: the records up to Offset have timestamps up to
// Timestamp.
type TimeIndexEntry struct {
	Timestamp int64
	Offset    int64
}

// readIndexEntries reads an index file's entries into x.buf, dropping trailing zero entries
// as load does (usedBytes).
func readIndexEntries(fs FS, x *indexFile) error {
	f, err := fs.OpenFile(x.path, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	n, err := x.usedBytes(f, fi.Size(), fi.Size())
	if err != nil {
		return err
	}
	x.buf = make([]byte, n)
	if n == 0 {
		return nil
	}
	_, err = f.ReadAt(x.buf, 0)
	return err
}

// ReadOffsetIndex reads the .index file at path (of the segment whose base offset its name
// gives). check is the result of the sanity check recovery applies against a .log of logSize
// bytes (logSize < 0: no .log to check positions against): nil when the index is sound.
func ReadOffsetIndex(fs FS, path string, logSize int64) (entries []IndexEntry, check error, err error) {
	base, ok := parseSegmentName(filepath.Base(path), indexSuffix)
	if !ok {
		return nil, nil, fmt.Errorf("storage: %s is not named <20-digit base offset>%s", path, indexSuffix)
	}
	x := &offsetIndex{indexFile: indexFile{fs: fs, path: path, entrySize: offsetIndexEntrySize}, baseOffset: base}
	if err := readIndexEntries(fs, &x.indexFile); err != nil {
		return nil, nil, err
	}
	for i := range x.entries() {
		o, p := x.at(i)
		entries = append(entries, IndexEntry{Offset: o, Position: p})
	}
	if logSize < 0 {
		logSize = 1 << 62
	}
	return entries, x.sanityCheck(logSize), nil
}

// ReadTimeIndex reads the .timeindex file at path. check is recovery's sanity check against
// the segment's next offset (nextOffset < 0: not checked against it).
func ReadTimeIndex(fs FS, path string, nextOffset int64) (entries []TimeIndexEntry, check error, err error) {
	base, ok := parseSegmentName(filepath.Base(path), timeIndexSuffix)
	if !ok {
		return nil, nil, fmt.Errorf("storage: %s is not named <20-digit base offset>%s", path, timeIndexSuffix)
	}
	x := &timeIndex{indexFile: indexFile{fs: fs, path: path, entrySize: timeIndexEntrySize}, baseOffset: base}
	if err := readIndexEntries(fs, &x.indexFile); err != nil {
		return nil, nil, err
	}
	for i := range x.entries() {
		ts, o := x.at(i)
		entries = append(entries, TimeIndexEntry{Timestamp: ts, Offset: o})
	}
	if nextOffset < 0 {
		nextOffset = 1 << 62
	}
	return entries, x.sanityCheck(nextOffset), nil
}

// ReadTxnIndex reads a .txnindex file: the aborted transactions whose markers are in its
// segment.
func ReadTxnIndex(fs FS, path string) ([]AbortedTxn, error) {
	f, err := fs.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	data, err := readAll(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return parseTxnIndex(data, path)
}

// ReadLeaderEpochCheckpoint reads a leader-epoch-checkpoint file.
func ReadLeaderEpochCheckpoint(fs FS, path string) ([]EpochEntry, error) {
	return readEpochCheckpoint(fs, path)
}

// MetaProperties is a log dir's meta.properties.
type MetaProperties struct {
	Version   int
	ClusterID string
	NodeID    int32 // -1 when absent (a version 0 file may lack broker.id)
}

// ReadMetaProperties reads dir's meta.properties as the broker does at start-up; ok is false
// when the dir has none (it is not formatted).
func ReadMetaProperties(fs FS, dir string) (mp MetaProperties, ok bool, err error) {
	m, ok, err := readMetaProperties(fs, dir)
	return MetaProperties{Version: m.version, ClusterID: m.clusterID, NodeID: m.nodeID}, ok, err
}

// FormatDir writes meta.properties (version 1, cluster.id, node.id, a new directory.id) into dir, creating dir,
// as the broker formats an empty log dir: a broker started with that node.id then takes the
// dir's cluster id. A dir already formatted is refused with ErrAlreadyFormatted, or with
// ErrMetaMismatch when it names another cluster or node.
func FormatDir(fs FS, dir, clusterID string, nodeID int32) error {
	if clusterID == "" || nodeID < 0 {
		return fmt.Errorf("storage: format needs a cluster id and a node id >= 0, got %q, %d", clusterID, nodeID)
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	old, ok, err := readMetaProperties(fs, dir)
	if err != nil {
		return err
	}
	if ok {
		if old.clusterID != clusterID || (old.nodeID != nodeID) {
			return fmt.Errorf("%w: %s has cluster.id %q node.id %d, not %q %d", ErrMetaMismatch, dir, old.clusterID, old.nodeID, clusterID, nodeID)
		}
		return fmt.Errorf("%w: %s", ErrAlreadyFormatted, dir)
	}
	id, err := NewDirID() // each dir its own directory.id (KIP-858), as kafka-storage.sh formats
	if err != nil {
		return err
	}
	return writeMetaProperties(fs, dir, metaProperties{version: 1, clusterID: clusterID, nodeID: nodeID, dirID: id})
}

// ErrAlreadyFormatted: FormatDir on a dir formatted for the same cluster and node.
var ErrAlreadyFormatted = errors.New("storage: log dir is already formatted")
