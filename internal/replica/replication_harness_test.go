package replica

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/storage"
)

// A small in-process replication harness over real logs: each node has a log and leader
// epoch cache in a temp dir, and leads (LeaderState) or follows (Follower). Requests go by
// direct calls; serveFetch, serveEpochEndOffset and serveListOffsets are the leader-side glue
// the api layer will do for real.

var quiet = slog.New(slog.DiscardHandler)

// noSyncFS is the OS file system without fsync: these tests never lose the page cache, and
// fsyncs would make up most of their time.
type noSyncFS struct{ storage.FS }

type noSyncFile struct{ storage.File }

func (noSyncFile) Sync() error { return nil }

func (fs noSyncFS) OpenFile(name string, flag int, perm os.FileMode) (storage.File, error) {
	f, err := fs.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return noSyncFile{f}, nil
}

func (noSyncFS) SyncDir(string) error { return nil }

var testFS storage.FS = noSyncFS{storage.OS}

type replicaNode struct {
	t        testing.TB
	id       int32
	dir      string
	log      *storage.Log
	epochs   *storage.LeaderEpochCache
	hw       int64 // as the replication-offset-checkpoint would keep it
	leader   *LeaderState
	follower *Follower
	fcfg     FollowerConfig
	answers  map[any]error // acks=all completions, by token
	proposal *ISRChange    // the last ISR change the leader proposed, not yet taken
}

func testLogConfig() storage.Config {
	c := storage.DefaultConfig()
	c.SegmentBytes = 2048 // several segments in the longer tests
	c.IndexIntervalBytes = 128
	c.SegmentIndexBytes = 4096 // small segments, small indexes: no 10 MB mapping per segment
	c.FileDeleteDelayMs = 0
	c.RetentionMs = -1
	return c
}

func newNode(t testing.TB, id int32) *replicaNode {
	n := &replicaNode{t: t, id: id, dir: filepath.Join(t.TempDir(), fmt.Sprintf("broker%d", id), "t-0"), answers: map[any]error{}}
	n.open()
	t.Cleanup(func() { n.log.Close() })
	return n
}

func (n *replicaNode) open() {
	n.t.Helper()
	l, err := storage.Open(testFS, n.dir, testLogConfig(), storage.OpenOptions{Clean: true, LogStartOffset: n.lsoCheckpoint(), Logger: quiet})
	if err != nil {
		n.t.Fatal(err)
	}
	c, err := storage.OpenLeaderEpochCache(testFS, l, quiet)
	if err != nil {
		n.t.Fatal(err)
	}
	n.log, n.epochs = l, c
	n.hw = min(n.hw, l.LogEndOffset())
	l.SetHighWatermark(n.hw)
}

func (n *replicaNode) lsoCheckpoint() int64 {
	if n.log == nil {
		return 0
	}
	return n.log.LogStartOffset()
}

// restart closes and reopens the node's log and epoch cache; its role is gone, its high
// watermark is what it had last learned.
func (n *replicaNode) restart() {
	n.t.Helper()
	if err := n.log.Close(); err != nil {
		n.t.Fatal(err)
	}
	n.open()
	n.leader, n.follower = nil, nil
}

func (n *replicaNode) local() LocalLog { return LocalLogOf(n.log, n.epochs, n.hw) }

// lead makes the node the leader of reg, as Partition.makeLeader will: assign the epoch at
// the log end offset, then start the state.
func (n *replicaNode) lead(reg Registration, nowMs int64) {
	n.t.Helper()
	if err := n.epochs.Assign(reg.LeaderEpoch, n.log.LogEndOffset()); err != nil {
		n.t.Fatal(err)
	}
	s, err := NewLeaderState(ReplicationConfig{LocalID: n.id, ReplicaLagTimeMaxMs: 10_000}, reg, n.log.LogEndOffset(), n.hw, nowMs)
	if err != nil {
		n.t.Fatal(err)
	}
	n.leader, n.follower = s, nil
	n.leaderReady()
}

func (n *replicaNode) follow(leader, epoch int32) {
	n.t.Helper()
	f, act := NewFollower(n.fcfg, leader, epoch, n.local())
	n.follower, n.leader = f, nil
	n.apply(act)
}

func (n *replicaNode) apply(act FollowerAction) {
	n.t.Helper()
	if _, err := ApplyFollowerAction(n.log, n.epochs, act); err != nil {
		n.t.Fatal(err)
	}
	if act.HighWatermark >= 0 {
		n.hw = act.HighWatermark
	}
}

func (n *replicaNode) leaderReady() LeaderReady {
	rd := n.leader.Ready()
	for _, c := range rd.Completed {
		if _, dup := n.answers[c.Token]; dup {
			n.t.Fatalf("produce %v answered twice", c.Token)
		}
		n.answers[c.Token] = c.Err
	}
	if rd.Proposal != nil {
		n.proposal = rd.Proposal
	}
	n.hw = rd.HighWatermark
	n.log.SetHighWatermark(n.hw)
	return rd
}

// produce appends one batch holding values as the leader and returns its base offset.
func (n *replicaNode) produce(nowMs int64, values ...string) int64 {
	n.t.Helper()
	b := buildBatch(n.t, values...)
	info, err := n.log.Append(b, storage.AppendOptions{AssignOffsets: true, LeaderEpoch: n.leader.LeaderEpoch()})
	if err != nil {
		n.t.Fatal(err)
	}
	if err := n.leader.Appended(n.log.LogEndOffset(), nowMs); err != nil {
		n.t.Fatal(err)
	}
	n.leaderReady()
	return info.FirstOffset
}

func buildBatch(t testing.TB, values ...string) []byte {
	t.Helper()
	recs := make([]batch.Record, len(values))
	for i, v := range values {
		recs[i] = batch.Record{OffsetDelta: int32(i), Value: []byte(v)}
	}
	h := batch.Header{PartitionLeaderEpoch: -1, LastOffsetDelta: int32(len(values) - 1), BaseTimestamp: 1000, MaxTimestamp: 1000, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	b, err := batch.Build(h, recs, batch.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// serveFetch is the leader's side of a follower's fetch.
func serveFetch(ld *replicaNode, from int32, req FollowerRequest, nowMs int64) FetchAnswer {
	ld.t.Helper()
	if ld.leader == nil {
		return FetchAnswer{Err: kerr.NotLeaderForPartition}
	}
	if err := CheckCurrentLeaderEpoch(ld.leader.LeaderEpoch(), req.CurrentLeaderEpoch); err != nil {
		if errors.Is(err, ErrFencedLeaderEpoch) {
			return FetchAnswer{Err: kerr.FencedLeaderEpoch}
		}
		return FetchAnswer{Err: kerr.UnknownLeaderEpoch}
	}
	lso, leo := ld.log.LogStartOffset(), ld.log.LogEndOffset()
	div, err := DivergingEpoch(ld.epochs, lso, leo, req.FetchOffset, req.LastFetchedEpoch)
	if err != nil {
		return FetchAnswer{Err: kerr.OffsetOutOfRange}
	}
	if div != nil {
		return FetchAnswer{DivergingEpoch: div, HighWatermark: ld.hw, LogStartOffset: lso}
	}
	if req.FetchOffset < lso || req.FetchOffset > leo {
		return FetchAnswer{Err: kerr.OffsetOutOfRange}
	}
	if err := ld.leader.FollowerFetched(from, req.FetchOffset, req.LogStartOffset, nowMs); err != nil {
		ld.t.Fatal(err)
	}
	ld.leaderReady()
	s, err := ld.log.Read(req.FetchOffset, 1<<20, leo, true)
	if err != nil {
		ld.t.Fatal(err)
	}
	defer s.Release()
	recs := make([]byte, s.Size)
	if s.Size > 0 {
		if _, err := s.File.ReadAt(recs, s.Pos); err != nil {
			ld.t.Fatal(err)
		}
	}
	return FetchAnswer{HighWatermark: ld.hw, LogStartOffset: lso, Records: recs}
}

func serveEpochEndOffset(ld *replicaNode, req FollowerRequest) (EpochEndOffset, error) {
	if ld.leader == nil {
		return EpochEndOffset{}, kerr.NotLeaderForPartition
	}
	if err := CheckCurrentLeaderEpoch(ld.leader.LeaderEpoch(), req.CurrentLeaderEpoch); err != nil {
		return EpochEndOffset{}, err
	}
	return LastOffsetForLeaderEpoch(ld.epochs, ld.log.LogEndOffset(), req.LeaderEpoch), nil
}

// fetchRound makes one request of n's follower to ld and applies the answer. It returns the
// kind of request made.
func (n *replicaNode) fetchRound(ld *replicaNode, nowMs int64) RequestKind {
	n.t.Helper()
	req := n.follower.Next(n.local(), nowMs)
	var act FollowerAction
	var err error
	switch req.Kind {
	case RequestNone:
		return req.Kind
	case RequestFetch:
		ans := serveFetch(ld, n.id, req, nowMs)
		act, err = n.follower.HandleFetch(req, ans, n.local(), nowMs)
	case RequestOffsetForLeaderEpoch:
		ans, aerr := serveEpochEndOffset(ld, req)
		act, err = n.follower.HandleEpochEndOffset(req, ans, aerr, n.local(), nowMs)
	case RequestListOffsets:
		act, err = n.follower.HandleLeaderOffsets(req, ld.log.LogStartOffset(), ld.log.LogEndOffset(), nil, n.local(), nowMs)
	}
	if err != nil && !isExpectedFetchErr(err) {
		n.t.Fatalf("broker %d: %v", n.id, err)
	}
	n.apply(act)
	return req.Kind
}

func isExpectedFetchErr(err error) bool {
	for _, e := range []error{kerr.OffsetOutOfRange, kerr.FencedLeaderEpoch, kerr.UnknownLeaderEpoch, kerr.NotLeaderForPartition, ErrFencedLeaderEpoch, ErrUnknownLeaderEpoch} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// catchUp runs fetch rounds until n's log end offset equals ld's and the high watermark
// settled, or fails after many rounds.
func (n *replicaNode) catchUp(ld *replicaNode, nowMs int64) {
	n.t.Helper()
	for range 100 {
		n.fetchRound(ld, nowMs)
		if n.follower.Phase() == PhaseFetching && n.log.LogEndOffset() == ld.log.LogEndOffset() && n.hw == ld.hw {
			// One more round reports our end offset, so the leader's high watermark can move.
			n.fetchRound(ld, nowMs)
			if n.hw == ld.hw {
				return
			}
		}
	}
	n.t.Fatalf("broker %d did not catch up with %d: LEO %d vs %d, HW %d vs %d, phase %v", n.id, ld.id, n.log.LogEndOffset(), ld.log.LogEndOffset(), n.hw, ld.hw, n.follower.Phase())
}

// logBytes is the log's bytes from its start up to end.
func logBytes(t testing.TB, l *storage.Log, end int64) []byte {
	t.Helper()
	var out []byte
	for off := l.LogStartOffset(); off < end; {
		s, err := l.Read(off, 1<<20, end, true)
		if err != nil {
			t.Fatal(err)
		}
		if s.Size == 0 {
			s.Release()
			break
		}
		b := make([]byte, s.Size)
		if _, err := s.File.ReadAt(b, s.Pos); err != nil {
			t.Fatal(err)
		}
		s.Release()
		out = append(out, b...)
		for p := 0; p < len(b); {
			h, err := batch.ParseHeader(b[p:])
			if err != nil {
				t.Fatal(err)
			}
			off = h.LastOffset() + 1
			p += h.Size()
		}
	}
	return out
}

// values lists the log's records as "offset:epoch:value" from its start to its end.
func values(t testing.TB, l *storage.Log) []string {
	t.Helper()
	var out []string
	eachRecord(t, l, func(off int64, epoch int32, v string) {
		out = append(out, fmt.Sprintf("%d:%d:%s", off, epoch, v))
	})
	return out
}

// eachRecord calls fn with every record of the log.
func eachRecord(t testing.TB, l *storage.Log, fn func(off int64, epoch int32, value string)) {
	t.Helper()
	b := logBytes(t, l, l.LogEndOffset())
	for len(b) > 0 {
		h, err := batch.ParseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := batch.Records(b[:h.Size()])
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			fn(h.BaseOffset+int64(r.OffsetDelta), h.PartitionLeaderEpoch, string(r.Value))
		}
		b = b[h.Size():]
	}
}

// sameBelow fails unless the nodes' logs are byte-identical below end.
func sameBelow(t testing.TB, end int64, nodes ...*replicaNode) {
	t.Helper()
	want := logBytes(t, nodes[0].log, end)
	for _, n := range nodes[1:] {
		if got := logBytes(t, n.log, end); !bytes.Equal(got, want) {
			t.Fatalf("broker %d and broker %d differ below offset %d:\n%v\n%v", nodes[0].id, n.id, end, values(t, nodes[0].log), values(t, n.log))
		}
	}
}
