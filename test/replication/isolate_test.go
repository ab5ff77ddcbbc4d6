package replication

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/internal/testutil"
)

// The partition leader is cut off from the other brokers and the
// controller quorum while clients keep reaching it on its CLIENT listener:
//
//   - it must acknowledge no acks=all write from then on: with its followers
//     unable to fetch, its high watermark cannot pass what they already
//     have, and it cannot shrink the ISR without the controller. Produce
//     requests sent straight to it (no retries, one connection) must all
//     fail, and a producer pinned to it must lose nothing it was told;
//   - the majority fences it, elects a new leader from the ISR and takes
//     writes from a producer that reaches it;
//   - after Heal, the old leader learns it was replaced, truncates what only
//     it had, catches up and rejoins the ISR as a follower.
//
// The checker then finds no acknowledged record lost, none duplicated, and
// the three replicas byte-identical below the high watermark.
func TestIsolatedLeaderAcknowledgesNothing(t *testing.T) {
	c := testutil.StartCluster(t, testutil.ClusterOptions{Nodes: 3})
	const topic = "isolated"
	createTopicOn(t.Context(), t, c, topic, []int32{1, 2, 3}, map[string]string{"min.insync.replicas": "2"})
	st := WaitPartition(t, c, topic, 0, 30*time.Second, PartitionState.FullISR, "a leader and a full ISR")
	old := c.Node(st.Leader)
	var majority []string
	for _, n := range c.Nodes() {
		if n.ID != old.ID {
			majority = append(majority, n.ClientAddr())
		}
	}

	// Writer 1 starts at the leader only.
	pinned := StartProducer(t, c, topic, ProducerOptions{Writer: 1, Seeds: []string{old.ClientAddr()}, Rate: 200, DeliveryTimeout: 10 * time.Second})
	pinned.WaitAcked(t, 200, 30*time.Second)

	c.Isolate(old.ID)
	isolatedAt := time.Now()
	// Writer 9: single Produce requests straight to the isolated leader, one
	// after another until the heal, with their outcomes.
	probes := startProbes(t, old, topic, 9)

	st = WaitPartition(t, c, topic, 0, 30*time.Second, func(s PartitionState) bool { return s.Leader >= 0 && s.Leader != old.ID && !s.InISR(old.ID) },
		"a new leader from the ISR, without the isolated one", majority...)
	t.Logf("node %d took over from isolated node %d in %v (epoch %d, ISR %v)", st.Leader, old.ID, time.Since(isolatedAt).Round(time.Millisecond), st.LeaderEpoch, st.ISR)
	// Writer 2 reaches the majority and writes to the new leader.
	majorityWriter := StartProducer(t, c, topic, ProducerOptions{Writer: 2, Seeds: majority, Rate: 200, DeliveryTimeout: 10 * time.Second})
	majorityWriter.WaitAcked(t, 200, 30*time.Second)
	// The isolated node still believes it leads: it keeps refusing.
	probes.waitSent(t, 5, 30*time.Second)
	probeRes := probes.stop()

	c.Heal(old.ID)
	WaitPartition(t, c, topic, 0, 45*time.Second, func(s PartitionState) bool { return s.FullISR() && s.Leader != old.ID },
		"the old leader back in the ISR as a follower", majority...)
	pinned.WaitMoreAcked(t, 100, 30*time.Second)
	majorityWriter.WaitMoreAcked(t, 100, 30*time.Second)
	resPinned, resMajority := pinned.Stop(), majorityWriter.Stop()

	t.Logf("probes to the isolated leader: %d sent, %d acknowledged, errors %v", probeRes.Sent, len(probeRes.Acked), probeRes.ErrorCounts())
	t.Logf("writer pinned to the old leader: %d acknowledged, %d failed %v; writer at the majority: %d acknowledged, %d failed %v",
		len(resPinned.Acked), len(resPinned.Failed), resPinned.ErrorCounts(), len(resMajority.Acked), len(resMajority.Failed), resMajority.ErrorCounts())
	if len(probeRes.Acked) > 0 {
		t.Errorf("the isolated leader acknowledged %d acks=all Produce requests it could not replicate", len(probeRes.Acked))
	}
	Verify(t, c, topic, resPinned, resMajority, probeRes)
}

// probes sends one-record acks=all Produce requests to one node, one at a
// time, on one connection and without retries, recording each outcome as a
// Producer does.
//
// Lock rule: mu guards res.
type probes struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu struct {
		sync.Mutex
		res Result
	}
}

// probeTimeout is each probe's acks=all timeout.
const probeTimeout = time.Second

// startProbes starts probing node n's partition 0 of topic with values
// "w<writer>-<i>" until stop.
func startProbes(t *testing.T, n *testutil.Node, topic string, writer int) *probes {
	t.Helper()
	cl := nodeClient(t, n, kgo.RequestRetries(0), kgo.RequestTimeoutOverhead(2*time.Second))
	ctx, cancel := context.WithCancel(t.Context())
	p := &probes{cancel: cancel, done: make(chan struct{})}
	p.mu.res = Result{Topic: topic, Writer: writer, Acked: map[string]int64{}, Failed: map[string]error{}}
	go func() {
		defer close(p.done)
		for i := 0; ctx.Err() == nil; i++ {
			v := fmt.Sprintf("w%d-%d", writer, i)
			off, err := probeProduce(ctx, cl, topic, v)
			if ctx.Err() != nil && err != nil {
				return // stopped mid-request: no outcome to record
			}
			p.mu.Lock()
			p.mu.res.Sent++
			if err != nil {
				p.mu.res.Failed[v] = err
			} else {
				p.mu.res.Acked[v] = off
			}
			p.mu.Unlock()
		}
	}()
	return p
}

// waitSent waits until at least n probes have an outcome.
func (p *probes) waitSent(t *testing.T, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		p.mu.Lock()
		sent := p.mu.res.Sent
		p.mu.Unlock()
		if sent >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d probes answered after %v, want %d", sent, timeout, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop ends the probes and returns their outcomes.
func (p *probes) stop() Result {
	p.cancel()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.mu.res
	r.Acked, r.Failed = maps.Clone(r.Acked), maps.Clone(r.Failed)
	return r
}

// probeProduce sends one acks=all Produce request of one record with value
// v to cl's seed broker and returns the offset it was given, or the
// partition's error (REQUEST_TIMED_OUT when the acks=all wait ran out).
func probeProduce(ctx context.Context, cl *kgo.Client, topic, v string) (int64, error) {
	req, err := produceRequest(topic, probeTimeout, v)
	if err != nil {
		return 0, err
	}
	resp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		return 0, err
	}
	pr, err := onePartition(resp)
	if err != nil {
		return 0, err
	}
	if err := kerr.ErrorForCode(pr.ErrorCode); err != nil {
		return 0, err
	}
	return pr.BaseOffset, nil
}
