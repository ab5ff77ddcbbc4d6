package storage

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Checkpoint file names in a log dir, as Kafka names them.
const (
	RecoveryPointCheckpointFile     = "recovery-point-offset-checkpoint"
	LogStartOffsetCheckpointFile    = "log-start-offset-checkpoint"
	ReplicationOffsetCheckpointFile = "replication-offset-checkpoint" // high watermarks; written by the replica layer
	CleanerOffsetCheckpointFile     = "cleaner-offset-checkpoint"     // each compacted log's first dirty offset (CleanResult.EndOffset); written by the cleaner
	CleanShutdownFile               = ".kafka_cleanshutdown"
	MetaPropertiesFile              = "meta.properties"
)

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// String is the partition's directory name, <topic>-<partition>.
func (tp TopicPartition) String() string { return tp.Topic + "-" + strconv.Itoa(int(tp.Partition)) }

func compareTP(a, b TopicPartition) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return int(a.Partition) - int(b.Partition)
}

// ReadCheckpoint reads an offset checkpoint file (Kafka's OffsetCheckpointFile):
//
//	0                       version
//	<n>                     number of entries
//	<topic> <partition> <offset>    n lines
//
// A missing file is an empty map.
func ReadCheckpoint(fs FS, path string) (map[TopicPartition]int64, error) {
	f, err := fs.OpenFile(path, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return map[TopicPartition]int64{}, nil
	} else if err != nil {
		return nil, err
	}
	data, err := readAll(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return parseCheckpoint(data)
}

func parseCheckpoint(data []byte) (map[TopicPartition]int64, error) {
	var m map[TopicPartition]int64
	err := scanCheckpoint(data, 3, func(n int) { m = make(map[TopicPartition]int64, min(n, 1<<16)) }, func(f []string) error {
		p, err1 := strconv.ParseInt(f[1], 10, 32)
		o, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil || p < 0 {
			return errBadEntry
		}
		m[TopicPartition{f[0], int32(p)}] = o
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("storage: malformed checkpoint file, %w", err)
	}
	return m, nil
}

// errBadEntry is what an entry parser returns for an entry it refuses (scanCheckpoint names
// the line).
var errBadEntry = errors.New("bad entry")

// scanCheckpoint reads Kafka's checkpoint framing, shared by the offset checkpoints and the
// leader-epoch-checkpoint: a version line "0", an entry count, then that many lines of fields
// fields each (whitespace-separated), and nothing after. start is told the count before the
// first entry; entry parses one entry's fields. Errors name the line.
func scanCheckpoint(data []byte, fields int, start func(n int), entry func(f []string) error) error {
	sc := bufio.NewScanner(bytes.NewReader(data))
	line := 0
	next := func() (string, bool) {
		if sc.Scan() {
			line++
			return strings.TrimSpace(sc.Text()), true
		}
		return "", false
	}
	bad := func(why string) error { return fmt.Errorf("line %d: %s", line, why) }
	v, ok := next()
	if !ok || v != "0" {
		return bad(fmt.Sprintf("version %q, want 0", v))
	}
	c, ok := next()
	n, err := strconv.Atoi(c)
	if !ok || err != nil || n < 0 {
		return bad(fmt.Sprintf("entry count %q", c))
	}
	start(n)
	for i := range n {
		s, ok := next()
		if !ok {
			return bad(fmt.Sprintf("%d entries, expected %d", i, n))
		}
		f := strings.Fields(s)
		if len(f) != fields {
			return bad(fmt.Sprintf("entry %q", s))
		}
		if err := entry(f); err != nil {
			if errors.Is(err, errBadEntry) {
				return bad(fmt.Sprintf("entry %q", s))
			}
			return bad(fmt.Sprintf("entry %q: %v", s, err))
		}
	}
	if s, ok := next(); ok && s != "" {
		return bad("trailing data")
	}
	return sc.Err()
}

// WriteCheckpoint durably replaces the checkpoint file dir/name with m (see ReadCheckpoint for
// the format; entries sorted by partition).
func WriteCheckpoint(fs FS, dir, name string, m map[TopicPartition]int64) error {
	return WriteFileAtomic(fs, dir, name, formatCheckpoint(m))
}

// formatCheckpoint renders m in checkpoint format, sorted by partition.
func formatCheckpoint(m map[TopicPartition]int64) []byte {
	tps := make([]TopicPartition, 0, len(m))
	for tp := range m {
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, compareTP)
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", len(tps))
	for _, tp := range tps {
		fmt.Fprintf(&b, "%s %d %d\n", tp.Topic, tp.Partition, m[tp])
	}
	return b.Bytes()
}

// WriteFileAtomic replaces dir/name with data durably: write dir/name.tmp, fsync, rename over
// the old file, fsync the directory.
func WriteFileAtomic(fs FS, dir, name string, data []byte) error {
	path := filepath.Join(dir, name)
	tmp := path + ".tmp"
	f, err := fs.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fs.Rename(tmp, path)
	}
	if err == nil {
		err = fs.SyncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("storage: writing %s: %w", path, err)
	}
	return nil
}

// replaceFile writes data to dir/name through a temporary file and a rename, without
// fsyncs: after a crash the file holds the old or the new contents, or (the rename reached
// the disk before the data) nothing. Only for files rebuilt from the log when they are
// missing, malformed or behind it (the leader epoch checkpoint after an append-side change).
func replaceFile(fs FS, dir, name string, data []byte) error {
	path := filepath.Join(dir, name)
	tmp := path + ".tmp"
	f, err := fs.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fs.Rename(tmp, path)
	}
	if err != nil {
		return fmt.Errorf("storage: writing %s: %w", path, err)
	}
	return nil
}

// readAll reads a whole (small) file.
func readAll(f File) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	b := make([]byte, fi.Size())
	n, err := f.ReadAt(b, 0)
	if err != nil && n != len(b) {
		return nil, err
	}
	return b[:n], nil
}
