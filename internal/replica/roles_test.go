package replica

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/storage"
)

// Tests of partition roles on a Manager over real logs: MakeLeader / MakeFollower, the leader's
// acks=all path and follower fetches, ApplyFollower's fencing, RunReplication's AlterPartition
// round trip and the high watermark checkpoint.

func roleManager(t *testing.T, dir string, id int32, o *ReplicationOptions) *Manager {
	t.Helper()
	logs, err := storage.OpenManager(testFS, dir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	m := NewManager(testFS, logs, quiet)
	if o != nil {
		o.LocalID = id
		m.SetReplication(*o)
	}
	return m
}

func roleSettings(minISR int32) Settings {
	return Settings{MaxMessageBytes: 1 << 20, MinInsyncReplicas: minISR, Log: testLogConfig()}
}

func openRolePartition(t *testing.T, m *Manager, minISR int32) *Partition {
	t.Helper()
	p, err := m.Open("t", 0, roleSettings(minISR))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// appendValues appends one batch as the leader.
func appendValues(t *testing.T, p *Partition, acksAll bool, values ...string) AppendResult {
	t.Helper()
	b := buildBatch(t, values...)
	h, err := batch.ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.AppendWait(b, []batch.Header{h}, 1000, -1, acksAll, 60_000)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func pending(ch <-chan error) bool {
	select {
	case err := <-ch:
		panic(err)
	default:
		return true
	}
}

func TestSolePartitionCommitsAtAppend(t *testing.T) {
	m := roleManager(t, t.TempDir(), 1, nil)
	defer m.Close()
	p := openRolePartition(t, m, 1)
	if _, epoch, leads := p.Role(); !leads || epoch != 0 {
		t.Fatalf("sole partition: epoch %d, leads %v", epoch, leads)
	}
	res := appendValues(t, p, true, "a", "b")
	if res.Wait != nil || p.HighWatermark() != 2 {
		t.Fatalf("sole acks=all: wait %v, high watermark %d", res.Wait, p.HighWatermark())
	}
	// A cache opened later (OffsetForLeaderEpoch) finds epoch 0 from the batches.
	if e, err := p.LastOffsetForLeaderEpoch(-1, 0); err != nil || e != (EpochEndOffset{0, 2}) {
		t.Fatalf("epoch 0 ends at %+v, %v", e, err)
	}
	if err := p.MakeLeader(LeaderAndISR{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1}, ISR: []int32{1}}, 0); err == nil {
		t.Fatal("MakeLeader without replication options")
	}
}

func TestPartitionWithoutRoleRefuses(t *testing.T) {
	m := roleManager(t, t.TempDir(), 1, &ReplicationOptions{})
	defer m.Close()
	p := openRolePartition(t, m, 1)
	b := buildBatch(t, "a")
	h, _ := batch.ParseHeader(b)
	if _, err := p.Append(b, []batch.Header{h}, 0, -1, false); !errors.Is(err, ErrNotLeaderOrFollower) {
		t.Fatalf("append before a role: %v", err)
	}
	if err := p.CheckLeader(-1); !errors.Is(err, ErrNotLeaderOrFollower) {
		t.Fatalf("CheckLeader before a role: %v", err)
	}
}

// A leader with a follower in its ISR answers acks=all when the follower's fetch passes the
// records; losing the leadership fails the produces still waiting.
func TestLeaderAcksAllAndMakeFollower(t *testing.T) {
	m := roleManager(t, t.TempDir(), 1, &ReplicationOptions{})
	defer m.Close()
	p := openRolePartition(t, m, 2)
	reg := LeaderAndISR{Leader: 1, LeaderEpoch: 3, PartitionEpoch: 7, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}
	if err := p.MakeLeader(reg, 1000); err != nil {
		t.Fatal(err)
	}
	if leader, epoch, leads := p.Role(); leader != 1 || epoch != 3 || !leads {
		t.Fatalf("Role = %d, %d, %v", leader, epoch, leads)
	}
	if es := p.Epochs().Entries(); !slices.Equal(es, []storage.EpochEntry{{Epoch: 3, StartOffset: 0}}) {
		t.Fatalf("epochs %v", es)
	}
	first := appendValues(t, p, true, "a", "b")
	if first.Wait == nil || !pending(first.Wait) || p.HighWatermark() != 0 {
		t.Fatalf("acks=all committed before the follower fetched: hw %d", p.HighWatermark())
	}
	// The batch carries the leader epoch.
	if vs := values(t, p.Log()); !slices.Equal(vs, []string{"0:3:a", "1:3:b"}) {
		t.Fatalf("log %v", vs)
	}
	// Fenced and stale fetches are refused before they count.
	if _, err := p.FollowerFetch(2, 2, 2, 0, 3, 1000); !errors.Is(err, ErrFencedLeaderEpoch) {
		t.Fatalf("fetch with epoch 2: %v", err)
	}
	if _, err := p.FollowerFetch(2, 4, 2, 0, 3, 1000); !errors.Is(err, ErrUnknownLeaderEpoch) {
		t.Fatalf("fetch with epoch 4: %v", err)
	}
	if _, err := p.FollowerFetch(5, 3, 2, 0, 3, 1000); !errors.Is(err, ErrNotLeaderOrFollower) {
		t.Fatalf("fetch from a broker that is no replica: %v", err)
	}
	// The follower fetches at 2: it has both records, the high watermark moves, the produce
	// is answered.
	st, err := p.FollowerFetch(2, 3, 2, 0, 3, 1000)
	if err != nil || st.HighWatermark != 2 || st.LogEndOffset != 2 {
		t.Fatalf("follower fetch: %+v, %v", st, err)
	}
	if err := <-first.Wait; err != nil {
		t.Fatalf("acks=all: %v", err)
	}
	second := appendValues(t, p, true, "c")
	if !pending(second.Wait) {
		t.Fatal("unreachable")
	}
	if err := p.MakeFollower(LeaderAndISR{Leader: 2, LeaderEpoch: 4, PartitionEpoch: 8, Replicas: []int32{1, 2}, ISR: []int32{2}}); err != nil {
		t.Fatal(err)
	}
	if err := <-second.Wait; !errors.Is(err, ErrNotLeaderOrFollower) {
		t.Fatalf("acks=all waiting across a leadership loss: %v", err)
	}
	if p.HighWatermark() != 2 {
		t.Fatalf("high watermark moved on MakeFollower: %d", p.HighWatermark())
	}
	b := buildBatch(t, "d")
	h, _ := batch.ParseHeader(b)
	if _, err := p.Append(b, []batch.Header{h}, 0, -1, false); !errors.Is(err, ErrNotLeaderOrFollower) {
		t.Fatalf("append on a follower: %v", err)
	}
	if _, err := p.FollowerFetch(3, 4, 0, 0, -1, 1000); !errors.Is(err, ErrNotLeaderOrFollower) {
		t.Fatalf("follower fetch from a follower: %v", err)
	}
	// An older leader epoch is stale metadata.
	if err := p.MakeLeader(reg, 1000); !errors.Is(err, ErrFencedLeaderEpoch) {
		t.Fatalf("MakeLeader of epoch 3 after epoch 4: %v", err)
	}
}

func TestAcksAllBelowMinISR(t *testing.T) {
	m := roleManager(t, t.TempDir(), 1, &ReplicationOptions{})
	defer m.Close()
	p := openRolePartition(t, m, 2)
	if err := p.MakeLeader(LeaderAndISR{Leader: 1, LeaderEpoch: 0, Replicas: []int32{1, 2}, ISR: []int32{1}}, 0); err != nil {
		t.Fatal(err)
	}
	b := buildBatch(t, "a")
	h, _ := batch.ParseHeader(b)
	if _, err := p.AppendWait(b, []batch.Header{h}, 0, -1, true, 1000); !errors.Is(err, ErrNotEnoughReplicas) {
		t.Fatalf("acks=all with ISR [1], min.insync.replicas 2: %v", err)
	}
	if p.Log().LogEndOffset() != 0 {
		t.Fatal("appended although refused")
	}
	// acks=1 goes ahead; with the ISR [1] alone it is committed at once.
	if res := appendValues(t, p, false, "b"); res.Wait != nil || p.HighWatermark() != 1 {
		t.Fatalf("acks=1: wait %v, hw %d", res.Wait, p.HighWatermark())
	}
}

// A follower applies only actions of the epoch it follows; becoming leader then assigns the
// new epoch at its log end offset, and OffsetForLeaderEpoch answers from the cache.
func TestFollowerApplyAndBecomeLeader(t *testing.T) {
	// Records with the leader's offsets and epoch 5, from a leader partition.
	lm := roleManager(t, t.TempDir(), 2, &ReplicationOptions{})
	defer lm.Close()
	lp := openRolePartition(t, lm, 1)
	if err := lp.MakeLeader(LeaderAndISR{Leader: 2, LeaderEpoch: 5, Replicas: []int32{2}, ISR: []int32{2}}, 0); err != nil {
		t.Fatal(err)
	}
	appendValues(t, lp, false, "a", "b")
	appendValues(t, lp, false, "c")
	recs := logBytes(t, lp.Log(), lp.Log().LogEndOffset())

	m := roleManager(t, t.TempDir(), 1, &ReplicationOptions{})
	defer m.Close()
	p := openRolePartition(t, m, 1)
	if err := p.MakeFollower(LeaderAndISR{Leader: 2, LeaderEpoch: 5, Replicas: []int32{1, 2}, ISR: []int32{2}}); err != nil {
		t.Fatal(err)
	}
	act := NoAction()
	act.Append, act.HighWatermark = recs, 2
	if _, err := p.ApplyFollower(4, act); !errors.Is(err, ErrNotLeaderOrFollower) {
		t.Fatalf("ApplyFollower for epoch 4 while following epoch 5: %v", err)
	}
	if p.Log().LogEndOffset() != 0 {
		t.Fatal("a stale action reached the log")
	}
	leo, err := p.ApplyFollower(5, act)
	if err != nil || leo != 3 || p.HighWatermark() != 2 {
		t.Fatalf("ApplyFollower: leo %d, hw %d, %v", leo, p.HighWatermark(), err)
	}
	if ll := p.LocalLog(); ll.LogEndOffset != 3 || ll.HighWatermark != 2 || ll.Epochs.LatestEpoch() != 5 {
		t.Fatalf("LocalLog %+v", ll)
	}
	p.SetFollowerHighWatermark(10) // capped at the log end
	if p.HighWatermark() != 3 {
		t.Fatalf("hw %d", p.HighWatermark())
	}
	p.SetFollowerHighWatermark(1) // never backwards
	if p.HighWatermark() != 3 {
		t.Fatalf("hw went back to %d", p.HighWatermark())
	}
	// A truncation (divergence) lowers both and rebuilds the producer state.
	trunc := NoAction()
	trunc.TruncateTo = 2
	if leo, err := p.ApplyFollower(5, trunc); err != nil || leo != 2 || p.HighWatermark() != 2 {
		t.Fatalf("truncate: leo %d, hw %d, %v", leo, p.HighWatermark(), err)
	}
	// Leader of epoch 7: the cache gets 7 at the log end offset, appends carry it.
	if err := p.MakeLeader(LeaderAndISR{Leader: 1, LeaderEpoch: 7, Replicas: []int32{1, 2}, ISR: []int32{1}}, 0); err != nil {
		t.Fatal(err)
	}
	want := []storage.EpochEntry{{Epoch: 5, StartOffset: 0}, {Epoch: 7, StartOffset: 2}}
	if es := p.Epochs().Entries(); !slices.Equal(es, want) {
		t.Fatalf("epochs %v, want %v", es, want)
	}
	if _, err := p.ApplyFollower(5, act); !errors.Is(err, ErrNotLeaderOrFollower) {
		t.Fatalf("ApplyFollower on a leader: %v", err)
	}
	appendValues(t, p, false, "x")
	if vs := values(t, p.Log()); !slices.Equal(vs, []string{"0:5:a", "1:5:b", "2:7:x"}) {
		t.Fatalf("log %v", vs)
	}
	for _, c := range []struct {
		epoch int32
		want  EpochEndOffset
	}{{5, EpochEndOffset{5, 2}}, {6, EpochEndOffset{5, 2}}, {7, EpochEndOffset{7, 3}}, {8, EpochEndOffset{-1, -1}}} {
		if got, err := p.LastOffsetForLeaderEpoch(7, c.epoch); err != nil || got != c.want {
			t.Fatalf("epoch %d: %+v, %v; want %+v", c.epoch, got, err, c.want)
		}
	}
	if _, err := p.LastOffsetForLeaderEpoch(6, 5); !errors.Is(err, ErrFencedLeaderEpoch) {
		t.Fatalf("current epoch 6 on epoch 7: %v", err)
	}
	// A follower that fetches with last epoch 5 at offset 3 diverges: epoch 5 ends at 2 here.
	st, err := p.FollowerFetch(2, 7, 3, 0, 5, 0)
	if err != nil || st.Diverging == nil || *st.Diverging != (EpochEndOffset{5, 2}) {
		t.Fatalf("diverging fetch: %+v, %v", st, err)
	}
}

// RunReplication sends the ISR expansion a caught-up follower causes and applies the
// controller's answer; an acks=all produce's timeout is answered by its tick.
func TestRunReplicationAlterPartition(t *testing.T) {
	var mu sync.Mutex
	var got []*kmsg.AlterPartitionRequest
	o := &ReplicationOptions{
		BrokerEpoch: func() int64 { return 42 },
		TopicID:     func(string) [16]byte { return [16]byte{9} },
		AlterPartition: func(_ context.Context, req *kmsg.AlterPartitionRequest) (*kmsg.AlterPartitionResponse, error) {
			mu.Lock()
			got = append(got, req)
			mu.Unlock()
			resp := kmsg.NewPtrAlterPartitionResponse()
			for _, rt := range req.Topics {
				st := kmsg.NewAlterPartitionResponseTopic()
				st.TopidID = rt.TopicID
				for _, rp := range rt.Partitions {
					sp := kmsg.NewAlterPartitionResponseTopicPartition()
					sp.Partition, sp.LeaderID, sp.LeaderEpoch = rp.Partition, req.BrokerID, rp.LeaderEpoch
					sp.ISR, sp.PartitionEpoch = rp.NewISR, rp.PartitionEpoch+1
					st.Partitions = append(st.Partitions, sp)
				}
				resp.Topics = append(resp.Topics, st)
			}
			return resp, nil
		},
	}
	m := roleManager(t, t.TempDir(), 1, o)
	defer m.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.RunReplication(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	p := openRolePartition(t, m, 1)
	if err := p.MakeLeader(LeaderAndISR{Leader: 1, LeaderEpoch: 2, PartitionEpoch: 4, Replicas: []int32{1, 2}, ISR: []int32{1}}, time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	appendValues(t, p, false, "a")
	if _, err := p.FollowerFetch(2, 2, 1, 0, 2, time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	waitRole(t, "ISR expansion applied", func() bool { return slices.Equal(p.LeaderISR(), []int32{1, 2}) })
	mu.Lock()
	req := got[0]
	mu.Unlock()
	rp := req.Topics[0].Partitions[0]
	if req.BrokerID != 1 || req.BrokerEpoch != 42 || req.Topics[0].TopicID != [16]byte{9} || rp.LeaderEpoch != 2 || rp.PartitionEpoch != 4 || !slices.Equal(rp.NewISR, []int32{1, 2}) {
		t.Fatalf("AlterPartition request %+v", req)
	}
	if pe := p.role.Load().partitionEpoch; pe != 5 {
		t.Fatalf("partition epoch %d after the change", pe)
	}
	// acks=all with a 1 ms timeout: the follower does not fetch, the tick times it out.
	b := buildBatch(t, "b")
	h, _ := batch.ParseHeader(b)
	res, err := p.AppendWait(b, []batch.Header{h}, time.Now().UnixMilli(), -1, true, 1)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-res.Wait:
		if !errors.Is(err, ErrRequestTimedOut) {
			t.Fatalf("acks=all timeout: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("acks=all waiter never expired")
	}
}

// The high watermark survives a restart in the replication-offset-checkpoint: a restarted
// replica keeps its records above it but does not expose them.
func TestHighWatermarkCheckpoint(t *testing.T) {
	dir := t.TempDir()
	m := roleManager(t, dir, 1, &ReplicationOptions{})
	p := openRolePartition(t, m, 1)
	if err := p.MakeLeader(LeaderAndISR{Leader: 1, LeaderEpoch: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}, 0); err != nil {
		t.Fatal(err)
	}
	appendValues(t, p, false, "a", "b")
	if _, err := p.FollowerFetch(2, 0, 2, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	appendValues(t, p, false, "c") // not replicated: above the high watermark
	if p.HighWatermark() != 2 {
		t.Fatalf("hw %d", p.HighWatermark())
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m = roleManager(t, dir, 1, &ReplicationOptions{})
	defer m.Close()
	p = openRolePartition(t, m, 1)
	if p.HighWatermark() != 2 || p.Log().LogEndOffset() != 3 {
		t.Fatalf("after restart: hw %d, leo %d", p.HighWatermark(), p.Log().LogEndOffset())
	}
}

func waitRole(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
