package replica

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gregor-project/gregor/internal/wire"
)

// A partition followed while the round's Fetch waits at the leader joins the next round at
// once: the waiting Fetch is interrupted, not awaited. With a 60 s replica.fetch.wait.max.ms
// and nothing new for the partition already followed, the new partition would otherwise wait
// a minute for its first fetch.
func TestFetcherNewPartitionInterruptsAWaitingFetch(t *testing.T) {
	s := startTestLeader(t, 1)
	s.lead("t", 0, regLeader1(1))
	s.lead("t", 1, regLeader1(1))
	produceN(s, "t", 0, 3, "p0")
	produceN(s, "t", 1, 3, "p1")

	f := testFetchers(t, fixedEndpoint(s.addr()), func(o *FetcherOptions) { o.MaxWaitMs = 60_000 })
	r0 := newTestReplica(t, 2, "t", 0)
	f.follow(r0, 1, 1)
	waitFor(t, 10*time.Second, "partition 0 fetched", func() bool { return hasLeaderLog(s, r0) })
	// Partition 0's next Fetch waits at the leader: nothing new comes for it.
	waitFor(t, 10*time.Second, "a fetch waiting at the leader", func() bool { return fetchWaiting(f, 1) })

	r1 := newTestReplica(t, 2, "t", 1)
	f.follow(r1, 1, 1)
	waitFor(t, 10*time.Second, "partition 1 fetched while partition 0's fetch was parked", func() bool { return hasLeaderLog(s, r1) })
}

// hasLeaderLog reports whether r has every record of the leader's log (its high watermark
// may lag: the leader's answers carry it one fetch later).
func hasLeaderLog(s *testLeader, r *testReplica) bool {
	leo, _ := s.state(r.topic, r.part)
	rleo, _ := r.state()
	return rleo == leo
}

// A partition followed while the round is being prepared (here: while it redials the
// leader), before its Fetch is sent, makes that Fetch answer at once, so the next round
// carries it.
func TestFetcherPartitionFollowedWhileDiallingIsNotLeftWaiting(t *testing.T) {
	s := startTestLeader(t, 1)
	s.lead("t", 0, regLeader1(1))
	s.lead("t", 1, regLeader1(1))
	produceN(s, "t", 0, 3, "p0")
	produceN(s, "t", 1, 3, "p1")

	var dials atomic.Int32
	redialing := make(chan struct{})
	release := make(chan struct{})
	f := testFetchers(t, fixedEndpoint(s.addr()), func(o *FetcherOptions) {
		o.MaxWaitMs = 60_000
		o.Dial = func(ctx context.Context, addr string) (*wire.Conn, error) {
			if dials.Add(1) == 2 {
				close(redialing)
				<-release
			}
			return wire.Dial(ctx, addr, "test")
		}
	})
	r0 := newTestReplica(t, 2, "t", 0)
	r1 := newTestReplica(t, 2, "t", 1)
	f.follow(r0, 1, 1)
	waitFor(t, 10*time.Second, "partition 0 fetched", func() bool { return hasLeaderLog(s, r0) })
	waitFor(t, 10*time.Second, "a fetch waiting at the leader", func() bool { return fetchWaiting(f, 1) })
	// The leader drops the connection: the round after the back-off redials.
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	<-redialing // the next round holds {r0} and is dialling
	f.follow(r1, 1, 1)
	close(release)
	waitFor(t, 10*time.Second, "partition 1 fetched although followed after the round began", func() bool { return hasLeaderLog(s, r1) })
}

// fetchWaiting reports whether the fetcher of leader has a Fetch in flight for longer than
// minInterruptAge.
func fetchWaiting(f *Fetchers, leader int32) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	sf := f.mu.sources[leader]
	if sf == nil {
		return false
	}
	sf.mu.Lock()
	defer sf.mu.Unlock()
	return sf.mu.fetch != nil && time.Since(sf.mu.fetch.started) > minInterruptAge
}

// A partition backing off after "leader not ready yet" is retried after its short pause even
// while another partition from the same leader waits at the leader: the Fetch waits no
// longer than the first back-off's end.
func TestFetcherQuickRetryIsNotHeldByAParkedFetch(t *testing.T) {
	s := startTestLeader(t, 1)
	s.lead("t", 0, regLeader1(1))
	produceN(s, "t", 0, 3, "p0")
	f := testFetchers(t, fixedEndpoint(s.addr()), func(o *FetcherOptions) {
		o.MaxWaitMs = 60_000
		o.BackoffMs = 60_000
	})
	r0 := newTestReplica(t, 2, "t", 0)
	f.follow(r0, 1, 1)
	waitFor(t, 10*time.Second, "partition 0 fetched", func() bool { return hasLeaderLog(s, r0) })

	// Partition 1 is followed while the leader has not applied its leadership yet: it
	// answers NOT_LEADER_OR_FOLLOWER for it alone, and partition 0's next Fetch parks.
	s.lead("t", 1, regLeader1(1))
	produceN(s, "t", 1, 3, "p1")
	s.mu.Lock()
	s.notReady = map[tp]bool{{"t", 1}: true}
	s.mu.Unlock()
	r1 := newTestReplica(t, 2, "t", 1)
	f.follow(r1, 1, 1)
	waitFor(t, 10*time.Second, "partition 1 refused", func() bool { return len(s.fetchTimes(tp{"t", 1})) > 0 })
	s.mu.Lock()
	s.notReady = nil
	s.mu.Unlock()
	waitFor(t, 10*time.Second, "partition 1 fetched after its short pause, partition 0's fetch parked meanwhile", func() bool { return hasLeaderLog(s, r1) })
}
