package quorum

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/gregor-project/gregor/internal/controller/state"
	"github.com/gregor-project/gregor/internal/storage"
)

var testCS = &pb.ConfState{Voters: []uint64{1, 2, 3}}

func ent(term, index uint64, data string) *pb.Entry {
	return &pb.Entry{Term: new(term), Index: new(index), Type: pb.EntryNormal.Enum(), Data: []byte(data)}
}

func hardState(term, vote, commit uint64) *pb.HardState {
	return &pb.HardState{Term: new(term), Vote: new(vote), Commit: new(commit)}
}

// entries returns the data of every stored entry.
func entries(t *testing.T, s *diskStorage) []string {
	t.Helper()
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	if last < first {
		return nil
	}
	es, err := s.Entries(first, last+1, ^uint64(0))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, fmt.Sprintf("%d/%d:%s", e.GetTerm(), e.GetIndex(), e.GetData()))
	}
	return out
}

func TestStorageReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := openStorage(storage.OS, dir, testCS)
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.save(hardState(1, 1, 0), []*pb.Entry{ent(1, 1, "a"), ent(1, 2, "b"), ent(1, 3, "c")}, nil, true))
	// A new leader overwrites the conflicting suffix from index 2.
	must(s.save(hardState(2, 2, 2), []*pb.Entry{ent(2, 2, "B"), ent(2, 3, "C"), ent(2, 4, "D")}, nil, true))
	must(s.close())

	s, err = openStorage(storage.OS, dir, testCS)
	must(err)
	if got, want := entries(t, s), []string{"1/1:a", "2/2:B", "2/3:C", "2/4:D"}; !slices.Equal(got, want) {
		t.Fatalf("entries %v, want %v", got, want)
	}
	hs, cs, _ := s.InitialState()
	if hs.GetTerm() != 2 || hs.GetVote() != 2 || hs.GetCommit() != 2 || !slices.Equal(cs.GetVoters(), testCS.GetVoters()) {
		t.Fatalf("state %v %v", hs, cs)
	}
	// Snapshot at 3 keeping 1 entry behind: compaction and a WAL rewrite.
	must(s.snapshot(3, []byte("image@3"), 1))
	must(s.save(nil, []*pb.Entry{ent(2, 5, "E")}, nil, true))
	must(s.close())

	s, err = openStorage(storage.OS, dir, testCS)
	must(err)
	defer s.close()
	// Entries up to the snapshot are folded into it (the in-memory catch-up tail is not
	// kept across a restart).
	if got, want := entries(t, s), []string{"2/4:D", "2/5:E"}; !slices.Equal(got, want) {
		t.Fatalf("after snapshot: entries %v, want %v", got, want)
	}
	if string(s.snap.GetData()) != "image@3" || s.recovered.SnapshotIndex != 3 {
		t.Fatalf("snapshot %q", s.snap.GetData())
	}
	names, _ := s.list()
	if len(matching(names, walPrefix, walSuffix)) != 1 {
		t.Fatalf("files %v", names)
	}
	// Another voter set is refused.
	s.close()
	if _, err := openStorage(storage.OS, dir, &pb.ConfState{Voters: []uint64{1, 2}}); err == nil {
		t.Fatal("opened with another voter set")
	}
}

func TestStorageReceivedSnapshot(t *testing.T) {
	dir := t.TempDir()
	s, err := openStorage(storage.OS, dir, testCS)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.save(hardState(1, 1, 2), []*pb.Entry{ent(1, 1, "a"), ent(1, 2, "b"), ent(1, 3, "stale")}, nil, true); err != nil {
		t.Fatal(err)
	}
	snap := &pb.Snapshot{Data: []byte("leader image"), Metadata: &pb.SnapshotMetadata{Index: new(uint64(10)), Term: new(uint64(3)), ConfState: testCS}}
	if err := s.save(hardState(3, 1, 10), []*pb.Entry{ent(3, 11, "x")}, snap, true); err != nil {
		t.Fatal(err)
	}
	s.close()
	s, err = openStorage(storage.OS, dir, testCS)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	if got := entries(t, s); !slices.Equal(got, []string{"3/11:x"}) {
		t.Fatalf("entries %v", got)
	}
	if string(s.snap.GetData()) != "leader image" {
		t.Fatal("snapshot lost")
	}
}

// TestStorageTornTail cuts the WAL at every byte of its last frames (a crash in the middle of
// an append) and corrupts bytes of the tail: reopening keeps exactly the intact frames.
func TestStorageTornTail(t *testing.T) {
	dir := t.TempDir()
	s, err := openStorage(storage.OS, dir, testCS)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.save(hardState(1, 1, 1), []*pb.Entry{ent(1, 1, "a"), ent(1, 2, "b")}, nil, true); err != nil {
		t.Fatal(err)
	}
	intact := s.wal.size
	if err := s.save(hardState(1, 1, 3), []*pb.Entry{ent(1, 3, "ccccccccccccccc")}, nil, true); err != nil {
		t.Fatal(err)
	}
	full := s.wal.size
	path := s.wal.path
	s.close()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, b []byte, want []string, wantCommit uint64) {
		t.Helper()
		d := t.TempDir()
		if err := os.WriteFile(filepath.Join(d, filepath.Base(path)), b, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := openStorage(storage.OS, d, testCS)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		defer s.close()
		if got := entries(t, s); !slices.Equal(got, want) {
			t.Fatalf("%s: entries %v, want %v", name, got, want)
		}
		hs, _, _ := s.InitialState()
		if hs.GetCommit() != wantCommit {
			t.Fatalf("%s: commit %d, want %d", name, hs.GetCommit(), wantCommit)
		}
		// The torn bytes are gone from the file and appends continue cleanly.
		if err := s.save(nil, []*pb.Entry{ent(1, uint64(len(want)+1), "z")}, nil, true); err != nil {
			t.Fatal(err)
		}
		s.close()
		s2, err := openStorage(storage.OS, d, testCS)
		if err != nil {
			t.Fatal(err)
		}
		defer s2.close()
		if got := entries(t, s2); len(got) != len(want)+1 || s2.recovered.TornBytes != 0 {
			t.Fatalf("%s: after append and reopen %v (torn %d)", name, got, s2.recovered.TornBytes)
		}
	}
	_, cLen, ok := decodeFrame(data[intact:]) // the entry frame; the hard state frame follows
	if !ok {
		t.Fatal("no entry frame")
	}
	cEnd := intact + int64(cLen)
	for cut := intact; cut < full; cut++ {
		want := []string{"1/1:a", "1/2:b"}
		if cut >= cEnd {
			want = append(want, "1/3:ccccccccccccccc") // only the hard state was torn
		}
		check(fmt.Sprintf("cut at %d", cut), data[:cut], want, 1)
	}
	for _, at := range []int64{intact, intact + 5, intact + 9, cEnd - 1} {
		b := slices.Clone(data)
		b[at] ^= 0xff
		check(fmt.Sprintf("flip at %d", at), b, []string{"1/1:a", "1/2:b"}, 1)
	}
	check("intact", data, []string{"1/1:a", "1/2:b", "1/3:ccccccccccccccc"}, 3)
	check("torn magic", data[:3], nil, 0)
}

// TestStorageFaultyWrite makes a WAL write tear through the fault-injecting file system: the
// save fails, and a reopen (the restart after the crash) recovers the frames before it.
func TestStorageFaultyWrite(t *testing.T) {
	dir := t.TempDir()
	ffs := storage.NewFaultFS(storage.OS)
	s, err := openStorage(ffs, dir, testCS)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.save(hardState(1, 1, 1), []*pb.Entry{ent(1, 1, "a")}, nil, true); err != nil {
		t.Fatal(err)
	}
	ffs.TornWrite("wal-*", 7)
	if err := s.save(hardState(1, 1, 2), []*pb.Entry{ent(1, 2, "b")}, nil, true); !errors.Is(err, storage.ErrInjected) {
		t.Fatalf("torn save: %v", err)
	}
	s.close()
	// A failed fsync is an error too.
	s, err = openStorage(storage.OS, dir, testCS)
	if err != nil {
		t.Fatal(err)
	}
	if got := entries(t, s); !slices.Equal(got, []string{"1/1:a"}) || s.recovered.TornBytes != 7 {
		t.Fatalf("entries %v torn %d", got, s.recovered.TornBytes)
	}
	s.close()
	ffs2 := storage.NewFaultFS(storage.OS)
	s, err = openStorage(ffs2, dir, testCS)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	ffs2.FailNextSync("wal-*")
	if err := s.save(nil, []*pb.Entry{ent(1, 2, "b")}, nil, true); !errors.Is(err, storage.ErrInjected) {
		t.Fatalf("failed fsync: %v", err)
	}
}

// TestNodeRecoversTornTail stops a controller, tears its WAL mid-frame as a kill -9 during an
// append would, restarts the whole quorum and checks the metadata is intact.
func TestNodeRecoversTornTail(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := c.waitActive(10 * time.Second)
	registerBroker(t, c.nodes[leader], 0)
	for i := range 10 {
		if _, err := createTopic(ctx(t), c.nodes[leader], fmt.Sprintf("t%d", i), 2, 1); err != nil {
			t.Fatal(err)
		}
	}
	c.waitApplied(c.nodes[leader].Status().Applied, 10*time.Second)
	before := c.sameImages()
	victim := (leader + 1) % 3
	walPath := c.nodes[victim].st.wal.path
	c.stopAll()
	// Append half of a frame that claims to be an entry.
	f, err := os.OpenFile(walPath, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte{0, 0, 1, 0, 0xde, 0xad, 0xbe, 0xef, frameEntry, 1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for i := range 3 {
		c.start(i, nil)
	}
	if torn := c.nodes[victim].st.recovered.TornBytes; torn != 12 {
		t.Fatalf("dropped %d torn bytes, want 12", torn)
	}
	leader = c.waitActive(10 * time.Second)
	if _, err := createTopic(ctx(t), c.nodes[leader], "after", 1, 1); err != nil {
		t.Fatal(err)
	}
	c.waitApplied(c.nodes[leader].Status().Applied, 10*time.Second)
	after := c.sameImages()
	im, _ := state.Restore(after)
	imB, _ := state.Restore(before)
	if len(im.TopicNames()) != len(imB.TopicNames())+1 {
		t.Fatalf("topics %v", im.TopicNames())
	}
}

// TestStorageStaleWAL: a crash after a rewrite's rename but before the old WAL's removal
// leaves two WALs; the newest wins and the stale one is removed.
func TestStorageStaleWAL(t *testing.T) {
	dir := t.TempDir()
	s, err := openStorage(storage.OS, dir, testCS)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.save(hardState(1, 1, 2), []*pb.Entry{ent(1, 1, "a"), ent(1, 2, "b")}, nil, true); err != nil {
		t.Fatal(err)
	}
	stale, err := os.ReadFile(s.wal.path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.snapshot(2, []byte("img"), 0); err != nil {
		t.Fatal(err)
	}
	if err := s.save(nil, []*pb.Entry{ent(1, 3, "c")}, nil, true); err != nil {
		t.Fatal(err)
	}
	s.close()
	if err := os.WriteFile(filepath.Join(dir, "wal-00000000000000000001.log"), stale, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "wal-00000000000000000003.log.tmp"), []byte("half"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err = openStorage(storage.OS, dir, testCS)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	if got := entries(t, s); !slices.Equal(got, []string{"1/3:c"}) {
		t.Fatalf("entries %v", got)
	}
	names, _ := s.list()
	if !slices.Equal(names, []string{"snap-00000000000000000002.snap", "wal-00000000000000000002.log"}) {
		t.Fatalf("files %v", names)
	}
}

// A controller whose WAL write fails stops on its own: Done is closed and Err says why (the
// process running it then exits), and a command in flight or sent after fails at once
// instead of waiting on a node that can no longer write.
func TestNodeStopsOnStorageFailure(t *testing.T) {
	ffs := storage.NewFaultFS(storage.OS)
	c := newCluster(t, 1, func(cfg *Config) { cfg.FS = ffs })
	n := c.nodes[c.waitActive(10*time.Second)]
	registerBroker(t, n, 0)
	ffs.Inject(storage.Fault{Op: storage.FaultWrite, Pattern: "wal-*", Times: -1})
	if _, err := createTopic(ctx(t), n, "t", 1, 1); !errors.Is(err, ErrStopped) {
		t.Fatalf("command during the failure: %v, want ErrStopped", err)
	}
	select {
	case <-n.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("node still running after its WAL write failed")
	}
	if err := n.Err(); !errors.Is(err, storage.ErrInjected) {
		t.Fatalf("Err: %v, want the injected write failure", err)
	}
	if _, err := createTopic(ctx(t), n, "u", 1, 1); !errors.Is(err, ErrStopped) {
		t.Fatalf("command after the failure: %v, want ErrStopped", err)
	}
	ffs.Clear()
}
