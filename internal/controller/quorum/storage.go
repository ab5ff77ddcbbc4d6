package quorum

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"google.golang.org/protobuf/proto"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/gregor-project/gregor/internal/storage"
)

// Snapshot files: snap-<index, 20 digits>.snap, written as .tmp, fsynced, renamed and the
// directory fsynced, so a snapshot file either exists whole or not at all:
//
//	file = "GRSNAP\x00\x01"  crc:uint32  length:uint64  raftpb.Snapshot (protobuf, length bytes)
//
// crc is the CRC-32C of the protobuf bytes. The two newest snapshots are kept.
const (
	snapMagic   = "GRSNAP\x00\x01"
	keepSnaps   = 2
	walPrefix   = "wal-"
	walSuffix   = ".log"
	snapPrefix  = "snap-"
	snapSuffix  = ".snap"
	tmpSuffix   = ".tmp"
	nameDigits  = "%020d"
	snapHdrSize = len(snapMagic) + 4 + 8
)

// diskStorage is raft's Storage: a raft.MemoryStorage that serves raft's reads, made durable
// by a WAL and snapshot files. Only the node's run loop calls its mutating methods.
type diskStorage struct {
	*raft.MemoryStorage
	fs     storage.FS
	dir    string
	wal    *wal
	walSeq uint64
	cs     *pb.ConfState // the voter set (static: controller.quorum.voters)
	hs     *pb.HardState // last hard state written
	snap   *pb.Snapshot  // newest snapshot (index 0: none)
	// recovered reports what open found, for logging and tests.
	recovered recovery
}

type recovery struct {
	SnapshotIndex uint64
	Entries       int   // entries replayed from the WAL
	TornBytes     int64 // bytes dropped from the WAL tail
}

// openStorage opens (or creates) the raft storage in dir. cs is the configured voter set; a
// stored snapshot with another voter set is refused.
func openStorage(fsys storage.FS, dir string, cs *pb.ConfState) (*diskStorage, error) {
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	s := &diskStorage{fs: fsys, dir: dir, cs: cs, MemoryStorage: raft.NewMemoryStorage()}
	names, err := s.list()
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		if strings.HasSuffix(n, tmpSuffix) {
			if err := fsys.Remove(filepath.Join(dir, n)); err != nil {
				return nil, err
			}
		}
	}
	if err := s.loadSnapshot(names); err != nil {
		return nil, err
	}
	if err := s.replayWAL(names); err != nil {
		return nil, err
	}
	return s, nil
}

// firstIndex and lastIndex read raft.MemoryStorage's bounds; its FirstIndex and LastIndex
// return a nil error unconditionally.
func (s *diskStorage) firstIndex() uint64 {
	i, err := s.FirstIndex()
	if err != nil {
		panic(err) // unreachable for MemoryStorage
	}
	return i
}

func (s *diskStorage) lastIndex() uint64 {
	i, err := s.LastIndex()
	if err != nil {
		panic(err) // unreachable for MemoryStorage
	}
	return i
}

func (s *diskStorage) list() ([]string, error) {
	ents, err := s.fs.ReadDir(s.dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names) // zero-padded numbers sort numerically
	return names, nil
}

func matching(names []string, prefix, suffix string) []string {
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, prefix) && strings.HasSuffix(n, suffix) {
			out = append(out, n)
		}
	}
	return out
}

// loadSnapshot installs the newest readable snapshot, or the bootstrap state (the voter set
// at index 0) if there is none.
func (s *diskStorage) loadSnapshot(names []string) error {
	snaps := matching(names, snapPrefix, snapSuffix)
	var firstErr error
	for i := len(snaps) - 1; i >= 0; i-- {
		snap, err := readSnapFile(s.fs, filepath.Join(s.dir, snaps[i]))
		if err != nil {
			firstErr = errors.Join(firstErr, err)
			continue // fall back to an older one; a gap in the WAL is caught later
		}
		if err := s.cs.Equivalent(snap.GetMetadata().GetConfState()); err != nil {
			return fmt.Errorf("quorum: snapshot %s has another voter set than controller.quorum.voters: %w", snaps[i], err)
		}
		s.snap = snap
		s.recovered.SnapshotIndex = snap.GetMetadata().GetIndex()
		return s.ApplySnapshot(snap)
	}
	if firstErr != nil && len(snaps) > 0 {
		return firstErr
	}
	s.snap = &pb.Snapshot{Metadata: &pb.SnapshotMetadata{ConfState: proto.Clone(s.cs).(*pb.ConfState), Index: new(uint64(0)), Term: new(uint64(0))}}
	return s.ApplySnapshot(s.snap)
}

// replayWAL replays the newest WAL into the memory storage and opens it for appending.
func (s *diskStorage) replayWAL(names []string) error {
	wals := matching(names, walPrefix, walSuffix)
	if len(wals) == 0 {
		s.walSeq = 1
		w, err := openWAL(s.fs, s.walPath(s.walSeq), 0, true)
		if err != nil {
			return err
		}
		s.wal = w
		return s.fs.SyncDir(s.dir)
	}
	// A crash between a rewrite's rename and the removal of the old file leaves two WALs:
	// the newest is complete (it was fsynced before the rename); the others are stale.
	for _, old := range wals[:len(wals)-1] {
		if err := s.fs.Remove(filepath.Join(s.dir, old)); err != nil {
			return err
		}
	}
	name := wals[len(wals)-1]
	if _, err := fmt.Sscanf(name, walPrefix+nameDigits+walSuffix, &s.walSeq); err != nil {
		return fmt.Errorf("quorum: WAL file name %q: %w", name, err)
	}
	path := filepath.Join(s.dir, name)
	recs, good, size, err := readWAL(s.fs, path)
	if err != nil {
		return err
	}
	snapIdx := s.snap.GetMetadata().GetIndex()
	for _, r := range recs {
		switch r.typ {
		case frameHardState:
			s.hs = r.hs
		case frameSnapshot:
			if r.snapIdx > snapIdx {
				return fmt.Errorf("%w: WAL installs snapshot %d but the newest snapshot file is %d", ErrCorruptLog, r.snapIdx, snapIdx)
			}
			// Everything before this frame was superseded by the snapshot.
			fresh := raft.NewMemoryStorage()
			if err := fresh.ApplySnapshot(s.snap); err != nil {
				return err
			}
			s.MemoryStorage = fresh
		case frameEntry:
			last := s.lastIndex()
			idx := r.entry.GetIndex()
			if idx > last+1 {
				return fmt.Errorf("%w: WAL entry %d follows %d", ErrCorruptLog, idx, last)
			}
			if err := s.Append([]*pb.Entry{r.entry}); err != nil {
				return err
			}
			s.recovered.Entries++
		}
	}
	if s.hs != nil {
		// The commit index may run ahead of what survived (a hard state written without
		// fsync); raft refuses a commit index beyond the last entry.
		last := s.lastIndex()
		if s.hs.GetCommit() > last {
			s.hs = proto.Clone(s.hs).(*pb.HardState)
			s.hs.Commit = new(last)
		}
		if err := s.SetHardState(s.hs); err != nil {
			return err
		}
	}
	s.recovered.TornBytes = size - good
	w, err := openWAL(s.fs, path, good, false)
	if err != nil {
		return err
	}
	s.wal = w
	return nil
}

func (s *diskStorage) walPath(seq uint64) string {
	return filepath.Join(s.dir, fmt.Sprintf(walPrefix+nameDigits+walSuffix, seq))
}

func (s *diskStorage) snapPath(index uint64) string {
	return filepath.Join(s.dir, fmt.Sprintf(snapPrefix+nameDigits+snapSuffix, index))
}

// save makes one Ready's state durable, in raft's required order: a received snapshot first
// (file, then WAL frame), then entries and hard state, then fsync (when raft says the Ready
// must be synced); only then does the memory storage (and so raft) see them.
func (s *diskStorage) save(hs *pb.HardState, ents []*pb.Entry, snap *pb.Snapshot, mustSync bool) error {
	hasSnap := snap != nil && !raft.IsEmptySnap(snap)
	if hasSnap {
		if err := writeSnapFile(s.fs, s.dir, s.snapPath(snap.GetMetadata().GetIndex()), snap); err != nil {
			return err
		}
		s.wal.addSnapshot(snap.GetMetadata().GetIndex(), snap.GetMetadata().GetTerm())
	}
	for _, e := range ents {
		if err := s.wal.addEntry(e); err != nil {
			return err
		}
	}
	if hs != nil && !raft.IsEmptyHardState(hs) {
		if err := s.wal.addHardState(hs); err != nil {
			return err
		}
	}
	if err := s.wal.flush(mustSync || hasSnap); err != nil {
		return err
	}
	if hasSnap {
		if err := s.ApplySnapshot(snap); err != nil {
			return err
		}
		s.snap = snap
		s.pruneSnaps()
	}
	if err := s.Append(ents); err != nil {
		return err
	}
	if hs != nil && !raft.IsEmptyHardState(hs) {
		s.hs = hs
		return s.SetHardState(hs)
	}
	return nil
}

// snapshot records a snapshot of the state machine at index (which must be applied), keeps
// catchUp entries before it for slow followers, compacts the rest away and rewrites the WAL
// so neither it nor restart time grows with history.
func (s *diskStorage) snapshot(index uint64, data []byte, catchUp uint64) error {
	snap, err := s.CreateSnapshot(index, s.cs, data)
	if err != nil {
		return err
	}
	if err := writeSnapFile(s.fs, s.dir, s.snapPath(index), snap); err != nil {
		return err
	}
	s.snap = snap
	if index > catchUp {
		if err := s.Compact(index - catchUp); err != nil && !errors.Is(err, raft.ErrCompacted) {
			return err
		}
	}
	if err := s.rewriteWAL(); err != nil {
		return err
	}
	s.pruneSnaps()
	return nil
}

// rewriteWAL replaces the WAL with one holding the hard state and the retained entries.
func (s *diskStorage) rewriteWAL() error {
	seq := s.walSeq + 1
	final := s.walPath(seq)
	tmp := final + tmpSuffix
	w, err := openWAL(s.fs, tmp, 0, true)
	if err != nil {
		return err
	}
	// Entries up to the snapshot are covered by it: the new WAL starts after it.
	first := s.snap.GetMetadata().GetIndex() + 1
	first = max(first, s.firstIndex())
	last := s.lastIndex()
	if last >= first {
		ents, err := s.Entries(first, last+1, ^uint64(0))
		if err != nil {
			w.close()
			return err
		}
		for _, e := range ents {
			if err := w.addEntry(e); err != nil {
				w.close()
				return err
			}
		}
	}
	if s.hs != nil {
		if err := w.addHardState(s.hs); err != nil {
			w.close()
			return err
		}
	}
	if err := w.flush(true); err != nil {
		w.close()
		return err
	}
	if err := s.fs.Rename(tmp, final); err != nil {
		w.close()
		return err
	}
	w.path = final
	if err := s.fs.SyncDir(s.dir); err != nil {
		w.close()
		return err
	}
	old := s.wal
	s.wal, s.walSeq = w, seq
	if err := old.close(); err != nil {
		return err
	}
	return s.fs.Remove(old.path)
}

// pruneSnaps removes all but the newest keepSnaps snapshot files (best effort: a leftover
// file is harmless).
func (s *diskStorage) pruneSnaps() {
	names, err := s.list()
	if err != nil {
		return
	}
	snaps := matching(names, snapPrefix, snapSuffix)
	for len(snaps) > keepSnaps {
		if s.fs.Remove(filepath.Join(s.dir, snaps[0])) != nil {
			return
		}
		snaps = snaps[1:]
	}
}

func (s *diskStorage) close() error { return s.wal.close() }

func writeSnapFile(fsys storage.FS, dir, path string, snap *pb.Snapshot) error {
	body, err := proto.Marshal(snap)
	if err != nil {
		return err
	}
	buf := make([]byte, 0, snapHdrSize+len(body))
	buf = append(buf, snapMagic...)
	buf = binary.BigEndian.AppendUint32(buf, crc32.Checksum(body, castagnoli))
	buf = binary.BigEndian.AppendUint64(buf, uint64(len(body)))
	buf = append(buf, body...)
	tmp := path + tmpSuffix
	f, err := fsys.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(buf, 0); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := fsys.Rename(tmp, path); err != nil {
		return err
	}
	return fsys.SyncDir(dir)
}

func readSnapFile(fsys storage.FS, path string) (*pb.Snapshot, error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() < int64(snapHdrSize) {
		return nil, fmt.Errorf("%w: %s: short snapshot file", ErrCorruptLog, path)
	}
	b := make([]byte, fi.Size())
	if _, err := f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if string(b[:len(snapMagic)]) != snapMagic {
		return nil, fmt.Errorf("%w: %s: not a snapshot file", ErrCorruptLog, path)
	}
	sum := binary.BigEndian.Uint32(b[len(snapMagic):])
	n := binary.BigEndian.Uint64(b[len(snapMagic)+4:])
	body := b[snapHdrSize:]
	if uint64(len(body)) != n || crc32.Checksum(body, castagnoli) != sum {
		return nil, fmt.Errorf("%w: %s: snapshot checksum or length mismatch", ErrCorruptLog, path)
	}
	snap := &pb.Snapshot{}
	if err := proto.Unmarshal(body, snap); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorruptLog, path, err)
	}
	return snap, nil
}
