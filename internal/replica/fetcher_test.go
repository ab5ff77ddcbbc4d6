package replica

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregor-project/gregor/internal/storage"
	"github.com/gregor-project/gregor/internal/wire"
)

// The fetcher against a leader over real TCP (testLeader, fetcher_leader_test.go), following
// testReplica partitions on real logs.

func regLeader1(epoch int32) Registration {
	return Registration{Leader: 1, LeaderEpoch: epoch, PartitionEpoch: epoch, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}
}

// regNewReplica2 is leader 1 with follower 2 not in the ISR, as a reassignment's new
// replica is: the one the replication throttle holds back (an in-sync one it never does).
func regNewReplica2(epoch int32) Registration {
	return Registration{Leader: 1, LeaderEpoch: epoch, PartitionEpoch: epoch, Replicas: []int32{1, 2}, ISR: []int32{1}}
}

func testFetchers(t testing.TB, endpoint func(int32) (string, bool), mod func(*FetcherOptions)) *Fetchers {
	o := FetcherOptions{
		LocalID:   2,
		Endpoint:  endpoint,
		MaxBytes:  700, // several rounds, and batches cut at max bytes
		MaxWaitMs: 200,
		BackoffMs: 100,
		Log:       quiet,
	}
	if mod != nil {
		mod(&o)
	}
	f := NewFetchers(o)
	t.Cleanup(f.Close)
	return f
}

func fixedEndpoint(addr string) func(int32) (string, bool) {
	return func(int32) (string, bool) { return addr, true }
}

// caughtUp reports whether r has the leader's whole log and high watermark, and the leader's
// high watermark reached its log end offset.
func caughtUp(s *testLeader, r *testReplica) bool {
	leo, hw := s.state(r.topic, r.part)
	rleo, rhw := r.state()
	return hw == leo && rleo == leo && rhw == hw
}

func produceN(s *testLeader, topic string, part int32, n int, prefix string) {
	for i := range n {
		s.produce(topic, part, fmt.Sprintf("%s-%d-a", prefix, i), fmt.Sprintf("%s-%d-b-%s", prefix, i, strings.Repeat("x", 40)))
	}
}

func TestFetcherCatchesUpByteIdentical(t *testing.T) {
	s := startTestLeader(t, 1)
	leader := s.lead("t", 0, regLeader1(1))
	produceN(s, "t", 0, 20, "before")
	r := newTestReplica(t, 2, "t", 0)
	f := testFetchers(t, fixedEndpoint(s.addr()), nil)
	f.follow(r, 1, 1)
	if l, ok := f.following(r); !ok || l != 1 {
		t.Fatalf("following: %d %v", l, ok)
	}
	waitFor(t, 10*time.Second, "catch up", func() bool { return caughtUp(s, r) })
	// New records reach the follower while it fetches (parked fetches wake up).
	produceN(s, "t", 0, 20, "after")
	waitFor(t, 10*time.Second, "catch up again", func() bool { return caughtUp(s, r) })
	leo, hw := s.state("t", 0)
	if leo != 80 || hw != 80 {
		t.Fatalf("leader LEO %d HW %d, want 80/80", leo, hw)
	}
	s.mu.Lock()
	sameBelow(t, leo, leader, r.n)
	s.mu.Unlock()
	if lag, ok := f.lag(r); !ok || lag != 0 {
		t.Fatalf("lag %d %v", lag, ok)
	}
	// Every batch but whole ones was cut by max bytes at least once, and nothing partial got
	// in: the logs being byte-identical shows it.
	for _, req := range s.fetches() {
		if e, ok := req[tp{"t", 0}]; !ok || e != 1 {
			t.Fatalf("fetch named %v, want t-0 at current leader epoch 1", req)
		}
	}
}

// KIP-279: the follower led briefly in epoch 2 and wrote records nobody has; the leader of
// epoch 3 does not have them. The follower must cut them and take the leader's log.
func TestFetcherTruncatesDivergingLog(t *testing.T) {
	for _, mode := range []struct {
		name  string
		useOE bool
	}{{"diverging epoch on fetch", false}, {"OffsetForLeaderEpoch", true}} {
		t.Run(mode.name, func(t *testing.T) {
			now := time.Now().UnixMilli()
			l := newLogNode(t, 1, "t-0")
			r := newTestReplica(t, 2, "t", 0)
			fn := r.n
			fn.fcfg = FollowerConfig{BackoffMs: 100}
			l.lead(regLeader1(1), now)
			l.produce(now, "a", "b")
			l.produce(now, "c")
			fn.follow(1, 1)
			fn.catchUp(l, now)
			// The follower leads epoch 2 alone and writes records that never replicate.
			fn.lead(Registration{Leader: 2, LeaderEpoch: 2, PartitionEpoch: 2, Replicas: []int32{1, 2}, ISR: []int32{2}}, now)
			fn.produce(now, "x")
			fn.produce(now, "y", "z")
			fn.leader = nil
			// The old leader comes back in epoch 3 and writes on.
			l.lead(Registration{Leader: 1, LeaderEpoch: 3, PartitionEpoch: 3, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}, now)
			l.produce(now, "d")
			l.produce(now, "e", "f", "g")

			s := startTestLeader(t, 1)
			s.serve("t", 0, l)
			f := testFetchers(t, fixedEndpoint(s.addr()), func(o *FetcherOptions) { o.UseOffsetForLeaderEpoch = mode.useOE })
			f.follow(r, 1, 3)
			waitFor(t, 10*time.Second, "catch up", func() bool { return caughtUp(s, r) })
			s.mu.Lock()
			sameBelow(t, l.log.LogEndOffset(), l, fn)
			s.mu.Unlock()
			r.mu.Lock()
			got := values(t, fn.log)
			r.mu.Unlock()
			want := []string{"0:1:a", "1:1:b", "2:1:c", "3:3:d", "4:3:e", "5:3:f", "6:3:g"}
			if !slices.Equal(got, want) {
				t.Fatalf("follower log %v, want %v", got, want)
			}
			if mode.useOE && s.epochReqs.Load() == 0 {
				t.Fatal("no OffsetForLeaderEpoch request was made")
			}
			if !mode.useOE && s.diverging.Load() == 0 {
				t.Fatal("no fetch answer carried a diverging epoch")
			}
		})
	}
}

// gapsAtLeast fails unless consecutive times are at least d apart.
func gapsAtLeast(t *testing.T, what string, ts []time.Time, d time.Duration) {
	t.Helper()
	for i := 1; i < len(ts); i++ {
		if gap := ts[i].Sub(ts[i-1]); gap < d {
			t.Fatalf("%s %d of %d came %v after the one before, want at least %v", what, i, len(ts), gap, d)
		}
	}
}

func TestFetcherBacksOffThenRecovers(t *testing.T) {
	// A leader that is not there: one dial per back-off.
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()
	s := startTestLeader(t, 1)
	s.lead("t", 0, regLeader1(1))
	produceN(s, "t", 0, 5, "m")

	var addr atomic.Value
	addr.Store(deadAddr)
	var mu sync.Mutex
	var dials []time.Time
	r := newTestReplica(t, 2, "t", 0)
	f := testFetchers(t, func(int32) (string, bool) { return addr.Load().(string), true }, func(o *FetcherOptions) {
		o.Dial = func(ctx context.Context, a string) (*wire.Conn, error) {
			mu.Lock()
			dials = append(dials, time.Now())
			mu.Unlock()
			return wire.Dial(ctx, a, "test")
		}
	})
	f.follow(r, 1, 1)
	dialed := func() []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(dials)
	}
	waitFor(t, 10*time.Second, "four dials", func() bool { return len(dialed()) >= 4 })
	gapsAtLeast(t, "dial", dialed(), 90*time.Millisecond)

	// The leader appears: the follower catches up.
	addr.Store(s.addr())
	waitFor(t, 10*time.Second, "catch up", func() bool { return caughtUp(s, r) })

	// The leader answers NOT_LEADER_OR_FOLLOWER (it has not seen the metadata yet): the
	// partition is retried after quickRetryMs, doubling up to the back-off (100 ms here):
	// 10, 20, 40, 80, 100, 100 ms.
	s.partErr.Store(int32(kerr.NotLeaderForPartition.Code))
	from := len(s.fetchTimes(tp{"t", 0}))
	produceN(s, "t", 0, 2, "n")
	waitFor(t, 10*time.Second, "seven failed fetches", func() bool { return len(s.fetchTimes(tp{"t", 0})) >= from+8 })
	failed := s.fetchTimes(tp{"t", 0})[from+1:]
	for i := 1; i < len(failed); i++ {
		want := min(100, quickRetryMs<<(i-1))
		if gap := failed[i].Sub(failed[i-1]); gap < time.Duration(want-2)*time.Millisecond {
			t.Fatalf("failed fetch %d came %v after the one before, want at least %d ms", i, gap, want)
		}
	}
	s.partErr.Store(0)
	waitFor(t, 10*time.Second, "catch up after the error", func() bool { return caughtUp(s, r) })
	if n := len(dialed()); n < 5 {
		t.Fatalf("%d dials", n)
	}
}

func TestFetcherUnfollowStopsFetching(t *testing.T) {
	s := startTestLeader(t, 1)
	s.lead("t", 0, regLeader1(1))
	s.lead("t", 1, regLeader1(1))
	produceN(s, "t", 0, 3, "p0")
	produceN(s, "t", 1, 3, "p1")
	r0, r1 := newTestReplica(t, 2, "t", 0), newTestReplica(t, 2, "t", 1)
	f := testFetchers(t, fixedEndpoint(s.addr()), nil)
	f.follow(r0, 1, 1)
	f.follow(r1, 1, 1)
	waitFor(t, 10*time.Second, "catch up", func() bool { return caughtUp(s, r0) && caughtUp(s, r1) })

	f.unfollow(r0)
	if _, ok := f.following(r0); ok {
		t.Fatal("still following t-0")
	}
	applied := r0.appliedCount()
	leo0, _ := r0.state()
	// The parked fetch (which names t-0) wakes with t-0's new records: they must be dropped.
	// Two rounds later t-1 has everything and t-0 nothing new.
	for i := range 2 {
		produceN(s, "t", 0, 2, fmt.Sprintf("late%d", i))
		produceN(s, "t", 1, 2, fmt.Sprintf("late%d", i))
		waitFor(t, 10*time.Second, "t-1 catches up", func() bool { return caughtUp(s, r1) })
	}
	if got := r0.appliedFrom(applied); len(got) != 0 {
		t.Fatalf("actions applied to t-0 after Unfollow: %+v", got)
	}
	if leo, _ := r0.state(); leo != leo0 {
		t.Fatalf("t-0 log end offset moved from %d to %d after Unfollow", leo0, leo)
	}
	fs := s.fetches()
	if _, ok := fs[len(fs)-1][tp{"t", 0}]; ok {
		t.Fatalf("the last fetch still names t-0: %v", fs[len(fs)-1])
	}
	// The last partition gone, the source fetcher stops and closes its connection.
	f.unfollow(r1)
	waitFor(t, 10*time.Second, "the fetcher's connection to close", func() bool { return s.openConns() == 0 })
}

// A fetch answer in flight when Follow moves the partition to a newer epoch is not applied:
// it answers a request of the old epoch.
func TestFetcherDropsStaleAnswerAfterNewEpoch(t *testing.T) {
	s := startTestLeader(t, 1)
	s.lead("t", 0, regLeader1(1))
	s.produce("t", 0, "a")
	r := newTestReplica(t, 2, "t", 0)
	f := testFetchers(t, fixedEndpoint(s.addr()), nil)
	f.follow(r, 1, 1)
	waitFor(t, 10*time.Second, "catch up", func() bool { return caughtUp(s, r) })

	h := &holdFetch{held: make(chan struct{}), release: make(chan struct{})}
	s.hold.Store(h)
	s.produce("t", 0, "b")
	select {
	case <-h.held:
	case <-time.After(10 * time.Second):
		t.Fatal("no fetch answer with records was held")
	}
	applied := r.appliedCount()
	f.follow(r, 1, 2) // metadata: a new leader epoch, same leader
	close(h.release)
	// The leader is still in epoch 1: a fetch in epoch 2 gets UNKNOWN_LEADER_EPOCH. Once one
	// was made, the held answer was handled.
	waitFor(t, 10*time.Second, "a fetch in epoch 2", func() bool {
		for _, req := range s.fetches() {
			if req[tp{"t", 0}] == 2 {
				return true
			}
		}
		return false
	})
	for _, a := range r.appliedFrom(applied) {
		if len(a.act.Append) > 0 {
			t.Fatalf("the stale answer was applied: %+v", a)
		}
	}
	if leo, _ := r.state(); leo != 1 {
		t.Fatalf("follower log end offset %d, want 1 (b must come in epoch 2)", leo)
	}
	// The leader learns epoch 2: b replicates.
	s.do("t", 0, func(n *replicaNode) { n.lead(regLeader1(2), time.Now().UnixMilli()) })
	waitFor(t, 10*time.Second, "catch up in epoch 2", func() bool { return caughtUp(s, r) })
	if leo, _ := r.state(); leo != 2 {
		t.Fatalf("follower log end offset %d, want 2", leo)
	}
}

// Unfollow while an answer is in flight: nothing of it is applied.
func TestFetcherDropsAnswerAfterUnfollow(t *testing.T) {
	s := startTestLeader(t, 1)
	s.lead("t", 0, regLeader1(1))
	s.lead("t", 1, regLeader1(1))
	r0, r1 := newTestReplica(t, 2, "t", 0), newTestReplica(t, 2, "t", 1)
	f := testFetchers(t, fixedEndpoint(s.addr()), nil)
	f.follow(r0, 1, 1)
	f.follow(r1, 1, 1)
	s.produce("t", 0, "a")
	waitFor(t, 10*time.Second, "catch up", func() bool { return caughtUp(s, r0) && caughtUp(s, r1) })

	h := &holdFetch{held: make(chan struct{}), release: make(chan struct{})}
	s.hold.Store(h)
	s.produce("t", 0, "b")
	select {
	case <-h.held:
	case <-time.After(10 * time.Second):
		t.Fatal("no fetch answer with records was held")
	}
	applied := r0.appliedCount()
	f.unfollow(r0) // t-1 keeps the source fetcher and its connection alive
	close(h.release)
	s.produce("t", 1, "c")
	waitFor(t, 10*time.Second, "t-1 catches up", func() bool { return caughtUp(s, r1) })
	if got := r0.appliedFrom(applied); len(got) != 0 {
		t.Fatalf("actions applied to t-0 after Unfollow: %+v", got)
	}
}

// Moving a partition to another leader: it fetches from the new one only.
func TestFetcherMovesToNewLeader(t *testing.T) {
	a := startTestLeader(t, 1)
	la := a.lead("t", 0, regLeader1(1))
	a.produce("t", 0, "a")
	r := newTestReplica(t, 2, "t", 0)
	b := startTestLeader(t, 3)
	f := testFetchers(t, func(id int32) (string, bool) {
		switch id {
		case 1:
			return a.addr(), true
		case 3:
			return b.addr(), true
		}
		return "", false
	}, nil)
	f.follow(r, 1, 1)
	waitFor(t, 10*time.Second, "catch up with broker 1", func() bool { return caughtUp(a, r) })

	// Broker 3 takes over in epoch 2 with broker 1's log.
	nb := newLogNode(t, 3, "t-0")
	a.mu.Lock()
	if _, err := nb.log.Append(logBytes(t, la.log, la.log.LogEndOffset()), storage.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	a.mu.Unlock()
	if err := nb.epochs.Assign(1, 0); err != nil {
		t.Fatal(err)
	}
	nb.hw = 1
	nb.lead(Registration{Leader: 3, LeaderEpoch: 2, PartitionEpoch: 2, Replicas: []int32{3, 2}, ISR: []int32{3, 2}}, time.Now().UnixMilli())
	b.serve("t", 0, nb)
	f.follow(r, 3, 2)
	if l, _ := f.following(r); l != 3 {
		t.Fatalf("following %d, want 3", l)
	}
	b.produce("t", 0, "b", "c")
	waitFor(t, 10*time.Second, "catch up with broker 3", func() bool { return caughtUp(b, r) })
	waitFor(t, 10*time.Second, "the connection to broker 1 to close", func() bool { return a.openConns() == 0 })
	r.mu.Lock()
	got := values(t, r.n.log)
	r.mu.Unlock()
	if want := []string{"0:1:a", "1:2:b", "2:2:c"}; !slices.Equal(got, want) {
		t.Fatalf("follower log %v, want %v", got, want)
	}
}

// The replication throttle bounds the fetched bytes per second of a follower not in sync.
func TestFetcherThrottle(t *testing.T) {
	s := startTestLeader(t, 1)
	leader := s.lead("t", 0, regNewReplica2(1))
	big := bytes.Repeat([]byte("v"), 400) // a batch fits a test segment (2 KiB)
	for range 150 {
		s.produce("t", 0, string(big), string(big))
	}
	leo, _ := s.state("t", 0)
	r := newTestReplica(t, 2, "t", 0)
	const rate = 40_000 // bytes/s: ~120 kB at 40 kB/s with a 40 kB burst takes about 2 s
	f := testFetchers(t, fixedEndpoint(s.addr()), func(o *FetcherOptions) {
		o.MaxBytes = 8_000
		o.Throttle = func() int64 { return rate }
	})
	start := time.Now()
	f.follow(r, 1, 1)
	waitFor(t, 20*time.Second, "catch up", func() bool { return caughtUp(s, r) })
	if took := time.Since(start); took < 1500*time.Millisecond {
		t.Fatalf("caught up with %d records in %v: the throttle of %d B/s did not hold", leo, took, rate)
	}
	s.mu.Lock()
	sameBelow(t, leo, leader, r.n)
	s.mu.Unlock()
}

// Only throttled replicas draw on the quota, and while it is exceeded they are left out of
// the fetch: an unthrottled partition from the same leader catches up while a throttled one,
// with the same backlog, is still far behind.
func TestFetcherThrottlesOnlyThrottledReplicas(t *testing.T) {
	s := startTestLeader(t, 1)
	s.lead("t", 0, regNewReplica2(1))
	s.lead("t", 1, regNewReplica2(1))
	big := bytes.Repeat([]byte("v"), 400)
	for range 60 {
		s.produce("t", 0, string(big), string(big))
		s.produce("t", 1, string(big), string(big))
	}
	slow := newTestReplica(t, 2, "t", 0)
	fast := newTestReplica(t, 2, "t", 1)
	const rate = 20_000 // bytes/s: the throttled backlog (~48 kB, a 20 kB burst) takes over a second
	f := testFetchers(t, fixedEndpoint(s.addr()), func(o *FetcherOptions) {
		o.MaxBytes = 8_000
		o.Throttle = func() int64 { return rate }
		o.Throttled = func(_ string, p int32) bool { return p == 0 }
	})
	f.follow(slow, 1, 1)
	f.follow(fast, 1, 1)
	waitFor(t, 20*time.Second, "the unthrottled replica catching up", func() bool { return caughtUp(s, fast) })
	if caughtUp(s, slow) {
		t.Fatal("the throttled replica caught up as fast as the unthrottled one")
	}
	waitFor(t, 40*time.Second, "the throttled replica catching up", func() bool { return caughtUp(s, slow) })
}
