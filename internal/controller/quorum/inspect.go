package quorum

import (
	"fmt"
	"path/filepath"
	"sort"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/gregor-project/gregor/internal/controller/state"
	"github.com/gregor-project/gregor/internal/storage"
)

// OfflineLog is a controller's metadata log as found on disk (the files of storage.go and
// wal.go), read for tools (gregor metadata) without opening it for writing: nothing is
// truncated, removed or created, so it is safe on a running node's files (it sees what was
// written when it read them).
type OfflineLog struct {
	// The newest readable snapshot: its raft index and term, and the image it holds
	// (state.Restore); Snapshot is nil when there is none.
	SnapshotIndex, SnapshotTerm uint64
	Snapshot                    []byte
	// Commit is the commit index of the last hard state in the WAL (0: none); entries past
	// it were written but not known to be committed.
	Commit uint64
	// Entries are the WAL's entries after the snapshot, by index, as replay keeps them (a
	// later entry at an index replaces the earlier one and everything after it). Raft's own
	// empty entries are left out.
	Entries []OfflineEntry
	// TornBytes is the length of an incomplete tail of the WAL (a crash mid-write).
	TornBytes int64
	// WAL and SnapshotFile name the files read ("" when none).
	WAL, SnapshotFile string
}

// OfflineEntry is one metadata log entry: a batch of records applied at Index.
type OfflineEntry struct {
	Index, Term uint64
	Records     []state.Record
}

// ReadOffline reads the metadata log in dir (<log dir>/__cluster_metadata-0).
func ReadOffline(fsys storage.FS, dir string) (*OfflineLog, error) {
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names) // zero-padded numbers sort numerically
	out := &OfflineLog{}
	snaps := matching(names, snapPrefix, snapSuffix)
	for i := len(snaps) - 1; i >= 0; i-- {
		snap, err := readSnapFile(fsys, filepath.Join(dir, snaps[i]))
		if err != nil {
			continue // an older one may do, as at start-up
		}
		out.SnapshotIndex, out.SnapshotTerm = snap.GetMetadata().GetIndex(), snap.GetMetadata().GetTerm()
		out.Snapshot, out.SnapshotFile = snap.GetData(), snaps[i]
		break
	}
	wals := matching(names, walPrefix, walSuffix)
	if len(wals) == 0 {
		return out, nil
	}
	out.WAL = wals[len(wals)-1]
	recs, good, size, err := readWAL(fsys, filepath.Join(dir, out.WAL))
	if err != nil {
		return nil, err
	}
	out.TornBytes = size - good
	var entries []*pb.Entry
	for _, r := range recs {
		switch r.typ {
		case frameHardState:
			out.Commit = r.hs.GetCommit()
		case frameSnapshot:
			entries = entries[:0]
		case frameEntry:
			idx := r.entry.GetIndex()
			for len(entries) > 0 && entries[len(entries)-1].GetIndex() >= idx {
				entries = entries[:len(entries)-1]
			}
			entries = append(entries, r.entry)
		}
	}
	for _, e := range entries {
		if e.GetIndex() <= out.SnapshotIndex || e.GetType() != pb.EntryNormal || len(e.GetData()) == 0 {
			continue
		}
		_, _, recs, err := decodeEntry(e.GetData())
		if err != nil {
			return nil, fmt.Errorf("quorum: %s entry %d: %w", out.WAL, e.GetIndex(), err)
		}
		out.Entries = append(out.Entries, OfflineEntry{Index: e.GetIndex(), Term: e.GetTerm(), Records: recs})
	}
	return out, nil
}
