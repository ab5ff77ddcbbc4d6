package quorum

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"

	"google.golang.org/protobuf/proto"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/gregor-project/gregor/internal/storage"
)

// The write-ahead log holds raft's hard state and log entries.
//
// # File format
//
// A WAL file (wal-<seq, 20 digits>.log) is an 8-byte magic followed by frames:
//
//	file   = "GRWAL\x00\x00\x01"  frame*
//	frame  = length:uint32  crc:uint32  type:uint8  payload      (big-endian integers)
//
// length counts type and payload; crc is the CRC-32C (Castagnoli) of type and payload.
// Frame types:
//
//	1 entry       payload = raftpb.Entry (protobuf)
//	2 hard state  payload = raftpb.HardState (protobuf)
//	3 snapshot    payload = index:uvarint term:uvarint — a snapshot received from the leader
//	              was installed here: every entry before this frame is superseded (the
//	              snapshot file itself was made durable before this frame was written)
//
// Appending an entry whose index is at or below the last one replaces that entry and every
// later one (raft truncating a conflicting suffix); replay does the same, so the file is
// append-only. Frames are written once per raft Ready and fsynced before any message of that
// Ready is sent.
//
// # Recovery
//
// Replay stops at the first frame that is short, longer than maxFrame, or fails its CRC:
// that is a torn write at the tail (a crash mid-append), and the file is truncated there
// (and fsynced). Nothing after it was ever acknowledged, because messages are only sent
// after the fsync that covers them.
//
// # Rewrite
//
// After a snapshot, the WAL is rewritten as a new file holding the hard state and the
// entries still kept after compaction: written as wal-<seq+1>.log.tmp, fsynced, renamed,
// the directory fsynced, and only then the old file removed. Leftover .tmp files are
// deleted at open; the highest-numbered WAL is the current one.
const (
	walMagic    = "GRWAL\x00\x00\x01"
	frameHeader = 9
	maxFrame    = 1 << 30

	frameEntry     byte = 1
	frameHardState byte = 2
	frameSnapshot  byte = 3
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorruptLog is returned when the WAL or snapshots are inconsistent beyond a torn tail:
// a gap between entries, a snapshot frame whose snapshot file is missing.
var ErrCorruptLog = errors.New("quorum: corrupt raft log")

// wal is an open WAL file positioned at its end.
type wal struct {
	fs   storage.FS
	path string
	f    storage.File
	size int64
	buf  []byte // frames of the current Save, written with one call
}

// walRecord is one decoded frame.
type walRecord struct {
	typ     byte
	entry   *pb.Entry
	hs      *pb.HardState
	snapIdx uint64
	snapTrm uint64
}

// readWAL reads every intact frame of the file at path and returns them with the offset of
// the end of the last intact frame (the file's size if it is intact).
func readWAL(fsys storage.FS, path string) ([]walRecord, int64, int64, error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, 0, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, 0, err
	}
	data := make([]byte, fi.Size())
	if _, err := f.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, 0, 0, err
	}
	if len(data) < len(walMagic) || string(data[:len(walMagic)]) != walMagic {
		if len(data) < len(walMagic) && string(data) == walMagic[:len(data)] {
			return nil, 0, int64(len(data)), nil // torn while writing the magic
		}
		return nil, 0, 0, fmt.Errorf("%w: %s: not a WAL file", ErrCorruptLog, path)
	}
	var recs []walRecord
	off := len(walMagic)
	for {
		rec, n, ok := decodeFrame(data[off:])
		if !ok {
			break
		}
		recs = append(recs, rec)
		off += n
	}
	return recs, int64(off), int64(len(data)), nil
}

func decodeFrame(b []byte) (walRecord, int, bool) {
	if len(b) < frameHeader {
		return walRecord{}, 0, false
	}
	n := binary.BigEndian.Uint32(b)
	if n < 1 || n > maxFrame || uint64(len(b)-8) < uint64(n) {
		return walRecord{}, 0, false
	}
	body := b[8 : 8+n]
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(b[4:]) {
		return walRecord{}, 0, false
	}
	rec := walRecord{typ: body[0]}
	payload := body[1:]
	switch rec.typ {
	case frameEntry:
		rec.entry = &pb.Entry{}
		if proto.Unmarshal(payload, rec.entry) != nil {
			return walRecord{}, 0, false
		}
	case frameHardState:
		rec.hs = &pb.HardState{}
		if proto.Unmarshal(payload, rec.hs) != nil {
			return walRecord{}, 0, false
		}
	case frameSnapshot:
		idx, k := binary.Uvarint(payload)
		if k <= 0 {
			return walRecord{}, 0, false
		}
		trm, k2 := binary.Uvarint(payload[k:])
		if k2 <= 0 || k+k2 != len(payload) {
			return walRecord{}, 0, false
		}
		rec.snapIdx, rec.snapTrm = idx, trm
	default:
		return walRecord{}, 0, false
	}
	return rec, 8 + int(n), true
}

// openWAL opens the WAL at path for appending after truncating it to size (dropping a torn
// tail), creating it with its magic if it does not exist.
func openWAL(fsys storage.FS, path string, size int64, create bool) (*wal, error) {
	flag := os.O_RDWR
	if create {
		flag |= os.O_CREATE | os.O_TRUNC
	}
	f, err := fsys.OpenFile(path, flag, 0o644)
	if err != nil {
		return nil, err
	}
	w := &wal{fs: fsys, path: path, f: f}
	if create || size < int64(len(walMagic)) {
		if err := f.Truncate(0); err != nil {
			f.Close()
			return nil, err
		}
		if _, err := f.WriteAt([]byte(walMagic), 0); err != nil {
			f.Close()
			return nil, err
		}
		w.size = int64(len(walMagic))
	} else {
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		if fi.Size() != size {
			if err := f.Truncate(size); err != nil {
				f.Close()
				return nil, err
			}
		}
		w.size = size
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	return w, nil
}

func (w *wal) addFrame(typ byte, payload []byte) {
	start := len(w.buf)
	w.buf = append(w.buf, 0, 0, 0, 0, 0, 0, 0, 0, typ)
	w.buf = append(w.buf, payload...)
	body := w.buf[start+8:]
	binary.BigEndian.PutUint32(w.buf[start:], uint32(len(body)))
	binary.BigEndian.PutUint32(w.buf[start+4:], crc32.Checksum(body, castagnoli))
}

func (w *wal) addEntry(e *pb.Entry) error {
	b, err := proto.Marshal(e)
	if err != nil {
		return err
	}
	w.addFrame(frameEntry, b)
	return nil
}

func (w *wal) addHardState(hs *pb.HardState) error {
	b, err := proto.Marshal(hs)
	if err != nil {
		return err
	}
	w.addFrame(frameHardState, b)
	return nil
}

func (w *wal) addSnapshot(index, term uint64) {
	b := binary.AppendUvarint(nil, index)
	w.addFrame(frameSnapshot, binary.AppendUvarint(b, term))
}

// flush writes the buffered frames and, if sync, fsyncs. On error the WAL must not be used
// again (the file may hold a partial frame; reopening drops it).
func (w *wal) flush(sync bool) error {
	if len(w.buf) > 0 {
		n, err := w.f.WriteAt(w.buf, w.size)
		w.size += int64(n)
		w.buf = w.buf[:0]
		if err != nil {
			return err
		}
	}
	if sync {
		return w.f.Sync()
	}
	return nil
}

func (w *wal) close() error { return w.f.Close() }
