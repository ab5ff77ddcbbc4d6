package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/gregor-project/gregor/internal/storage"
)

// Producer state snapshots live beside the segments, as Kafka's do: `<20-digit offset>.snapshot`
// holds the state as of that offset (the log end offset when it was taken). Recovery loads
// the newest snapshot not past the log end and replays batch headers from its offset.
//
// File format (big endian), ours:
//
//	magic "GPS2" | crc32c uint32 of the rest | count int32 | count × entry
//	entry: producerId int64 | epoch int16 | lastTimestamp int64 | coordinatorEpoch int32 |
//	       txnFirstOffset int64 | n int8 | n × batch
//	batch: firstSeq int32 | lastSeq int32 | firstOffset int64 | lastOffset int64
//
// coordinatorEpoch is the last marker's (-1: none), txnFirstOffset the first offset of the
// producer's ongoing transaction (-1: none), so that a restart keeps the last stable offset.
// Transactions ended but not yet below the high watermark are not kept (neither are they in
// Kafka's snapshots). "GPS1" (before transactions) is still read: its entries lack the two
// fields and have no transaction.

const snapshotSuffix = ".snapshot"

var (
	crcTable       = crc32.MakeTable(crc32.Castagnoli)
	errBadSnapshot = errors.New("replica: corrupt producer snapshot")
)

func snapshotName(dir string, offset int64) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", offset, snapshotSuffix))
}

func (s *ProducerState) encode() []byte {
	b := make([]byte, 12, 12+len(s.m)*76)
	copy(b, "GPS2")
	ids := make([]int64, 0, len(s.m))
	for id := range s.m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	binary.BigEndian.PutUint32(b[8:], uint32(len(ids)))
	for _, id := range ids {
		e := s.m[id]
		b = binary.BigEndian.AppendUint64(b, uint64(id))
		b = binary.BigEndian.AppendUint16(b, uint16(e.epoch))
		b = binary.BigEndian.AppendUint64(b, uint64(e.lastTimestamp))
		b = binary.BigEndian.AppendUint32(b, uint32(e.coordinatorEpoch))
		b = binary.BigEndian.AppendUint64(b, uint64(e.txnFirstOffset))
		b = append(b, byte(len(e.batches)))
		for _, m := range e.batches {
			b = binary.BigEndian.AppendUint32(b, uint32(m.FirstSeq))
			b = binary.BigEndian.AppendUint32(b, uint32(m.LastSeq))
			b = binary.BigEndian.AppendUint64(b, uint64(m.FirstOffset))
			b = binary.BigEndian.AppendUint64(b, uint64(m.LastOffset))
		}
	}
	binary.BigEndian.PutUint32(b[4:], crc32.Checksum(b[8:], crcTable))
	return b
}

func decodeSnapshot(b []byte) (*ProducerState, error) {
	if len(b) < 12 || (string(b[:4]) != "GPS1" && string(b[:4]) != "GPS2") || binary.BigEndian.Uint32(b[4:]) != crc32.Checksum(b[8:], crcTable) {
		return nil, errBadSnapshot
	}
	txn := string(b[:4]) == "GPS2"
	head := 19 // entry bytes before the batches
	if txn {
		head = 31
	}
	n := int(binary.BigEndian.Uint32(b[8:]))
	b = b[12:]
	s := NewProducerState()
	for i := 0; i < n; i++ {
		if len(b) < head {
			return nil, errBadSnapshot
		}
		id := int64(binary.BigEndian.Uint64(b))
		e := newProducerEntry(int16(binary.BigEndian.Uint16(b[8:])))
		e.lastTimestamp = int64(binary.BigEndian.Uint64(b[10:]))
		if txn {
			e.coordinatorEpoch = int32(binary.BigEndian.Uint32(b[18:]))
			e.txnFirstOffset = int64(binary.BigEndian.Uint64(b[22:]))
		}
		nb := int(b[head-1])
		b = b[head:]
		if nb > maxBatchesPerProducer || len(b) < nb*24 {
			return nil, errBadSnapshot
		}
		for j := 0; j < nb; j++ {
			e.batches = append(e.batches, BatchMeta{
				FirstSeq:    int32(binary.BigEndian.Uint32(b)),
				LastSeq:     int32(binary.BigEndian.Uint32(b[4:])),
				FirstOffset: int64(binary.BigEndian.Uint64(b[8:])),
				LastOffset:  int64(binary.BigEndian.Uint64(b[16:])),
			})
			b = b[24:]
		}
		s.m[id] = e
	}
	s.rebuildIndexes()
	return s, nil
}

// listSnapshots returns the snapshot offsets in dir, ascending.
func listSnapshots(fs storage.FS, dir string) ([]int64, error) {
	ents, err := fs.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var offs []int64
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, snapshotSuffix) {
			continue
		}
		if off, err := strconv.ParseInt(strings.TrimSuffix(name, snapshotSuffix), 10, 64); err == nil {
			offs = append(offs, off)
		}
	}
	sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
	return offs, nil
}

// writeSnapshot writes the state as of offset and removes all but the two newest snapshots.
func writeSnapshot(fs storage.FS, dir string, offset int64, s *ProducerState) error {
	name := snapshotName(dir, offset)
	if err := storage.WriteFileAtomic(fs, dir, filepath.Base(name), s.encode()); err != nil {
		return err
	}
	offs, err := listSnapshots(fs, dir)
	if err != nil {
		return err
	}
	for i := 0; i+2 < len(offs); i++ {
		if err := fs.Remove(snapshotName(dir, offs[i])); err != nil {
			return err
		}
	}
	return nil
}

// loadSnapshot returns the newest readable snapshot in [minOffset, maxOffset] (and its
// offset), deleting snapshots past maxOffset (the log was truncated below them) and below
// minOffset, the log start offset: the batches between such a snapshot and the log start
// are gone, markers included, so replaying from the log start over it would keep
// transactions the deleted markers ended (and sequences the deleted batches advanced), as
// Kafka never loads one (truncateAndReload). With none it returns empty state and offset -1.
func loadSnapshot(fs storage.FS, dir string, minOffset, maxOffset int64) (*ProducerState, int64, error) {
	offs, err := listSnapshots(fs, dir)
	if err != nil {
		return nil, -1, err
	}
	for i := len(offs) - 1; i >= 0; i-- {
		name := snapshotName(dir, offs[i])
		if offs[i] > maxOffset || offs[i] < minOffset {
			if err := fs.Remove(name); err != nil {
				return nil, -1, err
			}
			continue
		}
		b, err := readAll(fs, name)
		if err != nil {
			return nil, -1, err
		}
		s, err := decodeSnapshot(b)
		if err != nil {
			continue // an older snapshot or a full replay rebuilds it
		}
		return s, offs[i], nil
	}
	return NewProducerState(), -1, nil
}

func readAll(fs storage.FS, name string) ([]byte, error) {
	f, err := fs.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil {
		return nil, err
	}
	return b, nil
}
