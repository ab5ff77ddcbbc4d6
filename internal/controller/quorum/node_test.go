package quorum

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregor-project/gregor/internal/controller/state"
)

func TestElectReplicateApply(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := c.waitActive(10 * time.Second)
	ln := c.nodes[leader]
	for i := range 3 {
		registerBroker(t, ln, int32(i))
	}
	for i := range 5 {
		if _, err := createTopic(ctx(t), ln, fmt.Sprintf("t%d", i), 4, 3); err != nil {
			t.Fatal(err)
		}
	}
	// Followers refuse commands.
	for i, n := range c.nodes {
		if i == leader {
			continue
		}
		_, err := createTopic(ctx(t), n, "nope", 1, 1)
		if !errors.Is(err, ErrNotController) || !errors.Is(err, kerr.NotController) {
			t.Fatalf("follower %d: %v", i, err)
		}
		// A follower learns the leader from its first append or heartbeat, which on a loaded
		// machine can come after the majority (the leader and the other follower) committed.
		deadline := time.Now().Add(10 * time.Second)
		for st := n.Status(); st.Leader != int32(leader) || st.Active; st = n.Status() {
			if st.Active || time.Now().After(deadline) {
				t.Fatalf("follower %d status %+v", i, st)
			}
			time.Sleep(5 * time.Millisecond) // polling interval, not synchronisation
		}
	}
	// A command with no records is answered without a log write; a failing one too.
	off := ln.Status().Applied
	if _, err := createTopic(ctx(t), ln, "t0", 1, 1); !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Fatalf("duplicate create: %v", err)
	}
	if ln.Status().Applied != off {
		t.Fatal("a refused command wrote to the log")
	}
	c.waitApplied(off, 10*time.Second)
	img := c.sameImages()
	im, err := state.Restore(img)
	if err != nil {
		t.Fatal(err)
	}
	if len(im.TopicNames()) != 5 || im.NumPartitions() != 20 || len(im.Brokers()) != 3 {
		t.Fatalf("image: %v topics, %d partitions", im.TopicNames(), im.NumPartitions())
	}
	// Every node saw the same committed batches, in order.
	c.mu.Lock()
	defer c.mu.Unlock()
	ref := offsets(c.commits[int32(leader)])
	for id, cms := range c.commits {
		if got := offsets(cms); !slices.Equal(got, ref) {
			t.Fatalf("node %d committed %v, leader %v", id, got, ref)
		}
	}
}

func offsets(cms []Committed) []int64 {
	var out []int64
	for _, cm := range cms {
		out = append(out, cm.Offset)
	}
	return out
}

func TestLeaderFailover(t *testing.T) {
	c := newCluster(t, 3, nil)
	old := c.waitActive(10 * time.Second)
	registerBroker(t, c.nodes[old], 1)
	if _, err := createTopic(ctx(t), c.nodes[old], "before", 2, 1); err != nil {
		t.Fatal(err)
	}
	c.waitApplied(c.nodes[old].Status().Applied, 10*time.Second)

	stopped := time.Now()
	c.stop(old)
	leader := c.waitActive(10 * time.Second)
	took := time.Since(stopped)
	t.Logf("new active controller %d after %v (election timeout 100-200 ms)", leader, took)
	if leader == old {
		t.Fatal("stopped node still active")
	}
	if _, err := createTopic(ctx(t), c.nodes[leader], "after", 2, 1); err != nil {
		t.Fatal(err)
	}
	// The old leader comes back as a follower and catches up.
	c.start(old, nil)
	c.waitApplied(c.nodes[leader].Status().Applied, 10*time.Second)
	img := c.sameImages()
	im, _ := state.Restore(img)
	if im.Topic("before") == nil || im.Topic("after") == nil {
		t.Fatalf("topics %v", im.TopicNames())
	}
}

func TestRestartAllFromDisk(t *testing.T) {
	// Small snapshot interval: restarts go through snapshots, compaction and WAL rewrites.
	c := newCluster(t, 3, func(cfg *Config) { cfg.SnapshotEntries = 16; cfg.CatchUpEntries = 4 })
	leader := c.waitActive(10 * time.Second)
	for i := range 3 {
		registerBroker(t, c.nodes[leader], int32(i))
	}
	for i := range 60 {
		if _, err := createTopic(ctx(t), c.nodes[leader], fmt.Sprintf("t%02d", i), 3, 2); err != nil {
			t.Fatal(err)
		}
	}
	c.waitApplied(c.nodes[leader].Status().Applied, 10*time.Second)
	before := c.sameImages()
	_, off := c.image(leader)

	c.stopAll()
	for i := range 3 {
		c.start(i, nil)
	}
	leader = c.waitActive(10 * time.Second)
	c.waitApplied(off, 10*time.Second)
	for i := range 3 {
		b, _ := c.image(i)
		imB, _ := state.Restore(b)
		imA, _ := state.Restore(before)
		if len(imB.TopicNames()) != len(imA.TopicNames()) || imB.NumPartitions() != imA.NumPartitions() {
			t.Fatalf("node %d after restart: %d topics, want %d", i, len(imB.TopicNames()), len(imA.TopicNames()))
		}
	}
	// Restart adds only raft's empty entries, so images match up to the offset.
	after := c.sameImages()
	if !sameContent(t, before, after) {
		t.Fatal("metadata changed across a full restart")
	}
	if _, err := createTopic(ctx(t), c.nodes[leader], "post", 1, 1); err != nil {
		t.Fatal(err)
	}
	// Storage stays bounded: at most two snapshots and one WAL per node.
	for i := range 3 {
		names, _ := c.nodes[i].st.list()
		if len(matching(names, snapPrefix, snapSuffix)) > keepSnaps || len(matching(names, walPrefix, walSuffix)) != 1 {
			t.Fatalf("node %d files %v", i, names)
		}
	}
}

// sameContent compares two images ignoring their offsets.
func sameContent(t testing.TB, a, b []byte) bool {
	t.Helper()
	ia, err := state.Restore(a)
	if err != nil {
		t.Fatal(err)
	}
	ib, err := state.Restore(b)
	if err != nil {
		t.Fatal(err)
	}
	strip := func(im *state.Image) string {
		s := fmt.Sprint(im.TopicNames(), im.NumPartitions(), im.NextBrokerEpoch(), im.NextProducerID())
		for _, n := range im.TopicNames() {
			tp := im.Topic(n)
			s += fmt.Sprint(tp.ID)
			for _, p := range tp.Partitions {
				s += fmt.Sprint(*p)
			}
		}
		for _, br := range im.Brokers() {
			s += fmt.Sprint(*br)
		}
		return s
	}
	return strip(ia) == strip(ib)
}

func TestLaggingFollowerGetsSnapshot(t *testing.T) {
	c := newCluster(t, 3, func(cfg *Config) { cfg.SnapshotEntries = 10; cfg.CatchUpEntries = 2 })
	leader := c.waitActive(10 * time.Second)
	registerBroker(t, c.nodes[leader], 0)
	lag := (leader + 1) % 3
	c.stop(lag)
	for i := range 40 {
		if _, err := createTopic(ctx(t), c.nodes[leader], fmt.Sprintf("t%02d", i), 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	c.start(lag, nil)
	c.waitApplied(c.nodes[leader].Status().Applied, 10*time.Second)
	c.sameImages()
	c.mu.Lock()
	defer c.mu.Unlock()
	gotSnap := false
	for _, cm := range c.commits[int32(lag)] {
		gotSnap = gotSnap || cm.Snapshot != nil
	}
	if !gotSnap {
		t.Fatal("the lagging follower caught up without a snapshot (compaction did not happen?)")
	}
}

func TestReadCommitted(t *testing.T) {
	c := newCluster(t, 1, func(cfg *Config) { cfg.SnapshotEntries = 8; cfg.CatchUpEntries = 2 })
	n := c.nodes[c.waitActive(10*time.Second)]
	registerBroker(t, n, 0)
	for i := range 20 {
		if _, err := createTopic(ctx(t), n, fmt.Sprintf("t%02d", i), 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.ReadCommitted(1, 100); !errors.Is(err, ErrCompacted) {
		t.Fatalf("read from 1 after compaction: %v", err)
	}
	// Follow like a broker: snapshot, then the log after it.
	snapOff, snap, err := n.LatestSnapshot()
	if err != nil || snapOff == 0 {
		t.Fatalf("snapshot %d %v", snapOff, err)
	}
	follower := state.New(state.Config{ClusterID: testCluster})
	if err := follower.Restore(snap); err != nil {
		t.Fatal(err)
	}
	next := snapOff + 1
	for {
		cms, err := n.ReadCommitted(next, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(cms) == 0 {
			if next > n.Status().Applied {
				break
			}
			next++ // a stretch of empty entries
			continue
		}
		for _, cm := range cms {
			if err := follower.Apply(cm.Offset, cm.Records); err != nil {
				t.Fatal(err)
			}
			next = cm.Offset + 1
		}
	}
	var want []byte
	if err := n.Read(ctx(t), func(ctrl *state.Controller) { want = ctrl.Snapshot() }); err != nil {
		t.Fatal(err)
	}
	if !sameContent(t, follower.Snapshot(), want) {
		t.Fatal("follower image differs")
	}
}

// fakeClock is a clock tests move by hand.
type fakeClock struct{ ns atomic.Int64 }

func TestSessionExpiryThroughQuorum(t *testing.T) {
	var clock fakeClock
	clock.ns.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	c := newCluster(t, 3, func(cfg *Config) {
		cfg.Now = func() time.Time { return time.Unix(0, clock.ns.Load()) }
		cfg.State.SessionTimeoutMs = 1000
	})
	leader := c.waitActive(10 * time.Second)
	n := c.nodes[leader]
	registerBroker(t, n, 5)
	registerBroker(t, n, 6)
	if _, err := createTopic(ctx(t), n, "t", 2, 2); err != nil {
		t.Fatal(err)
	}
	// Broker 6 keeps heartbeating, 5 does not; time jumps past the session timeout.
	clock.ns.Add(int64(1500 * time.Millisecond))
	epoch6 := int64(1)
	if _, err := Do(ctx(t), n, func(ctrl *state.Controller, now int64) ([]state.Record, state.HeartbeatResponse) {
		epoch6 = ctrl.Image().Broker(6).Epoch
		return ctrl.Heartbeat(now, state.HeartbeatRequest{NodeID: 6, BrokerEpoch: epoch6, CurrentMetadataOffset: ctrl.Image().Offset()})
	}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var fenced5, fenced6 bool
		var leaders []int32
		if err := n.Read(ctx(t), func(ctrl *state.Controller) {
			fenced5, fenced6 = ctrl.Image().Broker(5).Fenced, ctrl.Image().Broker(6).Fenced
			for _, p := range ctrl.Image().Topic("t").Partitions {
				leaders = append(leaders, p.Leader)
			}
		}); err != nil {
			t.Fatal(err)
		}
		if fenced5 {
			if fenced6 || slices.Contains(leaders, 5) {
				t.Fatalf("fenced6=%v leaders %v", fenced6, leaders)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("broker 5 not fenced after its session expired")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
