package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/replica"
	"github.com/gregor-project/gregor/internal/storage"
)

// The integrity check of `gregor dump-log DIR`: a partition directory, or a log dir and every
// partition directory in it. What is checked, per partition:
//   - every batch of every segment parses, fits in its file and passes its CRC;
//   - base offsets are at or above the segment's base offset and strictly above the previous
//     batch's last offset, across segments too;
//   - the .index passes recovery's sanity check, and each entry names the last offset of the
//     batch that starts at its position (a position inside the .log at a batch boundary);
//   - the .timeindex passes recovery's sanity check against the segment's next offset;
//   - the .txnindex, producer snapshots and leader-epoch-checkpoint parse;
// and, for a log dir, that meta.properties and the offset checkpoints parse. The metadata
// log (__cluster_metadata-0) is not in Kafka's segment format: `gregor metadata` reads it.

// DirCheck is what the check of one directory found.
type DirCheck struct {
	Dir        string           `json:"dir"`
	Problems   []string         `json:"problems"`
	Partitions []PartitionCheck `json:"partitions"`
}

// PartitionCheck is one partition directory's result.
type PartitionCheck struct {
	Partition   string   `json:"partition"`
	Segments    int      `json:"segments"`
	Batches     int      `json:"batches"`
	Bytes       int64    `json:"bytes"`
	FirstOffset int64    `json:"first_offset"` // -1 when the log is empty
	NextOffset  int64    `json:"next_offset"`
	Problems    []string `json:"problems"`
}

func (c DirCheck) problemCount() int {
	n := len(c.Problems)
	for _, p := range c.Partitions {
		n += len(p.Problems)
	}
	return n
}

// terminalProgress is where a long check reports its progress: standard error when it is a
// terminal, else nowhere (a pipe or a file gets only the result).
func terminalProgress(cmd *cobra.Command) io.Writer {
	if f, ok := cmd.ErrOrStderr().(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			return f
		}
	}
	return io.Discard
}

// checkDir checks a partition directory or a log dir.
func checkDir(dir string, progress io.Writer) (DirCheck, error) {
	c := DirCheck{Dir: dir, Problems: []string{}, Partitions: []PartitionCheck{}}
	if _, ok := storage.ParsePartitionDir(filepath.Base(filepath.Clean(dir))); ok && !isLogDir(dir) {
		pc, err := checkPartition(dir)
		if err != nil {
			return c, err
		}
		c.Partitions = append(c.Partitions, pc)
		return c, nil
	}
	fs := storage.OS
	if _, _, err := storage.ReadMetaProperties(fs, dir); err != nil {
		c.Problems = append(c.Problems, err.Error())
	}
	for _, name := range []string{storage.RecoveryPointCheckpointFile, storage.LogStartOffsetCheckpointFile, storage.ReplicationOffsetCheckpointFile} {
		if _, err := storage.ReadCheckpoint(fs, filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			c.Problems = append(c.Problems, fmt.Sprintf("%s: %v", name, err))
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return c, err
	}
	var parts []string
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		if tp, ok := storage.ParsePartitionDir(e.Name()); !ok || tp.Topic == storage.MetadataLogTopic {
			continue // not a partition (being deleted, a future replica), or the metadata log
		}
		parts = append(parts, e.Name())
	}
	sort.Strings(parts)
	for i, name := range parts {
		fmt.Fprintf(progress, "\rchecking %d/%d partitions: %s\033[K", i+1, len(parts), name)
		pc, err := checkPartition(filepath.Join(dir, name))
		if err != nil {
			return c, err
		}
		c.Partitions = append(c.Partitions, pc)
	}
	if len(parts) > 0 {
		fmt.Fprintf(progress, "\r\033[K")
	}
	return c, nil
}

// isLogDir reports whether dir holds a meta.properties (a log dir whose name happens to end
// in -<number> is still a log dir).
func isLogDir(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, storage.MetaPropertiesFile))
	return err == nil
}

// checkPartition checks one partition directory.
func checkPartition(dir string) (PartitionCheck, error) {
	pc := PartitionCheck{Partition: filepath.Base(dir), FirstOffset: -1, Problems: []string{}}
	fs := storage.OS
	ents, err := os.ReadDir(dir)
	if err != nil {
		return pc, err
	}
	var bases []int64
	var snapshots, txnIndexes []string
	for _, e := range ents {
		name := e.Name()
		if base, ok := storage.ParseSegmentFileName(name, storage.LogFileSuffix); ok {
			bases = append(bases, base)
		}
		switch {
		case strings.HasSuffix(name, ".snapshot"):
			snapshots = append(snapshots, name)
		case strings.HasSuffix(name, storage.TxnIndexFileSuffix):
			txnIndexes = append(txnIndexes, name)
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	pc.Segments = len(bases)
	prevLast := int64(-1)
	problem := func(format string, args ...any) { pc.Problems = append(pc.Problems, fmt.Sprintf(format, args...)) }
	for _, base := range bases {
		prefix := filepath.Join(dir, fmt.Sprintf("%020d", base))
		logPath := prefix + storage.LogFileSuffix
		seg := filepath.Base(logPath)
		idxPath := prefix + storage.IndexFileSuffix
		var logSize int64
		if fi, err := os.Stat(logPath); err == nil {
			logSize = fi.Size()
			pc.Bytes += logSize
		}
		// The index first: the walk of the .log then checks each entry at its position,
		// holding only the entries (a sparse few), never every batch.
		wantAt := map[int64]int64{} // index position -> the last offset its entry names
		if entries, check, err := storage.ReadOffsetIndex(fs, idxPath, logSize); err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				problem("%s: %v", filepath.Base(idxPath), err)
			}
		} else {
			if check != nil {
				problem("%v", check)
			}
			for _, e := range entries {
				wantAt[e.Position] = e.Offset
			}
		}
		next := base
		problems, err := readBatches(logPath, false, false, nil, func(db DumpedBatch, h batch.Header) error {
			pos := db.Position
			if want, ok := wantAt[pos]; ok {
				if want != h.LastOffset() {
					problem("%s: entry (offset %d, position %d) points at a batch whose last offset is %d", filepath.Base(idxPath), want, pos, h.LastOffset())
				}
				delete(wantAt, pos)
			}
			if h.BaseOffset < base {
				problem("%s: batch at position %d has base offset %d below the segment's %d", seg, pos, h.BaseOffset, base)
			}
			if h.BaseOffset <= prevLast {
				problem("%s: batch at position %d has base offset %d, not above the previous batch's last offset %d", seg, pos, h.BaseOffset, prevLast)
			}
			if pc.FirstOffset < 0 {
				pc.FirstOffset = h.BaseOffset
			}
			prevLast = h.LastOffset()
			next = h.LastOffset() + 1
			pc.Batches++
			return nil
		})
		if err != nil {
			return pc, err
		}
		for _, p := range problems {
			if !strings.Contains(p, "not above the previous batch") { // reported above with the segment's name
				problem("%s: %s", seg, p)
			}
		}
		stray := make([]int64, 0, len(wantAt))
		for pos := range wantAt {
			stray = append(stray, pos)
		}
		sort.Slice(stray, func(i, j int) bool { return stray[i] < stray[j] })
		for _, pos := range stray {
			problem("%s: entry (offset %d, position %d) does not point at a batch", filepath.Base(idxPath), wantAt[pos], pos)
		}
		if _, check, err := storage.ReadTimeIndex(fs, prefix+storage.TimeIndexFileSuffix, next); err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				problem("%s: %v", filepath.Base(prefix+storage.TimeIndexFileSuffix), err)
			}
		} else if check != nil && next > base {
			problem("%v", check)
		}
	}
	pc.NextOffset = prevLast + 1
	if prevLast < 0 && len(bases) > 0 {
		pc.NextOffset = bases[len(bases)-1]
	}
	for _, name := range txnIndexes {
		if _, err := storage.ReadTxnIndex(fs, filepath.Join(dir, name)); err != nil {
			problem("%s: %v", name, err)
		}
	}
	for _, name := range snapshots {
		if _, err := replica.ReadProducerSnapshot(fs, filepath.Join(dir, name)); err != nil {
			problem("%s: %v", name, err)
		}
	}
	if es, err := storage.ReadLeaderEpochCheckpoint(fs, filepath.Join(dir, storage.LeaderEpochCheckpointFile)); err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			problem("%s: %v", storage.LeaderEpochCheckpointFile, err)
		}
	} else if n := len(es); n > 0 && len(bases) > 0 && es[n-1].StartOffset > pc.NextOffset {
		problem("%s: epoch %d starts at %d, past the log end %d", storage.LeaderEpochCheckpointFile, es[n-1].Epoch, es[n-1].StartOffset, pc.NextOffset)
	}
	return pc, nil
}

func printDirCheck(w io.Writer, c DirCheck) error {
	fmt.Fprintf(w, "Checking %s\n", c.Dir)
	for _, p := range c.Problems {
		fmt.Fprintf(w, "PROBLEM: %s\n", p)
	}
	t := newTable(w, "PARTITION", "SEGMENTS", "BATCHES", "BYTES", "FIRST_OFFSET", "NEXT_OFFSET", "STATUS")
	for _, p := range c.Partitions {
		status := "ok"
		if len(p.Problems) > 0 {
			status = fmt.Sprintf("%d problem(s)", len(p.Problems))
		}
		t.row(p.Partition, fmt.Sprint(p.Segments), fmt.Sprint(p.Batches), fmt.Sprint(p.Bytes), offsetText(p.FirstOffset), fmt.Sprint(p.NextOffset), status)
	}
	if err := t.flush(); err != nil {
		return err
	}
	for _, p := range c.Partitions {
		for _, pr := range p.Problems {
			fmt.Fprintf(w, "PROBLEM: %s: %s\n", p.Partition, pr)
		}
	}
	if n := c.problemCount(); n == 0 {
		fmt.Fprintf(w, "%d partition(s) checked: no problems found.\n", len(c.Partitions))
	} else {
		fmt.Fprintf(w, "%d partition(s) checked: %d problem(s) found.\n", len(c.Partitions), n)
	}
	return nil
}
