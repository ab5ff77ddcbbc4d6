package replica

import (
	"testing"
	"time"
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
	waitFor(t, 10*time.Second, "a fetch waiting at the leader", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		sf := f.mu.sources[1]
		sf.mu.Lock()
		defer sf.mu.Unlock()
		return sf.mu.fetch != nil && time.Since(sf.mu.fetch.started) > minInterruptAge
	})

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
